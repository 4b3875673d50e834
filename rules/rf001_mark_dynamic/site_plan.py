"""RF001's plan for one call of one compiled frame (``SitePlan``): which of the dimensions that
changed there to mark, with which mark (``mark_dynamic``, ``maybe_mark_dynamic``,
``mark_unbacked``), where the statements go, and the notes on what still compiles."""

from __future__ import annotations

import re
from typing import Any

import libcst as cst

from recompile_fix.analysis.call_match import call_at_site
from recompile_fix.analysis.call_site_code import (
    argument_for_base,
    call_runs_before_argument,
    calls_nothing,
    is_plain_dotted,
    name_used_elsewhere,
)
from recompile_fix.analysis.call_targets import Base, CallTarget, library_frame, locate, signature_of
from recompile_fix.analysis.project import Project
from recompile_fix.analysis.source import SourceFile, walk
from recompile_fix.findings.finding import UNPROVEN, Finding, Safety, cover, frame_evidence
from recompile_fix.findings.rule import Rule
from recompile_fix.profile.model import Location, is_library_path
from recompile_fix.profile.sources import Step
from recompile_fix.rules.rf001_mark_dynamic.compile_call import (
    dynamic_instead,
    isolate_finding,
    library_call_finding,
    per_wrapper_sizes,
)
from recompile_fix.rules.rf001_mark_dynamic.graph_dims import parameter_of, refused_by_run, split_by_run
from recompile_fix.rules.rf001_mark_dynamic.marks import (
    MARK_UNBACKED,
    UNHELD_UNPROVEN,
    Mark,
    argument_order,
    borrowed_message,
    loops_of_marks,
    none_message,
    shared_message,
    short_path,
    site_message,
    steps_code,
    steps_json,
    target_label,
    unheld_notes,
)
from recompile_fix.rules.rf001_mark_dynamic.parameter_shapes import parameter_shapes_finding
from recompile_fix.rules.rf001_mark_dynamic.size_evidence import SiteEvidence
from recompile_fix.rules.rf001_mark_dynamic.size_uses import SizeUses, unseen_call
from recompile_fix.rules.rf001_mark_dynamic.zero_one import zero_one_suggestion

__all__ = ["SitePlan"]


