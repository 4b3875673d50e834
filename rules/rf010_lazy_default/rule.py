"""RF010 lazy-default: a module attribute the first call itself sets (``if self.x is None:
self.x = ...`` in forward) compiles the frame twice."""

from __future__ import annotations

import ast
import builtins
import json
import os
import re
import textwrap
from collections.abc import Callable

import libcst as cst

from recompile_fix.analysis.call_site_code import compiled_module, find_compile_call, root_name
from recompile_fix.analysis.call_targets import library_frame
from recompile_fix.analysis.classes import ClassIndex, ClassRef
from recompile_fix.analysis.cst_names import is_load
from recompile_fix.analysis.model_line import model_line
from recompile_fix.analysis.project import Project
from recompile_fix.analysis.source import SourceFile, dotted_name, walk
from recompile_fix.edits.edit import Edit
from recompile_fix.findings.finding import UNPROVEN, Finding, Safety, cover, frame_evidence
from recompile_fix.findings.rule import Example, Rule
from recompile_fix.profile.model import Compile, Frame, Location, Profile, Reason, is_library_path
from recompile_fix.profile.recorder.inputs import MAX_STRINGS

__all__ = ["RULE", "LazyDefault"]

# The guard ``self.config.scale is None`` names the attribute chain (reasons.py: an id guard).
_ATTRIBUTE = re.compile(r"^self(?:\.\w+)+$")
# An attribute of a module the compiled function takes (`model.config.problem_type` where
# `@torch.compile def step(model, batch)` calls a transformers model).
_PASSED_ATTRIBUTE = re.compile(r"^[A-Za-z_]\w*(?:\.\w+)+$")
# libcst node classes by name: reading cst.* here would load libcst when the module is imported.
_CONSTANTS = frozenset({"Integer", "Float", "Imaginary", "SimpleString", "ConcatenatedString"})
_BUILTINS = frozenset(dir(builtins))


