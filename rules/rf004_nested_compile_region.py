"""RF004 nested-compile-region: a stack of identical blocks is compiled once per block."""

from __future__ import annotations

import dataclasses
import os
import re
from dataclasses import dataclass, field

import libcst as cst

from recompile_fix.edits import Edit
from recompile_fix.findings import Finding, Safety
from recompile_fix.profile import Frame, Location, Profile
from recompile_fix.rule import Example, Project, Rule
from recompile_fix.source import SourceFile, dotted_name

RESUME_PREFIX = "torch_dynamo_resume_in_"
MIN_TORCH = (2, 8)  # torch.compiler.nested_compile_region is public from 2.8
MIN_BLOCKS = 4  # below this the saving (about one block's compile per block) is not worth a region
DECORATOR = "compiler.nested_compile_region"


class NestedCompileRegion(Rule):
    """
    ## What it does
    Finds a stack of identical blocks (an `nn.ModuleList` or `nn.Sequential` of instances of
    one class, run one after another in `forward`) and decorates the block class's `forward`,
    in the class body, with `@torch.compiler.nested_compile_region`. Where the blocks are passed
    to a per-layer function of the same file, that function is decorated instead.

    ## Why is this bad?
    `torch.compile(model)` inlines every block into the model's graph, and the backend lowers
    and compiles each copy on its own: nothing recompiles, but the cold compile grows with the
    depth of the model. With the decorator the block is traced and compiled once and every
    layer reuses it. On a 12-block transformer (CPU, inductor, cold caches) the compile took
    22.8 s, 15.2 s with the decorator, and 14.9 s for a model of one block.

    ## Example
    ```python
    class Block(nn.Module):
        def forward(self, x):
            return x + self.mlp(self.norm(x))
    ```
    Use instead:
    ```python
    class Block(nn.Module):
        @torch.compiler.nested_compile_region
        def forward(self, x):
            return x + self.mlp(self.norm(x))
    ```

    ## Fix safety
    A graph break inside the region is an error, even without `fullgraph`, so the fix is safe
    only when the block's `forward` (and what it calls in the same file) can be traced whole.
    No fix, with the reason, when the block calls `print()`, a logger or `warnings.warn`, reads
    a tensor into Python (`.item()`, `.tolist()`), branches on a tensor's value, returns its
    input or a view of it, or the Profile recorded a graph break inside it; when it mutates a
    buffer or an input in place (BatchNorm's running statistics) and the program trains
    (`.backward()`), which the region rejects; and when the torch the Profile saw is older
    than 2.8 or unknown. Unsafe when it calls code the analysis cannot see (another file, a
    callable kept in an attribute or a variable), when it mutates in place and no training was
    seen, and whenever the program trains (`.backward()`): in torch 2.13 inductor's buffer reuse
    can corrupt the gradients of a reused region (measured; pytorch/pytorch#193960), and with
    `backend="eager"` backward through the region fails. Inference-only programs get exactly the
    same outputs. The decorator goes on `def forward` in the class body: on an instance's bound
    method it raises, on the class it silently does nothing.

    ## Profile evidence
    No guard failure: the frame that inlines the blocks (e.g. `forward` of the model) compiles
    once, and its compile seconds grow with the number of blocks. The rule confirms the loop
    over the blocks in that frame's file and that no block was compiled as a frame of its own.
    Without a Profile (static mode) the loop alone, with confidence "static".
    """

    id = "RF004"
    name = "nested-compile-region"
    message = "`{container}` runs {count} `{block}` blocks {where}: compile `{target}` once with nested_compile_region"
    # No guard failure drives this rule: its evidence is the compile seconds of the frame that
    # inlines the blocks.
    consumes = ("compile_seconds",)
    triggers = ("ModuleList", "Sequential")
    examples = (
        Example(
            before="class Block(nn.Module):\n    def forward(self, x):\n        return x + self.mlp(x)\n",
            after="class Block(nn.Module):\n    @torch.compiler.nested_compile_region\n"
                  "    def forward(self, x):\n        return x + self.mlp(x)\n",
        ),
    )

    # -- planning ----------------------------------------------------------------------
    def plan(self, profile: Profile, project: Project) -> list[Finding]:
        findings: dict[tuple[str, str], Finding] = {}
        version_problem = _version_problem(profile.torch_version, "the Profile")
        training = None
        for frame in sorted(profile.frames, key=lambda f: -f.compile_seconds):
            if frame.name.startswith(RESUME_PREFIX) or os.path.isabs(frame.file):
                continue  # a resume function, or a file outside the project (torch's, a library's)
            source = project.source(frame.file)
            func = source.function_def(frame.first_line, frame.name) if source else None
            if func is None:
                continue
            analysis = _Analysis(source)
            for site in analysis.reachable_sites(func):
                key = (frame.file, site.target_key)
                if key in findings:
                    continue
                if training is None:
                    training = _training_evidence(project, [p for p in profile.sources if not os.path.isabs(p)])
                finding = self._finding(analysis, site, frame.file, version_problem, training, frame, profile)
                if finding is not None and _compiled_on_its_own(profile, frame.file, analysis, site):
                    # Not inlined: a graph break in it (said above, when the Profile saw it), or
                    # regional compilation. The decorator would not help; say so (this also
                    # overrides what static mode would plan for it).
                    finding.safety = Safety.NONE
                    finding.notes.insert(0, f"`{finding.params['function']}` is compiled as a frame of its own "
                                            "(a graph break around it, or regional compilation): it is not "
                                            "inlined into the model's graph")
                if finding is not None:
                    findings[key] = finding
        return list(findings.values())

    def plan_static(self, source: SourceFile, path: str) -> list[Finding]:
        version_problem = _version_problem(_installed_torch(), "this environment")
        analysis = _Analysis(source)
        training = _training_in(source, path)
        findings: dict[str, Finding] = {}
        for site in analysis.sites():
            if site.target_key in findings:
                continue
            finding = self._finding(analysis, site, path, version_problem, training, None, None)
            if finding is not None:
                finding.confidence = "static"
                findings[site.target_key] = finding
        return list(findings.values())

    def _finding(self, analysis: "_Analysis", site: "_Site", path: str, version_problem: str | None,
                 training: str | None, frame: Frame | None, profile: Profile | None) -> Finding | None:
        if site.count is not None and site.count < MIN_BLOCKS:
            return None
        target = analysis.target_function(site)
        if target is None or _already_marked(target):
            return None
        verdict = analysis.check(site)
        pos = analysis.source.positions[target]
        location = Location(file=path, line=pos.start.line, end_line=pos.start.line, col=pos.start.column,
                            end_col=pos.start.column + 3, function=target.name.value)
        target_name = f"{site.block}.forward" if site.function is None else site.function
        count = str(site.count) if site.count is not None else "its"
        where = (f"inline in compiled `{frame.name}` ({frame.compile_seconds:.2f} s compiling)"
                 if frame is not None else "one after another")
        evidence = {"container": f"{site.owner}.{site.attr}", "blocks": site.count, "block": site.block,
                    "loop_line": site.line}
        if frame is not None:
            evidence.update({"frame": f"{frame.name} ({frame.file}:{frame.first_line})",
                             "compiles": len(frame.compiles), "compile_seconds": round(frame.compile_seconds, 3),
                             "graph_breaks": sum(b.count for b in frame.graph_breaks)})
            _attribute_graph_breaks(profile, frame, path, verdict)
        finding = Finding(
            rule=self.id, file=path, location=location, safety=Safety.SAFE,
            message=self.message.format(container=f"{site.owner}.{site.attr}", count=count, block=site.block,
                                        where=where, target=target_name),
            params={"class": site.block if site.function is None else None, "function": target.name.value,
                    "line": pos.start.line},
            evidence=evidence,
        )
        blockers = list(verdict.hard)
        risks = list(verdict.unseen) + list(verdict.risks)
        if version_problem:
            blockers.insert(0, version_problem)
        if verdict.mutations:
            if training:
                blockers.extend(f"{m}; the program trains ({training}), and nested_compile_region rejects "
                                "in-place input or buffer mutation in training (RuntimeError)"
                                for m in verdict.mutations)
            else:
                risks.extend(f"{m}; nested_compile_region rejects that in training (RuntimeError), and "
                             "no `.backward()` was seen, so the model may be used for inference only"
                             for m in verdict.mutations)
        if training:
            risks.append(f"the program trains ({training}): with inductor, torch 2.13 can corrupt the gradients "
                         "of a reused region (measured: a 2-block model whose first block follows an embedding "
                         "and whose last feeds a LayerNorm got LayerNorm weight gradients 50% off; inductor's "
                         "buffer reuse writes over a saved input, pytorch/pytorch#193960; the forward is exact). "
                         "Check the gradients against eager, or set "
                         "torch._inductor.config.allow_buffer_reuse = False, which avoids it")
        eager = analysis.eager_backend_line()
        if eager and training:
            risks.append(f"the file compiles with backend=\"eager\" (line {eager}) and the program trains: "
                         "in torch 2.13 backward through the region fails with that backend "
                         "(AssertionError: fake_mode should be enabled for HOPs); aot_eager and inductor work")
        if blockers:
            finding.safety = Safety.NONE
            finding.notes = blockers + risks
        elif risks:
            finding.safety = Safety.UNSAFE
            finding.notes = risks
        if site.count is None:
            finding.notes.append("the number of blocks is not a constant in the source")
        return finding

    # -- rewriting ---------------------------------------------------------------------
    def fix(self, finding: Finding, source: SourceFile, torch_name: str) -> list[Edit]:
        p = finding.params
        func = next(n for n in source.nodes(cst.FunctionDef)
                    if n.name.value == p["function"] and source.positions[n].start.line == p["line"]
                    and _class_name(source.enclosing_class(n)) == p["class"])
        if _already_marked(func):
            return []
        pos = source.positions[func]
        indent = source.lines[pos.start.line - 1][: pos.start.column]
        at = source.offset(pos.start.line, 0)
        return [Edit(finding.file, at, at, f"{indent}@{torch_name}.{DECORATOR}\n", self.id)]


