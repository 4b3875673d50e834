"""The tensors a compiled module holds itself, for the recorder (standard library only: it runs
inside the user's process, and is handed torch's own objects).

The argument walk (``recorder.inputs.InputWalk``) looks into a module's plain attributes only; its
buffers and parameters live in ``_buffers`` and ``_parameters``, so a rule that met
``self.scale`` (a registered buffer) could not tell its dtype, rank or device, and filed a fix
that is bit-identical for a float32 buffer as unsafe (RF009's schedule tensor). These are the
module's own, not its submodules' (a model has thousands): ``self.scale``, ``self.weight``.
"""

from __future__ import annotations

__all__ = ["MAX_HELD", "held_tensors"]

MAX_HELD = 32  # buffers and parameters recorded per module


def held_tensors(module, source: str, describe) -> dict[str, dict]:
    """``source.name`` -> ``describe(tensor)`` plus ``"held": "buffer"`` or ``"parameter"``, for
    the buffers, then the parameters, that ``module`` registered itself (not None). Never raises."""
    found: dict[str, dict] = {}
    for held, table in (("buffer", "_buffers"), ("parameter", "_parameters")):
        try:
            items = list(vars(module).get(table, {}).items())
        except Exception:  # a module that misbehaves when looked at: nothing from it
            continue
        for name, tensor in items:
            if len(found) >= MAX_HELD:
                return found
            if tensor is None or not isinstance(name, str):
                continue
            try:
                entry = describe(tensor)
            except Exception:
                entry = None
            if entry is not None and entry.get("type") == "Tensor":
                found[f"{source}.{name}"] = {**entry, "held": held}
    return found
