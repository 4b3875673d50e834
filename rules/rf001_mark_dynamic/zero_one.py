"""What RF001's note says to do about 0/1 specialisation (torch specialises a size of 0 or 1 even
where it is marked dynamic): only what the Profile's torch has, and only where the compiled code
can take it."""

from __future__ import annotations

from recompile_fix.rules.rf001_mark_dynamic.marks import BACKED_SIZE_OBLIVIOUS, MARK_UNBACKED

__all__ = ["zero_one_suggestion"]


def zero_one_suggestion(readable: bool, unseen: str | None, files: list[str], release: tuple[int, int] | None) -> str:
    """The note's ending. ``readable``: the compiled code is the program's own and the analysis
    read all of it; ``unseen``: a call in it the analysis cannot read; ``files``: the library
    frames' files and the compiled frame's (transformers' masking code takes another path for a
    size-1 input)."""
    if readable:
        ways = ["start with a larger size"]
        if MARK_UNBACKED.runs_on(release):
            ways.append(
                "try `torch._dynamo.decorators.mark_unbacked` instead (it graph-breaks wherever the "
                "compiled code needs a concrete size, e.g. scaled_dot_product_attention: check with "
                "`recompile-fix verify`)"
            )
        if BACKED_SIZE_OBLIVIOUS.runs_on(release):
            ways.append(f"set {BACKED_SIZE_OBLIVIOUS.name} = True")
        return "; " + ", or ".join(ways)
    if unseen is None:  # library code, or a compiled function the analysis could not find
        transformers = any("transformers/" in f.replace("\\", "/") for f in files)
        example = (
            " (transformers: `q_length == 1` in masking_utils, `is_causal = q_length > 1` in sdpa_attention)"
            if transformers
            else ""
        )
        return (
            ". `mark_unbacked` and `backed_size_oblivious` are not suggested: model code may take another path "
            f"for a size-1 input{example}, so they graph-break there and compile more, not less"
        )
    return (
        f"; start with a larger size. `mark_unbacked` and `backed_size_oblivious` are not "
        f"suggested: the compiled code calls {unseen}, which the analysis cannot read and "
        "which may need a concrete size (scaled_dot_product_attention does, and graph-breaks)"
    )
