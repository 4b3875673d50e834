"""RF001's fix where the sizes that change are parameters' (or tied to them), which no mark before
a call reaches: let Dynamo trace parameter sizes as dynamic.

Dynamo specialises every parameter's shape (``force_parameter_static_shapes``, and for modules
of ``torch.nn`` inlined as they are called, ``force_nn_module_property_static_shapes``). Where
several compiled wrappers share one frame (ten heads of different widths, each
``torch.compile``d, all run ``nn.Linear.forward``) or one module's parameter is replaced by one of
another shape (a LoRA rank sweep), the frame then compiles once per shape, and past the
recompile limit the rest run eagerly. With both options off, automatic dynamic does for
parameters what it does for inputs: the first shape compiles static, the second compiles a graph
with that size dynamic, which serves every later one. Measured (torch 2.13.0 and 2.14.1, eager
and inductor): ten heads 8 compiles and a limit hit -> 2; a rank sweep 4, 8, 16, 32: 4 -> 2;
the same outputs and gradients. PyTorch's PGO removes none of these (its run 2: 8 and 4).

Two config lines before the statement that compiles, in its scope: read when the frame is
traced, which is at the first call, after that statement.
"""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING, Any

import libcst as cst

from recompile_fix.analysis.call_site_code import scope_statement, statement_start
from recompile_fix.analysis.source import SourceError
from recompile_fix.edits.edit import Edit
from recompile_fix.findings.finding import UNPROVEN, Finding, Safety, cover
from recompile_fix.findings.releases import TorchApi
from recompile_fix.rules.rf001_mark_dynamic.compile_call import wrapper_compile_call

if TYPE_CHECKING:
    from recompile_fix.analysis.source import SourceFile

__all__ = ["PARAMETER_SHAPES", "fix_parameter_shapes", "parameter_shapes_finding"]

PARAMETER_SHAPES = TorchApi(
    "torch._dynamo.config.force_parameter_static_shapes",
    (2, 13),
    "measured: 2.13.0, 2.14.1 (ten heads 8 compiles + a limit hit -> 2; both options present)",
)
_OPTIONS = ("force_parameter_static_shapes", "force_nn_module_property_static_shapes")
_COMMENT = "# Parameters of several shapes run through one compiled frame: trace their sizes as dynamic."


def parameter_shapes_finding(plan: Any, source: SourceFile, call: cst.Call, notes: list[str]) -> list[Finding] | None:
    """The safe fix for a frame whose changing sizes are parameters' (or tied to them), where it
    merges compiles: two or more size recompiles of the frame (three heads, or two widths each
    compiled with and without grad) leave one. None where the torch that ran has no
    such options, the program sets them itself (its call), or the compile call is not found
    (``plan``: RF001's ``SitePlan``)."""
    # Counted over the frame, not this call: each compiled wrapper may be called at a line of its
    # own (a policy and a value net), and the options serve them all.
    shape_recompiles = [c for c in plan.frame.compiles if any(r.kind == "size_mismatch" for r in c.reasons)]
    if len(shape_recompiles) < 2 or not PARAMETER_SHAPES.runs_on(plan.release):
        return None
    found = wrapper_compile_call(plan, source, call)
    if found is None:
        return None
    compile_source, node, _ = found
    if any(option in compile_source.text for option in _OPTIONS):
        return None  # the program chose how Dynamo treats parameter shapes: the user's call
    statement = scope_statement(compile_source, node)
    if statement is None:
        return None
    location = compile_source.location_of(node, plan.site.file)
    finding = plan.finding(
        f"compiled `{plan.frame.shown_name}` compiles once per parameter shape ({plan.frame.compile_count} compiles"
        + (f", then {plan.frame.limit_hits} recompile-limit hit" if plan.frame.limit_hits else "")
        + "): let Dynamo trace parameter sizes as dynamic before the compile",
        Safety.SAFE,
        [
            *notes,
            "with `force_parameter_static_shapes` and `force_nn_module_property_static_shapes` off, "
            "the first shape compiles static and the second a graph whose changed size is dynamic, "
            "which serves every later shape: 2 compiles, none left at the recompile limit (measured: "
            "ten heads of different widths 8 compiles and a limit hit -> 2, a LoRA rank sweep 4 -> 2, "
            "the same outputs); the options are process-wide, and change only frames whose "
            "parameters change shape",
        ],
        location,
    )
    held = _size_held_as_int(plan.project.source(plan.frame.file), plan.frame.name, plan.frame.first_line)
    if held is not None:
        # Dynamo specialises a module's int attributes: with the parameters' sizes dynamic, the
        # guard on that int still fails once per width (ten heads with a LayerNorm: 8 -> 8).
        finding.safety, finding.unsafe_because = Safety.UNSAFE, UNPROVEN
        finding.notes.append(
            f"unproven: {held}, which Dynamo specialises whatever the options say: each width may "
            "still compile once; `fix` keeps it only where a run shows fewer compiles"
        )
    elif _most_sizes(shape_recompiles) < 3:
        # Two shapes: the one compile it saves is a later state's (each net again under
        # no_grad), which a size 1 among the parameters the guards do not name (a value head of
        # width 1, specialised) takes back: a run must show it (measured 4 -> 4 there).
        finding.safety, finding.unsafe_because = Safety.UNSAFE, UNPROVEN
        finding.notes.append(
            "unproven: the run saw two parameter shapes; the compile this saves is a later state's, "
            "which a parameter of size 1 would take back; `fix` keeps it only where a run shows fewer compiles"
        )
    finding.params = {"config_before": list(statement_start(compile_source, statement))}
    finding.covers = [cover(plan.frame, kinds=["size_mismatch"])]
    return [finding]


