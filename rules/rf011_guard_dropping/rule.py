"""RF011 guard-dropping: `torch.compile` options that drop guards (`guard_filter_fn`, torch's
`*_unsafe` filters, `set_stance(skip_guard_eval_unsafe=True)`) stop recompiles by reusing code
compiled for other values. A finding, never a fix."""

from __future__ import annotations

import ast

from recompile_fix.analysis.project import Project
from recompile_fix.analysis.source import SourceFile
from recompile_fix.edits.edit import Edit
from recompile_fix.findings.finding import Finding, Safety
from recompile_fix.findings.rule import Example, Rule
from recompile_fix.profile.model import Frame, Location, Profile, is_library_path

__all__ = ["RULE", "GuardDropping"]

# torch.compiler's guard filters (torch 2.13 `torch/compiler/__init__.py`) and what each drops.
UNSAFE_FILTERS = {
    "skip_guard_on_inbuilt_nn_modules_unsafe": "the guards on torch's own nn.Modules (their attributes, parameters)",
    "skip_guard_on_all_nn_modules_unsafe": "every guard on an nn.Module (its attributes, training flag, parameters)",
    "keep_tensor_guards_unsafe": "every guard but the tensors' (module attributes, globals, Python scalars)",
    "skip_guard_on_globals_unsafe": "the guards on module globals",
    "skip_all_guards_unsafe": "every guard",
    "keep_portable_guards_unsafe": "every guard that is not portable across processes (object ids, globals)",
}
_KEY = "guard_filter_fn"
_STANCE_FLAG = "skip_guard_eval_unsafe"
# Measured on torch 2.13 (tests/test_rf011.py): a module whose int attribute takes 1..4.
_MEASURED = (
    "measured: a module whose int attribute takes 1, 2, 3, 4 returns [1, 1, 1, 1] where eager gives [1, 2, 3, 4]"
)


class GuardDropping(Rule):
    """
    ## What it does
    Finds `torch.compile` options that drop guards: `options={"guard_filter_fn": ...}` with one
    of `torch.compiler`'s `*_unsafe` filters (`skip_guard_on_all_nn_modules_unsafe`,
    `skip_guard_on_inbuilt_nn_modules_unsafe`, `skip_guard_on_globals_unsafe`,
    `keep_tensor_guards_unsafe`, `skip_all_guards_unsafe`, `keep_portable_guards_unsafe`) or a
    filter of the program's own, and `torch.compiler.set_stance(..., skip_guard_eval_unsafe=True)`.
    It reports them; it never edits them.

    ## Why is this bad?
    A guard is how torch knows that compiled code still fits: an nn.Module's int attribute, a
    global, a flag the graph was specialised on. Dropping it removes the recompile by running
    the code compiled for the first value when the value changes: the frame compiles once and
    returns wrong answers, silently. On torch 2.13 a module whose `self.scale` takes 1, 2, 3, 4
    compiles once under `skip_guard_on_all_nn_modules_unsafe` and returns `[1, 1, 1, 1]` where
    eager gives `[1, 2, 3, 4]`. Fixing the recompile in the source (a tensor the module reads,
    an argument instead of a global) keeps one compile and the right answers.

    ## Example
    ```python
    compiled = torch.compile(
        model, options={"guard_filter_fn": torch.compiler.skip_guard_on_all_nn_modules_unsafe}
    )
    for scale in (1, 2, 3, 4):
        model.scale = scale
        compiled(x)  # compiles once, returns x * 1 four times
    ```
    Use instead: the compile without the filter, and the recompile fixed where the state lives
    (RF006 makes `self.scale` a 0-d tensor buffer; RF002 passes a changing float as a tensor).

    ## Fix safety
    No fix: whether the dropped state can change is the program's knowledge, not the tool's.
    With a Profile, the finding names the frames compiled from the file and their compiles,
    and says which recompiles the filter hides.

    ## Profile evidence
    None needed: the options are found in the source. With a Profile, the compiled frames whose
    call sites are in the file (`forward: 1 compile`): a frame that compiled once under a
    guard filter may be one that would recompile, and return other values, without it.
    """

    id = "RF011"
    name = "guard-dropping"
    message = "{what} drops {dropped}: recompiles stop because the compiled code is reused for other values (wrong answers), not because it fits"  # noqa: E501
    consumes = ()
    finding_only = True
    triggers = (_KEY, _STANCE_FLAG, *UNSAFE_FILTERS)
    examples = (
        Example(
            before='compiled = torch.compile(\n    model, options={"guard_filter_fn": '
            "torch.compiler.skip_guard_on_all_nn_modules_unsafe}\n)\n",
            after=None,
            golden="RF011/module_attribute",
        ),
    )

    def plan_static(self, source: SourceFile, path: str) -> list[Finding]:
        return [self._finding(path, site, []) for site in find_guard_dropping(source)]

    def plan(self, profile: Profile, project: Project) -> list[Finding]:
        files = sorted({f.file for f in profile.frames} | {_call_file(f) for f in profile.frames} - {""})
        findings = []
        for path in files:
            if is_library_path(path):
                continue
            source = project.source(path)
            if source is None:
                continue
            sites = find_guard_dropping(source)
            if not sites:
                continue
            frames = [f for f in profile.frames if path in (f.file, _call_file(f))]
            for site in sites:
                finding = self._finding(path, site, frames)
                finding.confidence = "profile"
                findings.append(finding)
        return findings

    def fix(self, finding: Finding, source: SourceFile, torch_name: str) -> list[Edit]:
        return []  # a finding only: the program knows whether the dropped state changes

    def _finding(self, path: str, site: "GuardSite", frames: list[Frame]) -> Finding:
        notes = [
            f"with it, a change in what those guards checked does not recompile: the frame runs the code "
            f"compiled for the first value ({_MEASURED})",
            "remove the option and fix the recompile in the source instead (`recompile-fix profile` "
            "without it shows which guard fails and offers the fix)",
        ]
        evidence: dict[str, object] = {"option": site.what}
        if frames:
            evidence["frames"] = {f.label: f.compile_count for f in frames}
            once = [f.name for f in frames if f.compile_count == 1]
            if once:
                notes.insert(
                    0,
                    f"the run compiled {', '.join(f'`{n}`' for n in once[:4])} once: with the filter, "
                    "torch does not check the dropped state, so one compile says nothing about whether it changed",
                )
        return Finding(
            rule=self.id,
            file=path,
            location=site.location(path),
            message=self.message.format(what=site.what, dropped=site.dropped),
            safety=Safety.NONE,
            evidence=evidence,
            notes=notes,
            confidence="static",
        )


