"""RF001 mark-dynamic: a tensor argument whose size changes makes its compiled frame recompile."""

from __future__ import annotations

import os

import libcst as cst

from recompile_fix.analysis.project import Project
from recompile_fix.analysis.source import SourceFile, is_name, walk
from recompile_fix.edits.edit import Edit
from recompile_fix.edits.format import format_statement
from recompile_fix.findings.finding import Finding, Safety, frame_evidence
from recompile_fix.findings.releases import TorchApi
from recompile_fix.findings.rule import Example, Rule
from recompile_fix.profile.model import Frame, Location, Profile
from recompile_fix.profile.resume import is_resume

__all__ = ["RULE", "MarkDynamic"]

MARK_DYNAMIC = TorchApi("torch._dynamo.mark_dynamic", None, "measured: present 2.6.0 to 2.15.0")
MAYBE_MARK_DYNAMIC = TorchApi("torch._dynamo.maybe_mark_dynamic", None, "measured: present 2.6.0 to 2.15.0")
# torch._dynamo.decorators.mark_unbacked(t, dim): a dynamic size that is not specialised at 0 or 1.
MARK_UNBACKED = TorchApi(
    "torch._dynamo.decorators.mark_unbacked", (2, 4), "measured: present 2.6.0 to 2.15.0; 2.4 from its PR"
)
CONTIGUOUS_COPY = TorchApi("torch.contiguous_format", None, "every release")
# Suggested in a note only (a global switch is the user's call, never written).
BACKED_SIZE_OBLIVIOUS = TorchApi(
    "torch.fx.experimental._config.backed_size_oblivious", (2, 8), "measured: absent 2.6.0, present 2.8.0", "note"
)