class LazyDefault(Rule):
    """
    ## What it does
    Where the compiled `forward` defaults a module attribute on its first call
    (`if self.config.scale is None: self.config.scale = 0.5`), runs the same `if` block at the
    end of the class's `__init__`, so the attribute already has its value when the first call
    compiles.

    ## Why is this bad?
    The first call compiles with the attribute still `None` (a guard `self.config.scale is
    None`), sets it, and the second call fails that guard and compiles the frame again: one
    extra compile, for a value that never changes again.

    ## Example
    ```python
    class Model(nn.Module):
        def __init__(self, config):
            super().__init__()
            self.config = config

        def forward(self, x):
            if self.config.scale is None:
                self.config.scale = 0.5
            return x * self.config.scale
    ```
    Use instead:
    ```python
        def __init__(self, config):
            super().__init__()
            self.config = config
            if self.config.scale is None:
                self.config.scale = 0.5
    ```

    The compiled frame may be library code (a decorator's `wrapper`, such as transformers'
    `can_return_tuple`) while the block is the program's own: the fix goes into the program's
    class as above.

    Where the block is library code (transformers' `*ForSequenceClassification.forward`
    defaults `self.config.problem_type` on its first call with labels), the program's own code
    sets the attribute to the value the first call gave it (recorded at the later compiles), on
    the line before it compiles the model:
    ```python
    model.config.problem_type = "single_label_classification"
    compiled = torch.compile(model)
    ```
    Where the program compiles a function that takes the model (`@torch.compile def
    compute_loss(model, batch): return model(**batch).loss`), the line goes right after the
    statement that builds the object the call passes (golden/RF010/problem_type_in_step).
    When a size change fails first (torch names only the first failing guard), the default is
    still found: the attribute was no string at the first compile, one string at every later
    one, and the module's class file has the `if ... is None:` test.

    ## Fix safety
    The block is the program's own, run once at construction instead of at the first call:
    safe when it assigns only constants. When it computes the default from other attributes or
    calls (`self.scale = self.dim ** -0.5`), the fix is unsafe: the program could change those
    between construction and the first call. No fix, with the line, when the block reads an
    input or a local of `forward` (a cache sized from `x`: it needs a representative input, so
    set it where the model is built), has an `else`, or the class has no `__init__` of its own.
    Library code's default is safe where the user's call reaches the compiled forward directly
    and one value was recorded after the first call (the same value, set earlier: the block no
    longer runs); no fix, saying what to set, where the value was not recorded (a trace, an older
    Profile), changed again, or library code makes the compiled call.

    ## Profile evidence
    `self.config.scale is None  # if self.config.scale is None:  # model.py:22 in forward`,
    failing once, on the frame's second compile.
    """

    id = "RF010"
    name = "lazy-default"
    message = "`{attr}` is defaulted by the first call of compiled `{frame}` ({compiles} compiles): {fix}"
    consumes = ("id_mismatch",)
    triggers = ("is None",)
    examples = (
        Example(
            before="    def __init__(self, config):\n        super().__init__()\n        self.config = config\n"
            "        self.fc = nn.Linear(config.width, config.width)\n",
            after="    def __init__(self, config):\n        super().__init__()\n        self.config = config\n"
            "        self.fc = nn.Linear(config.width, config.width)\n"
            "        if self.config.scale is None:\n            self.config.scale = 0.5\n",
            golden="RF010/config_field",
        ),
        Example(  # transformers' forward defaults it: set where the model is compiled
            before="model.train()\ncompiled = torch.compile(model",
            after='model.train()\nmodel.config.problem_type = "single_label_classification"\ncompiled = torch.compile(model',
            golden="RF010/library_problem_type",
        ),
        Example(  # the same default, hidden behind the padded length's size guard
            before="model.train()\ncompiled = torch.compile(model",
            after='model.train()\nmodel.config.problem_type = "single_label_classification"\ncompiled = torch.compile(model',
            golden="RF010/library_problem_type_hidden",
        ),
        Example(  # the cache is built from the input: no edit
            before="        if self.cos_cached is None:\n",
            after=None,
            golden="RF010/cache_from_input",
        ),
    )

    def plan(self, profile: Profile, project: Project) -> list[Finding]:
        findings = []
        seen = set()
        self._profile = profile
        for frame in profile.frames:
            for index, compile_ in enumerate(frame.compiles):
                for reason in compile_.reasons:
                    attr = reason.source or ""
                    passed = not _ATTRIBUTE.match(attr) and _passed_module(frame, attr)
                    if (
                        reason.kind != "id_mismatch"
                        or not (_ATTRIBUTE.match(attr) or passed)
                        or f"{attr} is None" not in reason.text.split("\n", 1)[0]
                        or reason.first_use is None
                        or (frame.key, attr) in seen
                    ):
                        continue
                    seen.add((frame.key, attr))
                    if is_library_path(reason.first_use.file):
                        # Library code defaults it (transformers' `self.config.problem_type`):
                        # never edited; the user's code sets it where it compiles the model.
                        finding = self._plan_library(frame, frame.compiles[index:], attr, reason, project)
                    elif passed:
                        continue  # the user's own code, through a module passed in: not followed
                    elif os.path.isabs(reason.first_use.file):
                        continue  # code outside the project: not the user's to edit
                    else:
                        finding = self._plan(frame, attr, reason, project)
                    if finding is not None:
                        findings.append(finding)
            findings.extend(self._hidden_library_defaults(frame, seen, project))
        return findings

    def _hidden_library_defaults(self, frame: Frame, seen: set, project: Project) -> list[Finding]:
        """Library defaults whose guard another guard hid (a size change fails first, and torch
        names only the first failing guard): an attribute of the compiled module that was not a
        string at its first compile and one string at every later one, where the module's class
        file defaults it (``if self.config.problem_type is None:``). Safe fixes only: without the
        guard, a case for a [no fix] is too thin to report."""
        if len(frame.compiles) < 2:
            return []
        first = frame.compiles[0]
        # The compiled module itself (`self`), or a library module the compiled function takes.
        modules = {
            name: entry["file"]
            for name, entry in first.inputs.items()
            if "." not in name
            and entry.get("type") == "Module"
            and isinstance(entry.get("file"), str)
            and is_library_path(entry["file"])
            and (name == "self" or _passed_module(frame, f"{name}.x"))
        }
        if not modules:
            return []
        strings_at_first = {k for k, e in first.inputs.items() if e.get("type") == "str"}
        if len(strings_at_first) >= MAX_STRINGS:
            return []  # the first compile's record is full: absent there says nothing
        later = frame.compiles[1:]
        candidates = sorted(
            {
                k
                for c in later
                for k, e in c.inputs.items()
                if e.get("type") == "str"
                and _PASSED_ATTRIBUTE.match(k)
                and k.split(".")[0] in modules
                and k not in strings_at_first
            }
        )
        findings = []
        for attr in candidates:
            if (frame.key, attr) in seen or not all(c.inputs.get(attr, {}).get("type") == "str" for c in later):
                continue
            defined_in = modules[attr.split(".")[0]]
            line = _none_test_line(defined_in, "self." + attr.split(".", 1)[1], project)
            if line is None:
                continue
            seen.add((frame.key, attr))
            reason = Reason(
                kind="id_mismatch",
                text=f"{attr} is None (hidden: torch named another guard of this recompile first)",
                source=attr,
                first_use=Location(file=defined_in, line=line),
            )
            finding = self._plan_library(frame, later, attr, reason, project)
            if finding is not None and finding.safety == Safety.SAFE:
                finding.notes.append(
                    "torch reported another guard for the recompile (it names only the first that "
                    f"fails); `{attr}` was not a string at the first compile and is this one at every "
                    "later compile"
                )
                findings.append(finding)
        return findings

    def _plan_library(
        self, frame: Frame, since: list[Compile], attr: str, reason: Reason, project: Project
    ) -> Finding | None:
        """The block is library code: the user's code sets the attribute to the value the first
        call gave it (recorded at the compiles after it), right before it compiles the model."""
        compile_ = since[0]
        site = compile_.user_call_site
        if site is None or project.source(site.file) is None:
            return None
        use = reason.first_use
        assert use is not None
        chain = attr.split(".", 1)[1]  # `config.problem_type` of `self`
        where = f"{os.path.basename(use.file)}:{use.line}"

        def finding(fix: str, safety: Safety, notes: list[str], location: Location, params=None) -> Finding:
            return self._finding(frame, attr, location, fix, safety, notes, params)

        tested = attr if attr.startswith("self.") else f"self.{attr.split('.', 1)[1]}"  # as the library spells it
        head = f"library code defaults it on the first call (`if {tested} is None:` at {where}), which compiles twice"
        values = {(e["type"], e["value"]) for c in since if (e := c.inputs.get(attr)) and "value" in e}
        if len(values) != 1 or next(iter(values))[0] not in ("str", "int", "float", "bool"):
            shown = "no value was recorded" if not values else "its value changed again"
            return finding(
                "it stays a lazy default",
                Safety.NONE,
                [head, f"{shown} after the first call: set `{chain}` on the model before its first call"],
                site,
            )
        kind, value = next(iter(values))
        literal = json.dumps(value) if kind == "str" else repr(value)
        if not attr.startswith("self."):
            return self._passed_model_default(frame, attr, literal, head, project, finding)
        if compile_.library_frames or (frame.signature or {}).get("positional", ["self"])[:1] != ["self"]:
            return finding(
                "it stays a lazy default",
                Safety.NONE,
                [
                    head,
                    f"library code ({library_frame(compile_.library_frames[-1]) if compile_.library_frames else where}) "
                    f"makes the compiled call: set `<model>.{chain} = {literal}` where the model is built",
                ],
                site,
            )
        source = project.source(site.file)
        assert source is not None
        call = source.call_at(site.line, site.col, site.end_line, site.end_col)
        names = {root_name(call.func)} if call is not None else set()
        compile_call = find_compile_call(project, site.file, {n for n in names if n}) if names else None
        compiled = compiled_module(compile_call[0], compile_call[1]) if compile_call else None
        if compile_call is None or compiled is None:
            return finding(
                "it stays a lazy default",
                Safety.NONE,
                [
                    head,
                    f"the model's compile call was not found in {site.file}: set `<model>.{chain} = {literal}` before it",
                ],
                site,
            )
        module, after = compiled
        compile_source, node, _ = compile_call
        statement = next(a for a in compile_source.ancestors(node) if isinstance(a, cst.SimpleStatementLine))
        pos = compile_source.positions[statement]
        line = compile_source.lines[pos.start.line - 1]
        newline = line[len(line.rstrip("\r\n")) :] or "\n"
        text = f"{compile_source.statement_indent(statement)}{module}.{chain} = {literal}{newline}"
        # Before the statement that compiles; after it where the model is built in the call
        # (`model = torch.compile(Bert(cfg).to(device))`): set on the compiled module, the
        # attribute is the model's, before its first call either way.
        at_line = pos.end.line + 1 if after else pos.start.line
        location = Location(file=site.file, line=at_line, col=pos.start.column)
        return finding(
            "set it before the model's first call" if after else "set it before the model is compiled",
            Safety.SAFE,
            [
                head,
                f"`{module}.{chain} = {literal}` is the value the first call set (recorded at the compiles after "
                "it): the first compile already sees it, and the library's `if` block no longer runs",
            ],
            location,
            {
                "at": compile_source.line_offsets[at_line - 1]
                if at_line <= len(compile_source.lines)
                else len(compile_source.text),
                "text": text,
            },
        )

    def _passed_model_default(
        self, frame: Frame, attr: str, literal: str, head: str, project: Project, finding: Callable[..., Finding]
    ) -> Finding | None:
        """The compiled function takes the model (`def step(model, batch): model(**batch)`): the
        line goes on the object the call passes, right after the statement that builds it."""
        root, chain = attr.split(".", 1)
        source = project.source(frame.file)
        func = source.function_def(frame.first_line, frame.name) if source is not None else None
        call = next(
            (n for n in walk(func.body) if isinstance(n, cst.Call) and isinstance(n.func, cst.Name) and n.func.value == root),
            None,
        ) if func is not None else None  # fmt: skip
        inside = model_line(self._profile, project, frame.file, source, call) if source and call else None
        if source is None or inside is None:
            return None
        line = source.lines[inside.built.line - 1]
        indent = line[: inside.built.col or 0]
        newline = line[len(line.rstrip("\r\n")) :] or "\n"
        at = source.line_offsets[inside.after - 1] if inside.after <= len(source.lines) else len(source.text)
        return finding(
            "set it where the model is built",
            Safety.SAFE,
            [
                head,
                f"`{inside.target}.{chain} = {literal}` is the value the first call set (recorded at the compiles "
                f"after it): set where `{inside.target}` is built, the first compile already sees it, and the "
                "library's `if` block no longer runs",
            ],
            inside.built,
            {"at": at, "text": f"{indent}{inside.target}.{chain} = {literal}{newline}"},
        )

    def _plan(self, frame: Frame, attr: str, reason: Reason, project: Project) -> Finding | None:
        use = reason.first_use
        assert use is not None
        source = project.source(use.file)
        if source is None:
            return None
        block = next(
            (
                n
                for n in source.nodes(cst.If)
                if source.positions[n].start.line == use.line and dotted_name(_none_tested(n) or cst.Name("_")) == attr
            ),
            None,
        )
        if block is None:
            return None
        pos = source.positions[block]
        location = Location(file=use.file, line=pos.start.line, col=pos.start.column, function=use.function)

        def finding(fix: str, safety: Safety, notes: list[str], params: dict | None = None) -> Finding:
            return self._finding(frame, attr, location, fix, safety, notes, params)

        no_fix = "it stays a lazy default"
        why_not = _why_not(block, attr, source)
        if why_not:
            return finding(no_fix, Safety.NONE, [why_not])
        cls = source.enclosing_class(next(a for a in source.ancestors(block) if isinstance(a, cst.FunctionDef)))
        init = _method(cls, "__init__") if cls is not None else None
        if cls is None or init is None:
            where = f"`{cls.name.value}`" if cls is not None else "the class"
            return finding(
                no_fix,
                Safety.NONE,
                [f"{where} has no `__init__` of its own to set it in: set `{attr}` where the model is built"],
            )
        root = attr.split(".")[1]
        if not _sets(init, root) and not _inherited_sets(ClassRef(use.file, source, cls), root, project):
            return finding(
                no_fix,
                Safety.NONE,
                [f"`self.{root}` is not set in `{cls.name.value}.__init__`: set `{attr}` where the model is built"],
            )
        last = init.body.body[-1]
        end = source.positions[last].end.line
        body_indent = source.statement_indent(last)
        text = textwrap.indent(textwrap.dedent(_statement_text(source, block)), body_indent)
        params = {"at": source.line_offsets[end] if end < len(source.line_offsets) else len(source.text), "text": text}
        computed = _computed(block, attr, source)
        notes = [
            f"the block runs once at the end of `{cls.name.value}.__init__`, as the first call ran it: "
            "the first compile already sees the value"
        ]
        if computed:
            notes.append(
                f"the default is computed ({computed}): the program could change what it reads between "
                "construction and the first call"
            )
            made = finding(f"set it in `{cls.name.value}.__init__`", Safety.UNSAFE, notes, params)
            made.unsafe_because = UNPROVEN  # whether the program changes what it reads: a run shows it
            return made
        return finding(f"set it in `{cls.name.value}.__init__`", Safety.SAFE, notes, params)

    def _finding(
        self, frame: Frame, attr: str, location: Location, fix: str, safety: Safety, notes: list[str], params
    ) -> Finding:
        """A Finding about ``attr`` of ``frame`` at ``location`` (the user's block, or the line
        before the user's compile call where library code defaults it)."""
        guards = [r for r in frame.reasons() if r.source == attr and r.kind in self.consumes]
        return Finding(
            rule=self.id,
            file=location.file,
            location=location,
            message=self.message.format(attr=attr, frame=frame.shown_name, compiles=len(frame.compiles), fix=fix),
            safety=safety,
            params=params or {},
            evidence=frame_evidence(frame, guards),
            notes=notes,
            covers=[cover(frame, [attr], self.consumes)],
        )

    def fix(self, finding: Finding, source: SourceFile, torch_name: str) -> list[Edit]:
        p = finding.params
        text = p["text"] if p["text"].endswith("\n") else p["text"] + "\n"
        return [Edit(finding.file, p["at"], p["at"], text, self.id)]