# -- finding the blocks ----------------------------------------------------------------------
@dataclass
class _Site:
    """A container of identical blocks that a module runs in sequence."""

    owner: str  # the class whose __init__ builds the container
    attr: str  # self.<attr>
    block: str  # the blocks' class
    count: int | None  # how many, when the source says
    line: int  # the loop (or the Sequential call) that runs them
    function: str | None = None  # a per-layer function of the file the blocks are passed to
    module_param: str | None = None  # the parameter of that function that receives the block

    @property
    def target_key(self) -> str:
        return self.function or self.block


@dataclass
class _Verdict:
    hard: list[str] = field(default_factory=list)  # certain errors inside the region: no fix
    mutations: list[str] = field(default_factory=list)  # in-place input / buffer mutation
    unseen: list[str] = field(default_factory=list)  # calls the analysis cannot follow
    risks: list[str] = field(default_factory=list)
    spans: list[tuple[int, int]] = field(default_factory=list)  # lines of the code analysed

    def add(self, bucket: list[str], text: str) -> None:
        if text not in bucket and len(bucket) < 6:
            bucket.append(text)


_SAFE_BUILTINS = {
    "len", "range", "isinstance", "issubclass", "tuple", "list", "dict", "set", "int", "float", "bool",
    "str", "min", "max", "abs", "getattr", "hasattr", "setattr", "zip", "enumerate", "super", "type",
    "reversed", "sorted", "slice", "divmod", "round", "map", "filter", "callable", "id", "iter", "next",
}
_BREAKING_BUILTINS = {"print", "input", "breakpoint", "exec", "eval", "open"}
_BREAKING_MODULES = {"logging", "warnings", "pdb"}  # verified: a graph break in the region
_SAFE_MODULES = {"math", "operator"}
_VALUE_READS = {"item", "tolist", "numpy"}
_REDUCTIONS = {"any", "all", "sum", "max", "min", "mean", "item", "norm", "nonzero", "equal", "allclose",
               "count_nonzero", "prod", "std", "var", "amax", "amin", "argmax", "argmin"}
