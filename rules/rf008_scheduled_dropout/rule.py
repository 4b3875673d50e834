"""RF008 scheduled-dropout: a dropout or drop-path probability that a schedule changes between
calls recompiles the compiled frame for every value."""

from __future__ import annotations

import ast
import os
import re

import libcst as cst

from recompile_fix.analysis.project import Project
from recompile_fix.analysis.source import SourceError, SourceFile, dotted_name, walk
from recompile_fix.edits.edit import Edit
from recompile_fix.findings.finding import UNPROVEN, Finding, Safety, cover, frame_evidence
from recompile_fix.findings.releases import TorchApi
from recompile_fix.findings.rule import Example, Rule
from recompile_fix.profile.model import Frame, Location, Profile, Reason

__all__ = ["HELPER", "RULE", "ScheduledDropout"]

# ``self._modules['drop'].p``, ``fn._modules['1'].p``,
# ``self._modules['blocks']._modules['0']._modules['drop_path'].drop_prob``, ``self.drop.p``.
_SOURCE = re.compile(r"""^\w+(?P<path>(?:\._modules\[['"][^'"]+['"]\]|\.\w+)+)$""")
_KEY = re.compile(r"""\._modules\[['"]([^'"]+)['"]\]|\.(\w+)""")
# A user module's scheduled probability: drop_prob, drop_path_rate, drop_rate, p_drop, ...
_PROBABILITY = re.compile(r"drop|^p$|prob")
HELPER_NAME = "ScheduledDropout"
# Inserted once per file that builds a scheduled nn.Dropout; `{base}` is how the file spells
# nn.Dropout, `{torch}` how it spells torch.
HELPER = '''class ScheduledDropout({base}):
    """nn.Dropout whose `p` a schedule changes between calls of compiled code, without a
    recompile per value: `p` lives in a 0-d float64 buffer (a graph input, not a constant
    torch guards on), and two bools say whether to draw a mask at all, so p == 0 draws no
    random numbers and p == 1 zeroes, as F.dropout does. The mask is F.dropout's:
    bernoulli(1 - p), scaled by 1 / (1 - p)."""

    @property
    def p(self):
        return self._p

    @p.setter
    def p(self, value):
        # nn.Dropout.__init__ sets p first; every schedule update after it lands here too.
        self._p = value
        if "p_tensor" in self._buffers:
            self.p_tensor.fill_(value)
        else:
            self.register_buffer("p_tensor", {torch}.tensor(value, dtype={torch}.float64), persistent=False)
        self.drops = bool(value > 0)
        self.drops_all = bool(value == 1)

    def forward(self, input):
        if not self.training or not self.drops:
            return input
        if self.drops_all:
            return input.mul_(0.0) if self.inplace else input * 0.0
        keep = 1 - self.p_tensor
        mask = {torch}.empty_like(input).bernoulli_(keep).div_(keep)
        return input.mul_(mask) if self.inplace else input * mask


'''


_NET = (
    "class Net(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
    "        self.fc1 = nn.Linear(16, 32)\n        self.drop = nn.Dropout(0.3)\n"
)


