"""Table tests for recompile_fix.profile.reasons, on guard-failure strings real torch produced.

Every string in REAL_213 was copied from ``torch._dynamo.utils.guard_failures`` (or, for the limit
hit, ``get_compilation_metrics()[i].fail_reason``) after compiling small functions with
``backend="eager"`` on torch 2.13.0 (CPU). Only paths were changed: the user file is
``/proj/model.py`` (torch's own shortening of that path, ``roj/model.py``, stays in the ``  # ...``
comment, as torch would print it) and the venv is ``/venv``. Object ids are as printed.

OLDER holds the torch < 2.13 spelling (``L['x']``); each must parse the same as its 2.13 twin.
RELEASES holds what other releases print where 2.13 prints something else (copied from their
runs, tests/fixtures/torch-<version>/): the limit-hit failure and the first use.
"""

from __future__ import annotations

import pytest

from recompile_fix.profile.model import REASON_KINDS
from recompile_fix.profile.reasons import (
    is_limit_hit,
    limit_hit_reason,
    parse_reason,
    parse_reasons,
    strip_local_scope,
)

pytestmark = pytest.mark.torch_lane  # quick, and the wording it parses is the release's

USER = "/proj/model.py"
ADAM = "/venv/lib/python3.11/site-packages/torch/optim/adam.py"
FIELDS = ("kind", "source", "dim", "expected", "actual", "value", "value_type", "entry", "first_use")


def case(id, text, **want):
    """``want`` lists the fields that are set; every other field of FIELDS must be None."""
    return pytest.param(text, want, id=id)