_VIEWS = {"view", "view_as", "reshape", "reshape_as", "transpose", "permute", "expand", "expand_as",
          "squeeze", "unsqueeze", "flatten", "unflatten", "t", "narrow", "detach", "as_strided", "select",
          "diagonal", "movedim", "swapaxes", "swapdims", "split", "chunk", "unbind", "contiguous", "T", "mT"}
_BATCHNORMS = {"BatchNorm1d", "BatchNorm2d", "BatchNorm3d", "SyncBatchNorm", "LazyBatchNorm1d",
               "LazyBatchNorm2d", "LazyBatchNorm3d"}
_INSTANCENORMS = {"InstanceNorm1d", "InstanceNorm2d", "InstanceNorm3d"}
_NON_TENSOR_ANNOTATIONS = re.compile(r"^(int|float|bool|str|bytes)(\s*\|\s*None)?$|^Optional\[(int|float|bool|str)\]$")


class _Analysis:
    """What one file says about its modules: containers of blocks, submodules, and whether a
    block's forward can be traced whole."""

    def __init__(self, source: SourceFile):
        self.source = source
        self.tree = _Tree(source.module)
        body = source.module.body
        self.classes = {s.name.value: s for s in body if isinstance(s, cst.ClassDef)}
        self.functions = {s.name.value: s for s in body if isinstance(s, cst.FunctionDef)}
        self.constants: dict[str, int] = {}
        self.torch_names: set[str] = set()  # names bound to torch or something imported from it
        self.imports: dict[str, str] = {}  # other imported names -> module
        self.globals: set[str] = set()  # other module-level names (not classes or functions)
        self.loggers: set[str] = set()
        for statement in body:
            if not isinstance(statement, cst.SimpleStatementLine):
                continue
            for small in statement.body:
                self._read_top_level(small)
        self._members: dict[str, dict] = {}

    def _read_top_level(self, small: cst.BaseSmallStatement) -> None:
        if isinstance(small, cst.Import):
            for alias in small.names:
                name = dotted_name(alias.name)
                self._imported(alias.asname.name.value if alias.asname else name.split(".")[0], name)
        elif isinstance(small, cst.ImportFrom) and not isinstance(small.names, cst.ImportStar):
            module = dotted_name(small.module) if small.module else ""
            for alias in small.names:
                name = dotted_name(alias.name)
                self._imported(alias.asname.name.value if alias.asname else name, f"{module}.{name}")
        elif isinstance(small, (cst.Assign, cst.AnnAssign)):
            targets = [t.target for t in small.targets] if isinstance(small, cst.Assign) else [small.target]
            for target in targets:
                if not isinstance(target, cst.Name):
                    continue
                self.globals.add(target.value)
                if isinstance(small.value, cst.Integer):
                    self.constants[target.value] = small.value.evaluated_value
                if isinstance(small.value, cst.Call) and dotted_name(small.value.func).endswith("getLogger"):
                    self.loggers.add(target.value)

    def _imported(self, bound: str, what: str) -> None:
        if what.split(".")[0] == "torch":
            self.torch_names.add(bound)
        else:
            self.imports[bound] = what

    # -- classes ----------------------------------------------------------------------
    def methods(self, class_name: str) -> dict[str, cst.FunctionDef]:
        cls_ = self.classes.get(class_name)
        if cls_ is None or not isinstance(cls_.body, cst.IndentedBlock):
            return {}
        return {s.name.value: s for s in cls_.body.body if isinstance(s, cst.FunctionDef)}

    def members(self, class_name: str) -> dict:
        """``self.x = ...`` in ``__init__``: submodules (kind, detail), parameters and buffers."""
        if class_name in self._members:
            return self._members[class_name]
        info = {"modules": {}, "tensors": set(), "buffers": set(), "containers": {}}
        self._members[class_name] = info
        init = self.methods(class_name).get("__init__")
        if init is None:
            return info
        for node in self.tree.walk(init, skip_defs=True):
            if isinstance(node, (cst.Assign, cst.AnnAssign)) and node.value is not None:
                targets = [t.target for t in node.targets] if isinstance(node, cst.Assign) else [node.target]
                for target in targets:
                    attr = _self_attr(target)
                    if attr is not None:
                        self._member(info, attr, node.value)
            elif isinstance(node, cst.Call):
                name = dotted_name(node.func)
                if name == "self.register_buffer" and node.args and isinstance(node.args[0].value, cst.SimpleString):
                    info["buffers"].add(node.args[0].value.evaluated_value)
                    info["tensors"].add(node.args[0].value.evaluated_value)
                elif name.startswith("self.") and name.endswith(".append") and name.count(".") == 2 and node.args:
                    attr = name.split(".")[1]
                    block = self._block_of(node.args[0].value)
                    if attr in info["containers"] and block is not None:
                        info["containers"][attr][1].add(block)
                        info["containers"][attr][2] = _loop_count(self, node, init)
        return info

    def _member(self, info: dict, attr: str, value: cst.BaseExpression) -> None:
        if not isinstance(value, cst.Call):
            info["modules"][attr] = ("unknown", self.source.code(value))
            return
        name = dotted_name(value.func)
        last = name.rsplit(".", 1)[-1]
        root = name.split(".")[0]
        if last in ("Parameter", "tensor", "zeros", "ones", "randn", "empty", "full", "arange") and root in self.torch_names:
            info["tensors"].add(attr)
        elif last in ("ModuleList", "Sequential") and root in self.torch_names:
            blocks, count = self._elements(value)
            info["containers"][attr] = [last, blocks, count]
            info["modules"][attr] = ("container", blocks)
        elif root in self.torch_names:
            tracks = last in _BATCHNORMS or (last in _INSTANCENORMS and any(
                a.keyword and a.keyword.value == "track_running_stats" and dotted_name(a.value) == "True"
                for a in value.args))
            info["modules"][attr] = ("torch", (last, tracks))
        elif name in self.classes:
            info["modules"][attr] = ("class", name)
        else:
            info["modules"][attr] = ("unknown", self.source.code(value.func))

    def _block_of(self, expr: cst.BaseExpression) -> str | None:
        if isinstance(expr, cst.Call):
            name = dotted_name(expr.func)
            return name or None
        return None

    def _elements(self, call: cst.Call) -> tuple[set[str], int | None]:
        """The classes a ModuleList / Sequential is built from, and how many, when the source says."""
        blocks: set[str] = set()
        count: int | None = 0
        for arg in call.args:
            if arg.keyword is not None:
                continue
            value = arg.value
            if isinstance(value, (cst.GeneratorExp, cst.ListComp)):
                block = self._block_of(value.elt)
                blocks.add(block or "?")
                n = _range_count(self, value.for_in)
                count = None if (count is None or n is None) else count + n
            elif isinstance(value, (cst.List, cst.Tuple)):
                for element in value.elements:
                    blocks.add(self._block_of(element.value) or "?")
                count = None if count is None else count + len(value.elements)
            else:
                blocks.add(self._block_of(value) or "?")
                count = None if count is None else count + 1
        return blocks, count

    # -- sites ------------------------------------------------------------------------
    def sites(self) -> list[_Site]:
        found = []
        for class_name in self.classes:
            found.extend(self._class_sites(class_name))
        return found

    def _class_sites(self, class_name: str) -> list[_Site]:
        containers = self.members(class_name)["containers"]
        found = []
        for method in self.methods(class_name).values():
            if method.name.value == "__init__":
                continue
            for node in self.tree.walk(method):
                site = None
                if isinstance(node, cst.For):
                    site = self._loop_site(class_name, containers, node)
                elif isinstance(node, cst.Call):
                    attr = _self_attr(node.func)
                    if attr in containers and containers[attr][0] == "Sequential":
                        site = self._site(class_name, attr, containers[attr], node, None)
                if site is not None:
                    found.append(site)
        return found

    def _loop_site(self, class_name: str, containers: dict, loop: cst.For) -> _Site | None:
        iterable, target = loop.iter, loop.target
        if isinstance(iterable, cst.Call) and dotted_name(iterable.func) == "enumerate" and iterable.args:
            iterable = iterable.args[0].value
            if isinstance(target, cst.Tuple) and len(target.elements) == 2:
                target = target.elements[1].value
        if isinstance(iterable, cst.Subscript):
            iterable = iterable.value
        attr = _self_attr(iterable)
        if attr not in containers or not isinstance(target, cst.Name):
            return None
        var = target.value
        per_layer = None
        for call in self.tree.walk(loop.body):
            if not isinstance(call, cst.Call):
                continue
            if isinstance(call.func, cst.Name) and call.func.value == var:
                return self._site(class_name, attr, containers[attr], loop, None)
            if isinstance(call.func, cst.Name) and call.func.value in self.functions and per_layer is None:
                param = _parameter_receiving(self.functions[call.func.value], call, var)
                if param is not None:
                    per_layer = (call.func.value, param)
        if per_layer is not None:
            return self._site(class_name, attr, containers[attr], loop, *per_layer)
        return None

    def _site(self, class_name: str, attr: str, container, node: cst.CSTNode, function: str | None,
              module_param: str | None = None):
        _, blocks, count = container
        if len(blocks) != 1:
            return None
        (block,) = blocks
        if block not in self.classes and function is None:
            return None  # torch's own or another file's class: not ours to decorate here
        return _Site(owner=class_name, attr=attr, block=block, count=count,
                     line=self.source.positions[node].start.line, function=function, module_param=module_param)

    def reachable_sites(self, func: cst.FunctionDef) -> list[_Site]:
        """Sites whose blocks a compiled frame ``func`` inlines: in its class or a submodule's
        (transitively), or in the class of a module-level object the function uses."""
        owner = self.tree.enclosing_class(func)
        start: set[str] = set()
        if owner is not None:
            start.add(owner.name.value)
        else:
            used = {n.value for n in self.tree.walk(func.body) if isinstance(n, cst.Name)}
            start |= self._instances_named(used)
        reachable, todo = set(), list(start)
        while todo:
            name = todo.pop()
            if name in reachable or name not in self.classes:
                continue
            reachable.add(name)
            for kind, detail in self.members(name)["modules"].values():
                if kind == "class":
                    todo.append(detail)
                elif kind == "container":
                    todo.extend(detail)
        return [s for s in self.sites() if s.owner in reachable]

    def _instances_named(self, names: set[str]) -> set[str]:
        """Classes of this file instantiated into one of ``names`` (``model = Net().eval()``)."""
        classes = set()
        for node in self.tree.walk(self.source.module):
            if isinstance(node, cst.Assign) and any(isinstance(t.target, cst.Name) and t.target.value in names
                                                    for t in node.targets):
                value = node.value
                while isinstance(value, cst.Call):
                    if isinstance(value.func, cst.Name) and value.func.value in self.classes:
                        classes.add(value.func.value)
                        break
                    value = value.func.value if isinstance(value.func, cst.Attribute) else None
        return classes

    def target_function(self, site: _Site) -> cst.FunctionDef | None:
        if site.function is not None:
            return self.functions.get(site.function)
        return self.methods(site.block).get("forward")

    def eager_backend_line(self) -> int | None:
        for node in self.tree.walk(self.source.module):
            if isinstance(node, cst.Call) and dotted_name(node.func).endswith("compile"):
                for arg in node.args:
                    if arg.keyword and arg.keyword.value == "backend" and isinstance(arg.value, cst.SimpleString) \
                            and arg.value.evaluated_value == "eager":
                        return self.source.positions[node].start.line
        return None

    # -- can the block be traced whole? -------------------------------------------------
    def check(self, site: _Site) -> _Verdict:
        verdict = _Verdict()
        target = self.target_function(site)
        if site.function is None:
            _Walker(self, verdict, site.block, target, top=True, seen=set()).run()
        else:
            modules = {site.module_param: site.block}
            _Walker(self, verdict, None, target, top=True, seen=set(), modules=modules).run()
        return verdict