def _passed_module(frame: Frame, attr: str) -> bool:
    """Is ``attr``'s root a module the compiled function takes (a parameter recorded as a module)?"""
    root = attr.split(".", 1)[0]
    params = (frame.signature or {}).get("positional") or []
    return (
        root != "self"
        and root in params
        and any(c.inputs.get(root, {}).get("type") == "Module" for c in frame.compiles)
    )


def _none_test_line(path: str, attr: str, project: Project) -> int | None:
    """The line of ``if <attr> is None:`` in a library file (read, never edited), or None."""
    source = project.as_is(path)
    try:
        tree = ast.parse(source.text) if source is not None else None
    except (SyntaxError, ValueError):
        return None
    if tree is None:
        return None
    for node in ast.walk(tree):
        if not isinstance(node, ast.If):
            continue
        test = node.test
        if (
            isinstance(test, ast.Compare)
            and len(test.ops) == 1
            and isinstance(test.ops[0], ast.Is)
            and isinstance(test.comparators[0], ast.Constant)
            and test.comparators[0].value is None
            and ast.unparse(test.left) == attr
        ):
            return node.lineno
    return None


def _none_tested(node: cst.If) -> cst.BaseExpression | None:
    test = node.test
    if (
        isinstance(test, cst.Comparison)
        and len(test.comparisons) == 1
        and isinstance(test.comparisons[0].operator, cst.Is)
        and isinstance(test.comparisons[0].comparator, cst.Name)
        and test.comparisons[0].comparator.value == "None"
    ):
        return test.left
    return None