# fmt: off
REAL_213 = [
    # -- a mark is guarded (a trial on 2.14.1: a timm ResNet's BatchNorm recalibration, unmarked,
    # then an eval loop whose batch `maybe_mark_dynamic` marks); the guard names no tensor ----------
    case("dim-marking-added",
         "0/0: _has_dynamo_dim_marking is present on runtime tensor but was absent at compile time",
         kind="dim_marking_added", entry="0/0"),
    # -- a view's storage offset, traced as a symbol, then a tensor of its own (offset 0) -----------
    case("storage-offset",
         "0/1: 2 <= x.storage_offset()  # return x * 2  # rc23.py:4 in f (user code shown is first use of this "
         "value--the guard itself is not due user code but due to 0/1 specialization in the framework; to avoid "
         "specialization try torch._dynamo.decorators.mark_unbacked(tensor, dim))",
         kind="storage_offset", source="x", entry="0/1"),
    # -- a comparison on a number traced as a symbol: which side of a branch the graph is for ------
    # (a trial: a Lightning-style `current_epoch` int made dynamic, `if self.current_epoch < 2:`)
    case("value-branch",
         "0/0: self.current_epoch <= 0  # if self.current_epoch < self.freeze_epochs:  # prog.py:26 in forward"
         " (_dynamo/variables/tensor.py:2606 in evaluate_expr)",
         kind="value_branch", source="self.current_epoch", value=0, value_type="int", entry="0/0",
         first_use=("prog.py", 26, "forward")),
    # -- a guard on arithmetic of one value: the value's guard, with no value of its own ---------
    # timm-style `keep_prob = 1 - drop_prob` then `bernoulli_(keep_prob)`, the attribute traced as
    # a float symbol after its first change, specialised there (a trial's drop-path schedule)
    case("affine-attribute",
         "0/1: (1.0 + ((-1)*self._modules['blocks']._modules['1']._modules['drop_path'].drop_prob)) == 0.95"
         "  # random_tensor = x.new_empty(shape).bernoulli_(keep_prob)  # prog.py:15 in drop_path"
         " (_dynamo/utils.py:4243 in run_node)",
         kind="module_attribute", source="self._modules['blocks']._modules['1']._modules['drop_path'].drop_prob",
         value_type="float", entry="0/1", first_use=("prog.py", 15, "drop_path")),
    # -- tensor guards: no source comment, no user stack ------------------------------------------
    case("size", "0/0: tensor 'x' size mismatch at index 0. expected 3, actual 4",
         kind="size_mismatch", source="x", dim=0, expected=3, actual=4, entry="0/0"),
    case("size-dim1", "0/0: tensor 'x' size mismatch at index 1. expected 3, actual 5",
         kind="size_mismatch", source="x", dim=1, expected=3, actual=5, entry="0/0"),
    # dynamic=None, sizes 1 then 3: the first entry was specialised on 1
    case("size-from-1", "0/0: tensor 'x' size mismatch at index 0. expected 1, actual 3",
         kind="size_mismatch", source="x", dim=0, expected=1, actual=3, entry="0/0"),
    case("size-from-0", "0/0: tensor 'x' size mismatch at index 0. expected 0, actual 3",
         kind="size_mismatch", source="x", dim=0, expected=0, actual=3, entry="0/0"),
    # the 8th entry failing on the 9th size (dynamic=False), right before the limit hit
    case("size-at-limit", "0/7: tensor 'x' size mismatch at index 0. expected 8, actual 9",
         kind="size_mismatch", source="x", dim=0, expected=8, actual=9, entry="0/7"),
    # a parameter's size: torch adds a sentence, whose full stop is no decimal point (was 12.0)
    case("size-of-parameter",
         "0/7: tensor 'fn._parameters['bias']' size mismatch at index 0. expected 11, actual 12. Guard "
         "failed on a parameter, consider using torch._dynamo.config.force_parameter_static_shapes = "
         "False to allow dynamism on parameters.",
         kind="size_mismatch", source="fn._parameters['bias']", dim=0, expected=11, actual=12, entry="0/7"),
    # `**kwargs` of an empty dict: its truth, which is its length 0
    case("empty-dict", "0/0: not kwargs                                               # return x + self.mlp(self.norm(x), **kwargs)  # mp/program.py:22 in forward",
         kind="container_length", source="kwargs", value=0, entry="0/0"),
    case("dtype", "0/0: tensor 'x' dtype mismatch. expected Float, actual Half",
         kind="dtype_mismatch", source="x", expected="Float", actual="Half", entry="0/0"),
    # cpu -> meta: torch checks dispatch keys before the device index, so a device-type change
    # is reported as a dispatch key set change; the backend key tells the devices apart
    case("device-cpu-to-meta",
         "0/0: tensor 'x' dispatch key set mismatch. expected DispatchKeySet(CPU, BackendSelect, "
         "ADInplaceOrView, AutogradCPU), actual DispatchKeySet(Meta, BackendSelect, ADInplaceOrView, "
         "AutogradMeta)",
         kind="device_mismatch", source="x", expected="cpu", actual="meta", entry="0/0"),
    case("stride-transpose", "0/0: tensor 'x' stride mismatch at index 0. expected 4, actual 1",
         kind="stride_mismatch", source="x", dim=0, expected=4, actual=1, entry="0/0"),
    case("stride-sliced-view", "0/0: tensor 'x' stride mismatch at index 0. expected 4, actual 8",
         kind="stride_mismatch", source="x", dim=0, expected=4, actual=8, entry="0/0"),
    case("rank", "0/0: tensor 'x' rank mismatch. expected 1, actual 2",
         kind="rank_mismatch", source="x", expected=1, actual=2, entry="0/0"),
    case("requires-grad", "0/0: tensor 'x' requires_grad mismatch. expected requires_grad=0",
         kind="requires_grad_mismatch", source="x", expected=False, actual=True, entry="0/0"),
    # a tensor argument became an int / a tensor subclass (the stray quote is torch's)
    case("tensor-to-int", "0/0: expected type of 'b' to be a tensor type, ' but found <class 'int'>",
         kind="type_mismatch", source="b", expected="Tensor", actual="int", entry="0/0"),
    case("tensor-to-subclass",
         "0/0: expected type of 'x' to be a tensor type, ' but found <class '__main__.T'>",
         kind="type_mismatch", source="x", expected="Tensor", actual="__main__.T", entry="0/0"),
    # f(t, t) after f(a, b), and f(a, b) after f(t, t)
    case("aliased-now", '0/0: Duplicate tensors found: ["a", "b"]',
         kind="id_mismatch", source="a", entry="0/0"),
    case("aliased-before",
         "0/0: a is b                                              # def f_ab(a, b): return a + b  "
         "# roj/model.py:12 in f_ab",
         kind="id_mismatch", source="a", entry="0/0"),
    # sizes 3, 4 (dynamic entry 0/1 with 0/1 specialisation), then 1: no User stack trace block
    case("size-specialization",
         "0/1: 2 <= x.size()[0]  # def f_x(x): return x * 2  # roj/model.py:13 in f_x (user code shown "
         "is first use of this value--the guard itself is not due user code but due to 0/1 "
         "specialization in the framework; to avoid specialization try "
         "torch._dynamo.decorators.mark_unbacked(tensor, dim))",
         kind="size_specialization", source="x", dim=0, entry="0/1"),
    case("size-specialization-dim1",
         "0/1: 2 <= x.size()[1]  # def f_x(x): return x * 2  # roj/model.py:13 in f_x (user code shown "
         "is first use of this value--the guard itself is not due user code but due to 0/1 "
         "specialization in the framework; to avoid specialization try "
         "torch._dynamo.decorators.mark_unbacked(tensor, dim))",
         kind="size_specialization", source="x", dim=1, entry="0/1"),
    case("grad-mode", "0/0: GLOBAL_STATE changed: grad_mode ",
         kind="grad_mode", source="grad_mode", entry="0/0"),

    # -- value guards: source comment and User stack trace -----------------------------------------
    case("float-arg",
         '0/0: c == 0.5                                                 # def f_c(x, c): return x * c  '
         '# roj/model.py:25 in f_c\nUser stack trace:\n  File "/proj/model.py", line 25, in f_c\n'
         '    def f_c(x, c): return x * c',
         kind="scalar_value", source="c", value=0.5, value_type="float", entry="0/0",
         first_use=(USER, 25, "f_c")),
    case("int-arg",
         '0/0: c == 1                                                   # def f_c(x, c): return x * c  '
         '# roj/model.py:25 in f_c\nUser stack trace:\n  File "/proj/model.py", line 25, in f_c\n'
         '    def f_c(x, c): return x * c',
         kind="scalar_value", source="c", value=1, value_type="int", entry="0/0",
         first_use=(USER, 25, "f_c")),
    case("str-arg",
         "0/0: s == 'a'                                                 # def f_s(x, s): return x * 2 if "
         's == "a" else x  # roj/model.py:29 in f_s\nUser stack trace:\n  File "/proj/model.py", line '
         '29, in f_s\n    def f_s(x, s): return x * 2 if s == "a" else x',
         kind="scalar_value", source="s", value="a", value_type="str", entry="0/0",
         first_use=(USER, 29, "f_s")),
    case("bool-arg",
         "0/0: flag == True                                             # return x * 2 if flag else x  "
         '# roj/model.py:4 in f_b\nUser stack trace:\n  File "/proj/model.py", line 4, in f_b\n'
         "    return x * 2 if flag else x",
         kind="scalar_value", source="flag", value=True, value_type="bool", entry="0/0",
         first_use=(USER, 4, "f_b")),
    # f(x, 2.0) then f(x, None): the float entry fails first
    case("float-then-none",
         "0/0: c == 2.0                                                 # if c is None: return x  "
         '# roj/model.py:18 in f_n\nUser stack trace:\n  File "/proj/model.py", line 18, in f_n\n'
         "    if c is None: return x",
         kind="scalar_value", source="c", value=2.0, value_type="float", entry="0/0",
         first_use=(USER, 18, "f_n")),
    case("dict-item",
         "0/0: d['a'] == 1.0                                            # def f_d(x, d): return x * "
         'd["a"]  # roj/model.py:22 in f_d\nUser stack trace:\n  File "/proj/model.py", line 22, in f_d'
         '\n    def f_d(x, d): return x * d["a"]',
         kind="scalar_value", source="d['a']", value=1.0, value_type="float", entry="0/0",
         first_use=(USER, 22, "f_d")),
    # iterating a dict guards its key order
    case("dict-key-order",
         "0/0: list(dict.keys(d))[0] == 'a'                             # for k in d: x = x + d[k]  "
         '# roj/model.py:25 in f_dk\nUser stack trace:\n  File "/proj/model.py", line 25, in f_dk\n'
         "    for k in d: x = x + d[k]",
         kind="scalar_value", source="list(dict.keys(d))[0]", value="a", value_type="str",
         entry="0/0", first_use=(USER, 25, "f_dk")),
    # the value is used in an inlined helper: first use is the innermost frame
    case("inlined-helper",
         "0/0: c == 1                                                   # def helper(x, c): return x * c"
         '  # roj/model.py:65 in helper\nUser stack trace:\n  File "/proj/model.py", line 66, in outer\n'
         '    def outer(x, c): return helper(x, c) + 1\n  File "/proj/model.py", line 65, in helper\n'
         "    def helper(x, c): return x * c",
         kind="scalar_value", source="c", value=1, value_type="int", entry="0/0",
         first_use=(USER, 65, "helper")),
    case("module-int-attribute",
         "0/0: self.scale == 1                                          # return y * self.scale  "
         "# roj/model.py:48 in forward (HINT: torch.compile considers integer attributes of the "
         "nn.Module to be static. If you are observing recompilation, you might want to make this "
         "integer dynamic using torch._dynamo.config.allow_unspec_int_on_nn_module = True, or convert "
         'this integer into a tensor.)\nUser stack trace:\n  File "/proj/model.py", line 48, in forward'
         "\n    return y * self.scale",
         kind="module_attribute", source="self.scale", value=1, value_type="int", entry="0/0",
         first_use=(USER, 48, "forward")),
    case("training-flag",
         "0/0: self.training == True                                    # if self.training:  "
         '# roj/model.py:46 in forward\nUser stack trace:\n  File "/proj/model.py", line 46, in forward'
         "\n    if self.training:",
         kind="training_flag", source="self.training", value=True, value_type="bool", entry="0/0",
         first_use=(USER, 46, "forward")),
    # Adam(lr=0.01) + ExponentialLR, compiled step(): the frame is torch's own Adam.step
    case("optimizer-lr",
         "2/0: self.param_groups[0]['lr'] == 0.01                       # for group in "
         "self.param_groups:  # optim/adam.py:229 in step\nUser stack trace:\n  File "
         f'"{ADAM}", line 229, in step\n    for group in self.param_groups:',
         kind="optimizer_param_group", source="self.param_groups[0]['lr']", value=0.01,
         value_type="float", entry="2/0", first_use=(ADAM, 229, "step")),
    case("global-int",
         "0/0: G['G_INT'] == 1                                               # def f_g(x): return x + "
         'G_INT  # roj/model.py:59 in f_g\nUser stack trace:\n  File "/proj/model.py", line 59, in f_g\n'
         "    def f_g(x): return x + G_INT",
         kind="global_value", source="G['G_INT']", value=1, value_type="int", entry="0/0",
         first_use=(USER, 59, "f_g")),
    case("list-length",
         "0/0: len(xs) == 1                                             # def f_len(xs): return sum(xs)  "
         '# roj/model.py:32 in f_len\nUser stack trace:\n  File "/proj/model.py", line 32, in f_len\n'
         "    def f_len(xs): return sum(xs)",
         kind="container_length", source="xs", value=1, entry="0/0", first_use=(USER, 32, "f_len")),
    case("tuple-length",
         "0/0: len(t) == 1                                              # def f_t(x, t): return x + t[0]"
         '  # roj/model.py:31 in f_t\nUser stack trace:\n  File "/proj/model.py", line 31, in f_t\n'
         "    def f_t(x, t): return x + t[0]",
         kind="container_length", source="t", value=1, entry="0/0", first_use=(USER, 31, "f_t")),

    # -- attribute / key presence ------------------------------------------------------------------
    case("module-hasattr",
         "0/0: not hasattr(self, 'extra')                               # if hasattr(self, \"extra\"): "
         'return x + self.extra  # roj/model.py:38 in forward\nUser stack trace:\n  File '
         '"/proj/model.py", line 38, in forward\n    if hasattr(self, "extra"): return x + self.extra',
         kind="attribute_presence", source="self.extra", entry="0/0",
         first_use=(USER, 38, "forward")),
    case("module-getattr-default",
         "0/0: not hasattr(self, 'hook')                                # if getattr(self, \"hook\", None) "
         "is not None: return self.lin(x) + 1  # roj/model.py:50 in forward\nUser stack trace:\n  File "
         '"/proj/model.py", line 50, in forward\n    if getattr(self, "hook", None) is not None: return '
         "self.lin(x) + 1",
         kind="attribute_presence", source="self.hook", entry="0/0", first_use=(USER, 50, "forward")),
    # an instance attribute now shadows the class attribute
    case("instance-shadows-class",
         "0/0: not ___dict_contains('a', o.__dict__)                    # def f_o2(x, o): return x * o.a"
         '  # roj/model.py:41 in f_o2\nUser stack trace:\n  File "/proj/model.py", line 41, in f_o2\n'
         "    def f_o2(x, o): return x * o.a",
         kind="attribute_presence", source="o.a", entry="0/0", first_use=(USER, 41, "f_o2")),
    case("forward-monkeypatched",
         "0/0: not ___dict_contains('forward', self._modules['lin'].__dict__)  # def forward(self, x): "
         'return self.lin(x)  # roj/model.py:57 in forward\nUser stack trace:\n  File "/proj/model.py", '
         "line 57, in forward\n    def forward(self, x): return self.lin(x)",
         kind="attribute_presence", source="self._modules['lin'].forward", entry="0/0",
         first_use=(USER, 57, "forward")),
    case("dict-key-removed",
         "0/0: ___dict_contains('a', d)                                 # def f_d(x, d): return x * "
         'd["a"] if "a" in d else x  # roj/model.py:12 in f_d\nUser stack trace:\n  File '
         '"/proj/model.py", line 12, in f_d\n    def f_d(x, d): return x * d["a"] if "a" in d else x',
         kind="attribute_presence", source="d['a']", entry="0/0", first_use=(USER, 12, "f_d")),
    # del o.a on a plain object / del on an nn.Module attribute
    case("getattr-failed", "0/0: getattr failed on source o.a",
         kind="attribute_presence", source="o.a", entry="0/0"),
    case("getattr-failed-root", "0/0: getattr failed on source o",
         kind="attribute_presence", source="o", entry="0/0"),
    case("module-attribute-deleted", "0/0: KeyError on self.extra",
         kind="attribute_presence", source="self.extra", entry="0/0"),

    # -- type and identity -------------------------------------------------------------------------
    # c = 0.5, 1.5 (entry 0/1 takes any float), then 2: the float entry's type check fails
    case("type-float-to-int",
         "0/1: ___check_type_id(c, 140222029713920), type=<class 'float'>  # def f_c(x, c): return "
         'x * c  # roj/model.py:17 in f_c (HINT: type float)\nUser stack trace:\n  File '
         '"/proj/model.py", line 17, in f_c\n    def f_c(x, c): return x * c',
         kind="type_mismatch", source="c", expected="float", entry="0/1", first_use=(USER, 17, "f_c")),
    case("type-int-to-float",
         "0/1: ___check_type_id(c, 140222029724896), type=<class 'int'>  # def f_c(x, c): return x * c"
         '  # roj/model.py:17 in f_c (HINT: type int)\nUser stack trace:\n  File "/proj/model.py", '
         "line 17, in f_c\n    def f_c(x, c): return x * c",
         kind="type_mismatch", source="c", expected="int", entry="0/1", first_use=(USER, 17, "f_c")),
    # ACT = F.relu, then ACT = F.gelu (a builtin is not a Python function)
    case("global-fn-to-builtin", "0/0: CodeGuardAccessor: Not a function on G['ACT'].__code__",
         kind="type_mismatch", source="G['ACT']", expected="function", entry="0/0"),
    case("builtin-arg-swapped",
         "0/0: ___check_obj_id(fn, 140063292068768), type=<class 'builtin_function_or_method'>  "
         "# def f_obj(x, fn): return fn(x)  # roj/model.py:80 in f_obj\nUser stack trace:\n  File "
         '"/proj/model.py", line 80, in f_obj\n    def f_obj(x, fn): return fn(x)',
         kind="id_mismatch", source="fn", entry="0/0", first_use=(USER, 80, "f_obj")),
    # Python functions are guarded by their __code__; the source is the function
    case("global-fn-swapped",
         "0/0: ___check_obj_id(G['ACT'].__code__, 140352877893360), type=<class 'code'>  # def "
         'f_act(x): return ACT(x)  # roj/model.py:20 in f_act\nUser stack trace:\n  File '
         '"/proj/model.py", line 20, in f_act\n    def f_act(x): return ACT(x)',
         kind="id_mismatch", source="G['ACT']", entry="0/0", first_use=(USER, 20, "f_act")),
    case("fresh-lambda-arg",
         "0/0: ___check_obj_id(fn.__code__, 140352874744096), type=<class 'code'>  # def f_call(x, fn): "
         'return fn(x)  # roj/model.py:24 in f_call\nUser stack trace:\n  File "/proj/model.py", line '
         "24, in f_call\n    def f_call(x, fn): return fn(x)",
         kind="id_mismatch", source="fn", entry="0/0", first_use=(USER, 24, "f_call")),
]