class _Walker:
    """Walks one function (and what it calls in this file) for what would break the region."""

    def __init__(self, analysis: _Analysis, verdict: _Verdict, owner: str | None, func: cst.FunctionDef,
                 *, top: bool, seen: set, modules: dict[str, str] | None = None):
        self.a, self.verdict, self.owner, self.func, self.top, self.seen = analysis, verdict, owner, func, top, seen
        self.source = analysis.source
        self.modules = modules or {}
        params = func.params
        every = [*params.posonly_params, *params.params, *params.kwonly_params]
        if owner is not None and every and every[0].name.value == "self":
            every = every[1:]
        self.tensors = {p.name.value for p in every if _maybe_tensor(p) and p.name.value not in self.modules}
        self.bound = _binding_lines(analysis, func)

    def line(self, node: cst.CSTNode) -> int:
        return self.source.positions[node].start.line

    def where(self, node: cst.CSTNode) -> str:
        return f"line {self.line(node)}"

    def run(self) -> None:
        if id(self.func) in self.seen:
            return
        self.seen.add(id(self.func))
        pos = self.source.positions[self.func]
        self.verdict.spans.append((pos.start.line, pos.end.line))
        for node in self.a.tree.walk(self.func.body, skip_defs=True):
            if isinstance(node, cst.Call):
                self.call(node)
            elif isinstance(node, (cst.If, cst.While, cst.IfExp)):
                self.branch(node.test, node)
            elif isinstance(node, cst.Assert):
                self.branch(node.test, node)
            elif isinstance(node, cst.AugAssign):
                self.mutation(node.target, node, augmented=True)
            elif isinstance(node, cst.Assign):
                for target in node.targets:
                    if isinstance(target.target, cst.Subscript):
                        self.mutation(target.target.value, node, augmented=False)
            elif isinstance(node, cst.Return) and self.top and node.value is not None:
                self.aliasing(node.value, node)

    def fresh(self, name: str, node: cst.CSTNode) -> bool:
        """Is ``name`` still the argument the function was called with at ``node``?"""
        return name in self.tensors and not any(line < self.line(node) for line in self.bound.get(name, ()))

    # -- calls ------------------------------------------------------------------------
    def call(self, node: cst.Call) -> None:
        func, verdict = node.func, self.verdict
        name = dotted_name(func)
        if isinstance(func, cst.Name):
            self.call_name(func.value, node)
            return
        if not isinstance(func, cst.Attribute):
            verdict.add(verdict.unseen, f"calls `{self.source.code(func)}(...)` ({self.where(node)}), "
                                        "which the analysis cannot follow")
            return
        method = func.attr.value
        if isinstance(func.value, cst.Call) and dotted_name(func.value.func) == "super":
            verdict.add(verdict.unseen, f"calls `super().{method}(...)` ({self.where(node)}), which the "
                                        "analysis cannot see")
            return
        parts = name.split(".") if name and not name.startswith(".") else []
        if method in _VALUE_READS:
            verdict.add(verdict.hard, f"`.{method}()` ({self.where(node)}) reads a tensor into Python: "
                                      "a graph break, and inside the region an error")
            return
        if not parts:
            return  # a method of a computed value: a tensor op
        root = parts[0]
        if root == "self" and self.owner is not None:
            self.call_self(parts[1:], node)
        elif root in self.a.torch_names:
            if "graph_break" in parts or "breakpoint" in parts:
                verdict.add(verdict.hard, f"`{name}()` ({self.where(node)}) breaks the graph: inside the "
                                          "region an error")
        elif root in self.modules:
            self.call_instance(self.modules[root], parts[1:], node, spelled=root)
        elif root in self.a.loggers or self.a.imports.get(root, "").split(".")[0] in _BREAKING_MODULES:
            verdict.add(verdict.hard, f"`{name}()` ({self.where(node)}) is not traceable (logging, warnings, "
                                      "I/O): a graph break, and inside the region an error")
        elif self.a.imports.get(root, "").split(".")[0] in _SAFE_MODULES:
            return
        elif root in self.a.imports or root in self.a.globals or root in self.a.classes:
            verdict.add(verdict.unseen, f"calls `{name}(...)` ({self.where(node)}), defined outside what "
                                        "the analysis can see")
        else:  # a local value: a tensor method
            if root in self.tensors and _in_place(method) and self.top and self.fresh(root, node):
                verdict.add(verdict.mutations, f"`{name}()` ({self.where(node)}) mutates the input `{root}` in place")

    def call_name(self, name: str, node: cst.Call) -> None:
        verdict = self.verdict
        if name in _BREAKING_BUILTINS:
            verdict.add(verdict.hard, f"calls `{name}()` ({self.where(node)}): a graph break, and a graph "
                                      "break inside the region is an error, even without fullgraph")
        elif name in self.modules:
            self.call_instance(self.modules[name], [], node, spelled=name)
        elif name in self.a.functions:
            _Walker(self.a, verdict, None, self.a.functions[name], top=False, seen=self.seen).run()
        elif name in _SAFE_BUILTINS or name in self.a.torch_names:
            return
        elif name in self.a.imports:
            verdict.add(verdict.unseen, f"calls `{name}(...)` ({self.where(node)}), defined outside what "
                                        "the analysis can see")
        else:
            verdict.add(verdict.unseen, f"calls `{name}(...)` ({self.where(node)}), which the analysis "
                                        "cannot follow")

    def call_self(self, parts: list[str], node: cst.Call) -> None:
        self.call_instance(self.owner, parts, node, spelled="self")

    def call_instance(self, class_name: str, parts: list[str], node: cst.Call, spelled: str) -> None:
        """A call on an instance of ``class_name`` (``self.x(...)``, ``block(...)``, ``layer.mix(...)``)."""
        verdict = self.verdict
        text = ".".join([spelled, *parts])
        if class_name not in self.a.classes:
            verdict.add(verdict.unseen, f"calls `{text}(...)` ({self.where(node)}), a `{class_name}`, defined "
                                        "outside what the analysis can see")
            return
        members, methods = self.a.members(class_name), self.a.methods(class_name)
        first = parts[0] if parts else "forward"
        if len(parts) <= 1 and first in methods:
            _Walker(self.a, verdict, class_name, methods[first], top=False, seen=self.seen).run()
        elif first in members["modules"]:
            kind, detail = members["modules"][first]
            self.call_member(f"{spelled}.{first}", kind, detail, parts[1:], node)
        elif first in members["tensors"]:
            if first in members["buffers"] and len(parts) == 2 and _in_place(parts[1]):
                verdict.add(verdict.mutations, f"`{text}()` ({self.where(node)}) mutates the buffer "
                                               f"`{first}` in place")
        elif len(parts) <= 1:
            verdict.add(verdict.unseen, f"`{class_name}.{first}` ({self.where(node)}) is inherited: the "
                                        "analysis cannot see it")
        else:
            verdict.add(verdict.unseen, f"calls `{text}(...)` ({self.where(node)}), which the analysis "
                                        "cannot follow")

    def call_member(self, spelled: str, kind: str, detail, rest: list[str], node: cst.Call) -> None:
        verdict = self.verdict
        if kind == "torch":
            last, tracks = detail
            if tracks and not rest:
                verdict.add(verdict.mutations, f"`{spelled}` ({last}, {self.where(node)}) updates its "
                                               "running statistics buffers in place in training mode")
        elif kind == "class":
            self.call_instance(detail, rest, node, spelled)
        elif kind == "container" and not rest:
            for block in sorted(detail):
                if block in self.a.classes:
                    self.call_instance(block, [], node, spelled)
                elif block.split(".")[0] not in self.a.torch_names:
                    verdict.add(verdict.unseen, f"`{spelled}` holds `{block}` ({self.where(node)}), "
                                                "defined outside what the analysis can see")
        elif kind == "unknown":
            verdict.add(verdict.unseen, f"calls `{spelled}` ({self.where(node)}), set to `{detail}`, which "
                                        "the analysis cannot follow")

    # -- values -----------------------------------------------------------------------
    def branch(self, test: cst.BaseExpression, node: cst.CSTNode) -> None:
        if self.data_dependent(test):
            self.verdict.add(self.verdict.hard, f"branches on a tensor's value ({self.where(node)}: "
                                                f"`{self.source.code(test)}`): a graph break, and inside the "
                                                "region an error")

    def data_dependent(self, test: cst.BaseExpression) -> bool:
        if isinstance(test, cst.Name):
            return test.value in self.tensors
        if isinstance(test, cst.UnaryOperation):
            return self.data_dependent(test.expression)
        if isinstance(test, cst.BooleanOperation):
            return self.data_dependent(test.left) or self.data_dependent(test.right)
        for node in [test, *self.a.tree.walk(test)]:
            if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute):
                name = dotted_name(node.func)
                root = name.split(".")[0] if name and not name.startswith(".") else ""
                if root in self.a.torch_names:
                    if not node.func.attr.value.startswith("is_") and node.func.attr.value in _REDUCTIONS | {"equal"}:
                        return True
                elif root != "self" and node.func.attr.value in _REDUCTIONS:
                    return True
            if isinstance(node, cst.Comparison):
                identity = all(isinstance(c.operator, (cst.Is, cst.IsNot, cst.In, cst.NotIn)) for c in node.comparisons)
                operands = [node.left, *(c.comparator for c in node.comparisons)]
                if not identity and any(isinstance(o, cst.Name) and o.value in self.tensors for o in operands):
                    return True
        return False

    def mutation(self, target: cst.BaseExpression, node: cst.CSTNode, *, augmented: bool) -> None:
        verdict = self.verdict
        attr = _self_attr(target)
        if attr is not None and self.owner is not None and attr in self.a.members(self.owner)["buffers"]:
            verdict.add(verdict.mutations, f"`{self.source.code(node).strip()}` ({self.where(node)}) mutates "
                                           f"the buffer `{attr}` in place")
        elif isinstance(target, cst.Name) and self.top and self.fresh(target.value, node):
            verdict.add(verdict.mutations, f"`{self.source.code(node).strip()}` ({self.where(node)}) mutates "
                                           f"the input `{target.value}` in place")

    def aliasing(self, value: cst.BaseExpression, node: cst.Return) -> None:
        values = [e.value for e in value.elements] if isinstance(value, cst.Tuple) else [value]
        for element in values:
            base = element
            while True:
                if isinstance(base, cst.Subscript):
                    base = base.value
                elif isinstance(base, cst.Call) and isinstance(base.func, cst.Attribute) and base.func.attr.value in _VIEWS:
                    base = base.func.value
                elif isinstance(base, cst.Attribute) and base.attr.value in ("T", "mT", "data"):
                    base = base.value
                else:
                    break
            alias = None
            if isinstance(base, cst.Name) and self.fresh(base.value, node):
                alias = f"its input `{base.value}`" if base is element else f"a view of its input `{base.value}`"
            elif _self_attr(base) in self.a.members(self.owner or "")["tensors"]:
                alias = f"its own tensor `{self.source.code(base)}`"
            if alias:
                self.verdict.add(self.verdict.hard, f"returns {alias} ({self.where(node)}): the region cannot "
                                                    "return an alias of an input (\"Higher order ops do not "
                                                    "support aliasing\"); return a copy (`.clone()`)")


