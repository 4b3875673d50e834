"""Fields of what a module returned: ``unet(latent_in, t).sample``, ``outputs.logits``.

Model code returns its tensors in an output object (diffusers' ``BaseOutput``, transformers'
``ModelOutput``, a dataclass of the user's), and the source of the compiled function does not say
what a field holds. A field of a module's output, read where a tensor was expected, is most
often a tensor; but that is a guess from the text, so a rule that takes it (``ScalarUses`` with
``output_fields=True``, which RF002 asks for only when the analysis without it refused) files its
fix as one a run must prove, and names the fields it took.

A tensor's own non-tensor attributes (``x.shape``, ``x.dtype``) are never taken for tensors.
"""

from __future__ import annotations

import libcst as cst

__all__ = ["TENSOR_METADATA", "is_output_field"]

# A tensor's attributes that are not tensors (torch.Tensor's data descriptors).
TENSOR_METADATA = frozenset(
    {
        "shape",
        "dtype",
        "device",
        "ndim",
        "layout",
        "names",
        "is_cuda",
        "is_cpu",
        "is_meta",
        "is_leaf",
        "is_sparse",
        "is_quantized",
        "is_nested",
        "is_mps",
        "requires_grad",
        "grad_fn",
        "itemsize",
        "nbytes",
        "output_nr",
    }
)


def is_output_field(expr: cst.Attribute) -> bool:
    """Could ``expr`` (whose object the caller knows to be a module's output or a tensor) be a
    tensor field: a public attribute that no tensor has as metadata."""
    name = expr.attr.value
    return name not in TENSOR_METADATA and not name.startswith("_")