# torch < 2.13 spelling -> the 2.13 string it must parse the same as.
OLDER = [
    pytest.param("0/0: tensor 'L['x']' size mismatch at index 0. expected 3, actual 4",
                 "0/0: tensor 'x' size mismatch at index 0. expected 3, actual 4", id="size"),
    pytest.param("0/0: L['c'] == 0.5  # return x * c  # a.py:3 in f",
                 "0/0: c == 0.5  # return x * c  # a.py:3 in f", id="float-arg"),
    pytest.param("0/0: L['self'].scale == 1  # return y * self.scale  # a.py:9 in forward",
                 "0/0: self.scale == 1  # return y * self.scale  # a.py:9 in forward",
                 id="module-int-attribute"),
    pytest.param("0/0: expected type of 'L['grads'][232]' to be a tensor type, ' but found <class "
                 "'NoneType'>",
                 "0/0: expected type of 'grads[232]' to be a tensor type, ' but found <class 'NoneType'>",
                 id="tensor-to-none"),
]
# fmt: on

# Not producible on a one-device machine: the spelling is TensorCheck::check_verbose's in
# torch/csrc/dynamo/guards.cpp, as torch's own test_torchinductor asserts it (cuda:0 -> cuda:1).
DEVICE_INDEX = "0/0: tensor 'L['x']' Tensor device index mismatch. Expected device index to be 0, actual 1"

