"""The constructs a scalar meets in compiled code, each a function ``f(x, c)`` (``x`` a float32
[4, 8] tensor, ``c`` the scalar): what tests/test_construct_table.py runs through the analysis
and measure.py runs through torch."""

from dataclasses import dataclass


@dataclass(frozen=True)
class Construct:
    kind: str  # float / int / size / optional: which VALUES it is called with
    body: str  # the function's body, indented by four spaces per level after the first line
    original_runs: bool = True  # False: the Python-number original fails even eagerly


VALUES = {
    "float": [0.5, 0.7, 1.3, 2.0],
    "int": [1, 2, 4, 8],
    "size": [2, 4, 8, 16, 32],  # sizes that divide x's 32 elements
    "optional": [0.5, None, 0.7, 1.3, None],
}

CONSTRUCTS = {
    # Python builtins on the number
    "max_const": Construct("float", "return x / max(c, 1e-5)"),
    "max_const_first": Construct("float", "return x / max(1e-5, c)"),
    "min_const": Construct("float", "return x * min(c, 1.0)"),
    "abs": Construct("float", "return x * abs(c)"),
    "sum_list": Construct("float", "return x * sum([c, 1.0])"),
    "pair_list": Construct("float", "pair = [c, c]\nreturn x * pair[0] + pair[1]"),
    "round": Construct("float", "return x * round(c)"),
    "float_conv": Construct("float", "return x * float(c)"),
    "int_conv": Construct("float", "return x * int(c)"),
    "builtin_pow": Construct("float", "return x * pow(c, 2)"),
    "math_sqrt": Construct("float", "return x * math.sqrt(c)"),
    "math_exp": Construct("float", "return x * math.exp(-c)"),
    # comparisons and branches
    "optional": Construct("optional", "if c is not None:\n    x = x * c\nreturn x"),
    "bool_as_number": Construct("float", "return x * (c > 1)"),
    "where_tensor_cmp": Construct("float", "return torch.where(x > c, x, x * c)"),
    "where_scalar_cmp": Construct("float", "return torch.where(c > 1, x * c, x)", original_runs=False),
    "branch_eq": Construct("float", "if c == 0.7:\n    return x\nreturn x / c"),
    "ifexp": Construct("float", "return x * c if c > 1 else x * 2"),
    "truthiness": Construct("float", "if c:\n    return x * c\nreturn x"),
    # tensor arithmetic
    "div": Construct("float", "return x / c"),
    "rdiv": Construct("float", "return c / (x.abs() + 1)"),
    "gumbel_tau": Construct("float", "return F.gumbel_softmax(x, tau=c)"),
    "scalar_math": Construct("float", "return x * (c * c) + 3.14 * c"),
    "power": Construct("float", "return x.abs() ** c"),
    "clamp": Construct("float", "return torch.clamp(x, max=c)"),
    "clamp_method": Construct("float", "return x.clamp(min=-c, max=c)"),
    "eps_arith": Construct("float", "return x / (x.norm(dim=-1, keepdim=True) + c)"),
    "lerp": Construct("float", "return torch.lerp(x, x * 2, c)"),
    # Scalar arguments of torch functions
    "full": Construct("float", "return torch.full((4, 8), c) + x"),
    "masked_fill": Construct("float", "return x.masked_fill(x > 0, c)"),
    "fill": Construct("float", "return x.clone().fill_(c)"),
    "full_like": Construct("float", "return torch.full_like(x, c)"),
    "new_full": Construct("float", "return x.new_full(x.shape, c)"),
    "leaky_relu": Construct("float", "return F.leaky_relu(x, c)"),
    "softplus": Construct("float", "return F.softplus(x, beta=c)"),
    "hardtanh": Construct("float", "return F.hardtanh(x, -c, c)"),
    "dropout": Construct("float", "return F.dropout(x, p=c / 4, training=True)"),
    "layer_norm_eps": Construct("float", "return F.layer_norm(x, (8,), eps=c * 1e-5)"),
    "label_smoothing": Construct("float", "return F.cross_entropy(x, torch.arange(4), label_smoothing=c / 4)"),
    "as_tensor": Construct("float", "return torch.as_tensor(c) * x.sum()"),
    "long_tensor": Construct("float", "return x + torch.tensor(c * 1000, dtype=torch.long)"),
    "returned": Construct("float", "return x * c, c"),
    # ints
    "int_mul": Construct("int", "return x * c"),
    "int_floordiv": Construct("int", "return x // c"),
    "int_int_conv": Construct("int", "return x * int(c)"),
    "int_range": Construct("int", "for _ in range(c):\n    x = x * 2\nreturn x"),
    "int_branch": Construct("int", "if c > 2:\n    return x * 2\nreturn x + 1"),
    "int_view": Construct("size", "return x.view(c, -1)"),
    "int_slice": Construct("int", "return x[:c]"),
    "int_index": Construct("int", "return x[:, c - 1]"),
    "int_zeros": Construct("int", "return torch.zeros(c, 8)"),
    "int_repeat": Construct("int", "return x.repeat(c, 1)"),
    "int_topk": Construct("int", "return torch.topk(x, c).values"),
    "int_sum_dim": Construct("int", "return x.sum(dim=c % 2)"),
    "int_one_hot": Construct("int", "return F.one_hot(torch.arange(4) % 2, num_classes=c + 1)"),
}


def source_of(name: str, function: str = "f") -> str:
    lines = CONSTRUCTS[name].body.splitlines()
    return f"def {function}(x, c):\n" + "".join(f"    {line}\n" for line in lines)