# -- helpers ------------------------------------------------------------------------------
class _Tree:
    """Every node of a module (preorder), each subtree's extent and each node's parent, from one
    pass over the nodes' fields (libcst's visitors and ``children`` are several times slower, and
    this runs on every file with a ModuleList in static mode)."""

    def __init__(self, module: cst.Module):
        self.order: list[cst.CSTNode] = []
        self.index: dict[int, int] = {}
        self.end: dict[int, int] = {}
        self.parent: dict[int, cst.CSTNode] = {}
        stack: list[tuple[cst.CSTNode, cst.CSTNode | None, bool]] = [(module, None, False)]
        while stack:
            node, parent, done = stack.pop()
            if done:
                self.end[id(node)] = len(self.order)
                continue
            self.index[id(node)] = len(self.order)
            self.order.append(node)
            if parent is not None:
                self.parent[id(node)] = parent
            stack.append((node, None, True))
            stack.extend((child, node, False) for child in reversed(_children(node)))

    def walk(self, root: cst.CSTNode, skip_defs: bool = False):
        """Every node under ``root`` (not ``root`` itself), in source order; with ``skip_defs``,
        not into nested functions, classes and lambdas."""
        i, end = self.index[id(root)] + 1, self.end[id(root)]
        while i < end:
            node = self.order[i]
            yield node
            i = self.end[id(node)] if skip_defs and isinstance(node, (cst.FunctionDef, cst.ClassDef, cst.Lambda)) else i + 1

    def ancestors(self, node: cst.CSTNode):
        parent = self.parent.get(id(node))
        while parent is not None:
            yield parent
            parent = self.parent.get(id(parent))

    def enclosing_class(self, func: cst.FunctionDef) -> cst.ClassDef | None:
        for parent in self.ancestors(func):
            if isinstance(parent, cst.ClassDef):
                return parent
            if isinstance(parent, (cst.FunctionDef, cst.Lambda)):
                return None
        return None