LIMIT_213 = (
    "Dynamo recompile limit exceeded\n  Explanation: Dynamo attempted to recompile the code object "
    "too many times, exceeding the {limit} cache size limit (currently set to {n}). Excessive "
    "recompilations can degrade performance due to the compilation overhead of each recompilation.\n"
    "  Hint: To monitor recompilations, enable TORCH_LOGS=recompiles. If recompilations are "
    "expected, consider increasing torch._dynamo.config.{limit} to an appropriate value.\n  Hint: "
    "See https://docs.pytorch.org/docs/main/user_guide/torch_compiler/compile/programming_model."
    "recompilation.html for tips on dealing with recompilations.\n\n  Developer debug context: "
    "Limit type: {limit}\n\n For more details about this graph break, please visit: "
    "https://meta-pytorch.github.io/compile-graph-break-site/gb/gb0039.html"
)
RECOMPILE_LIMIT = LIMIT_213.format(limit="recompile_limit", n=8)
ACCUMULATED_LIMIT = LIMIT_213.format(limit="accumulated_recompile_limit", n=2)


def _fields(reason) -> dict:
    got = {name: getattr(reason, name) for name in FIELDS}
    if reason.first_use is not None:
        got["first_use"] = (reason.first_use.file, reason.first_use.line, reason.first_use.function)
    return got


