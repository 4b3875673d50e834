"""Per call site: which tensor dimensions changed size between a frame's compiles, and which of
them are tied (moved in lock-step).

Evidence is per call site (issue 14): the compiles a call triggered, with the shapes recorded at
each (every tensor reachable from the arguments: the mask beside the ids, each layer of a
cache). A recompile at another call of the same frame counts only where it failed against an
entry compiled at this call on a size (``fn(torch.ones(3)); fn(torch.ones(4))``): then marking
both calls is what merges them.

Torch names only the first failing guard of a recompile, so ties come from the shapes: two
dimensions whose sizes differed by the same amount between every two compiles at the call
(``input_ids`` and ``attention_mask`` dim 1; the mask's dim 1 and every cache layer's dim 2,
one apart) are tied, and are marked together or not at all: marking half of a tie makes torch
specialise the other half and raise ``ConstraintViolationError``.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from recompile_fix.profile.model import Compile, Frame, Location, Reason

__all__ = ["SiteEvidence", "borrow_marks", "share_marks", "site_evidence"]

Dim = tuple[str, int]  # (guard source, dimension)

_SIZE_KINDS = ("size_mismatch", "size_specialization")


@dataclass
class SiteEvidence:
    frame: Frame
    site: Location | None
    compiles: list[Compile]  # the compiles this call triggered
    linked: list[Compile] = field(default_factory=list)  # other calls' compiles tied to these by a size guard
    changed: dict[str, set[int]] = field(default_factory=dict)  # source -> dimensions to mark
    sizes: dict[Dim, list[int | None]] = field(default_factory=dict)  # the size at each of ``compiles``
    groups: list[list[Dim]] = field(default_factory=list)  # tied dimensions
    reasons: list[Reason] = field(default_factory=list)  # the guard failures that count here
    across: list[Reason] = field(default_factory=list)  # ... of them, those against another call's entry
    strided: set[str] = field(default_factory=set)  # sources with a stride guard here
    optional: set[str] = field(default_factory=set)  # tensors some calls here passed as None
    # Library code between the call and this frame is compiled code that graph-breaks (the frame
    # was cut from a compiled forward at a break): what it passes is traced inside once fixed.
    from_compiled: bool = False
    # Dims this call got dynamic from other calls' size changes (automatic dynamic), which marks
    # at those calls take away: this call needs its own mark (see ``borrow_marks``).
    borrowed: bool = False
    # Dims this call traced unmarked that the program marks at another call: torch compiled again
    # there for the mark alone (see ``share_marks``).
    shared: bool = False

    def small(self, source: str, dims: list[int]) -> bool:
        """Did this call pass size 0 or 1 in one of these dimensions (specialised even when
        marked dynamic)?"""
        if any(
            r.source == source and r.kind == "size_specialization" and (r.dim is None or r.dim in dims)
            for r in self.reasons
        ):
            return True
        return self.passed_small(source, dims)

    def passed_small(self, source: str, dims: list[int]) -> bool:
        """Was the tensor itself of size 0 or 1 in one of these dimensions at a compile? (Where
        not, a 0/1 guard on it is about a size the compiled code derives from it: a feature map
        after a stride of 32 is 1 where the input is 32.)"""
        return any(size in (0, 1) for d in dims for size in self.sizes.get((source, d), ()) if size is not None)

    def none_and_tensor(self) -> list[str]:
        """Sources that were None on some calls here and a tensor on others, or here and at another
        call (an empty cache before prefill, a filled one in decode): different graphs, whatever is
        marked."""
        found = []
        for reason in (r for c in self.compiles for r in c.reasons):
            if reason.kind == "type_mismatch" and reason.source and reason.expected == "Tensor":
                if reason.actual in (None, "NoneType") and reason.source not in found:
                    found.append(reason.source)
        for source in sorted(self.optional):
            if source not in found:
                found.append(source)
        return found


def site_evidence(frame: Frame) -> list[SiteEvidence]:
    """The frame's evidence, one per call site, in the order the calls first compiled."""
    sites = frame.call_sites()
    site_of: dict[tuple[int | None, str], int] = {}
    by_id: dict[tuple[int | None, str], Compile] = {}
    for index, (_, compiles) in enumerate(sites):
        for compile_ in compiles:
            site_of[(compile_.rank, compile_.id)] = index
            by_id[(compile_.rank, compile_.id)] = compile_
    evidence = [SiteEvidence(frame, site, list(compiles)) for site, compiles in sites]
    for index, ev in enumerate(evidence):
        for compile_ in ev.compiles:
            for reason in compile_.reasons:
                entry = (compile_.rank, reason.entry or "")
                other = site_of.get(entry)
                if other is None or other == index:
                    ev.reasons.append(reason)
                    if reason.kind == "stride_mismatch" and reason.source:
                        ev.strided.add(reason.source)
                elif reason.kind in _SIZE_KINDS:
                    # A size guard that failed against an entry another call compiled ties the calls.
                    ev.reasons.append(reason)
                    ev.across.append(reason)
                    if by_id[entry] not in ev.linked:
                        ev.linked.append(by_id[entry])
                    if compile_ not in evidence[other].linked:
                        evidence[other].linked.append(compile_)
    for ev in evidence:
        _changed_dims(ev)
        _tie(ev)
    return evidence