class ScheduledDropout(Rule):
    """
    ## What it does
    When a schedule changes a dropout probability between calls of compiled code (early
    dropout: `model.drop.p = schedule[step]`; stochastic depth: `block.drop_path.drop_prob =
    rate`), keeps the probability out of torch's guards: a scheduled `nn.Dropout` becomes a
    `ScheduledDropout` whose p is a tensor, and a drop-path module of the program's own runs
    eagerly.

    * an `nn.Dropout` built in the program becomes `ScheduledDropout`, a subclass the fix
      inserts once in that file: `p` lives in a 0-d float64 buffer that the `p = ...` writes
      fill, and the mask is drawn as F.dropout draws it. The schedule's writes stay as they are.
    * a drop-path module of the program's own gets `@torch.compiler.disable` on its `forward`:
      it runs eagerly, outside the graph.

    torch names only the first guard that fails, so a Profile names one of the dropouts a
    schedule sets. The others the same schedule sets are converted with it: every `nn.Dropout`
    of the profiled files where a loop over `model.modules()` writes `.p`
    (`for m in model.modules(): if isinstance(m, nn.Dropout): m.p = p`), and the dropouts
    written `.p` in the same function or loop as the named one (`model.drop1.p = p;
    model.drop2.p = p`). Converting only the named one would leave the recompiles.

    ## Why is this bad?
    torch guards a module's float attribute on its value (`self._modules['drop'].p == 0.3`,
    read by `F.dropout`): every new probability compiles the frame again, and a schedule over
    the training reaches the recompile limit within a few steps, after which the frame runs
    eagerly for the rest of training.

    ## Example
    ```python
    self.drop = nn.Dropout(0.3)
    ...
    model.drop.p = 0.3 - 0.03 * step
    ```
    Use instead:
    ```python
    self.drop = ScheduledDropout(0.3)
    ```

    ## Fix safety
    Always unsafe. `ScheduledDropout` draws `bernoulli_(1 - p)` with a tensor probability where
    F.dropout draws with a number: on CPU under the eager and aot_eager backends the mask, the
    outputs and the gradients are bit-identical to nn.Dropout (measured over a 10-step schedule
    from 0 and one that never reaches 0), but inductor and CUDA draw their own random numbers,
    so there only the distribution is the same. It compiles once while p stays above 0 (twice
    when the schedule starts at 0: `drops` is a bool torch guards). The module's `p` reads and
    writes, `state_dict()` and `isinstance(m, nn.Dropout)` are unchanged. The drop-path fix
    keeps every value (the module runs eagerly) but breaks the graph at each call of it (the
    frame compiles 5 times where it hit the limit). No fix when the dropout is built where no
    edit can reach it (a library's module, a `Sequential` literal) or is a `Dropout1d/2d/3d`.

    ## Profile evidence
    `self._modules['drop'].p == 0.3  # return F.dropout(input, self.p, self.training,
    self.inplace)  # nn/modules/dropout.py:73 in forward`, once per scheduled value, up to the
    recompile limit; for a drop-path module, `...['drop_path'].drop_prob == 0.0  # if drop_prob
    == 0. or not training:`.
    """

    id = "RF008"
    name = "scheduled-dropout"
    message = (
        "`{source}` is a dropout probability that changes between calls of compiled `{frame}` "
        "({values}; {compiles} compiles{limit}): {fix}"
    )
    consumes = ("scalar_value", "module_attribute")
    triggers = ("Dropout", "drop")
    emits = (
        TorchApi("torch.tensor", None, "every release"),
        TorchApi("torch.empty_like", None, "every release"),
        TorchApi("torch.compiler.disable", None, "torch 2.1 and later (every release in the table)"),
    )
    # The drop-path fix runs the module eagerly: a graph break at each call, a resume frame after.
    verify_allows = ("graph_breaks", "resume_frames")
    examples = (
        Example(
            before=_NET,
            after=HELPER.format(base="nn.Dropout", torch="torch") + _NET.replace("nn.Dropout(", "ScheduledDropout("),
            golden="RF008/early_dropout",
        ),
        Example(
            before="    def forward(self, x):\n        return drop_path(x, self.drop_prob, self.training, self.scale_by_keep)\n",
            after="    @torch.compiler.disable\n    def forward(self, x):\n"
            "        return drop_path(x, self.drop_prob, self.training, self.scale_by_keep)\n",
            golden="RF008/stochastic_depth",
        ),
        Example(  # a Dropout2d zeroes channels: no edit
            before="        self.drop = nn.Dropout2d(0.2)\n",
            after=None,
            golden="RF008/channel_dropout",
        ),
    )

    def plan(self, profile: Profile, project: Project) -> list[Finding]:
        by_source: dict[str, list[tuple[Frame, Reason]]] = {}
        for frame in profile.frames:
            for reason in frame.reasons():
                if reason.kind in self.consumes and reason.value_type == "float" and _SOURCE.match(reason.source or ""):
                    by_source.setdefault(reason.source or "", []).append((frame, reason))
        scheduled: dict[tuple[str, bool], list[tuple[Frame, Reason]]] = {}
        for source, seen in by_source.items():
            match = _SOURCE.match(source)
            assert match is not None
            keys = [a or b for a, b in _KEY.findall(match.group("path"))]
            if len(keys) < 2:
                continue  # an attribute of the compiled module itself, not of a submodule
            attr, module = keys[-1], keys[-2]
            # torch prints the line of first use with one failure of each guard, not with all.
            uses = [r.first_use for _, r in seen if r.first_use is not None]
            torch_dropout = any(u.file.replace("\\", "/").endswith("torch/nn/modules/dropout.py") for u in uses)
            if torch_dropout and attr == "p":
                scheduled.setdefault((module, True), []).extend(seen)
            elif not uses and attr == "p" and module in _dropout_sites(module, set(), {module}, profile, project)[1]:
                # torch printed the line of first use with another guard's failure (a drop path's,
                # set in the same step) and never with this one: the source says nn.Dropout.
                scheduled.setdefault((module, True), []).extend(seen)
            elif not torch_dropout and uses and _PROBABILITY.search(attr):
                scheduled.setdefault((f"{module}.{attr}", False), []).extend(seen)
        findings = []
        for (name, is_torch), seen in scheduled.items():
            if is_torch:
                findings.extend(self._plan_dropout(name, seen, profile, project))
            else:
                findings.extend(self._plan_drop_path(name, seen, profile, project))
        return findings

    # -- evidence --------------------------------------------------------------------------------
    def _finding(self, seen, location: Location, fix: str, safety: Safety, notes, params=None) -> Finding:
        frames = list({f.key: f for f, _ in seen}.values())
        frame = frames[0]
        values = list(dict.fromkeys(r.value for _, r in seen if isinstance(r.value, float)))
        shown = ", ".join(map(repr, values[:3])) + (", ..." if len(values) > 3 else "")
        return Finding(
            rule=self.id,
            file=location.file,
            location=location,
            message=self.message.format(
                source=seen[0][1].source,
                frame=frame.shown_name,
                values=shown,
                compiles=sum(len(f.compiles) for f in frames),
                limit=", recompile limit hit" if any(f.limit_hits for f in frames) else "",
                fix=fix,
            ),
            safety=safety,
            params=params or {},
            evidence=frame_evidence(frame, [r for _, r in seen], values=values[:10]),
            notes=notes,
            covers=[
                cover(f, sorted({r.source for g, r in seen if g is f and r.source}), self.consumes) for f in frames
            ],
        )

    # -- nn.Dropout --------------------------------------------------------------------------------
    def _plan_dropout(self, module: str, seen, profile: Profile, project: Project) -> list[Finding]:
        """``self.<module> = nn.Dropout(...)`` in the profiled files -> ScheduledDropout."""
        frame = seen[0][0]
        # torch names only the first guard that fails: the other dropouts the same schedule
        # sets are converted with it, or their recompiles stay (one of four converted: no fewer).
        siblings, schedule = _schedule_siblings(module, profile, project)
        names = {module, *(siblings or ())}
        sites, converted, other_kinds = _dropout_sites(module, siblings, names, profile, project)
        fallback = Location(file=frame.file, line=frame.first_line, function=frame.name)
        if not sites or module not in converted:
            why = (
                f"`self.{module}` is built as {', '.join(other_kinds)}, whose mask is not F.dropout's"
                if other_kinds
                else f"no `self.{module} = nn.Dropout(...)` in the profiled files: the fix has no place to go"
            )
            return [self._finding(seen, fallback, "it stays as it is", Safety.NONE, [why])]
        notes = [
            "ScheduledDropout keeps p in a 0-d float64 buffer that `p = ...` fills: one graph for every p above 0 "
            "(and one for p == 0)",
            "unsafe: bit-identical to nn.Dropout on CPU with the eager and aot_eager backends (same mask, same random "
            "stream); inductor and CUDA draw their own random numbers, so there only the distribution is the same",
        ]
        others = sorted(converted - {module})
        if others and schedule is not None:
            notes.insert(
                1,
                f"the schedule at {schedule.file}:{schedule.line} also sets "
                f"{', '.join(f'`{n}`' for n in others)}, which no guard named yet (torch names only the first "
                "that fails): converted too, or their recompiles stay",
            )
        findings = []
        for file, calls in sites.items():
            source = project.source(file)
            assert source is not None
            if HELPER_NAME in {n.name.value for n in source.nodes(cst.ClassDef)}:
                findings.append(
                    self._finding(
                        seen, fallback, "it stays as it is", Safety.NONE, [f"{file} already defines `{HELPER_NAME}`"]
                    )
                )
                continue
            first = min(calls, key=lambda c: source.positions[c].start.line)
            pos = source.positions[first]
            location = Location(file=file, line=pos.start.line, col=pos.start.column, end_col=pos.end.column)
            top = _top_level(source, first)
            params = {
                "replace": [list(source.span(c.func)) for c in calls],
                "insert": source.line_offsets[source.positions[top].start.line - 1] - _leading_comment(source, top),
                "base": source.code(first.func),
            }
            made = self._finding(seen, location, f"build it as `{HELPER_NAME}`", Safety.UNSAFE, notes, params)
            made.unsafe_because = UNPROVEN  # the same mask on this program's backend: a run shows it, exactly
            findings.append(made)
        return findings

    # -- a drop-path module of the program's own -----------------------------------------------------
    def _plan_drop_path(self, name: str, seen, profile: Profile, project: Project) -> list[Finding]:
        module, attr = name.split(".")
        first = next(r.first_use for _, r in seen if r.first_use is not None)
        source = project.source(first.file)
        func = _function_at(source, first.line) if source is not None else None
        cls = source.enclosing_class(func) if source is not None and func is not None else None
        fallback = Location(file=first.file, line=first.line, function=first.function)
        if source is None or cls is None:
            # The read sits in a function the module's forward calls (timm's drop_path()): find
            # the class whose forward passes self.<attr> on.
            found = _class_reading(attr, profile, project)
            if found is None:  # a library's module (timm's DropPath): no edit of ours reaches it
                where = f"`{first.function}` at {first.file}:{first.line}" if first.function else first.file
                why = (
                    f"`{attr}` is read by library code ({where}) in a module class the profiled files do not "
                    "define: the fix (its forward run eagerly) has no place to go; each scheduled value compiles "
                    "again (hold the rate fixed, or give the schedule a module of the program's own)"
                )
                return [
                    self._finding(
                        seen, _write_of(attr, profile, project) or fallback, "it stays as it is", Safety.NONE, [why]
                    )
                ]
            source, cls = found
        forward = next((s for s in cls.body.body if isinstance(s, cst.FunctionDef) and s.name.value == "forward"), None)
        if forward is None:
            return [
                self._finding(seen, fallback, "it stays as it is", Safety.NONE, [f"`{cls.name.value}` has no forward"])
            ]
        if any(dotted_name(d.decorator).endswith("compiler.disable") for d in forward.decorators):
            return []
        if profile.torch_release is not None and profile.torch_release < (2, 1):
            return [
                self._finding(
                    seen, fallback, "it stays as it is", Safety.NONE, ["torch.compiler.disable is torch 2.1+"]
                )
            ]
        file = str(source.path)
        pos = source.positions[forward]
        line = min([pos.start.line] + [source.positions[d].start.line for d in forward.decorators])
        indent = source.lines[line - 1][: len(source.lines[line - 1]) - len(source.lines[line - 1].lstrip())]
        location = Location(file=file, line=pos.start.line, col=pos.start.column, function="forward")
        notes = [
            f"`{cls.name.value}.forward` runs eagerly, outside the graph: every value of `{attr}` is used as it is, "
            "with no guard on it",
            "unsafe: the graph breaks at each call of the module (the frame resumes after it in a frame of its own); "
            "a mask drawn with a 0-d float64 probability behind a bool `p > 0` compiles once instead, with the same "
            "random numbers, but needs the module rewritten by hand",
        ]
        params = {"insert": source.line_offsets[line - 1], "indent": indent}
        return [
            self._finding(
                seen,
                location,
                f"run `{cls.name.value}.forward` eagerly (torch.compiler.disable)",
                Safety.UNSAFE,
                notes,
                params,
            )
        ]

    # -- rewriting ---------------------------------------------------------------------------------
    def fix(self, finding: Finding, source: SourceFile, torch_name: str) -> list[Edit]:
        p = finding.params
        if "base" in p:
            helper = HELPER.format(base=p["base"], torch=torch_name)
            edits = [Edit(finding.file, p["insert"], p["insert"], helper, self.id)]
            edits += [Edit(finding.file, start, end, HELPER_NAME, self.id) for start, end in p["replace"]]
            return edits
        decorator = f"{p['indent']}@{torch_name}.compiler.disable\n"
        return [Edit(finding.file, p["insert"], p["insert"], decorator, self.id)]