@pytest.mark.parametrize("text, want", REAL_213)
def test_parse_reason(text, want):
    reason = parse_reason(text)
    assert _fields(reason) == {name: want.get(name) for name in FIELDS}
    assert reason.kind in REASON_KINDS
    assert reason.text == text  # torch's own words, kept whole (2.13 has no L['...'] to strip)


@pytest.mark.parametrize("text, want", REAL_213)
def test_parse_reasons_one_guard_per_string(text, want):
    # torch reports only the first failing guard of an entry unless recompiles_verbose is on
    assert [_fields(r) for r in parse_reasons(text)] == [_fields(parse_reason(text))]


def test_no_real_string_is_other():
    others = [p.id for p in REAL_213 if parse_reason(p.values[0]).kind == "other"]
    assert others == []


def test_kinds_covered():
    covered = {p.values[1]["kind"] for p in REAL_213}
    # dispatch_key_mismatch (same device, other keys) and global_state need setups not tried here
    assert set(REASON_KINDS) - covered - {"limit_hit", "other"} == {"dispatch_key_mismatch", "global_state"}


@pytest.mark.parametrize("old, new", OLDER)
def test_older_spelling_parses_the_same(old, new):
    assert _fields(parse_reason(old)) == _fields(parse_reason(new))
    assert parse_reason(old).text == new