def _why_not(block: cst.If, attr: str, source: SourceFile) -> str | None:
    line = source.positions[block].start.line
    if block.orelse is not None:
        return f"the `if` at line {line} has an `else`: the first call does more than set a default"
    if not any(isinstance(n, cst.AssignTarget) and dotted_name(n.target) == attr for n in walk(block.body)) and not any(
        isinstance(n, (cst.AnnAssign, cst.AugAssign)) and dotted_name(n.target) == attr for n in walk(block.body)
    ):
        return f"the block at line {line} does not assign `{attr}` itself"
    func = next((a for a in source.ancestors(block) if isinstance(a, cst.FunctionDef)), None)
    if func is None:
        return None
    module_names = _module_names(source)
    for node in walk(block.body):
        if isinstance(node, cst.Name) and is_load(source, node):
            if node.value in ("self", "None", "True", "False") or node.value in module_names or node.value in _BUILTINS:
                continue
            return (
                f"the default reads `{node.value}` (line {source.positions[node].start.line}), a name of "
                f"`{func.name.value}`: set `{attr}` where the model is built, with a representative input"
            )
    return None


def _computed(block: cst.If, attr: str, source: SourceFile) -> str:
    """What the assigned values read besides constants (empty when they are all constants)."""
    for node in walk(block.body):
        if isinstance(node, cst.Assign):
            value = node.value
            if not _is_constant(value):
                return f"`{source.code(value)}`"
        elif isinstance(node, (cst.Expr,)):
            return f"`{source.code(node)}`"
    return ""