_FIELDS: dict[type, tuple[str, ...]] = {}
_IS_NODE: dict[type, bool] = {}
# Layout-only nodes: nothing here asks about them.
_LAYOUT = (cst.SimpleWhitespace, cst.ParenthesizedWhitespace, cst.TrailingWhitespace, cst.EmptyLine,
           cst.Newline, cst.Comment, cst.LeftParen, cst.RightParen, cst.Comma, cst.Semicolon, cst.Dot)


def _children(node: cst.CSTNode) -> list[cst.CSTNode]:
    names = _FIELDS.get(type(node))
    if names is None:
        names = _FIELDS[type(node)] = tuple(f.name for f in dataclasses.fields(node))
    children = []
    for name in names:
        value = getattr(node, name)
        if type(value) in (list, tuple):
            children.extend(v for v in value if _is_node(type(v)))
        elif _is_node(type(value)):
            children.append(value)
    return children


def _is_node(kind: type) -> bool:
    known = _IS_NODE.get(kind)
    if known is None:
        known = _IS_NODE[kind] = issubclass(kind, cst.CSTNode) and not issubclass(kind, _LAYOUT)
    return known


def _parameter_receiving(func: cst.FunctionDef, call: cst.Call, var: str) -> str | None:
    """The parameter of ``func`` that ``call`` passes the name ``var`` to."""
    positional = [p.name.value for p in (*func.params.posonly_params, *func.params.params)]
    index = 0
    for arg in call.args:
        if arg.star:
            return None
        if arg.keyword is not None:
            if isinstance(arg.value, cst.Name) and arg.value.value == var:
                return arg.keyword.value
            continue
        if isinstance(arg.value, cst.Name) and arg.value.value == var:
            return positional[index] if index < len(positional) else None
        index += 1
    return None