class MarkDynamic(Rule):
    """
    ## What it does
    Marks the dimension of a tensor argument that changed size between calls as dynamic, with
    `torch._dynamo.mark_dynamic(arg, dim)` right before the statement that calls the compiled
    code, outside the compiled region.

    ## Why is this bad?
    `torch.compile` specialises a graph on the sizes it first sees. A growing sequence or a
    ragged last batch then compiles the frame again (with `dynamic=False`, once per size, until
    the recompile limit stops compiling it at all). Marking the dimension before the first call
    compiles one graph that serves every size. Torch names only the first failing guard of a
    recompile, so the dimensions come from the argument shapes recorded at each compile too: a
    size change hidden behind another argument's guard is marked in the same pass.

    ## Example
    ```python
    for batch in loader:
        out = model(batch)
    ```
    Use instead:
    ```python
    for batch in loader:
        torch._dynamo.mark_dynamic(batch, 0)
        out = model(batch)
    ```

    ## Fix safety
    Safe: marking changes no value. Where the compiled code specialises the dimension
    (`if x.shape[0] == 3`), a hard mark would raise `ConstraintViolationError`, so the fix uses
    `torch._dynamo.maybe_mark_dynamic` instead. Where the Profile saw the dimension at size 0 or
    1, which torch specialises even when marked, and the compiled code calls nothing (`x + c`),
    the fix uses `torch._dynamo.decorators.mark_unbacked` (torch >= 2.4), which serves every
    size with one graph; code that calls into torch may need a concrete size there (SDPA does,
    and graph-breaks), so elsewhere the finding only suggests it. An argument that is not a
    plain name is bound to a new name first; that is unsafe when other parts of the statement
    run before it and could have side effects. A stride guard on a sliced view (`idx[:, -n:]`,
    whose strides change with its source) is not a size guard: the fix also passes a contiguous
    copy (`.clone(memory_format=torch.contiguous_format)`; `.contiguous()` keeps a size-1
    batch's odd stride), which changes no value but is unsafe where the name is used again
    after the call (a later in-place write would no longer reach the original). The finding
    says when torch will still recompile after the edit.

    ## Profile evidence
    `tensor 'x' size mismatch at index 0. expected 32, actual 17` (also `L['x']`, and
    `args[0]` for a compiled `nn.Sequential`).
    """

    id = "RF001"
    name = "mark-dynamic"
    message = "`{param}` of compiled `{frame}` changes size in dim {dims} ({compiles} compiles): mark it dynamic before the call"
    consumes = ("size_mismatch", "size_specialization", "stride_mismatch")
    triggers = ("compile",)
    emits = (MARK_DYNAMIC, MAYBE_MARK_DYNAMIC, MARK_UNBACKED, CONTIGUOUS_COPY, BACKED_SIZE_OBLIVIOUS)
    examples = (
        Example(
            before="fn(torch.ones(3))\nfn(torch.ones(4))\n",
            after="x = torch.ones(3)\ntorch._dynamo.mark_dynamic(x, 0)\nfn(x)\n"
            "x = torch.ones(4)\ntorch._dynamo.mark_dynamic(x, 0)\nfn(x)\n",
            golden="RF001/seed_shape_change",
        ),
    )

    # -- planning ----------------------------------------------------------------------
    def plan(self, profile: Profile, project: Project) -> list[Finding]:
        findings = []
        release = profile.torch_release
        unbacked = MARK_UNBACKED.runs_on(release)
        # The user's own frames first: a finding merged from several frames speaks of theirs.
        for frame in sorted(profile.frames, key=lambda f: os.path.isabs(f.file)):
            dims: dict[str, set[int]] = {}
            for reason in frame.reasons():
                if reason.kind == "size_mismatch" and reason.source and reason.dim is not None:
                    dims.setdefault(reason.source, set()).add(reason.dim)
            if not is_resume(frame.name):
                # Torch names only the first failing guard (a scalar's `c == 0.5` can hide a size
                # change of `x`): the shapes recorded at each compile show every changed dimension.
                for source_expr in frame.tensor_inputs():
                    if _changed_dims(frame, source_expr):
                        dims.setdefault(source_expr, set())
            for source_expr in dims:
                dims[source_expr] |= _changed_dims(frame, source_expr)
            for source_expr, source_dims in dims.items():
                findings.extend(
                    self._plan_argument(frame, source_expr, sorted(source_dims), project, unbacked, release)
                )
        return _merge_same_argument(findings)

    def _plan_argument(
        self,
        frame: Frame,
        source_expr: str,
        dims: list[int],
        project: Project,
        unbacked: bool,
        release: tuple[int, int] | None,
    ) -> list[Finding]:
        evidence = frame_evidence(
            frame, [r for r in frame.reasons() if r.source == source_expr and r.kind in self.consumes]
        )
        target = _Target.resolve(frame, source_expr, project)
        small = _small_sizes_seen(frame, source_expr, dims)
        mark = "mark_dynamic"
        if target is not None and target.specialized(dims):
            mark = "maybe_mark_dynamic"
        elif small and unbacked and target is not None and target.calls_nothing():
            # An unbacked size breaks the graph wherever torch needs a concrete one (SDPA picks
            # its kernel by size, for one): only code that calls nothing is sure not to.
            mark = "decorators.mark_unbacked"
        notes = self._remaining_recompiles(
            frame, source_expr, small and mark != "decorators.mark_unbacked", unbacked, release
        )
        strided = any(r.kind == "stride_mismatch" for r in frame.reasons() if r.source == source_expr)
        if mark == "decorators.mark_unbacked":
            notes.append(
                "the Profile saw size 0 or 1 in this dimension, which torch specialises even when "
                "marked dynamic: mark_unbacked serves those sizes with the same graph (code that "
                "branches on the size would fail to compile; the compiled code seen does not)"
            )
        findings = []
        seen = set()
        for compile_ in frame.compiles:
            site = compile_.call_site
            if site is None or (site.file, site.line, site.col) in seen:
                continue
            seen.add((site.file, site.line, site.col))
            finding = Finding(
                rule=self.id,
                file=site.file,
                location=site,
                safety=Safety.SAFE,
                message=self.message.format(
                    param=target.param if target else source_expr,
                    frame=frame.name,
                    dims=", ".join(map(str, dims)),
                    compiles=len(frame.compiles),
                ),
                evidence=evidence,
                notes=list(notes),
            )
            if target is None or target.why_not:
                finding.safety = Safety.NONE
                finding.notes.insert(0, target.why_not if target else f"`{source_expr}` is not an argument of the call")
                findings.append(finding)
                break  # one explanation per frame is enough
            self._locate(finding, target, dims, mark, strided, project)
            findings.append(finding)
        return findings

    def _locate(
        self, finding: Finding, target: "_Target", dims: list[int], mark: str, strided: bool, project: Project
    ) -> None:
        site = finding.location
        source = project.source(site.file)
        call = source.call_at(site.line, site.col, site.end_line, site.end_col) if source else None
        if call is None:
            finding.safety = Safety.NONE
            finding.notes.insert(0, f"no call found at {site.file}:{site.line}")
            return
        arg, why_not = target.argument_of(call)
        statement, why_not_statement = source.statement_of(call)
        why_not = why_not or why_not_statement
        if why_not:
            finding.safety = Safety.NONE
            finding.notes.insert(0, why_not)
            return
        pos = source.positions[call]
        finding.location = Location(
            file=site.file,
            line=pos.start.line,
            end_line=pos.end.line,
            col=pos.start.column,
            end_col=pos.end.column,
            function=site.function,
        )
        finding.params = {
            "call": [pos.start.line, pos.start.column, pos.end.line, pos.end.column],
            "param": target.param,
            "keyword": target.keyword_of(call),
            "index": target.index,
            "dims": dims,
            "mark": mark,
            "contiguous": strided,
        }
        if strided and isinstance(arg.value, cst.Name) and _used_elsewhere(source, call, arg.value.value):
            finding.safety = Safety.UNSAFE
            finding.notes.append(
                f"the fix passes a contiguous copy of `{arg.value.value}`, which the code uses "
                "again: an in-place write to it after the call would no longer reach the tensor "
                "it was sliced from"
            )
        if not isinstance(arg.value, cst.Name) and _runs_before(source, statement, call, arg):
            finding.safety = Safety.UNSAFE
            finding.notes.append(
                "binding the argument to a name moves its evaluation before other calls in the statement"
            )

    @staticmethod
    def _remaining_recompiles(
        frame: Frame, source_expr: str, small_sizes: bool, unbacked: bool, release: tuple[int, int] | None
    ) -> list[str]:
        notes = []
        reasons = [r for r in frame.reasons() if r.source == source_expr]
        if small_sizes:
            # Suggest only what the Profile's torch has.
            ways = ["start with a larger size"]
            if unbacked:
                ways.append(
                    "try `torch._dynamo.decorators.mark_unbacked` instead (it graph-breaks wherever the "
                    "compiled code needs a concrete size, e.g. scaled_dot_product_attention: check with "
                    "`recompile-fix verify`)"
                )
            if BACKED_SIZE_OBLIVIOUS.runs_on(release):
                ways.append(f"set {BACKED_SIZE_OBLIVIOUS.name} = True")
            notes.append(
                "torch will still recompile once: the Profile saw size 0 or 1, which torch "
                "specialises even when marked (0/1 specialisation); " + ", or ".join(ways)
            )
        if any(r.kind == "stride_mismatch" for r in reasons):
            notes.append(
                f"a stride guard on `{source_expr}`: it is a view whose strides change (e.g. a crop "
                "`x[:, -n:]`), so the fix passes a copy made with "
                "`.clone(memory_format=torch.contiguous_format)` (`.contiguous()` would keep a size-1 "
                "dimension's stride)"
            )
        return notes

    # -- rewriting ---------------------------------------------------------------------
    def fix(self, finding: Finding, source: SourceFile, torch_name: str) -> list[Edit]:
        p = finding.params
        call = next(
            n
            for n in source.nodes(cst.Call)
            if [
                source.positions[n].start.line,
                source.positions[n].start.column,
                source.positions[n].end.line,
                source.positions[n].end.column,
            ]
            == p["call"]
        )
        arg = _argument(call, p["keyword"], p["index"])
        statement, _ = source.statement_of(call)
        indent = source.statement_indent(statement)
        at = source.offset(source.positions[statement].start.line, 0)
        dims = p["dims"][0] if len(p["dims"]) == 1 else p["dims"]
        edits = []
        clone = f".clone(memory_format={torch_name}.contiguous_format)" if p.get("contiguous") else ""
        if isinstance(arg.value, cst.Name):
            name = arg.value.value
            if clone:
                # Where the statement before binds the name (`idx_cond = idx[:, -n:]`), copy there;
                # else in a statement of its own.
                binding = _binding_before(source, statement, name)
                if binding is not None:
                    end = source.span(binding)[1]
                    edits.append(Edit(finding.file, end, end, clone, self.id))
                else:
                    edits.append(Edit(finding.file, at, at, _indented(f"{name} = {name}{clone}", indent), self.id))
        else:
            name = _fresh_name(p["param"], source.names_in_scope(call))
            value = source.code(arg.value)
            if clone and not _atomic(arg.value):
                value = f"({value})"
            edits.append(Edit(finding.file, at, at, _indented(f"{name} = {value}{clone}", indent), self.id))
            start, end = source.span(arg.value)
            edits.append(Edit(finding.file, start, end, name, self.id))
        mark = f"{torch_name}._dynamo.{p['mark']}({name}, {dims})"
        edits.append(Edit(finding.file, at, at, _indented(mark, indent), self.id))
        return edits