def _is_constant(node: cst.BaseExpression) -> bool:
    if type(node).__name__ in _CONSTANTS:
        return True
    if isinstance(node, cst.Name):
        return node.value in ("None", "True", "False")
    if isinstance(node, cst.UnaryOperation):
        return _is_constant(node.expression)
    if isinstance(node, (cst.Tuple, cst.List)):
        return all(_is_constant(e.value) for e in node.elements)
    return False


def _module_names(source: SourceFile) -> set[str]:
    names = set(source.imports)
    for statement in source.module.body:
        if isinstance(statement, (cst.FunctionDef, cst.ClassDef)):
            names.add(statement.name.value)
        elif isinstance(statement, cst.SimpleStatementLine):
            for small in statement.body:
                if isinstance(small, cst.Assign):
                    for target in small.targets:
                        if isinstance(target.target, cst.Name):
                            names.add(target.target.value)
    return names


def _method(cls: cst.ClassDef, name: str) -> cst.FunctionDef | None:
    return next((s for s in cls.body.body if isinstance(s, cst.FunctionDef) and s.name.value == name), None)


def _sets(init: cst.FunctionDef, root: str) -> bool:
    """Does ``__init__`` set ``self.<root>`` (or hand ``root`` to ``super().__init__``)?"""
    for node in walk(init.body):
        if isinstance(node, cst.AssignTarget) and dotted_name(node.target) == f"self.{root}":
            return True
        if (
            isinstance(node, cst.Call)
            and dotted_name(node.func).endswith("__init__")
            and any(dotted_name(a.value) == root or (a.keyword and a.keyword.value == root) for a in node.args)
        ):
            return True
    return False


def _inherited_sets(ref: ClassRef, root: str, project: Project) -> bool:
    classes = ClassIndex(project)
    for owner in list(classes.mro(ref))[1:]:
        init = _method(owner.node, "__init__")
        if init is not None and _sets(init, root):
            return True
    return False


def _statement_text(source: SourceFile, statement: cst.CSTNode) -> str:
    """The statement's whole lines (its indentation included, its comments kept)."""
    pos = source.positions[statement]
    start = source.line_offsets[pos.start.line - 1]
    end = source.line_offsets[pos.end.line] if pos.end.line < len(source.line_offsets) else len(source.text)
    return source.text[start:end]


RULE = LazyDefault()