def test_older_spelling_values():
    size = parse_reason(OLDER[0].values[0])
    assert (size.kind, size.source, size.dim, size.expected, size.actual) == ("size_mismatch", "x", 0, 3, 4)
    value = parse_reason(OLDER[1].values[0])
    assert (value.kind, value.source, value.value, value.value_type) == ("scalar_value", "c", 0.5, "float")
    # No User stack trace block before 2.13: the comment's path tail names the first use.
    assert (value.first_use.file, value.first_use.line, value.first_use.function) == ("a.py", 3, "f")
    scale = parse_reason(OLDER[2].values[0])
    assert (scale.kind, scale.source, scale.value) == ("module_attribute", "self.scale", 1)
    none = parse_reason(OLDER[3].values[0])
    assert (none.kind, none.source) == ("type_mismatch", "grads[232]")
    assert (none.expected, none.actual) == ("Tensor", "NoneType")


def test_device_index():
    reason = parse_reason(DEVICE_INDEX)
    want = {"kind": "device_mismatch", "source": "x", "expected": 0, "actual": 1, "entry": "0/0"}
    assert _fields(reason) == {name: want.get(name) for name in FIELDS}


def test_dispatch_keys_on_one_device_stay_dispatch_keys():
    # same backend (CPU), other functionality keys: not a device change
    text = (
        "0/0: tensor 'x' dispatch key set mismatch. expected DispatchKeySet(CPU, ADInplaceOrView, "
        "AutogradCPU, AutocastCPU), actual DispatchKeySet(CPU, AutocastCPU)"
    )
    reason = parse_reason(text)
    assert reason.kind == "dispatch_key_mismatch"
    assert reason.expected == "DispatchKeySet(CPU, ADInplaceOrView, AutogradCPU, AutocastCPU)"
    assert reason.actual == "DispatchKeySet(CPU, AutocastCPU)"