class _Target:
    """The compiled frame's parameter that a guard's source names, and how calls pass it."""

    def __init__(
        self, param: str, index: int | None, keyword_only: bool, body: cst.CSTNode | None, why_not: str | None = None
    ):
        self.param, self.index, self.keyword_only, self.body, self.why_not = param, index, keyword_only, body, why_not

    @classmethod
    def resolve(cls, frame: Frame, source_expr: str, project: Project) -> "_Target | None":
        if is_resume(frame.name):
            return cls(
                source_expr,
                None,
                False,
                None,
                f"`{source_expr}` is a local of the code after a graph break, not an argument",
            )
        if source_expr.startswith("args[") and source_expr.endswith("]") and source_expr[5:-1].isdigit():
            # A compiled builtin module (nn.Sequential): torch's wrapper takes *args.
            return cls(
                f"input{source_expr[5:-1]}" if source_expr != "args[0]" else "x", int(source_expr[5:-1]), False, None
            )
        if not source_expr.isidentifier():
            return cls(source_expr, None, False, None, f"`{source_expr}` is not a plain argument of `{frame.name}`")
        file = project.source(frame.file)
        func = file.function_def(frame.first_line, frame.name) if file else None
        if func is None:
            return cls(source_expr, None, False, None, f"cannot read the source of `{frame.name}`")
        params = func.params
        positional = [p.name.value for p in (*params.posonly_params, *params.params)]
        if file.enclosing_class(func) is not None and not _is_static(func):
            positional = positional[1:]  # `self` is bound by the call
        if source_expr in positional:
            return cls(source_expr, positional.index(source_expr), False, func.body)
        if source_expr in [p.name.value for p in params.kwonly_params]:
            return cls(source_expr, None, True, func.body)
        return cls(source_expr, None, False, None, f"`{source_expr}` is not a parameter of `{frame.name}`")

    def argument_of(self, call: cst.Call) -> tuple[cst.Arg | None, str | None]:
        if any(a.star for a in call.args):
            return None, "the call passes *args or **kwargs"
        arg = _argument(call, self.param, self.index)
        if arg is None:
            return None, f"the call does not pass `{self.param}`"
        return arg, None

    def keyword_of(self, call: cst.Call) -> str | None:
        return self.param if any(a.keyword and a.keyword.value == self.param for a in call.args) else None

    def calls_nothing(self) -> bool:
        """Is the compiled body plain operators on its values (``x + c``), with no call into code
        that might need a concrete size?"""
        return self.body is not None and not any(isinstance(n, cst.Call) for n in walk(self.body))

    def specialized(self, dims: list[int]) -> bool:
        """Does the compiled body compare this dimension for equality, or loop over it?
        Then a hard mark would raise ConstraintViolationError."""
        if self.body is None:
            return True  # torch's own wrapper: we cannot see the code, so do not assert
        found = False
        param, wanted = self.param, set(dims)

        def size_dim(node) -> int | None:
            # x.shape[d] / x.size()[d]
            if isinstance(node, cst.Subscript) and len(node.slice) == 1:
                index = node.slice[0].slice
                value = node.value
                if isinstance(index, cst.Index) and isinstance(index.value, cst.Integer):
                    if (
                        isinstance(value, cst.Attribute) and value.attr.value == "shape" and is_name(value.value, param)
                    ) or (isinstance(value, cst.Call) and _is_method(value, param, "size") and not value.args):
                        return index.value.evaluated_value
            # x.size(d)
            if (
                isinstance(node, cst.Call)
                and _is_method(node, param, "size")
                and len(node.args) == 1
                and isinstance(node.args[0].value, cst.Integer)
            ):
                return node.args[0].value.evaluated_value
            # len(x)
            if (
                isinstance(node, cst.Call)
                and is_name(node.func, "len")
                and len(node.args) == 1
                and is_name(node.args[0].value, param)
            ):
                return 0
            return None

        class Finder(cst.CSTVisitor):
            def visit_Comparison(self, node: cst.Comparison) -> None:
                nonlocal found
                if any(isinstance(c.operator, (cst.Equal, cst.NotEqual)) for c in node.comparisons):
                    found |= _contains(node, lambda n: size_dim(n) in wanted)

            def visit_Call(self, node: cst.Call) -> None:
                nonlocal found
                if is_name(node.func, "range"):
                    found |= _contains(node, lambda n: size_dim(n) in wanted)

        self.body.visit(Finder())
        return found