# torch.nn modules whose forward passes a size given to the constructor as a Python int
# (``F.layer_norm(x, self.normalized_shape, ...)``), and the attribute that holds it.
_SIZE_AS_INT = {
    "LayerNorm": "normalized_shape",
    "RMSNorm": "normalized_shape",
    "MultiheadAttention": "embed_dim",
    "Unflatten": "unflattened_size",
}


def _size_held_as_int(source: SourceFile | None, name: str, first_line: int) -> str | None:
    """Where the compiled method's class (or a class of the same file it builds) keeps a size it
    was given as an int its code reads: a ``nn.LayerNorm(width)``, or ``self.width = width``
    read outside ``__init__``. None where none is seen (a frame outside the project: none)."""
    if source is None:
        return None
    try:
        tree = source.syntax
    except SourceError:  # a file that does not parse: no claim either way
        return None
    classes = {node.name: node for node in ast.walk(tree) if isinstance(node, ast.ClassDef)}
    owner = next(
        (
            cls
            for cls in classes.values()
            for item in cls.body
            if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef))
            and item.name == name
            and first_line in {item.lineno, *(d.lineno for d in item.decorator_list)}
        ),
        None,
    )
    seen: set[str] = set()
    todo = [owner] if owner is not None else []
    while todo:
        cls = todo.pop()
        if cls.name in seen or len(seen) > 8:
            continue
        seen.add(cls.name)
        init = next((i for i in cls.body if isinstance(i, ast.FunctionDef) and i.name == "__init__"), None)
        if init is None:
            continue
        params = {a.arg for a in [*init.args.args, *init.args.kwonlyargs]} - {"self"}
        read = {
            n.attr
            for item in cls.body
            if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)) and item.name != "__init__"
            for n in ast.walk(item)
            if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id == "self"
        }
        for node in ast.walk(init):
            if isinstance(node, ast.Call):
                called = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", None)
                arguments = [*node.args, *(k.value for k in node.keywords)]
                if called in _SIZE_AS_INT and not all(isinstance(a, ast.Constant) for a in arguments):
                    return f"`{source.segment(node)}` keeps its size as a Python int (`{_SIZE_AS_INT[called]}`)"
                if called in classes:
                    todo.append(classes[called])
            elif isinstance(node, ast.Assign) and isinstance(node.value, ast.Name) and node.value.id in params:
                for target in node.targets:
                    if (
                        isinstance(target, ast.Attribute)
                        and isinstance(target.value, ast.Name)
                        and target.value.id == "self"
                        and target.attr in read
                    ):
                        return f"`{source.segment(node)}` keeps a size as a Python int its code reads"
    return None


def _most_sizes(recompiles: list[Any]) -> int:
    """The most sizes one dimension took in the size guards of ``recompiles``."""
    sizes: dict[tuple[str, int | None], set[Any]] = {}
    for compile_ in recompiles:
        for reason in compile_.reasons:
            if reason.kind == "size_mismatch" and reason.source:
                sizes.setdefault((reason.source, reason.dim), set()).update({reason.expected, reason.actual})
    return max((len(s - {None}) for s in sizes.values()), default=0)


def fix_parameter_shapes(finding: Finding, source: SourceFile, torch_name: str) -> list[Edit]:
    """The two config lines, with why, before the statement that compiles."""
    line, column = finding.params["config_before"]
    indent = source.lines[line - 1][:column]
    if indent.strip():
        raise ValueError(f"line {line} no longer starts the statement that compiles")
    text = "".join(
        f"{indent}{row}\n" for row in [_COMMENT, *(f"{torch_name}._dynamo.config.{o} = False" for o in _OPTIONS)]
    )
    at = source.offset(line, 0)
    return [Edit(finding.file, at, at, text, "RF001")]