def _tensor_shapes(compiles: list[Compile]) -> dict[str, list[list[int] | None]]:
    """source -> its shape at each compile (None where not recorded), for tensors recorded at
    least once, keeping the rank seen most often (a rank change is not a size to mark)."""
    shapes: dict[str, list[list[int] | None]] = {}
    for i, compile_ in enumerate(compiles):
        for source, entry in compile_.inputs.items():
            if entry.get("type") == "Tensor" and isinstance(entry.get("shape"), list):
                shapes.setdefault(source, [None] * len(compiles))[i] = list(entry["shape"])
    for source, seen in shapes.items():
        ranks = Counter(len(s) for s in seen if s is not None)
        rank = ranks.most_common(1)[0][0]
        shapes[source] = [s if s is not None and len(s) == rank else None for s in seen]
    return shapes


def _changed_dims(ev: SiteEvidence) -> None:
    own = _tensor_shapes(ev.compiles)
    pool = _tensor_shapes(ev.compiles + ev.linked)
    # A compile that recorded no arguments at all (a recompile-limit hit) says nothing of them.
    recorded = [bool(c.inputs) for c in ev.compiles]
    for source, seen in own.items():
        present = [s for s in seen if s is not None]
        if not present:
            continue
        if any(s is None and r for s, r in zip(seen, recorded)):
            ev.optional.add(source)
        rank = len(present[0])
        pooled = [s for s in pool.get(source, []) if s is not None and len(s) == rank]
        for d in range(rank):
            ev.sizes[(source, d)] = [s[d] if s is not None else None for s in seen]
            if len({s[d] for s in pooled}) > 1 and any(s[d] > 1 for s in present):
                ev.changed.setdefault(source, set()).add(d)
    # Guards name dimensions the shapes may not show (a Profile from a trace, an older one).
    for reason in ev.reasons:
        if reason.kind not in _SIZE_KINDS or not reason.source or reason.dim is None:
            continue
        if reason.source in own:
            if reason.kind == "size_specialization":
                ev.changed.setdefault(reason.source, set()).add(reason.dim)
            continue
        if any(reason is r for r in ev.across) and isinstance(reason.actual, int) and reason.actual <= 1:
            continue  # this call passes size 1 (or 0), specialised even when marked
        ev.changed.setdefault(reason.source, set()).add(reason.dim)
    ev.optional &= set(ev.changed)