@pytest.mark.parametrize(
    "fail_reason, limit",
    [(RECOMPILE_LIMIT, "recompile_limit"), (ACCUMULATED_LIMIT, "accumulated_recompile_limit")],
    ids=["recompile_limit", "accumulated_recompile_limit"],
)
def test_limit_hit_reason(fail_reason, limit):
    assert is_limit_hit(fail_reason)
    reason = limit_hit_reason(fail_reason, entry="0/8")
    assert (reason.kind, reason.source, reason.entry) == ("limit_hit", limit, "0/8")
    assert reason.text == "Dynamo recompile limit exceeded"


# torch < 2.13 raise RecompileLimitExceeded(f"{limit_type} reached"); 2.6 has no recompile_limit.
@pytest.mark.parametrize(
    "fail_reason, limit",
    [
        ("recompile_limit reached", "recompile_limit"),  # 2.8, 2.10
        ("accumulated_recompile_limit reached", "accumulated_recompile_limit"),
        ("cache_size_limit reached", "cache_size_limit"),  # 2.6
        ("accumulated_cache_size_limit reached", "accumulated_cache_size_limit"),
    ],
)
def test_limit_hit_reason_of_older_releases(fail_reason, limit):
    assert is_limit_hit(fail_reason)
    reason = limit_hit_reason(fail_reason)
    assert (reason.kind, reason.source, reason.text) == ("limit_hit", limit, fail_reason)


