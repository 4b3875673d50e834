"""RF005 graph-break-shield: a value used only at the end of a frame recompiles all of it."""

from __future__ import annotations

import os
import re

import libcst as cst

from recompile_fix.analysis.project import Project
from recompile_fix.analysis.source import SourceFile, dotted_name, walk
from recompile_fix.edits.edit import Edit
from recompile_fix.findings.finding import Finding, Safety, cover, frame_evidence
from recompile_fix.findings.releases import TorchApi
from recompile_fix.findings.rule import Example, Rule
from recompile_fix.profile.model import REASON_KINDS, Frame, Location, Profile, Reason
from recompile_fix.profile.resume import is_resume

__all__ = ["RULE", "GraphBreakShield"]

# ``File "/abs/program.py", line 11, in fn`` in the ``User stack trace:`` block of a guard failure.
_USER_FRAME = re.compile(r'File "(?P<file>[^"]+)", line (?P<line>\d+), in (?P<fn>\S+)')


class GraphBreakShield(Rule):
    """
    ## What it does
    When a compiled frame recompiles for each new value of a Python scalar (an int argument
    under `dynamic=False`, a global or module attribute int) that it first uses only after a
    prefix of work that does not read it, inserts `torch._dynamo.graph_break()` right before the
    statement of that first use.

    ## Why is this bad?
    Dynamo guards the whole frame on the value, so every new value compiles the whole frame
    again, prefix included, although the prefix never reads it. A graph break splits the frame:
    the prefix is compiled once, and only the code after the break (a resume function)
    recompiles for each value.

    ## Example
    ```python
    @torch.compile(dynamic=False)
    def fn(x, c):
        y = very_large_function(x)  # recompiled for every c
        return y + c
    ```
    Use instead:
    ```python
    @torch.compile(dynamic=False)
    def fn(x, c):
        y = very_large_function(x)  # compiled once
        torch._dynamo.graph_break()
        return y + c  # recompiled for every c
    ```

    ## Fix safety
    Always unsafe: it trades steady-state speed for compile time. Every call then runs two
    graphs with a return to Python between them, and nothing is fused across the break; the
    code after the break still recompiles for each value. Values are unchanged. Where the first use
    sits inside a loop or another block, the break goes before that whole statement of the
    frame's body. No finding when the prefix calls nothing (no work worth shielding); no fix,
    with the reason, when the frame is compiled with `fullgraph=True` (a graph break is an
    error there), the prefix reads the value, or the Profile shows that the break cannot make
    the prefix compile once: the prefix recompiles for other guards too, the value indexes a
    Python list (the code after the break would recompile for every value anyway; measured: one
    compile more than before), or the graph already breaks at that line. Nor when another rule's
    safe fix makes the frame compile once for the same value (RF002 wraps it in a tensor): a
    break would then only add a frame.

    ## Profile evidence
    A value guard on a scalar with a `User stack trace` naming the line of first use, e.g.
    `c == 1  # return y + c  # program.py:11 in fn`, repeated for each new value; also
    `G['N'] == 3` (a global) and `self.n == 2` (a module attribute).
    """

    id = "RF005"
    name = "graph-break-shield"
    message = (
        "`{frame}` recompiles for each value of `{value}` ({compiles} compiles), first used at line "
        "{line} after {prefix} statement(s) that do not read it: a graph break before line {line} "
        "compiles them once"
    )
    consumes = ("scalar_value", "global_value", "module_attribute")
    triggers = ("compile",)
    # The break splits the frame on purpose: the graph break and the resume frame it adds.
    verify_allows = ("graph_breaks", "resume_frames")
    emits = (TorchApi("torch._dynamo.graph_break", None, "measured: present 2.6.0 to 2.15.0"),)
    examples = (
        Example(
            before="@torch.compile(dynamic=False)\ndef fn(x, c):\n    y = very_large_function(x)  # recompiled every time\n"
            "    return y + c\n",
            after="@torch.compile(dynamic=False)\ndef fn(x, c):\n    y = very_large_function(x)  # recompiled every time\n"
            "    torch._dynamo.graph_break()\n    return y + c\n",
            golden="RF005/seed_very_large_function",
        ),
        Example(  # fullgraph=True: a graph break would be an error, no edit
            before="@torch.compile(dynamic=False, fullgraph=True)\ndef fn(x, k):\n    y = prefix(x)\n    return y * k\n",
            after=None,
            golden="RF005/fullgraph_frame",
        ),
    )

    # -- planning ----------------------------------------------------------------------
    def plan(self, profile: Profile, project: Project) -> list[Finding]:
        findings = []
        for frame in profile.frames:
            if is_resume(frame.name) or os.path.isabs(frame.file) or frame.recompiles == 0:
                continue  # already split, or in a file outside the project, or nothing recompiled
            uses = self._first_uses(frame)
            if not uses:
                continue
            source = project.source(frame.file)
            func = source.function_def(frame.first_line, frame.name) if source else None
            if source is None or func is None:
                continue
            finding = self._plan_frame(frame, uses, source, func)
            if finding is not None:
                findings.append(finding)
        return findings

    def _first_uses(self, frame: Frame) -> dict[str, tuple[int, list[Reason]]]:
        """Value -> (the line of the frame's own code that first uses it, its reasons)."""
        uses: dict[str, tuple[int, list[Reason]]] = {}
        for reason in frame.reasons():
            if reason.kind not in self.consumes or not reason.source:
                continue
            line = _line_in_frame(reason, frame)
            if line is None:
                continue
            previous = uses.get(reason.source)
            if previous is None:
                uses[reason.source] = (line, [reason])
            else:
                previous[1].append(reason)
                uses[reason.source] = (min(previous[0], line), previous[1])
        return uses

    def _plan_frame(self, frame: Frame, uses: dict, source: SourceFile, func: cst.FunctionDef) -> Finding | None:
        value, (line, reasons) = min(uses.items(), key=lambda item: item[1][0])
        body = func.body.body if isinstance(func.body, cst.IndentedBlock) else ()
        index = next(
            (
                i
                for i, statement in enumerate(body)
                if source.positions[statement].start.line <= line <= source.positions[statement].end.line
            ),
            None,
        )
        if index is None:
            return None
        evidence = frame_evidence(frame, reasons, first_use=f"{frame.file}:{line}")
        statement = body[index]
        pos = source.positions[statement]
        location = Location(
            file=frame.file,
            line=pos.start.line,
            end_line=pos.end.line,
            col=pos.start.column,
            end_col=pos.end.column if pos.end.line == pos.start.line else None,
            function=frame.name,
        )
        prefix = list(body[:index])
        if not any(isinstance(n, cst.Call) for earlier in prefix for n in walk(earlier)):
            return None  # no prefix, or one that calls nothing: no work worth a graph break
        finding = Finding(
            rule=self.id,
            file=frame.file,
            location=location,
            safety=Safety.UNSAFE,
            message=self.message.format(
                frame=frame.shown_name,
                value=value,
                compiles=frame.compile_count,
                line=pos.start.line,
                prefix=len(prefix),
            ),
            params={"function": frame.name, "line": pos.start.line, "col": pos.start.column},
            evidence=evidence,
            notes=[
                f"trade-off: the prefix (lines {source.positions[body[0]].start.line}-"
                f"{source.positions[body[index - 1]].end.line}) compiles once "
                f"instead of once per value of `{value}`, but every call then runs two graphs with a return "
                "to Python between them and nothing fused across the break, and the rest of the frame "
                "still recompiles for each value"
            ],
        )
        finding.covers = [cover(frame, [value], self.consumes)]
        why_not = self._why_not(value, prefix, statement, source, func) or _profile_why_not(frame, value, line)
        if why_not:
            finding.safety = Safety.NONE
            finding.notes = [why_not]
        return finding

    def _why_not(self, value: str, prefix: list, statement, source: SourceFile, func: cst.FunctionDef) -> str | None:
        fullgraph = _fullgraph_line(source, func)
        if fullgraph:
            return (
                f"`{func.name.value}` is compiled with fullgraph=True (line {fullgraph}): a graph break "
                "there is an error"
            )
        if _is_graph_break(prefix[-1]):
            return "a graph break already stands before this statement"
        names = _value_names(value)
        for earlier in prefix:
            read = next((n for n in walk(earlier) if _reads(n, names)), None)
            if read is not None:
                return (
                    f"the prefix reads `{value}` (line {source.positions[read].start.line}) before the "
                    "guarded use: a break would not shield it"
                )
        return None

    # -- rewriting ---------------------------------------------------------------------
    def fix(self, finding: Finding, source: SourceFile, torch_name: str) -> list[Edit]:
        p = finding.params
        func = next(
            n
            for n in source.nodes(cst.FunctionDef)
            if n.name.value == p["function"] and any(source.positions[s].start.line == p["line"] for s in n.body.body)
        )
        statement = next(s for s in func.body.body if source.positions[s].start.line == p["line"])
        pos = source.positions[statement]
        indent = source.lines[pos.start.line - 1][: pos.start.column]
        if indent.strip() or pos.start.column != p["col"]:
            raise ValueError(f"line {p['line']} does not start with the statement")
        at = source.offset(pos.start.line, 0)
        return [Edit(finding.file, at, at, f"{indent}{torch_name}._dynamo.graph_break()\n", self.id)]

    def already_present(self, finding: Finding, source: SourceFile) -> str | None:
        """A graph break right before the statement (``torch._dynamo.graph_break()``, ours or
        hand-written, however imported)."""
        p = finding.params
        for func in source.nodes(cst.FunctionDef):
            body = list(func.body.body) if func.name.value == p["function"] else []
            for before, statement in zip(body, body[1:]):
                if source.positions[statement].start.line != p["line"]:
                    continue
                if not isinstance(before, cst.SimpleStatementLine):
                    return None
                for small in before.body:
                    call = small.value if isinstance(small, cst.Expr) else None
                    func_expr = call.func if isinstance(call, cst.Call) else None
                    called = (
                        func_expr.attr.value
                        if isinstance(func_expr, cst.Attribute)
                        else func_expr.value
                        if isinstance(func_expr, cst.Name)
                        else None
                    )
                    if called == "graph_break":
                        return f"line {source.positions[before].start.line}: `{source.code(small).strip()}`"
                return None
        return None


