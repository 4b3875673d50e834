"""What the run showed about a changing size, before RF001 marks it: facts the compile recorded,
not guesses from the source text.

* The compile's graph specialised the dimension (``Compile.dims``: torch traced it as a symbol
  once it changed, then a guard fixed it to one value): tied to a parameter's static size (a
  head's ``in_features``), formatted into a string, compared. ``mark_dynamic`` on it raises
  ConstraintViolationError at the first call, ``maybe_mark_dynamic`` changes nothing.
* The graph traced the dimension dynamic, and its own guards reject a size an earlier compile
  took (``excludes``: a size computed from it is 0 or 1 there, a stride-32 network at 32
  pixels): a mark made at that earlier call gives a graph for its side only, no fewer compiles
  where it rejects one size; where it rejects several, they may share that graph (unproven).
* The tensor is a module's parameter (``self._parameters['lora_a']``), replaced by one of
  another shape (a LoRA rank swap): torch keeps parameters' shapes static, and the object the
  call holds (a compiled wrapper) may have no such parameter to mark.
"""

from __future__ import annotations

from recompile_fix.profile.model import Compile
from recompile_fix.profile.sources import parse_source

__all__ = ["parameter_of", "refused_by_run", "split_by_run"]


def refused_by_run(
    group: list[tuple[str, int]], compiles: list[Compile], frame_compiles: list[Compile] | None = None
) -> str | None:
    """Why no dimension of ``group`` (tied dims, marked together or not at all) may be marked,
    from the run's record of ``compiles`` (this call's); None when the run shows nothing
    against it. A dimension some compile of the frame (``frame_compiles``) kept dynamic is not
    refused: the graph served it dynamic there (a prefill's mask specialised before the cache
    filled, dynamic once decoding)."""
    served = [c for c in (frame_compiles or []) + compiles if c.dims]
    for src, dim in group:
        parameter = parameter_of(src)
        if parameter is not None:
            return (
                f"`{src}` dim {dim} gets no mark: it is the module's parameter `{parameter}`, replaced by "
                "one of another shape between calls (a rank or width swap); torch keeps parameters' "
                "shapes static, and the object the call holds may have no such parameter to mark (a "
                "compiled wrapper holds none): each shape compiles once, whatever the call marks"
            )
    rejected = _rejected(group, served)
    if rejected is not None and not _may_share(rejected, compiles):
        src, dim, compile_, rejected_sizes, guard = rejected
        sizes = ", ".join(map(str, rejected_sizes))
        # The guard the run recorded; an older Profile's: the usual cause, said as one.
        why = f"`{guard}`" if guard else "e.g. a size computed from it is 0 or 1 there, which torch specialises"
        return (
            f"`{src}` dim {dim} gets no mark: compile {compile_.id} traced it dynamic, and that "
            f"graph's own guards reject the size {sizes} an earlier call took ({why}): marked from "
            f"the first call, {sizes} still gets a graph of its own, no fewer compiles"
        )
    if any(_dynamic(c, src, dim) for src, dim in group for c in served):
        return None
    for src, dim in group:
        for compile_ in compiles:
            record = compile_.specialized(src, dim)
            if record is None:
                continue
            tied = [f"`{s}` dim {d}" for s, d in group if (s, d) != (src, dim)]
            also = f" (nor {', '.join(tied)}, tied to it)" if tied else ""
            if record.get("tied"):
                why = (
                    f"it equals `{record['tied']}`'s size ({record['size']}), a parameter's, which torch "
                    "keeps static: each module's own weight fixes it"
                )
            else:
                why = (
                    f"the compiled code needs its value (a guard fixed it to {record['size']}: it is "
                    "formatted into a string, compared, or fed to an op that needs a concrete size)"
                )
            return (
                f"`{src}` dim {dim} gets no mark{also}: compile {compile_.id} traced it as dynamic and "
                f"specialised it, as {why}; `mark_dynamic` would raise ConstraintViolationError and "
                "`maybe_mark_dynamic` would change nothing"
            )
    return None


def split_by_run(group: list[tuple[str, int]], compiles: list[Compile], frame_compiles: list[Compile]) -> str | None:
    """Why a mark of ``group`` is unproven where the run's dynamic graph rejects sizes earlier
    compiles took (`32*(n//10) - 32 > 20480`: a branch on the size) and a mark may still merge
    compiles: two or more sizes rejected (marked from the first call, they may share one graph for
    their side: a trial's wav2vec2 on clips of 4000, 6400 and longer, 3 -> 2), or more than two
    compiles at the call (one graph per side is fewer: a trial's EfficientNet at three scales and
    two aspect ratios, 4 -> 3). None where the graph rejects nothing, or where ``refused_by_run``
    refuses: one size rejected and two compiles, a graph per side as before."""
    rejected = _rejected(group, [c for c in frame_compiles + compiles if c.dims])
    if rejected is None or not _may_share(rejected, compiles):
        return None
    src, dim, compile_, rejected_sizes, guard = rejected
    return (
        f"unproven: compile {compile_.id} traced `{src}` dim {dim} dynamic, and that graph's own guards "
        f"reject the size {', '.join(map(str, rejected_sizes))} earlier calls took{f' (`{guard}`)' if guard else ''}: marked from the "
        "first call, a graph per side of that guard may still be fewer compiles than now; `fix` keeps "
        "the mark only where a run shows fewer compiles"
    )


def _rejected(
    group: list[tuple[str, int]], served: list[Compile]
) -> tuple[str, int, Compile, list[int], str | None] | None:
    """(source, dim, compile, sizes, guard) where a dynamic graph's own guards reject the sizes
    earlier compiles took; None where none does."""
    for src, dim in group:
        for compile_ in served:
            excluded = [d for d in (compile_.dims or {}).get(src, []) if d.get("dim") == dim and d.get("excludes")]
            if excluded:
                return src, dim, compile_, sorted(set(excluded[0]["excludes"])), excluded[0].get("excluded_by")
    return None


def _may_share(rejected: tuple[str, int, Compile, list[int], str | None], compiles: list[Compile]) -> bool:
    """Could a mark from the first call still merge compiles: several sizes rejected, or more than
    the two graphs (one per side of the guard) a mark leaves at the least?"""
    return len(rejected[3]) > 1 or len({c.id for c in compiles}) > 2


def _dynamic(compile_: Compile, src: str, dim: int) -> bool:
    return any(d.get("dim") == dim and d.get("state") == "dynamic" for d in (compile_.dims or {}).get(src, []))


def parameter_of(src: str) -> str | None:
    """``self._parameters['lora_a']`` -> that spelling; None for a tensor that is no parameter."""
    path = parse_source(src)
    if path is None:
        return None
    steps = path.steps
    for i, step in enumerate(steps[:-1]):
        if step.kind == "attr" and step.key == "_parameters" and steps[i + 1].kind == "item":
            return path.code(steps=steps[: i + 2])
    return None