# fmt: off
RELEASES = [
    # 2.10: no User stack trace block; the comment's path is relative to the directory above torch's
    pytest.param("0/0: c == 0.5                                                 # return x + c  "
                 "# run-tree/tests/programs/seeds/float_constant.py:6 in fn",
                 ("scalar_value", "c", ("run-tree/tests/programs/seeds/float_constant.py", 6, "fn")),
                 id="2.10-float"),
    pytest.param("5/0: self.param_groups[0]['lr'] == 0.01                       # for group in "
                 "self.param_groups:  # optim/adam.py:229 in step",
                 ("optimizer_param_group", "self.param_groups[0]['lr']", ("optim/adam.py", 229, "step")),
                 id="2.10-optimizer-lr"),
    pytest.param("0/0: self.scale == 1                                          # return y * self.scale  "
                 "# roj/model.py:48 in forward (HINT: torch.compile considers integer attributes of the "
                 "nn.Module to be static.)",
                 ("module_attribute", "self.scale", ("roj/model.py", 48, "forward")),
                 id="2.10-module-int-hint"),
    # 2.8: no comment at all, only padding
    pytest.param("0/0: alpha == 0.5                                           ",
                 ("scalar_value", "alpha", None), id="2.8-float"),
    # 2.6: L['...'] spelling, padding only
    pytest.param("0/0: L['c'] == 1                                                 ",
                 ("scalar_value", "c", None), id="2.6-int"),
    # an identity guard's comment names where the argument was bound, not a use
    pytest.param("0/0: a is b                                              # def f_ab(a, b): return a + b  "
                 "# roj/model.py:12 in f_ab", ("id_mismatch", "a", None), id="identity-no-first-use"),
    # an attribute's None test: the comment is the line that tested it (RF010's lazy default)
    pytest.param("0/0: self.config.scale is None  # if self.config.scale is None:  # roj/model.py:22 in forward",
                 ("id_mismatch", "self.config.scale", ("roj/model.py", 22, "forward")), id="2.10-attribute-none-test"),
]
# fmt: on


@pytest.mark.parametrize("text, want", RELEASES)
def test_first_use_on_other_releases(text, want):
    reason = parse_reason(text)
    first_use = reason.first_use and (reason.first_use.file, reason.first_use.line, reason.first_use.function)
    assert (reason.kind, reason.source, first_use) == want


@pytest.mark.parametrize("fail_reason", [None, "", REAL_213[0].values[0]])
def test_not_a_limit_hit(fail_reason):
    assert not is_limit_hit(fail_reason)


@pytest.mark.parametrize(
    "text, stripped",
    [
        ("tensor 'L['x']' size mismatch", "tensor 'x' size mismatch"),
        ('L["x"] == 1', "x == 1"),
        ("L[ 'x' ] == 1", "x == 1"),
        ("L['self'].param_groups[0]['lr'] == 0.01", "self.param_groups[0]['lr'] == 0.01"),
        ("L['a'] is L['b']", "a is b"),
        ("G['G_INT'] == 1", "G['G_INT'] == 1"),
        ("0/0: c == 0.5", "0/0: c == 0.5"),
    ],
)
def test_strip_local_scope(text, stripped):
    assert strip_local_scope(text) == stripped


def test_an_attribute_read_through_dict_is_spelled_as_an_attribute():
    """torch 2.13 guards `self.__dict__['_modules']['drop'].p` where a module is reached through a
    property: the same value as `self._modules['drop'].p`, which the rules match (RF008 missed
    the scheduled dropout). Profiles recorded with the other spelling read the same way."""
    from recompile_fix.profile.model import Reason
    from recompile_fix.profile.reasons import parse_reasons

    (reason,) = parse_reasons("0/0: self.__dict__['_modules']['drop'].p == 0.1  # x = self.drop(x)")
    assert reason.source == "self._modules['drop'].p"
    assert Reason("scalar_value", "", source="L['self'].__dict__[\"scale\"]").source == "L['self'].scale"
    assert Reason("scalar_value", "", source="d['__dict__']").source == "d['__dict__']"


def test_a_size_before_a_full_stop_is_an_int():
    text = (
        "0/7: tensor 'fn._parameters['bias']' size mismatch at index 0. expected 11, actual 12. Guard "
        "failed on a parameter, consider using torch._dynamo.config.force_parameter_static_shapes = False"
    )
    reason = parse_reason(text)
    assert (reason.expected, reason.actual) == (11, 12) and type(reason.actual) is int  # was 12.0