class GuardSite:
    """One place a program drops guards: what it says there and what that drops."""

    def __init__(self, node: ast.AST, what: str, dropped: str) -> None:
        self.node = node
        self.what = what
        self.dropped = dropped

    def location(self, path: str) -> Location:
        node = self.node
        return Location(
            file=path,
            line=node.lineno,  # type: ignore[attr-defined]
            end_line=getattr(node, "end_lineno", None),
            col=node.col_offset,  # type: ignore[attr-defined]
            end_col=getattr(node, "end_col_offset", None),
        )


def find_guard_dropping(source: SourceFile) -> list[GuardSite]:
    """The guard-dropping options in a file, in source order: a `guard_filter_fn` entry (a dict
    key, a `dict(...)` keyword, an item assignment), a reference to one of torch's unsafe
    filters elsewhere (bound to a name first), `set_stance(skip_guard_eval_unsafe=True)`."""
    imports = source.imports
    sites: list[GuardSite] = []
    covered: set[int] = set()  # filter references already named by their guard_filter_fn entry

    def filter_of(value: ast.AST | None) -> tuple[str, str]:
        name = _qualified(value, imports) if value is not None else ""
        short = name.rsplit(".", 1)[-1]
        if short in UNSAFE_FILTERS and name.startswith("torch."):
            if value is not None:
                covered.update(id(n) for n in ast.walk(value))
            return f"`guard_filter_fn={name}`", UNSAFE_FILTERS[short]
        shown = f"`{_KEY}={name}`" if name else f"`{_KEY}`"
        return shown, "the guards its filter rejects"

    for node in ast.walk(source.syntax):
        if isinstance(node, ast.Dict):
            for key, value in zip(node.keys, node.values):
                if isinstance(key, ast.Constant) and key.value == _KEY:
                    sites.append(GuardSite(key, *filter_of(value)))
        elif isinstance(node, ast.Call):
            for keyword in node.keywords:
                if keyword.arg == _KEY and _qualified(node.func, imports) in ("dict", "builtins.dict"):
                    sites.append(GuardSite(keyword, *filter_of(keyword.value)))
                elif keyword.arg == _STANCE_FLAG and not _is_false(keyword.value):
                    what = f"`set_stance(..., {_STANCE_FLAG}=...)`"
                    sites.append(GuardSite(keyword, what, "every guard but those that tell cache entries apart"))
        elif isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Subscript) and _constant(target.slice) == _KEY:
                    sites.append(GuardSite(target, *filter_of(node.value)))
    for node in ast.walk(source.syntax):
        if isinstance(node, (ast.Attribute, ast.Name)) and id(node) not in covered:
            name = _qualified(node, imports)
            short = name.rsplit(".", 1)[-1]
            if short in UNSAFE_FILTERS and name.startswith("torch."):
                covered.update(id(n) for n in ast.walk(node))
                sites.append(GuardSite(node, f"`{name}`", UNSAFE_FILTERS[short]))
    return sorted(sites, key=lambda s: (s.node.lineno, s.node.col_offset))  # type: ignore[attr-defined]


def _qualified(node: ast.AST, imports: dict[str, str]) -> str:
    """``tc.skip_all_guards_unsafe`` -> ``torch.compiler.skip_all_guards_unsafe`` through the
    file's imports; "" for anything but a dotted name."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return ""
    head = imports.get(node.id, node.id)
    return ".".join([head, *reversed(parts)])


def _constant(node: ast.AST) -> object:
    return node.value if isinstance(node, ast.Constant) else None


def _is_false(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and not node.value


def _call_file(frame: Frame) -> str:
    for compile_ in frame.compiles:
        site = compile_.user_call_site
        if site is not None:
            return site.file
    return ""


RULE = GuardDropping()