def _dropout_sites(
    module: str, siblings: set[str] | None, names: set[str], profile: Profile, project: Project
) -> tuple[dict[str, list[cst.Call]], set[str], list[str]]:
    """Where the profiled files build ``self.<module>`` (and its siblings, the dropouts the same
    schedule sets) as ``nn.Dropout``: the calls per file, the attributes converted, and the other
    dropout kinds ``self.<module>`` is built as."""
    sites: dict[str, list[cst.Call]] = {}
    converted: set[str] = set()
    other_kinds: list[str] = []
    for file in profile.sources:
        if os.path.isabs(file):
            continue
        source = project.source(file)
        if source is None:
            continue
        for node in source.nodes(cst.Assign):
            targets = [dotted_name(t.target) for t in node.targets]
            target = next((t for t in targets if t.startswith("self.") and t.count(".") == 1), "")
            if f"self.{module}" not in targets and not (
                target and (siblings is None or target.split(".", 1)[1] in names)
            ):
                continue
            if not isinstance(node.value, cst.Call):
                continue
            built = source.qualified_name(node.value.func)
            if built == "torch.nn.Dropout":
                sites.setdefault(file, []).append(node.value)
                converted.add(target.split(".", 1)[1] if target else module)
            elif built.startswith("torch.nn.") and "Dropout" in built and f"self.{module}" in targets:
                other_kinds.append(f"`{source.code(node.value.func)}`")
    return sites, converted, other_kinds