def _profile_why_not(frame: Frame, value: str, line: int) -> str | None:
    """Why the Profile shows that a break before ``line`` cannot make the prefix compile once,
    or None. The break pays off only when the prefix stops recompiling; the code after it
    recompiles as before, in a frame of its own (one more compile)."""
    for reason in frame.reasons():
        if reason.source == value and "getitem_const" in reason.text:
            return (
                f"`{value}` indexes a Python list at line {line}: the code after a break would recompile for "
                "every value just the same, and the frame it adds is one more compile (RF009 keeps the list "
                "in a tensor instead)"
            )
    for graph_break in frame.graph_breaks:
        if graph_break.location.file == frame.file and graph_break.location.line == line:
            return (
                f"the graph already breaks at line {line} ({graph_break.reason.split(':', 1)[0]}): the code after it "
                "is a frame of its own, and another break adds a compile"
            )
    others: dict[str, int] = {}
    for compile_ in frame.compiles:
        if not compile_.is_recompile or compile_.limit_hit or not compile_.reasons:
            continue
        reason = compile_.reasons[0]
        if reason.source == value or reason.kind in ("grad_mode", "training_flag", "limit_hit"):
            continue
        first = _line_in_frame(reason, frame) if reason.first_use is not None else None
        if first is None or first < line:
            what = REASON_KINDS.get(reason.kind, reason.kind) + (f" `{reason.source}`" if reason.source else "")
            others[what] = others.get(what, 0) + 1
    if others:
        listed = ", ".join(f"{what} ({n}x)" for what, n in others.items())
        return f"the prefix recompiles too ({listed}): a break would not make it compile once"
    return None