def _self_attr(node) -> str | None:
    if isinstance(node, cst.Attribute) and isinstance(node.value, cst.Name) and node.value.value == "self":
        return node.attr.value
    return None


def _class_name(node: cst.ClassDef | None) -> str | None:
    return node.name.value if node is not None else None


def _in_place(method: str) -> bool:
    return method.endswith("_") and not method.startswith("_")


def _range_count(analysis: _Analysis, comp_for: cst.CompFor) -> int | None:
    if comp_for.inner_for_in is not None:
        return None
    return _count_of(analysis, comp_for.iter)


def _count_of(analysis: _Analysis, iterable: cst.BaseExpression) -> int | None:
    if isinstance(iterable, cst.Call) and dotted_name(iterable.func) == "range" and len(iterable.args) == 1:
        value = iterable.args[0].value
        if isinstance(value, cst.Integer):
            return value.evaluated_value
        if isinstance(value, cst.Name):
            return analysis.constants.get(value.value)
    return None


def _loop_count(analysis: _Analysis, node: cst.CSTNode, init: cst.FunctionDef) -> int | None:
    """``for _ in range(N): self.blocks.append(Block())``: N."""
    for parent in analysis.tree.ancestors(node):
        if isinstance(parent, cst.For):
            return _count_of(analysis, parent.iter)
        if parent is init:
            return 1
    return None


