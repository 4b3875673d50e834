"""RF004 nested-compile-region: a stack of identical blocks is compiled once per block."""

from __future__ import annotations

import ast
import copy
import dataclasses
import os
import re
from collections.abc import Callable
from typing import cast

from recompile_fix.analysis.ast_tree import DEFS, Tree, class_name, eager_compile, tree_of
from recompile_fix.analysis.block_stacks import (
    MIN_BLOCKS,
    REGION_DECORATORS,
    Analysis,
    Site,
    already_marked,
    recorded_too_few,
    training_in,
    training_in_any,
)
from recompile_fix.analysis.project import Project
from recompile_fix.analysis.region_check import Verdict
from recompile_fix.analysis.regional import regional_loops
from recompile_fix.analysis.source import SourceError, SourceFile
from recompile_fix.edits.edit import Edit
from recompile_fix.findings.arbitration import Claim
from recompile_fix.findings.finding import Finding, Safety
from recompile_fix.findings.releases import TorchApi, installed_torch_version
from recompile_fix.findings.rule import Example, Rule
from recompile_fix.profile.model import Frame, Location, Profile
from recompile_fix.profile.resume import is_resume
from recompile_fix.profile.sources import module_path_code

__all__ = ["RULE", "NestedCompileRegion"]

NESTED_COMPILE_REGION = TorchApi(
    "torch.compiler.nested_compile_region", (2, 8), "measured: absent 2.6.0, present 2.8.0"
)
assert NESTED_COMPILE_REGION.since is not None
MIN_TORCH = NESTED_COMPILE_REGION.since  # public from 2.8
# Backward through a region compiled with backend="eager" fails before 2.14 ("fake_mode should be
# enabled for HOPs"; measured on 2.8, 2.10 and 2.13, fixed by pytorch/pytorch#184700, whose fast
# path is in the 2.14.0 and 2.14.1 sources).
EAGER_BACKWARD_TORCH = (2, 14)
DECORATOR = "compiler.nested_compile_region"
# In training, inductor's buffer reuse can corrupt a reused region's gradients (measured on
# 2.13.0, 2.14.1, 2.15.0); off, they are exact (bench/compile_time.py's rf004_nobufreuse).
BUFFER_REUSE = TorchApi(
    "torch._inductor.config.allow_buffer_reuse",
    None,
    "an inductor option of every release the rule writes for (2.8 and later)",
)
_BUFFER_REUSE_WHY = "# Inductor's buffer reuse can corrupt the gradients of a nested_compile_region in training."


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
    A compiled region rejects what a graph would take, even without `fullgraph`, so the fix is
    offered only where the block's `forward` (and what it calls in the same file) traces whole
    and aliases nothing the way a higher-order op refuses. No fix, with the reason, when the
    block calls `print()`, a logger or `warnings.warn`, reads a tensor into Python (`.item()`,
    `.tolist()`), branches on a tensor's value, or the Profile recorded a graph break inside it;
    when an output is an input or a view of one, also passed back through the file's own calls
    (T5's `position_bias`), two outputs are views of one tensor (Flux's single block), a view is
    stored on an object (`self.last = h.detach()`), or a key/value cache is updated in a model
    with a sliding window (Mistral: the cache keeps a `.to()` alias); when it mutates a buffer or
    an input in place (BatchNorm's running statistics) and the program trains; when the program
    trains with `backend="eager"` (or was profiled with `--backend eager`) on torch older than
    2.14: backward through the region fails there (`fake_mode should be enabled for HOPs`,
    measured on 2.8, 2.10 and 2.13; fixed by pytorch/pytorch#184700) and each call runs the block
    twice; and when the torch the Profile saw is older than 2.8 or unknown. Unsafe when it calls
    code the analysis cannot see (another file, a callable kept in an attribute or a variable),
    when it mutates in place and no training was seen, and whenever the program trains:
    inductor can corrupt the gradients of a reused region (measured on torch 2.13.0, 2.14.1 and
    2.15.0), so in a program that trains the fix also sets
    `torch._inductor.config.allow_buffer_reuse = False`, which avoids it, before the block's class. Where RF007 could
    compile the same blocks one by one instead, RF007 is chosen when the program trains, and for
    inference when the Profile timed the model's steady-state call and the blocks' boundaries
    would add at most 10% to it (RF007 compiles faster; see RF007). Inference-only programs get
    exactly the same outputs. The decorator goes
    on `def forward` in the class body: on an instance's bound method it raises, on the class it
    silently does nothing. Only files of the project are edited: a pip package's block is left to
    RF007, which edits where the program compiles the model.

    ## Profile evidence
    No guard failure: the frame that inlines the blocks (e.g. `forward` of the model) compiles
    once, and its compile seconds grow with the number of blocks. The rule confirms the loop
    over the blocks in that frame's file and that no block was compiled as a frame of its own.
    Without a Profile (static mode) the loop alone, with confidence "static".
    """

    id = "RF004"
    name = "nested-compile-region"
    message = "`{container}` runs {count} `{block}` blocks {where}: compile `{target}` once with nested_compile_region"
    # No guard failure drives this rule (it consumes no reason kind): its evidence is the compile
    # seconds of the frame that inlines the blocks, and it also runs without a Profile.
    consumes = ()
    triggers = ("ModuleList", "Sequential")
    emits = (NESTED_COMPILE_REGION, BUFFER_REUSE)
    # The frame compiles as often with the region as without: each compile gets cheaper.
    verify_allows = ("same_compiles",)
    examples = (
        Example(
            before="    def forward(self, x):\n        return x + self.scale * F.silu(self.proj(x))\n",
            after="    @torch.compiler.nested_compile_region\n"
            "    def forward(self, x):\n        return x + self.scale * F.silu(self.proj(x))\n",
            golden="RF004/sequential_blocks",
        ),
        Example(  # print() breaks the graph inside the region: no edit
            before='    def forward(self, x):\n        print("block input", tuple(x.shape))\n'
            "        return x + torch.relu(self.lin(x))\n",
            after=None,
            golden="RF004/print_block",
        ),
        Example(  # training with backend="eager": backward through the region fails before torch 2.14
            before="    def forward(self, x):\n        return x + self.fc2(torch.relu(self.fc1(self.norm(x))))\n",
            after=None,
            golden="RF004/train_eager_backend",
        ),
    )

    # -- planning ----------------------------------------------------------------------
    def plan(self, profile: Profile, project: Project) -> list[Finding]:
        findings: dict[tuple[str, str], Finding] = {}
        version_problem = _version_problem(profile.torch_version, "the Profile")
        user_files = [p for p in profile.sources if not os.path.isabs(p)]
        facts = _ProgramFacts(project, user_files, profile)
        # A Profile whose run ran a backward pass trains, whatever its files show now.
        facts.training = facts.training or (_RAN_BACKWARD if profile.trains else None)
        analyses: dict[str, Analysis | None] = {}
        for frame in sorted(profile.frames, key=lambda f: -f.compile_seconds):
            if is_resume(frame.name) or os.path.isabs(frame.file):
                continue  # a resume function, or a file outside the project (torch's, a library's)
            if frame.file not in analyses:
                analyses[frame.file] = _analysis_of(project.source(frame.file))
            analysis = analyses[frame.file]
            func = analysis.function_def(frame.first_line, frame.name) if analysis else None
            if analysis is None or func is None:
                continue
            for site in analysis.reachable_sites(func):
                key = (frame.file, site.target_key)
                if key in findings:
                    continue
                site = _recorded_count(site, frame, frame.file)
                finding = self._finding(analysis, site, frame.file, version_problem, facts, frame, profile)
                if finding is not None and _compiled_on_its_own(profile, frame.file, analysis, site):
                    # Not inlined: a graph break in it (said above, when the Profile saw it), or
                    # regional compilation. The decorator would not help; say so (this also
                    # overrides what static mode would plan for it).
                    finding.safety = Safety.NONE
                    finding.notes.insert(
                        0,
                        f"`{finding.params['function']}` is compiled as a frame of its own "
                        "(a graph break around it, or regional compilation): it is not "
                        "inlined into the model's graph",
                    )
                if finding is not None:
                    findings[key] = finding
        # Blocks the recorder saw in a compiled module whose class lives in another file of the
        # project (a parent class's __init__, a blocks.py): decorated where they are defined.
        for frame in profile.frames:
            if is_resume(frame.name):
                continue
            for stack in frame.block_stacks:
                if os.path.isabs(stack.file) or stack.count < MIN_BLOCKS or "." in stack.block:
                    continue
                key = (stack.file, stack.block)
                if key in findings or any(
                    f.file == stack.file and f.params.get("class") == stack.block for f in findings.values()
                ):
                    continue
                if stack.file not in analyses:
                    analyses[stack.file] = _analysis_of(project.source(stack.file))
                analysis = analyses[stack.file]
                if analysis is None or stack.block not in analysis.classes:
                    continue
                owner = stack.owner or _frame_class(analyses, project, frame) or frame.name
                site = Site(owner=owner, attr=stack.path, block=stack.block, count=stack.count, line=frame.first_line)
                finding = self._finding(analysis, site, stack.file, version_problem, facts, frame, profile)
                if finding is not None:
                    findings[key] = finding
        return list(findings.values())

    def plan_static(self, source: SourceFile, path: str) -> list[Finding]:
        return self._plan_static(source, path, None)

    def _plan_static(
        self, source: SourceFile, path: str, training: str | None, backend: str | None = None
    ) -> list[Finding]:
        version_problem = _version_problem(_installed_torch(), "this environment")
        analysis = Analysis(source)
        facts = _ProgramFacts.of_file(source, path, analysis)
        facts.training = training or facts.training
        facts.profile_backend = backend
        findings: dict[str, Finding] = {}
        for site in analysis.sites():
            if site.target_key in findings:
                continue
            finding = self._finding(analysis, site, path, version_problem, facts, None, None)
            if finding is not None:
                finding.confidence = "static"
                findings[site.target_key] = finding
        return list(findings.values())

    def _finding(
        self,
        analysis: "Analysis",
        site: "Site",
        path: str,
        version_problem: str | None,
        facts: "_ProgramFacts",
        frame: Frame | None,
        profile: Profile | None,
    ) -> Finding | None:
        training = facts.training
        if site.count is not None and site.count < MIN_BLOCKS:
            return None
        target = analysis.target_function(site)
        if target is None or already_marked(target):
            return None
        verdict = analysis.check(site)
        # The `def` line, not a decorator's: profiles, golden files and editors hold it.
        col = analysis.source.char_column(target.lineno, target.col_offset)
        location = Location(
            file=path, line=target.lineno, end_line=target.lineno, col=col, end_col=col + 3, function=target.name
        )
        target_name = f"{site.block}.forward" if site.function is None else site.function
        count = str(site.count) if site.count is not None else "its"
        where = (
            f"inline in compiled `{frame.shown_name}` ({frame.compile_seconds:.2f} s compiling)"
            if frame is not None
            else "one after another"
        )
        evidence: dict[str, object] = {
            "container": f"{site.owner}{module_path_code(site.attr)}",
            "blocks": site.count,
            "block": site.block,
            "loop_line": site.line,
            "trains": bool(training),
        }
        if frame is not None:
            evidence.update(
                {
                    "frame": f"{frame.name} ({frame.file}:{frame.first_line})",
                    "compiles": frame.compile_count,
                    "compile_seconds": round(frame.compile_seconds, 3),
                    "graph_breaks": sum(b.count for b in frame.graph_breaks),
                }
            )
            assert profile is not None, "a frame is the Profile's"
            _attribute_graph_breaks(profile, frame, path, verdict)
        finding = Finding(
            rule=self.id,
            file=path,
            location=location,
            safety=Safety.SAFE,
            message=self.message.format(
                container=f"{site.owner}{module_path_code(site.attr)}",
                count=count,
                block=site.block,
                where=where,
                target=target_name,
            ),
            params={
                "class": site.block if site.function is None else None,
                "function": target.name,
                "line": target.lineno,
            },
            evidence=evidence,
        )
        blockers, risks = _problems(analysis, site, verdict, version_problem, facts, frame, profile)
        if blockers:
            finding.safety = Safety.NONE
            finding.notes = blockers + risks
        elif risks:
            finding.safety = Safety.UNSAFE
            finding.notes = risks
        if site.count is None:
            finding.notes.append("the number of blocks is not a constant in the source")
        return finding

    def honour_facts(self, finding: Finding, profile: Profile, source: SourceFile) -> Finding | None:
        """Left out where the run recorded the blocks, fewer than MIN_BLOCKS of them (the source
        builds `range(config.n_layer)` of them; this run's config has one). A Profile whose run
        ran a backward pass makes the static finding what the Profile's plan made it: the
        program trains, whatever this one file shows."""
        block = finding.params.get("class")
        if block and recorded_too_few(profile, [(finding.file, block)]):
            return None
        if not profile.trains or finding.evidence.get("trains") or finding.safety is Safety.NONE:
            return finding
        try:
            again = self._plan_static(source, finding.file, _RAN_BACKWARD)
        except SourceError:
            return finding
        return next((f for f in again if f.params == finding.params), finding)

    def honour_training(
        self,
        finding: Finding,
        source: SourceFile,
        where: Callable[[], str | None],
        backend: str | None = None,
    ) -> Finding:
        """A block file the profiled run used for inference only, which a training script of the
        project imports too (`sample.py` profiled, `train.py` beside it): the fix is the training
        one, as the static plan makes it with that training seen (inductor corrupts the
        gradients of a reused region without `allow_buffer_reuse = False`: measured 4-40% off)."""
        if finding.safety is Safety.NONE or finding.evidence.get("trains"):
            return finding
        training = where()
        if training is None:
            return finding
        try:
            # The Profile's `--backend eager` is the backend the program is checked with: backward
            # through a region fails there before torch 2.14 (a trial: `fix` blamed the fix).
            planned = self._plan_static(source, finding.file, training, backend)
            again = next((f for f in planned if f.params == finding.params), None)
        except SourceError:
            return finding
        if again is None:
            return finding
        updated = copy.copy(finding)
        updated.safety, updated.unsafe_because = again.safety, again.unsafe_because
        updated.notes = again.notes
        updated.evidence = {**finding.evidence, "trains": True}
        return updated

    def claims(self, finding: Finding) -> list[Claim]:
        """The stack of blocks whose class the region goes on, by its attribute in the container
        (``Model.layers``: ``layers``); RF007 claims stacks by the same name."""
        container = str(finding.evidence.get("container", ""))
        attr = container.split(".", 1)[1] if "." in container else container
        block = finding.params.get("class")
        return [Claim(f"stack of `{block}` blocks", attr, f"marks `{block}.forward` as a nested compile region")]

    def already_present(self, finding: Finding, source: SourceFile) -> str | None:
        """The function is already a region (``nested_compile_region``, ours or hand-written)."""
        if not any(name in source.text for name in REGION_DECORATORS):
            return None  # no decorator can end with a name the text lacks: no tree to build
        func = _target_def(tree_of(source), finding.params)
        if func is None or not already_marked(func):
            return None
        return f"line {func.lineno}: `{finding.params['function']}` is already a nested_compile_region"

    # -- rewriting ---------------------------------------------------------------------
    def fix(self, finding: Finding, source: SourceFile, torch_name: str) -> list[Edit]:
        p = finding.params
        func = _target_def(tree_of(source), p)
        if func is None:
            raise ValueError(f"no `def {p['function']}` at line {p['line']}")
        if already_marked(func):
            return []
        # On the `def` line, below any decorators it has: where the finding points.
        indent = source.lines[func.lineno - 1][: source.char_column(func.lineno, func.col_offset)]
        at = source.offset(func.lineno, 0)
        edits = [Edit(finding.file, at, at, f"{indent}@{torch_name}.{DECORATOR}\n", self.id)]
        if finding.evidence.get("trains"):
            edits.extend(_buffer_reuse_off(source, func, finding.file, torch_name, self.id))
        return edits


def _buffer_reuse_off(source: SourceFile, func: ast.AST, file: str, torch_name: str, rule: str) -> list[Edit]:
    """``allow_buffer_reuse = False``, with why, before the module-level statement that holds the
    region (its class, its decorators first); none where the file turns it off already."""
    if "allow_buffer_reuse" in source.text:
        return []
    tree = tree_of(source)
    top: ast.AST = func
    for parent in tree.ancestors(func):
        if isinstance(parent, ast.Module):
            break
        top = parent
    decorators = getattr(top, "decorator_list", [])
    line = min([top.lineno] + [d.lineno for d in decorators])  # type: ignore[attr-defined]
    at = source.offset(line, 0)
    text = f"{_BUFFER_REUSE_WHY}\n{torch_name}._inductor.config.allow_buffer_reuse = False\n\n\n"
    return [Edit(file, at, at, text, rule)]


# The training evidence of a Profile whose files no longer tell (already fixed, or edited since).
_RAN_BACKWARD = "the profiled run ran a backward pass"


def _target_def(tree: Tree, params: dict):
    return next(
        (
            n
            for n in tree.order
            if isinstance(n, DEFS)
            and n.name == params["function"]
            and n.lineno == params["line"]
            and class_name(tree.enclosing_class(cast(ast.FunctionDef, n))) == params["class"]
        ),
        None,
    )


def _problems(
    analysis: Analysis,
    site: Site,
    verdict: Verdict,
    version_problem: str | None,
    facts: _ProgramFacts,
    frame: Frame | None,
    profile: Profile | None,
) -> tuple[list[str], list[str]]:
    """What stops the region (blockers) and what makes it unsafe (risks): the block's verdict,
    the torch release, blocks already compiled one by one, in-place mutation, training."""
    training = facts.training
    blockers = list(verdict.hard)
    risks = list(verdict.unseen) + list(verdict.risks)
    if version_problem:
        blockers.insert(0, version_problem)
    regional = facts.regional_loop(site.attr)
    if regional:
        blockers.insert(
            0,
            f"the blocks are compiled one by one ({regional}): each is a frame of its own, where "
            "a nested compile region adds nothing",
        )
    if verdict.mutations:
        if training:
            blockers.extend(
                f"{m}; the program trains ({training}), and nested_compile_region rejects "
                "in-place input or buffer mutation in training (RuntimeError)"
                for m in verdict.mutations
            )
        else:
            risks.extend(
                f"{m}; nested_compile_region rejects that in training (RuntimeError), and "
                "no `.backward()` was seen, so the model may be used for inference only"
                for m in verdict.mutations
            )
    if training:
        risks.append(
            f"the program trains ({training}): inductor can corrupt the gradients of a reused region "
            "(measured on torch 2.13.0, 2.14.1 and 2.15.0: LayerNorm weight gradients of a block that "
            "feeds a LayerNorm 54-65% off; the forward is exact), so the fix also sets "
            "torch._inductor.config.allow_buffer_reuse = False, which avoids it (more memory in the "
            "compiled code); check the gradients against eager"
        )
        eager = facts.eager_backend(analysis, frame)
        release = _torch_version(profile.torch_version if profile is not None else _installed_torch())
        if eager and release is not None and release < EAGER_BACKWARD_TORCH:
            blockers.append(
                f'the program trains and compiles with backend="eager" ({eager}): with torch '
                f"{release[0]}.{release[1]} backward through the region fails (AssertionError: fake_mode "
                "should be enabled for HOPs; fixed in torch 2.14 by pytorch/pytorch#184700), and each "
                "region call runs the block twice with grad on (a dropout draws twice); aot_eager and "
                "inductor run it"
            )
    return blockers, risks


def _torch_version(text: str | None) -> tuple[int, int] | None:
    match = re.match(r"^\s*(\d+)\.(\d+)", text or "")
    return (int(match.group(1)), int(match.group(2))) if match else None


def _version_problem(version: str | None, whose: str) -> str | None:
    parsed = _torch_version(version)
    if parsed is None:
        return (
            f"the torch version of {whose} is unknown: torch.compiler.nested_compile_region needs torch "
            ">= 2.8, so no edit is made"
        )
    if parsed < MIN_TORCH:
        return (
            f"torch {version} ({whose}) has no torch.compiler.nested_compile_region (added in 2.8): "
            "no edit is made; compile the blocks one by one (`for b in model.blocks: b.compile()`) instead"
        )
    return None


def _installed_torch() -> str | None:
    """Static mode's torch: the user's interpreter's (``installed_torch_version``)."""
    return installed_torch_version()


class _ProgramFacts:
    """What the program as a whole says, beyond the block's file: where it trains, whether it
    compiles with backend="eager", and blocks it already compiles one by one. Read from every
    file of the program the Profile saw (as they are on disk: facts, not positions), or the one
    file in static mode."""

    def __init__(self, project: Project | None, paths: list[str], profile: Profile | None):
        self.sources: list[tuple[str, SourceFile]] = []
        for path in paths:
            source = project.source(path) if project is not None else None
            if source is None and project is not None:  # changed since (e.g. fixed by RF007): read as is
                source = project.as_is(path)
            if source is not None:
                self.sources.append((path, source))
        self.profile_backend = profile.backend if profile is not None else None
        # The backends the run's compiles recorded (torch's own objects, at compile time): what the
        # program compiled with, however it chose it (``backend=args.backend``, a variable).
        self.recorded_backends: dict[str, list[str]] = (
            {f.label: f.backends for f in profile.frames if f.backends} if profile is not None else {}
        )
        self.training = training_in_any(self.sources)

    @classmethod
    def of_file(cls, source: SourceFile, path: str, analysis: Analysis) -> "_ProgramFacts":
        facts = cls(None, [], None)
        facts.sources = [(path, source)]
        facts.training = training_in(source, path, analysis.tree)
        return facts

    def eager_backend(self, analysis: Analysis, frame: Frame | None = None) -> str | None:
        """Where the program compiles with backend="eager" (the Profile's forced backend too): the
        backend the run recorded first (the frame's own, else any frame's), the source text only
        where the run recorded none."""
        if self.profile_backend == "eager":
            return "the Profile was recorded with `--backend eager`"
        if self.recorded_backends:
            labels = [frame.label] if frame is not None and frame.label in self.recorded_backends else []
            for label in labels or list(self.recorded_backends):
                if "eager" in self.recorded_backends[label]:
                    return f"the run compiled `{label}` with it"
            return None
        if analysis.eager_backend_line:
            return f"{analysis.source.path}:{analysis.eager_backend_line}"
        for path, source in self.sources:
            if "eager" not in source.text:  # what eager_compile looks for, written out
                continue
            try:
                calls = (n for n in ast.walk(source.syntax) if isinstance(n, ast.Call))  # all eager_compile takes
                line = next((n.lineno for n in calls if eager_compile(source, n)), None)
            except SourceError:
                continue
            if line:
                return f"{path}:{line}"
        return None

    def regional_loop(self, attr: str) -> str | None:
        """A loop that compiles the blocks of ``attr`` one by one, where the program has one."""
        for path, source in self.sources:
            try:
                loops = regional_loops(source)
            except SourceError:
                continue
            code = module_path_code(attr).lstrip(".")  # `stages[0]` for the recorded `stages.0`
            for line, expr in loops:
                if expr.split(".", 1)[-1] == code or expr.endswith("." + code):
                    return f"`for ... in {expr}: ....compile()` at {path}:{line}"
        return None


def _recorded_count(site: Site, frame: Frame, path: str) -> Site:
    """The site (its block a class of ``path``) with the number of blocks the run recorded in the
    compiled module (its block stack of the same class, by file and name, at the same attribute),
    where the source does not say it (``nn.ModuleList(Block() for _ in range(config.n_layer))``)."""
    if site.count is not None:
        return site
    counts = {
        stack.count
        for stack in frame.block_stacks
        if stack.file == path
        and stack.block == site.block
        and (stack.path == site.attr or stack.path.endswith("." + site.attr))
    }
    return dataclasses.replace(site, count=counts.pop()) if len(counts) == 1 else site


def _frame_class(analyses: dict[str, Analysis | None], project: Project, frame: Frame) -> str | None:
    """The class whose method the frame compiled (for a Profile recorded before stacks named it)."""
    if os.path.isabs(frame.file):
        return None
    if frame.file not in analyses:
        analyses[frame.file] = _analysis_of(project.source(frame.file))
    analysis = analyses[frame.file]
    func = analysis.function_def(frame.first_line, frame.name) if analysis else None
    return class_name(analysis.tree.enclosing_class(func)) if analysis is not None and func is not None else None


def _analysis_of(source: SourceFile | None) -> Analysis | None:
    """The analysis of a file the Profile saw; None where it cannot be read or parsed."""
    if source is None:
        return None
    try:
        return Analysis(source)
    except SourceError:
        return None


def _compiled_on_its_own(profile: Profile, path: str, analysis: Analysis, site: Site) -> bool:
    """A block whose forward is a compiled frame of its own is not inlined (regional
    compilation, or a graph break around it): the decorator would not help."""
    target = analysis.target_function(site)
    if target is None:
        return False
    first = min([target.lineno] + [d.lineno for d in target.decorator_list])
    return any(
        f.file == path and f.name == target.name and first <= f.first_line <= target.lineno for f in profile.frames
    )


def _attribute_graph_breaks(profile: Profile, frame: Frame, path: str, verdict: Verdict) -> None:
    """Graph breaks the Profile saw in the block's code (in any frame) make the region an error;
    one the inlining frame saw in another file may be in code the block calls."""
    for other in profile.frames:
        for graph_break in other.graph_breaks:
            where = graph_break.location
            if where.file == path and any(start <= where.line <= end for start, end in verdict.spans):
                verdict.add(
                    verdict.hard,
                    f"the Profile recorded a graph break inside the block at "
                    f"{where.file}:{where.line} ({graph_break.reason or 'no reason given'}): "
                    "inside the region it would be an error",
                )
            elif where.file != path and other is frame:
                verdict.add(
                    verdict.risks,
                    f"the Profile recorded a graph break at {where.file}:{where.line}, "
                    "which may be in code the block calls",
                )


RULE = NestedCompileRegion()