def _line_in_frame(reason: Reason, frame: Frame) -> int | None:
    """The line of the frame's own code on the way to the first use (the use itself when it is in
    the frame; otherwise the call into the function that uses it)."""
    first = reason.first_use
    if first is not None and first.function == frame.name and _same_file(first.file, frame.file):
        return first.line
    _, _, stack = reason.text.partition("User stack trace:")
    lines = [
        int(m.group("line"))
        for m in _USER_FRAME.finditer(stack)
        if m.group("fn") == frame.name and _same_file(m.group("file"), frame.file)
    ]
    return lines[-1] if lines else None


def _same_file(path: str, profile_path: str) -> bool:
    """``path`` (as torch prints it, absolute) names the file a Profile spells ``profile_path``."""
    return path == profile_path or path.endswith(os.sep + profile_path)


def _value_names(value: str) -> tuple[str, ...]:
    """How code spells the guarded value: ``c`` -> (c,), ``G['N']`` -> (N,), ``self.n`` -> (self.n,)."""
    match = re.match(r"""^G\[['"](\w+)['"]\]$""", value)
    return (match.group(1),) if match else (value,)


def _reads(node: cst.CSTNode, names: tuple[str, ...]) -> bool:
    if isinstance(node, cst.Name):
        return node.value in names
    if isinstance(node, cst.Attribute):
        return dotted_name(node) in names
    return False


def _is_graph_break(statement) -> bool:
    if isinstance(statement, cst.SimpleStatementLine) and len(statement.body) == 1:
        small = statement.body[0]
        return (
            isinstance(small, cst.Expr)
            and isinstance(small.value, cst.Call)
            and dotted_name(small.value.func).endswith("_dynamo.graph_break")
        )
    return False


def _fullgraph_line(source: SourceFile, func: cst.FunctionDef) -> int | None:
    """Where ``func`` is compiled with ``fullgraph=True``: its decorator, or
    ``torch.compile(func, fullgraph=True)`` in the file."""
    name = func.name.value
    candidates = [d.decorator for d in func.decorators if isinstance(d.decorator, cst.Call)]
    for call in source.nodes(cst.Call):
        if call.args and isinstance(call.args[0].value, cst.Name) and call.args[0].value.value == name:
            candidates.append(call)
    for call in candidates:
        if not dotted_name(call.func).endswith("compile"):
            continue
        for arg in call.args:
            if (
                arg.keyword
                and arg.keyword.value == "fullgraph"
                and not (isinstance(arg.value, cst.Name) and arg.value.value == "False")
            ):
                return source.positions[call].start.line
    return None


RULE = GraphBreakShield()