def _maybe_tensor(param: cst.Param) -> bool:
    if param.annotation is not None:
        annotation = dotted_name(param.annotation.annotation) or ""
        code = cst.Module([]).code_for_node(param.annotation.annotation)
        if _NON_TENSOR_ANNOTATIONS.match(code.strip()) or annotation in ("int", "float", "bool", "str"):
            return False
    default = param.default
    if default is not None and not (isinstance(default, cst.Name) and default.value == "None"):
        return False
    return True


def _binding_lines(analysis: _Analysis, func: cst.FunctionDef) -> dict[str, list[int]]:
    """Lines where each name is (re)bound in the function: assignments, loops, with-as."""
    bound: dict[str, list[int]] = {}

    def names(target) -> list[str]:
        if isinstance(target, cst.Name):
            return [target.value]
        if isinstance(target, (cst.Tuple, cst.List)):
            return [n for e in target.elements for n in names(e.value)]
        if isinstance(target, cst.StarredElement):
            return names(target.value)
        return []

    for node in analysis.tree.walk(func.body, skip_defs=True):
        targets = []
        if isinstance(node, cst.Assign):
            targets = [t.target for t in node.targets]
        elif isinstance(node, (cst.AnnAssign, cst.For, cst.NamedExpr)):
            targets = [node.target]
        elif isinstance(node, cst.WithItem) and node.asname is not None:
            targets = [node.asname.name]
        for target in targets:
            for name in names(target):
                bound.setdefault(name, []).append(analysis.source.positions[node].start.line)
    return bound


def _already_marked(func: cst.FunctionDef) -> bool:
    for decorator in func.decorators:
        expr = decorator.decorator.func if isinstance(decorator.decorator, cst.Call) else decorator.decorator
        if dotted_name(expr).endswith(("nested_compile_region", "mark_compile_region")):
            return True
    return False


def _torch_version(text: str | None) -> tuple[int, int] | None:
    match = re.match(r"^\s*(\d+)\.(\d+)", text or "")
    return (int(match.group(1)), int(match.group(2))) if match else None


def _version_problem(version: str | None, whose: str) -> str | None:
    parsed = _torch_version(version)
    if parsed is None:
        return (f"the torch version of {whose} is unknown: torch.compiler.nested_compile_region needs torch "
                ">= 2.8, so no edit is made")
    if parsed < MIN_TORCH:
        return (f"torch {version} ({whose}) has no torch.compiler.nested_compile_region (added in 2.8): "
                "no edit is made; compile the blocks one by one (`for b in model.blocks: b.compile()`) instead")
    return None


def _installed_torch() -> str | None:
    from importlib import metadata

    try:
        return metadata.version("torch")
    except metadata.PackageNotFoundError:
        return None


def _training_in(source: SourceFile, path: str) -> str | None:
    """Where the file runs a backward pass (``loss.backward()``), if it does."""
    for node in source.nodes(cst.Call):
        name = dotted_name(node.func)
        if isinstance(node.func, cst.Attribute) and node.func.attr.value == "backward" or \
                name in ("torch.autograd.backward", "torch.autograd.grad"):
            return f"`{source.code(node)}` at {path}:{source.positions[node].start.line}"
    return None


def _training_evidence(project: Project, paths: list[str]) -> str | None:
    for path in paths:
        source = project.source(path)
        if source is not None:
            found = _training_in(source, path)
            if found:
                return found
    return ""


def _compiled_on_its_own(profile: Profile, path: str, analysis: _Analysis, site: _Site) -> bool:
    """A block whose forward is a compiled frame of its own is not inlined (regional
    compilation, or a graph break around it): the decorator would not help."""
    target = analysis.target_function(site)
    if target is None:
        return False
    pos = analysis.source.positions[target]
    first = min([pos.start.line] + [analysis.source.positions[d].start.line for d in target.decorators])
    return any(f.file == path and f.name == target.name.value and first <= f.first_line <= pos.start.line
               for f in profile.frames)


def _attribute_graph_breaks(profile: Profile, frame: Frame, path: str, verdict: _Verdict) -> None:
    """Graph breaks the Profile saw in the block's code (in any frame) make the region an error;
    one the inlining frame saw in another file may be in code the block calls."""
    for other in profile.frames:
        for graph_break in other.graph_breaks:
            where = graph_break.location
            if where.file == path and any(start <= where.line <= end for start, end in verdict.spans):
                verdict.add(verdict.hard, f"the Profile recorded a graph break inside the block at "
                                          f"{where.file}:{where.line} ({graph_break.reason or 'no reason given'}): "
                                          "inside the region it would be an error")
            elif where.file != path and other is frame:
                verdict.add(verdict.risks, f"the Profile recorded a graph break at {where.file}:{where.line}, "
                                           "which may be in code the block calls")


RULE = NestedCompileRegion()
