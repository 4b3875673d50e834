"""torch's API as the scalar analysis (``scalar_uses``) sees it: where a Python number may as well be
a 0-d tensor (arithmetic), where it must stay a number (shapes, sizes, settings), and what
never returns a tensor.
"""

from __future__ import annotations

import libcst as cst

__all__ = [
    "ARITH_FUNCTIONS",
    "ARITH_METHODS",
    "CONVERTERS",
    "EXACT_INT_OPS",
    "NOT_TENSOR_METHODS",
    "NOT_TENSOR_TORCH",
    "NOT_VALUE_KEYWORDS",
    "NUMBER_SETTING_FUNCTIONS",
    "PYTHON_REDUCERS",
    "SHAPE_FUNCTIONS",
    "SHAPE_KEYWORDS",
    "SHAPE_METHODS",
    "TENSOR_ATTRIBUTES",
    "makes_tensor",
]

# Tensor methods whose Python-number arguments may as well be 0-d tensors (same result).
ARITH_METHODS = frozenset(
    {
        "add",
        "add_",
        "sub",
        "sub_",
        "subtract",
        "mul",
        "mul_",
        "multiply",
        "div",
        "div_",
        "divide",
        "true_divide",
        "pow",
        "pow_",
        "clamp",
        "clamp_",
        "clip",
        "clip_",
        "clamp_min",
        "clamp_max",
        "lerp",
        "lerp_",
        "maximum",
        "minimum",
        "fmod",
        "remainder",
        "where",
        "masked_fill",
        "masked_fill_",
        "fill_",
        "eq",
        "ne",
        "lt",
        "le",
        "gt",
        "ge",
        "atan2",
        "hypot",
        "copysign",
        "xlogy",
        "float_power",
        "rsub",
    }
)


# torch functions of the same kind: the number is a value in the arithmetic, not a setting.
ARITH_FUNCTIONS = frozenset(ARITH_METHODS | {"rsub", "full_like"})


# Keywords that are never a value in the arithmetic.
NOT_VALUE_KEYWORDS = frozenset({"dim", "out", "dtype", "keepdim", "alpha", "rounding_mode", "device"})


SHAPE_METHODS = frozenset(
    {
        "view",
        "reshape",
        "expand",
        "repeat",
        "repeat_interleave",
        "narrow",
        "unflatten",
        "flatten",
        "permute",
        "transpose",
        "split",
        "chunk",
        "unfold",
        "topk",
        "kthvalue",
        "new_zeros",
        "new_ones",
        "new_empty",
        "new_full",
        "sum",
        "mean",
        "softmax",
        "log_softmax",
        "argmax",
        "argmin",
        "max",
        "min",
        "cumsum",
        "squeeze",
        "unsqueeze",
        "roll",
        "tril",
        "triu",
        "select",
        "index_select",
        "gather",
        "diagonal",
        "movedim",
        "tile",
        "to",
    }
)


SHAPE_FUNCTIONS = frozenset(
    {
        "zeros",
        "ones",
        "empty",
        "full",
        "rand",
        "randn",
        "randint",
        "randperm",
        "arange",
        "linspace",
        "logspace",
        "eye",
        "pad",
        "interpolate",
        "topk",
        "kthvalue",
        "split",
        "chunk",
        "tril",
        "triu",
        "roll",
        "one_hot",
        "softmax",
        "log_softmax",
        "cumsum",
        "flatten",
        "unflatten",
        "reshape",
        "narrow",
        "repeat_interleave",
        "tile",
        "multinomial",
        "avg_pool1d",
        "avg_pool2d",
        "max_pool1d",
        "max_pool2d",
        "adaptive_avg_pool1d",
        "adaptive_avg_pool2d",
        "unfold",
        "fold",
    }
)


SHAPE_KEYWORDS = frozenset(
    {
        "size",
        "shape",
        "dim",
        "dims",
        "kernel_size",
        "stride",
        "padding",
        "output_size",
        "num_classes",
        "k",
        "chunks",
        "sections",
        "split_size_or_sections",
        "repeats",
        "groups",
        "num_samples",
        "scale_factor",
        "start_dim",
        "end_dim",
    }
)


# Activation and normalisation settings torch reads as a Python number (§8: leaky_relu, layer_norm).
NUMBER_SETTING_FUNCTIONS = frozenset(
    {
        "leaky_relu",
        "elu",
        "celu",
        "selu",
        "hardtanh",
        "softplus",
        "threshold",
        "rrelu",
        "gelu",
        "layer_norm",
        "group_norm",
        "batch_norm",
        "instance_norm",
        "rms_norm",
        "normalize",
        "local_response_norm",
        "clip_grad_norm_",
        "clip_grad_value_",
        "label_smoothing",
    }
)


NOT_TENSOR_METHODS = frozenset(
    {
        "item",
        "tolist",
        "size",
        "dim",
        "ndimension",
        "numel",
        "nelement",
        "stride",
        "data_ptr",
        "element_size",
        "is_contiguous",
        "is_floating_point",
        "is_complex",
        "get_device",
        "storage_offset",
        "numpy",
        "untyped_storage",
        "equal",
        "allclose",
        "is_nonzero",
        "has_names",
        "is_same_size",
        "__len__",
        "backward",
        "register_hook",
        "parameters",
        "named_parameters",
        "state_dict",
        "train",
        "eval",
        "zero_grad",
        "step",
    }
)


NOT_TENSOR_TORCH = frozenset(
    {
        "is_tensor",
        "numel",
        "is_floating_point",
        "is_complex",
        "is_nonzero",
        "get_default_dtype",
        "equal",
        "allclose",
        "is_grad_enabled",
        "is_storage",
        "typename",
        "result_type",
        "promote_types",
        "can_cast",
        "finfo",
        "iinfo",
        "device",
        "dtype",
        "Size",
        "compile",
        "no_grad",
        "enable_grad",
        "manual_seed",
        "set_grad_enabled",
        "is_inference_mode_enabled",
        "graph_break",
        "mark_dynamic",
    }
)


TENSOR_ATTRIBUTES = frozenset({"T", "mT", "H", "mH", "data", "grad", "real", "imag"})


CONVERTERS = frozenset(
    {
        "int",
        "float",
        "round",
        "bool",
        "complex",
        "len",
        "str",
        "repr",
        "format",
        "hex",
        "oct",
        "bin",
        "chr",
        "hash",
        "divmod",
    }
)


PYTHON_REDUCERS = frozenset({"max", "min", "sum", "sorted", "any", "all"})


EXACT_INT_OPS = (cst.Add, cst.Subtract, cst.Multiply, cst.FloorDivide, cst.Modulo)


# Calls that make a tensor from a Python number: a value already passed through one is a tensor.
TENSOR_CONSTRUCTORS = ("tensor", "as_tensor", "scalar_tensor", "full", "zeros", "ones")


def makes_tensor(code: str) -> bool:
    """Is this expression's text a call that makes a tensor (``torch.tensor(0.5)``, ``th.as_tensor(lr)``,
    ``torch.full((), k)``), whatever the module is called?"""
    import re

    return re.match(rf"^\s*[\w.]*\b({'|'.join(TENSOR_CONSTRUCTORS)})\s*\(", code) is not None