class SitePlan:
    """The finding for one call of one compiled frame."""

    def __init__(
        self,
        rule: Rule,
        evidence: SiteEvidence,
        project: Project,
        release: tuple[int, int] | None,
        uses: dict[tuple[int, str], tuple[cst.FunctionDef, SizeUses]] | None = None,
        other_compiled_calls: set[tuple[str, int]] | None = None,
    ):
        self.rule = rule
        self.other_compiled_calls = other_compiled_calls or set()
        self._uses = {} if uses is None else uses
        self.ev = evidence
        self.frame = evidence.frame
        self.site: Location = evidence.site  # type: ignore[assignment]
        self.project = project
        self.release = release
        self.library = next((c.library_frames for c in evidence.compiles if c.library_frames), [])
        self.here = len(evidence.compiles)

    # A finding, with the evidence of this call.
    def finding(self, message: str, safety: Safety, notes: list[str], location: Location | None = None) -> Finding:
        guards = [r for r in self.ev.reasons if r.kind in self.rule.consumes]
        return Finding(
            rule=self.rule.id,
            file=(location or self.site).file,
            location=location or self.site,
            safety=safety,
            message=message,
            evidence=frame_evidence(
                self.frame,
                guards,
                call_site=f"{self.site.file}:{self.site.line}",
                compiles_here=self.here,
            ),
            notes=notes,
        )

    def none(self, why: list[str]) -> list[Finding]:
        # The tensor torch's own guard names, where one does.
        named = [r.source for r in self.ev.reasons if r.source in self.ev.changed]
        first = named[0] if named else sorted(self.ev.changed)[0]
        return [
            self.finding(none_message(first, sorted(self.ev.changed[first]), self.frame, self.here), Safety.NONE, why)
        ]

    def findings(self) -> list[Finding]:
        source = self.project.source(self.site.file)
        site = self.site
        # On a line without spans (PYTHONNODEBUGRANGES=1), the call that can take the recorded arguments.
        call = call_at_site(source, site, self.frame, self.project.source) if source else None
        if source is None or call is None:
            return self.none([f"no call found at {site.file}:{site.line}"])
        statement, why = source.statement_of(call)
        if statement is None:  # no mark can go before this call; a fix at the compile call still can
            reasons = [why or "no statement before the call"]
            isolated = self._isolated(source, call, reasons, about_the_call=True)
            return isolated if isolated is not None else dynamic_instead(self, reasons) or self.none(reasons)
        signature = signature_of(self.frame, self.project)
        located = {src: locate(self.frame, self.ev.compiles, src, call, source, signature) for src in self.ev.changed}
        func, func_source = self._compiled_function()
        kept, notes, partial, lost = self._kept(located, func, func_source)
        unheld = bool(partial) and not self.ev.from_compiled  # tied tensors this call cannot mark
        if not kept:
            if self.library and lost:
                return library_call_finding(self, source, call, lost)
            isolated = self._isolated(source, call, notes + lost)
            return isolated if isolated is not None else self.none(notes + lost)

        tied = self._tied_ints(kept, func, func_source)
        if tied:
            return self.none(tied)
        entries, loops, names = self._layout(source, call, kept, located)
        if not (self.ev.borrowed or self.ev.shared) and not self._marking_helps(kept):
            return self._no_help(kept, func, names)
        for entry in list(entries):
            if entry["optional"] and any(kind == "item" for kind, _ in entry["steps"]):
                # `batch["mask"]` that some calls lack: a guard `is not None` could not reach it.
                entries.remove(entry)
                partial.append(
                    f"`{names[entry['source']]}` changes with them but is not passed on every call: "
                    "the marks are `maybe_mark_dynamic`, which cannot raise"
                )
        if not entries and not loops:
            return self.none(notes + partial)
        unseen = (
            unseen_call(func_source, func, self._opaque_params(signature))
            if func is not None and func_source is not None
            else None
        )
        compared = self._compared(kept, located, func, func_source)
        hard, mark = self._mark(kept, located, func, partial, compared, unseen)
        notes = notes + partial
        shared = self._passed_to_other_compiled_code(source, call, statement, entries) if hard else None
        if shared is not None and mark == "mark_dynamic":
            hard, mark = False, "maybe_mark_dynamic"
            notes.append(
                f"`maybe_mark_dynamic`, not `mark_dynamic`: the program also passes `{shared[0]}` to other "
                f"compiled code at line {shared[1]}, whose graph may specialise the size (a hard mark "
                "raises there); `maybe_mark_dynamic` cannot raise"
            )
        elif not hard and not partial:
            notes.append(self._why_maybe(func, compared, unseen))
        copied = {e["source"] for e in entries if e["contiguous"]}
        notes.extend(self._still_compiles(kept, mark, func, unseen, names, copied))

        finding = self.finding("", Safety.SAFE, notes)
        # The recompiles it is about: the dims it marks (`from_compiled`: also the tied tensors,
        # traced inside once the break goes), not every size change of the frame.
        traced = partial and self.ev.from_compiled
        dims = kept + [(s, d) for s, ds in self.ev.changed.items() for d in ds if traced and s not in dict(kept)]
        finding.covers = [cover(self.frame, [src for src, _ in dims], self.rule.consumes, dims)]
        if self.ev.shared:  # torch's guard on the mark names no tensor
            finding.covers.append(cover(self.frame, kinds=["dim_marking_added"]))
        self._fill(finding, source, call, statement, entries, loops, mark)
        indexed = self._indexed_unseen(entries, names)
        if indexed is not None:
            finding.safety, finding.unsafe_because = Safety.UNSAFE, UNPROVEN
            finding.notes.append(indexed)
        runs = self.ev.compiles + self.ev.linked
        splits = (split_by_run(group, runs, self.frame.compiles) for group in self.ev.groups if set(group) & set(kept))
        split = next((note for note in splits if note), None)
        if split is not None:
            finding.safety, finding.unsafe_because = Safety.UNSAFE, UNPROVEN
            finding.notes.append(split)
        if unheld:  # an input changing size unmarked recompiles whatever is marked (a trial: 7 -> 7)
            finding.safety, finding.unsafe_because = Safety.UNSAFE, UNPROVEN
            finding.notes.append(UNHELD_UNPROVEN)
        if compared and not self._merges_despite_equality(kept, located, func, func_source):
            # A size the code tests for equality (`if x.shape[0] == 4`, `case 4:`) still compiles
            # apart where a call's size takes the equal branch: unless the recorded sizes and the
            # literals show the mark merges compiles, a run proves it (verify/planted.py: 2 -> 2).
            finding.safety, finding.unsafe_because = Safety.UNSAFE, UNPROVEN
            finding.notes.append(
                "unproven: the compiled code tests the size for equality, so a size that takes the equal "
                "branch still compiles on its own; `fix` keeps the mark only where a run shows fewer compiles"
            )
        return [finding, *(library_call_finding(self, source, call, [], finding) if unheld else [])]

    def _indexed_unseen(self, entries: list[dict[str, Any]], names: dict[str, str]) -> str | None:
        """Why a mark reached through an index into a container (`cache.layers[0].keys`) may raise
        where it runs, or None: the run recorded no shape of it, only a guard that named it, so
        it may be missing at calls before that one (a new user's Whisper decoder loop: the cache
        holds no layers at its first call, and the mark raised IndexError)."""
        for entry in entries:
            if any(kind == "item" and isinstance(key, int) for kind, key in entry["steps"]) and not any(
                src == entry["source"] for src, _ in self.ev.sizes
            ):
                return (
                    f"unproven: `{names[entry['source']]}` is reached through an index into a container "
                    "the run recorded only when a guard named it (a cache fills as it runs): at a call where "
                    "it is shorter, the mark raises IndexError; `fix` keeps it only where a run passes and "
                    "compiles less"
                )
        return None

    def _passed_to_other_compiled_code(
        self, source: SourceFile, call: cst.Call, statement: cst.CSTNode, entries: list[dict[str, Any]]
    ) -> tuple[str, int] | None:
        """(name, line) where a tensor this call's marks go on, held in a name, is also passed to
        a call of other compiled code (a call site of another frame the run recorded) in the same
        function: the mark goes with the tensor."""
        names = set()
        for entry in entries:
            arg = argument_for_base(call, Base.from_json(entry["base"])) if "expr" not in entry["base"] else None
            if arg is not None and isinstance(arg.value, cst.Name):
                names.add(arg.value.value)
        if not names or not self.other_compiled_calls:
            return None
        scope = next((a for a in source.ancestors(statement) if isinstance(a, cst.FunctionDef)), source.module)
        for node in walk(scope):
            if not isinstance(node, cst.Call) or node is call:
                continue
            line = source.positions[node].start.line
            if (self.site.file, line) not in self.other_compiled_calls:
                continue
            for arg in node.args:
                root = arg.value
                while isinstance(root, (cst.Attribute, cst.Subscript)):
                    root = root.value
                if isinstance(root, cst.Name) and root.value in names:
                    return root.value, line
        return None

    def _kept(
        self,
        located: dict[str, tuple[CallTarget | None, str | None]],
        func: cst.FunctionDef | None,
        func_source: SourceFile | None,
    ) -> tuple[list[tuple[str, int]], list[str], list[str], list[str]]:
        """The dimensions to mark, per group of tied ones: (kept, notes on groups refused, partial:
        tensors of a group the call does not hold, lost: groups it holds none of)."""
        kept: list[tuple[str, int]] = []
        notes: list[str] = []
        unheld: list[tuple[str, int, str]] = []  # (source, dim, why the call cannot mark it)
        lost: list[str] = []
        for group in self.ev.groups:
            refused = refused_by_run(group, self.ev.compiles + self.ev.linked, self.frame.compiles)
            if refused:
                notes.append(refused)
                continue
            looped = self._looped(group, located, func, func_source)
            if looped:
                notes.append(looped)
                continue
            missing = [(src, d) for src, d in group if located[src][0] is None]
            reachable = [(src, d) for src, d in group if located[src][0] is not None]
            if not reachable:
                lost.extend(f"`{src}` dim {d}: {located[src][1]}" for src, d in group)
                continue
            kept.extend(reachable)
            unheld.extend((src, d, located[src][1] or "") for src, d in missing)
        return kept, notes, unheld_notes(unheld), lost

    def _tied_ints(
        self, kept: list[tuple[str, int]], func: cst.FunctionDef | None, func_source: SourceFile | None
    ) -> list[str]:
        """Why no mark helps where an int argument carries the size along with the tensor (the
        recorded int equals the dim's size at every compile here, and changes): torch specialises
        an int at the first compile, so the call compiles again whatever the mark, and a
        ``mark_dynamic`` raises where the code ties the two (``x.view(shape)``:
        ConstraintViolationError). An int the compiled function's body never names gets no guard:
        not counted. Empty where none does."""
        compiles = [c for c in self.ev.compiles if c.inputs]
        body = func_source.code(func.body) if func is not None and func_source is not None else None
        if len(compiles) < 2:
            return []
        why = []
        for src, dim in kept:
            sizes = [(c.inputs.get(src) or {}).get("shape") for c in compiles]
            if any(not isinstance(s, list) or len(s) <= dim for s in sizes):
                continue
            at = [s[dim] for s in sizes]  # type: ignore[index]
            if len(set(at)) < 2:
                continue
            for name in compiles[0].inputs:
                root = re.match(r"[A-Za-z_]\w*", name)
                if body is not None and (root is None or not re.search(rf"\b{root.group()}\b", body)):
                    continue  # never read in the compiled code: no guard on it
                values = [(c.inputs.get(name) or {}) for c in compiles]
                if all(v.get("type") == "int" and v.get("value") == size for v, size in zip(values, at)):
                    kind = "an int attribute" if "." in name else "an int argument"
                    why.append(
                        f"`{name}`, {kind}, carries `{src}` dim {dim}'s size ({' -> '.join(map(str, at))}): "
                        "torch specialises an int at the first compile, so the call compiles again whatever "
                        "the mark (and `mark_dynamic` raises where the code ties the two, as `x.view(shape)` "
                        f"does); pass the size from the tensor instead (`{src}.shape[{dim}]`, or -1 in a view)"
                    )
                    break
        return why

    def _no_help(
        self, kept: list[tuple[str, int]], func: cst.FunctionDef | None, names: dict[str, str]
    ) -> list[Finding]:
        """Where marking would not reduce the compiles at this call: no edit, and why."""
        if self.here < 2:
            return []  # nothing recompiled here: no word about another call's compiles
        small = sorted({f"`{names.get(src, src)}` dim {d}" for src, d in kept if self.ev.small(src, [d])})
        return self.none(
            [
                f"no edit: marking {', '.join(small) or 'these dimensions'} would not reduce the "
                f"{self.here} compiles at this call (torch makes a dimension dynamic on its own once "
                "its size changes; what is left is the floor)",
                *self._still_compiles(kept, "maybe_mark_dynamic", func, None if func else "", names)[:1],
            ]
        )

    def _mark(
        self,
        kept: list[tuple[str, int]],
        located: dict[str, tuple[CallTarget | None, str | None]],
        func: cst.FunctionDef | None,
        partial: list[str],
        compared: bool,
        unseen: str | None,
    ) -> tuple[bool, str]:
        """Whether the mark is a hard one, and which: ``mark_dynamic`` where nothing can make it
        raise, ``decorators.mark_unbacked`` for a size 0 or 1 in code that calls nothing, else
        ``maybe_mark_dynamic``."""
        plain = all(located[src][0].param for src, _ in kept)  # type: ignore[union-attr]
        hard = func is not None and not self.library and not partial and plain and not compared and unseen is None
        # The program hard-marks these dims at another call of this frame (a warm-up call before
        # a marked loop): a `maybe_mark_dynamic` graph would not serve its marked tensors
        # ("_dynamo_dynamic_indices should be absent"); the same mark, which ran, serves both.
        # Not for a size 0 or 1 here: torch specialises it, and a hard mark raises there.
        hard = hard or (
            not partial and self._marked_by_program(kept) and not any(self.ev.small(src, [d]) for src, d in kept)
        )
        small = any(self.ev.small(src, [d]) for src, d in kept)
        if self.ev.shared:  # the program's own kind of mark, which it ran at the other call
            hard = self._marked_by_program(kept) and not small
            return hard, "mark_dynamic" if hard else "maybe_mark_dynamic"
        mark = "mark_dynamic" if hard else "maybe_mark_dynamic"
        if hard and small and MARK_UNBACKED.runs_on(self.release) and calls_nothing(func):
            # An unbacked size breaks the graph wherever torch needs a concrete one (SDPA picks
            # its kernel by size, for one): only code that calls nothing is sure not to.
            mark = "decorators.mark_unbacked"
        return hard, mark

    def _isolated(
        self, source: SourceFile, call: cst.Call, notes: list[str], about_the_call: bool = False
    ) -> list[Finding] | None:
        """Parameter sizes traced as dynamic where sizes are tied to each wrapper's weights, or
        parameters of another shape sit behind one frame (ten heads of different widths, each
        compiled; a LoRA rank sweep); else `isolate_recompiles=True` where several compiled
        modules share its cache (not one module whose parameter was swapped)."""
        tied = any(per_wrapper_sizes(group, self.ev.compiles) for group in self.ev.groups)
        swapped = any(parameter_of(src) for group in self.ev.groups for src, _ in group)
        if not (tied or swapped):
            return None
        if self._parameters_traced_dynamic():
            return []  # the program lets them be dynamic already: its one recompile is expected
        # Why no mark goes before the call (``about_the_call``) says nothing of a fix elsewhere.
        return parameter_shapes_finding(self, source, call, [] if about_the_call else notes) or isolate_finding(
            self, source, call, notes, repeated_only=not tied
        )

    def _parameters_traced_dynamic(self) -> bool:
        """Did a compile here trace a changed parameter's size as dynamic (the program turned
        ``force_parameter_static_shapes`` off: the second shape compiled the graph for all)?"""
        params = {src for group in self.ev.groups for src, _ in group if parameter_of(src)}
        return any(
            record.get("state") == "dynamic"
            for c in self.ev.compiles
            for src in params
            for record in (c.dims or {}).get(src, [])
        )

    def _marked_by_program(self, kept: list[tuple[str, int]]) -> bool:
        """Did the program itself `mark_dynamic` each of these dims at a recorded compile?"""
        compiles = [c for c in self.ev.compiles + self.ev.linked if c.inputs]
        return bool(kept) and all(
            any(d in (c.inputs.get(src) or {}).get("marked", ()) for c in compiles) for src, d in kept
        )

    def _opaque_params(self, signature: dict[str, Any] | None) -> frozenset[str]:
        """Parameters never recorded as a tensor or a number at this call (a cache object passed
        in): their methods may be a library's."""
        if signature is None:
            return frozenset()
        found = set()
        for param in [*signature.get("positional", []), *signature.get("keyword_only", [])]:
            kinds = {c.inputs.get(param, {}).get("type") for c in self.ev.compiles if c.inputs}
            if param not in ("self", "cls") and kinds and not kinds & {"Tensor", "int", "float", "bool"}:
                found.add(param)
        return frozenset(found)

    def _marking_helps(self, kept: list[tuple[str, int]], apart: dict[tuple[str, int], set[int]] | None = None) -> bool:
        """Would the marks merge any compiles? After marking, the calls still differ where a
        marked size was 0 or 1 (specialised), one of ``apart``'s sizes (a literal the code tests
        it against), or the tensor was None: count those classes."""
        compiles = [c for c in self.ev.compiles + self.ev.linked if c.inputs]
        if not compiles:
            return True  # no shapes recorded: the guards alone say it changed
        classes: set[tuple[Any, ...]] = set()
        varying: dict[tuple[str, int], set[int]] = {}  # sizes a mark makes one graph of
        for compile_ in compiles:
            key: list[Any] = []
            for src, d in kept:
                shape = compile_.inputs.get(src, {}).get("shape")
                size = shape[d] if isinstance(shape, list) and d < len(shape) else None
                apart_here = size is None or size <= 1 or size in (apart or {}).get((src, d), ())
                key.append(size if apart_here else "n")
                if size is not None and not apart_here:
                    varying.setdefault((src, d), set()).add(size)
            classes.add(tuple(key))
        # One size besides 0/1 (a UNet's batch 2, 2, 1): the compiles differ for another reason
        # (a changed `timestep`), which no mark merges.
        # Sizes not recorded for these sources: the guards alone say they changed.
        recorded = any(isinstance(c.inputs.get(src, {}).get("shape"), list) for c in compiles for src, _ in kept)
        return len(classes) < len(compiles) and (not recorded or any(len(s) > 1 for s in varying.values()))

    # -- what the compiled code does with the sizes ----------------------------------------
    def _compiled_function(self) -> tuple[cst.FunctionDef | None, SourceFile | None]:
        """The compiled function, when it is the user's own code and readable."""
        if is_library_path(self.frame.file):
            return None, None
        source = self.project.source(self.frame.file)
        func = source.function_def(self.frame.first_line, self.frame.name) if source else None
        return func, source

    def _looped(
        self,
        group: list[tuple[str, int]],
        located: dict[str, Any],
        func: cst.FunctionDef | None,
        func_source: SourceFile | None,
    ) -> str | None:
        if func is None:
            return None
        for src, d in group:
            target = located[src][0]
            if target is None or not target.param:
                continue
            loops = self.size_uses(func, target.param, func_source).loop_dims()
            if d in loops:
                tied = [f"`{s}` dim {e}" for s, e in group if (s, e) != (src, d)]
                also = f" (nor {', '.join(tied)}, tied to it)" if tied else ""
                return (
                    f"`{src}` dim {d} gets no mark{also}: the compiled code feeds it to {loops[d]}, "
                    "which torch specialises: `mark_dynamic` would raise ConstraintViolationError on "
                    "every call and `maybe_mark_dynamic` would change nothing"
                )
        return None

    def size_uses(self, func: cst.FunctionDef, param: str, source: SourceFile | None) -> SizeUses:
        """What ``func`` does with ``param``'s sizes, analysed once per plan (every frame and
        call of a function asked again: 35 ms a frame)."""
        key = (id(func), param)
        if key not in self._uses:
            self._uses[key] = (func, SizeUses(func, param, source))  # func kept: its id stays its own
        return self._uses[key][1]

    def _compared(
        self,
        kept: list[tuple[str, int]],
        located: dict[str, Any],
        func: cst.FunctionDef | None,
        func_source: SourceFile | None,
    ) -> bool:
        if func is None:
            return False
        for src, d in kept:
            target = located[src][0]
            if target.param and d in self.size_uses(func, target.param, func_source).compared_dims():
                return True
        return False

    def _merges_despite_equality(
        self,
        kept: list[tuple[str, int]],
        located: dict[str, Any],
        func: cst.FunctionDef | None,
        func_source: SourceFile | None,
    ) -> bool:
        """With the sizes compared only to literals: each recorded size equal to one (or 0 or 1)
        still compiles on its own, the others share one graph; do fewer classes than compiles
        remain?"""
        if func is None:
            return False
        special: dict[tuple[str, int], set[int]] = {}
        for src, d in kept:
            target = located[src][0]
            uses = self.size_uses(func, target.param, func_source) if target.param else None
            values = uses.compared_values(d) if uses is not None and d in uses.compared_dims() else set()
            if values is None:
                return False
            special[(src, d)] = values
        recorded = any(c.inputs for c in self.ev.compiles + self.ev.linked)  # no sizes: nothing shown
        return recorded and self._marking_helps(kept, special)

    def _why_maybe(self, func: cst.FunctionDef | None, compared: bool, unseen: str | None) -> str:
        if self.library:
            reason = f"library code ({library_frame(self.library[-1])}) makes the compiled call"
        elif func is None:
            reason = (
                f"the compiled code (`{self.frame.name}` in {short_path(self.frame.file)}) is not the program's own"
            )
        elif compared:
            reason = "the compiled code compares the size for equality"
        elif unseen is not None:
            reason = f"the compiled code calls {unseen}, which the analysis cannot read"
        else:
            reason = "not every tensor is a plain argument of the compiled function"
        return (
            f"`maybe_mark_dynamic`, not `mark_dynamic`: {reason}, and may specialise a size; "
            "`maybe_mark_dynamic` cannot raise where it does"
        )

    def _still_compiles(
        self,
        kept: list[tuple[str, int]],
        mark: str,
        func: cst.FunctionDef | None,
        unseen: str | None,
        names: dict[str, str],
        copied: set[str] | None = None,
    ) -> list[str]:
        """Why torch will still compile after the marks; ``copied``: the strided views the fix
        passes as contiguous copies."""
        notes = []
        small = sorted({f"`{names.get(src, src)}` dim {d}" for src, d in kept if self.ev.small(src, [d])})
        if mark == "decorators.mark_unbacked":
            notes.append(
                "the Profile saw size 0 or 1 in this dimension, which torch specialises even when "
                "marked dynamic: mark_unbacked serves those sizes with the same graph (code that "
                "branches on the size would fail to compile; the compiled code seen does not)"
            )
        elif small:
            readable = func is not None and unseen is None and not self.library
            files = [loc.file for loc in self.library] + [self.frame.file]
            unread = unseen if func is not None and not self.library else None
            suggestion = zero_one_suggestion(readable, unread, files, self.release)
            if any(self.ev.passed_small(src, [d]) for src, d in kept):
                had = "had size 1 (or 0) on some calls, which torch specialises"
            else:
                had = (
                    "were never 0 or 1, but a size the compiled code derives from them was on some calls "
                    "(a feature map after its strides: torch guarded their range), and torch specialises it"
                )
            notes.append(
                f"torch will still compile twice: {', '.join(small)} {had} even when marked "
                f"(0/1 specialisation){suggestion}"
            )
        none = []
        for src in self.ev.none_and_tensor():
            name = names.get(src, src)
            if name not in none:
                none.append(name)
        if none:
            notes.append(
                f"torch will still compile twice: `{none[0]}` was None on some calls and a tensor on "
                "others (an empty cache before the prefill, a filled one when decoding): those are "
                "different graphs, and torch compiles each once whatever is marked"
            )
        for src in sorted(self.ev.strided & (copied or set())):
            notes.append(
                f"a stride guard on `{src}`: it is a view whose strides change (e.g. a crop "
                "`x[:, -n:]`), so the fix passes a copy made with "
                "`.clone(memory_format=torch.contiguous_format)` (`.contiguous()` would keep a size-1 "
                "dimension's stride)"
            )
        return notes

    # -- the fix's parameters --------------------------------------------------------------
    def _layout(
        self, source: SourceFile, call: cst.Call, kept: list[tuple[str, int]], located: dict[str, Any]
    ) -> tuple[list[dict[str, Any]], list[dict[str, Any]], dict[str, str]]:
        """The marks (one per tensor, its dimensions together), the loops over a list's items, and
        how the user's code names each guard source (for the notes)."""
        marks: dict[tuple[Base, tuple[Step, ...]], Mark] = {}
        for src, d in kept:
            target = located[src][0]
            marks.setdefault((target.base, target.steps), Mark(target)).dims.add(d)
        loops = loops_of_marks(list(marks.values()))
        looped = {id(m) for loop in loops for m in loop["members"]}
        entries: list[dict[str, Any]] = []
        labels: dict[Base, str] = {}
        names: dict[str, str] = {}
        for m in sorted(marks.values(), key=lambda m: argument_order(call, m.target.base)):
            label = labels.setdefault(m.target.base, target_label(source, call, m.target))
            names[m.target.source] = label + steps_code(steps_json(m.target.steps))
            if id(m) in looped:
                continue
            entries.append(
                {
                    "base": m.target.base.to_json(),
                    "steps": steps_json(m.target.steps),
                    "dims": sorted(m.dims),
                    "label": label,
                    "source": m.target.source,
                    "optional": m.target.source in self.ev.optional,
                    "contiguous": m.target.source in self.ev.strided
                    and not m.target.steps
                    and m.target.base.expr is None
                    and not m.target.base.star,
                }
            )
        loop_entries = []
        for loop in loops:
            base = loop["base"]
            labels.setdefault(base, target_label(source, call, loop["members"][0].target))
            container = labels[base] + steps_code(steps_json(loop["container"]))
            presence = {
                tuple(size is not None for size in self.ev.sizes.get((m.target.source, 0), [])) for m in loop["members"]
            }
            for m in loop["members"]:
                names[m.target.source] = f"{container}[*]" + steps_code(
                    steps_json(m.target.steps[len(loop["container"]) + 1 :])
                )
            loop_entries.append(
                {
                    "base": base.to_json(),
                    "container": steps_json(loop["container"]),
                    "leaves": loop["leaves"],
                    "label": labels[base],
                    # Some calls passed the items empty (a cache before its prefill): skip those.
                    "optional": any(m.target.source in self.ev.optional for m in loop["members"]),
                    "together": len(presence) == 1,
                    "sources": [m.target.source for m in loop["members"]],
                }
            )
        # Sources out of reach, and those looped over, by a name the user's code uses.
        for src in self.ev.changed:
            names.setdefault(src, src)
        return entries, loop_entries, names

    def _fill(
        self,
        finding: Finding,
        source: SourceFile,
        call: cst.Call,
        statement: cst.CSTNode,
        entries: list[dict[str, Any]],
        loop_entries: list[dict[str, Any]],
        mark: str,
    ) -> None:
        pos = source.positions[call]
        finding.location = source.location_of(call, self.site.file, self.site.function)
        finding.params = {
            "call": [pos.start.line, pos.start.column, pos.end.line, pos.end.column],
            "mark": mark,
            "marks": entries,
            "loops": loop_entries,
        }
        finding.message = site_message(entries, loop_entries, self.frame, self.here, len(self.frame.compiles))
        if self.ev.shared:
            finding.message, note = shared_message(entries, loop_entries, self.frame)
            finding.notes.append(note)
        elif self.ev.borrowed:
            finding.message = borrowed_message(entries, loop_entries, self.frame)
            finding.notes.append(
                "the run traced these sizes as dynamic here only because other calls of the frame had "
                "changed them (automatic dynamic); once those calls are marked nothing does, and this "
                "call would compile a static graph, then another for its next size"
            )
        for entry in entries:
            arg = argument_for_base(call, Base.from_json(entry["base"])) if "expr" not in entry["base"] else None
            value = arg.value if arg is not None else None
            if entry["contiguous"] and isinstance(value, cst.Name) and name_used_elsewhere(source, call, value.value):
                finding.safety, finding.unsafe_because = Safety.UNSAFE, UNPROVEN
                finding.notes.append(
                    f"the fix passes a contiguous copy of `{value.value}`, which the code uses "
                    "again: an in-place write to it after the call would no longer reach the tensor "
                    "it was sliced from"
                )
        for base in {Base.from_json(e["base"]) for e in entries + loop_entries}:
            arg = argument_for_base(call, base) if base.expr is None else None
            if (
                arg is not None
                and not is_plain_dotted(arg.value)
                and call_runs_before_argument(source, statement, call, arg)
            ):
                finding.safety, finding.unsafe_because = Safety.UNSAFE, UNPROVEN
                finding.notes.append(
                    "binding the argument to a name moves its evaluation before other calls in the statement"
                )
                break