def _merge_same_argument(findings: list[Finding]) -> list[Finding]:
    """One mark per argument of a call. Several compiled frames can see the same tensor through
    one call: a compiled DDP or other torch wrapper (`inner(*args)`) and the user's `forward`
    under it. Their findings merge; ``maybe_mark_dynamic`` wins when either frame needs it."""
    merged: list[Finding] = []
    by_argument: dict[tuple, Finding] = {}
    for finding in findings:
        p = finding.params
        if not p.get("call"):
            merged.append(finding)
            continue
        key = (finding.file, tuple(p["call"]), p.get("keyword"), p.get("index"))
        first = by_argument.get(key)
        if first is None:
            by_argument[key] = finding
            merged.append(finding)
            continue
        q = first.params
        q["dims"] = sorted(set(q["dims"]) | set(p["dims"]))
        q["contiguous"] = bool(q.get("contiguous") or p.get("contiguous"))
        if "maybe_mark_dynamic" in (p["mark"], q["mark"]):
            q["mark"] = "maybe_mark_dynamic"
        elif "decorators.mark_unbacked" in (p["mark"], q["mark"]):
            q["mark"] = "decorators.mark_unbacked"
        if finding.safety is Safety.UNSAFE:
            first.safety = Safety.UNSAFE
        first.evidence.setdefault("also_frames", []).append(finding.evidence.get("frame"))
        first.notes.extend(n for n in finding.notes if n not in first.notes)
    return merged