def _schedule_siblings(module: str, profile: Profile, project: Project) -> tuple[set[str] | None, Location | None]:
    """The other dropouts the schedule that sets ``<...>.<module>.p`` sets too, and where it
    does: the names written ``.p`` in the same function (``model.drop1.p = p; model.drop2.p =
    p``) or the same loop over named modules (``for d in (model.drop1, model.drop2): d.p = p``);
    None (every ``nn.Dropout`` of the profiled files) for a loop over ``.modules()`` that
    writes ``.p`` (``for m in model.modules(): if isinstance(m, nn.Dropout): m.p = p``)."""
    siblings: set[str] = set()
    where = None
    for file in profile.sources:
        source = project.source(file) if not os.path.isabs(file) else None
        if source is None:
            continue
        scopes: dict[cst.CSTNode | None, dict[str, int]] = {}
        for node in source.nodes(cst.Assign):
            for target in node.targets:
                holder = _p_holder(target.target)
                if holder is not None and isinstance(holder, cst.Attribute):
                    scope = next((a for a in source.ancestors(node) if isinstance(a, cst.FunctionDef)), None)
                    scopes.setdefault(scope, {})[holder.attr.value] = source.positions[node].start.line
        for written in scopes.values():
            if module in written and len(written) > 1:
                siblings |= set(written) - {module}
                where = where or Location(file=file, line=written[module])
        for loop in source.nodes(cst.For):
            if not isinstance(loop.target, (cst.Name, cst.Tuple)):
                continue
            variable = loop.target if isinstance(loop.target, cst.Name) else loop.target.elements[-1].value
            if not isinstance(variable, cst.Name) or not _writes_p_of(loop.body, variable.value):
                continue
            line = source.positions[loop].start.line
            iterated = loop.iter
            if (
                isinstance(iterated, cst.Call)
                and isinstance(iterated.func, cst.Attribute)
                and iterated.func.attr.value in ("modules", "named_modules")
            ):
                return None, Location(file=file, line=line)
            if isinstance(iterated, (cst.Tuple, cst.List)):
                listed = {e.value.attr.value for e in iterated.elements if isinstance(e.value, cst.Attribute)}
                if module in listed:
                    siblings |= listed - {module}
                    where = where or Location(file=file, line=line)
    return siblings, where