def _tie(ev: SiteEvidence) -> None:
    """Group the changed dimensions: two are tied unless the shapes recorded here show them
    moving apart (their sizes differed by different amounts between two compiles). Without
    shapes to tell, they count as tied: marking more together is never the unsafe side."""
    dims: list[Dim] = [(source, d) for source in ev.changed for d in sorted(ev.changed[source])]
    parent = {dim: dim for dim in dims}

    def find(dim: Dim) -> Dim:
        while parent[dim] != dim:
            parent[dim] = parent[parent[dim]]
            dim = parent[dim]
        return dim

    for i, a in enumerate(dims):
        for b in dims[i + 1 :]:
            if _tied(ev.sizes.get(a), ev.sizes.get(b)):
                parent[find(a)] = find(b)
    groups: dict[Dim, list[Dim]] = {}
    for dim in dims:
        groups.setdefault(find(dim), []).append(dim)
    ev.groups = list(groups.values())


def _tied(a: list[int | None] | None, b: list[int | None] | None) -> bool:
    if not a or not b:
        return True
    both = [(x, y) for x, y in zip(a, b) if x is not None and y is not None]
    if len(both) < 2:
        return True
    offset = both[0][0] - both[0][1]
    return all(x - y == offset for x, y in both)


def borrow_marks(evidence: list[SiteEvidence], marked: set[Dim]) -> list[SiteEvidence]:
    """The calls of a frame whose compiles traced one of ``marked`` (dims the fix marks at other
    calls) as dynamic without a mark of the program's, and saw it change nowhere themselves: an
    eval loop after a training loop at other lengths. Torch made the dim dynamic there only
    because the other calls had changed its size; once they are marked, nothing does, and this
    call compiles static, and again for its next size (measured: train at 8..20 then eval at 10,
    14, the training call marked: 3 -> 3 compiles; both marked: 2)."""
    found = []
    for ev in evidence:
        if ev.changed or ev.site is None:
            continue
        dims: dict[str, set[int]] = {}
        for compile_ in ev.compiles:
            marked_here = {src: set((entry or {}).get("marked") or ()) for src, entry in compile_.inputs.items()}
            for src, records in (compile_.dims or {}).items():
                for record in records:
                    d = record.get("dim")
                    if not isinstance(d, int) or record.get("state") != "dynamic":
                        continue
                    if (src, d) in marked and d not in marked_here.get(src, ()):
                        dims.setdefault(src, set()).add(d)
        if dims:
            ev.changed, ev.borrowed = dims, True
            _tie(ev)
            found.append(ev)
    return found


def share_marks(frame: Frame, evidence: list[SiteEvidence]) -> list[SiteEvidence]:
    """The calls of a frame that passed, unmarked, a tensor the program marks dynamic at another
    of its calls, where torch compiled again for the mark alone (RC024 `dim_marking_added`: since
    pytorch PR #176341 it guards whether a tensor was marked, so a warm-up or calibration call
    before a marked loop costs a graph of its own, even at a size it had). The same mark at these
    calls makes one graph serve them all (measured: 2 -> 1 compiles)."""
    if not any(r.kind == "dim_marking_added" for c in frame.compiles for r in c.reasons):
        return []
    marks: dict[str, set[int]] = {}  # source -> the dims some call of the frame marked
    marking: list[Compile] = []  # the compiles that saw them marked
    for compile_ in frame.compiles:
        for source, entry in compile_.inputs.items():
            seen = set((entry or {}).get("marked") or ()) | set((entry or {}).get("maybe_marked") or ())
            if seen:
                marks.setdefault(source, set()).update(seen)
                if compile_ not in marking:
                    marking.append(compile_)
    found = []
    for ev in evidence:
        if ev.changed or ev.site is None:
            continue
        dims: dict[str, set[int]] = {}
        for compile_ in ev.compiles:
            for source, entry in compile_.inputs.items():
                if entry.get("type") != "Tensor" or source not in marks:
                    continue
                if not (entry.get("marked") or entry.get("maybe_marked")):
                    dims.setdefault(source, set()).update(marks[source])
        if dims:
            ev.changed, ev.shared = dims, True
            ev.linked += [c for c in marking if c not in ev.linked]  # the marks it copies
            _tie(ev)
            found.append(ev)
    return found