def _small_sizes_seen(frame: Frame, source_expr: str, dims: list[int]) -> bool:
    """Did this argument have size 0 or 1 in a marked dimension (which torch specialises even
    when the dimension is marked dynamic)?"""
    for reason in frame.reasons():
        if reason.source == source_expr and (
            reason.kind == "size_specialization" or (reason.kind == "size_mismatch" and reason.expected in (0, 1))
        ):
            return True
    return any(d < len(shape) and shape[d] in (0, 1) for shape in frame.shapes(source_expr) for d in dims)


def _changed_dims(frame: Frame, source_expr: str) -> set[int]:
    """Dimensions of an argument whose size differed between compiles (the guard text names
    only the first one that failed)."""
    shapes = frame.shapes(source_expr)
    changed: set[int] = set()
    for shape in shapes[1:]:
        if len(shape) == len(shapes[0]):
            changed |= {d for d, (a, b) in enumerate(zip(shapes[0], shape)) if a != b}
    return changed


def _contains(root: cst.CSTNode, predicate) -> bool:
    hit = False

    class Walk(cst.CSTVisitor):
        def on_visit(self, node: cst.CSTNode) -> bool:
            nonlocal hit
            if predicate(node):
                hit = True
            return not hit

    root.visit(Walk())
    return hit