def _writes_p_of(body: cst.CSTNode, name: str) -> bool:
    """Does ``body`` assign ``<name>.p``?"""
    for node in walk(body):
        if isinstance(node, cst.Assign):
            for target in node.targets:
                holder = _p_holder(target.target)
                if isinstance(holder, cst.Name) and holder.value == name:
                    return True
    return False


def _p_holder(target: cst.BaseExpression) -> cst.BaseExpression | None:
    """``model.drop`` of ``model.drop.p = ...``, ``m`` of ``m.p = ...``; None for other targets."""
    if isinstance(target, cst.Attribute) and target.attr.value == "p":
        return target.value
    return None


def _top_level(source: SourceFile, node: cst.CSTNode) -> cst.CSTNode:
    top = node
    for parent in source.ancestors(node):
        if isinstance(parent, cst.Module):
            return top
        top = parent
    return top


def _leading_comment(source: SourceFile, statement: cst.CSTNode) -> int:
    """Characters of comment lines right above a top-level statement (they stay with it)."""
    line = source.positions[statement].start.line - 1
    if isinstance(statement, (cst.ClassDef, cst.FunctionDef)) and statement.decorators:
        line = source.positions[statement.decorators[0]].start.line - 1
    start = source.line_offsets[line]
    while line > 0 and source.lines[line - 1].lstrip().startswith("#"):
        line -= 1
    return start - source.line_offsets[line]


