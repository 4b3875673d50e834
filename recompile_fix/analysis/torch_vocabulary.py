"""torch's API as the scalar analysis (``scalar_uses``) sees it: where a Python number may as well be
a 0-d tensor (arithmetic), where it must stay a number (shapes, sizes, settings), and what
never returns a tensor.

Each entry that allows a 0-d tensor was measured with torch 2.13 (tests/test_construct_table.py
runs every construct with a Python number and with a 0-d tensor and checks the verdict here).
"""

from __future__ import annotations

__all__ = [
    "SYMBOLIC_SIZE_CALLS",
    "TENSOR_DATA_CALLS",
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
    "SCALAR_SLOTS",
    "TENSOR_ATTRIBUTES",
    "CONVERTER_WHY",
    "INEXACT",
    "WRONG_UNDER_INDUCTOR",
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
# Not ``full_like``: see WRONG_UNDER_INDUCTOR. ``gumbel_softmax``'s ``tau`` divides a tensor
# (``(logits + gumbels) / tau``; measured exact, the construct table's ``gumbel_tau``).
ARITH_FUNCTIONS = frozenset(ARITH_METHODS | {"rsub", "gumbel_softmax"})


# Arguments that take a Scalar (torch converts a 0-d tensor there to a number, so the tensor's
# dtype never reaches the result): name -> (positional index, keyword, float64 only). The index
# counts a method's arguments after the tensor it is called on, a function's from its first.
# ``float64 only``: a float32 0-d tensor there breaks the graph (and fails under fullgraph with
# PendingUnbackedSymbolNotFound); a float64 one compiles once, exact (measured, torch 2.13).
SCALAR_SLOTS: dict[str, tuple[int, str, bool]] = {
    "full": (1, "fill_value", False),
    "masked_fill": (1, "value", False),
    "masked_fill_": (1, "value", False),
    "fill_": (0, "value", False),
    "leaky_relu": (1, "negative_slope", True),
    "softplus": (1, "beta", True),
}


# Fills whose value a 0-d float64 tensor gets WRONG under inductor: torch 2.13, 2.14.1 and 2.15.0
# compile ``torch.full_like(x, c)`` / ``x.new_full(shape, c)`` once and return the first call's
# value on every later call (measured: 0.5, 0.5, 0.5, 0.5 for c = 0.5, 0.7, 1.3, 2.0); eager and
# aot_eager are right, so `verify --backend eager` cannot see it. The number stays a number.
WRONG_UNDER_INDUCTOR = frozenset({"full_like", "new_full"})


# Elementwise ops whose result has their (floating) input's dtype and shape: ``x.sin()`` and
# ``torch.sin(x)`` take both from ``x``, so a number that meets the result meets ``x``'s dtype.
SAME_DTYPE_ELEMENTWISE = frozenset(
    {
        "abs", "neg", "sin", "cos", "tan", "tanh", "sigmoid", "exp", "exp2", "expm1", "log", "log1p",
        "log2", "log10", "sqrt", "rsqrt", "square", "relu", "erf", "sign", "reciprocal", "clone",
        "contiguous", "detach", "softmax", "log_softmax",
    }
)  # fmt: skip


# Where a 0-d tensor computes close to, but not bit-identical with, the Python number: a tensor
# exponent (``x ** c``; measured on the eager backend).
INEXACT = frozenset({"pow", "pow_"})


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


# Calls that build a tensor from Python numbers (a list's, for the first two).
TENSOR_DATA_CALLS = frozenset({"torch.tensor", "torch.as_tensor", "torch.scalar_tensor"})

# Calls whose size arguments stay symbolic in a dynamic graph (a tensor's length, a range's
# ends, a `topk` or `kthvalue` k: measured on torch 2.13 and 2.14, eager and inductor, 4 values
# of k -> 1 compile): an int traced as a symbolic int there compiles once. A dim index, a kernel
# size, a window (`unfold`) are guarded on their value, dynamic or not.
SYMBOLIC_SIZE_CALLS = frozenset(
    {
        "arange",
        "view",
        "reshape",
        "expand",
        "repeat",
        "narrow",
        "zeros",
        "ones",
        "empty",
        "full",
        "rand",
        "randn",
        "new_zeros",
        "new_ones",
        "new_empty",
        "new_full",
        "pad",
        "roll",  # its shifts (its dims are a "dim" use)
        "topk",
        "kthvalue",
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


# What each converter does with a 0-d tensor under torch.compile (measured, torch 2.13).
CONVERTER_WHY = {
    "round": "raises TypeError there, even eagerly",
    "float": "graph-breaks there on `.item()` and compiles more often",
    "int": "graph-breaks there on `.item()` and compiles more often",
    "bool": "graph-breaks there (data-dependent)",
}


# libcst's operators whose result is an exact int for int operands (names, so that importing this
# module does not load libcst).
EXACT_INT_OPS = frozenset({"Add", "Subtract", "Multiply", "FloorDivide", "Modulo"})


# Calls that make a tensor from a Python number: a value already passed through one is a tensor.
TENSOR_CONSTRUCTORS = ("tensor", "as_tensor", "scalar_tensor", "full", "zeros", "ones")


def makes_tensor(code: str) -> bool:
    """Is this expression's text a call that makes a tensor (``torch.tensor(0.5)``, ``th.as_tensor(lr)``,
    ``torch.full((), k)``), whatever the module is called?"""
    import re

    return re.match(rf"^\s*[\w.]*\b({'|'.join(TENSOR_CONSTRUCTORS)})\s*\(", code) is not None


FLOATING = frozenset({"float16", "bfloat16", "float32", "float64"})


def zero_d_computes_as_float(operand: str, float64: bool) -> bool:
    """Does a 0-d tensor in a Python float's place compute what the float did beside a tensor of
    ``operand`` (``"float32:2"``: dtype and rank)? A float64 one beside any floating tensor of
    rank >= 1 (its dtype wins, the value casts as the float's did); a default-dtype (float32) one
    beside float32, or a half tensor of rank >= 1 (beside a 0-d half one it makes the result
    float32, beside float64 it rounds the number first)."""
    dtype, _, rank = operand.partition(":")
    if not rank.isdigit():
        return False
    if float64:
        return dtype in FLOATING and int(rank) >= 1
    return dtype == "float32" or (dtype in ("float16", "bfloat16") and int(rank) >= 1)