def _is_method(call: cst.Call, owner: str, method: str) -> bool:
    return isinstance(call.func, cst.Attribute) and call.func.attr.value == method and is_name(call.func.value, owner)


def _is_static(func: cst.FunctionDef) -> bool:
    return any(is_name(d.decorator, "staticmethod") for d in func.decorators)


def _argument(call: cst.Call, keyword: str | None, index: int | None) -> cst.Arg | None:
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == keyword:
            return arg
    positional = [a for a in call.args if a.keyword is None and not a.star]
    if index is not None and index < len(positional):
        return positional[index]
    return None


def _runs_before(source: SourceFile, statement, call: cst.Call, arg: cst.Arg) -> bool:
    """Does any other call in the statement run before ``arg`` is evaluated?"""
    arg_start = source.span(arg)[0]
    inside_arg = set()

    class Mark(cst.CSTVisitor):
        def on_visit(self, node):
            inside_arg.add(id(node))
            return True

    arg.visit(Mark())
    for node in source.nodes(cst.Call):
        if node is call or id(node) in inside_arg:
            continue
        start = source.span(node)[0]
        if start < arg_start and source.span(statement)[0] <= start:
            if call in set(source.ancestors(node)) and not _contains(call.func, lambda n, node=node: n is node):
                return True  # an earlier argument of the same call
            if call not in set(source.ancestors(node)) and node not in set(source.ancestors(call)):
                return True
    return False


def _atomic(node: cst.BaseExpression) -> bool:
    """Can ``.clone(...)`` be appended to this expression's text without parentheses?"""
    return isinstance(node, (cst.Name, cst.Attribute, cst.Subscript, cst.Call)) and not node.lpar


def _binding_before(source: SourceFile, statement, name: str) -> cst.BaseExpression | None:
    """The value of ``name = value`` when that is the statement right before ``statement`` in
    the same block, and the value takes ``.clone(...)`` as it is."""
    block = source.parents.get(statement)
    body = list(getattr(block, "body", ()))
    index = next((i for i, s in enumerate(body) if s is statement), 0)
    if index == 0 or not isinstance(body[index - 1], cst.SimpleStatementLine):
        return None
    (small, *rest) = body[index - 1].body
    if (
        rest
        or not isinstance(small, cst.Assign)
        or len(small.targets) != 1
        or not is_name(small.targets[0].target, name)
    ):
        return None
    return small.value if _atomic(small.value) else None


def _used_elsewhere(source: SourceFile, call: cst.Call, name: str) -> bool:
    """Is ``name`` read anywhere in the function around ``call`` other than as its argument?"""
    scope = next((a for a in source.ancestors(call) if isinstance(a, cst.FunctionDef)), source.module)
    in_call = {id(n) for n in walk(call)}
    bound = set()
    for node in walk(scope):
        if isinstance(node, cst.AssignTarget) and is_name(node.target, name):
            bound.add(id(node.target))
    return any(is_name(n, name) and id(n) not in in_call and id(n) not in bound for n in walk(scope))


def _fresh_name(base: str, taken: set[str]) -> str:
    if base not in taken:
        return base
    n = 1
    while f"{base}_{n}" in taken:
        n += 1
    return f"{base}_{n}"


def _indented(statement: str, indent: str) -> str:
    return "".join(indent + line + "\n" for line in format_statement(statement, len(indent)).splitlines())


RULE = MarkDynamic()