def _function_at(source: SourceFile, line: int) -> cst.FunctionDef | None:
    best = None
    for node in source.nodes(cst.FunctionDef):
        pos = source.positions[node]
        if pos.start.line <= line <= pos.end.line:
            if best is None or source.positions[best].start.line < pos.start.line:
                best = node
    return best


def _class_reading(attr: str, profile: Profile, project: Project) -> tuple[SourceFile, cst.ClassDef] | None:
    """The one class of the profiled files whose forward reads ``self.<attr>``."""
    found = []
    for file in profile.sources:
        source = project.source(file) if not os.path.isabs(file) else None
        if source is None:
            continue
        for cls in source.nodes(cst.ClassDef):
            forward = next(
                (s for s in cls.body.body if isinstance(s, cst.FunctionDef) and s.name.value == "forward"), None
            )
            if forward is not None and any(
                isinstance(n, cst.Attribute) and dotted_name(n) == f"self.{attr}" for n in walk(forward)
            ):
                found.append((source, cls))
    return found[0] if len(found) == 1 else None


RULE = ScheduledDropout()


def _write_of(attr: str, profile: Profile, project: Project) -> Location | None:
    """The first ``<x>.<attr> = ...`` in the profiled files: where the program sets what a
    library's module reads (``dp.drop_prob = rate``), the line a finding about it names."""
    for file in sorted(profile.sources):
        source = project.source(file) if not os.path.isabs(file) else None
        if source is None:
            continue
        try:
            tree = source.syntax
        except SourceError:
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Assign):
                targets = node.targets
            elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
                targets = [node.target]
            else:
                continue
            if any(isinstance(t, ast.Attribute) and t.attr == attr for t in targets):
                return Location(file=file, line=node.lineno, col=source.char_column(node.lineno, node.col_offset))
    return None
