"""RF007 regional-compile: a whole model compiled at once, where compiling its blocks one by one
compiles in about one block's time."""

from __future__ import annotations

import ast
import os
import re
from typing import Any

from recompile_fix.analysis.ast_tree import DEFS, dotted, identifiers, tree_of
from recompile_fix.analysis.block_stacks import (
    MIN_BLOCKS,
    Analysis,
    already_marked,
    recorded_too_few,
    training_in,
    training_in_any,
)
from recompile_fix.analysis.project import Project
from recompile_fix.analysis.regional import (
    CompileSite,
    StackRef,
    compile_sites,
    module_class,
    regional_loops,
    stack_checks,
    static_stacks,
    turns_off_cache,
)
from recompile_fix.analysis.source import SourceError, SourceFile
from recompile_fix.edits.edit import Edit
from recompile_fix.findings.arbitration import Claim, Preference
from recompile_fix.findings.finding import Finding, Safety
from recompile_fix.findings.releases import TorchApi, installed_torch_version
from recompile_fix.findings.rule import Example, Rule
from recompile_fix.profile.model import BlockStack, Frame, Location, Profile, torch_release
from recompile_fix.profile.resume import is_resume
from recompile_fix.profile.sources import module_path_code
from recompile_fix.rules.rf007_regional_compile.block_boundaries import boundary_inputs, boundary_share, preference

__all__ = ["RULE", "RegionalCompile"]

# The fix writes `block.compile()`, not a torch name, so the gate is the rule's own (in_text=False).
MODULE_COMPILE = TorchApi(
    "torch.nn.Module.compile", (2, 2), "PyTorch 2.2 release (nn.Module.compile added)", in_text=False
)
assert MODULE_COMPILE.since is not None
MIN_TORCH = MODULE_COMPILE.since  # nn.Module.compile() is in torch 2.2 and later
# What the fix does to a stack of blocks, as a nested compile region's note names it when it loses.
BLOCKS_ONE_BY_ONE = "compiles these blocks one by one"

TRADE_OFF = (
    "trade-off: the blocks compile once for all of them (about one block's compile time), but the "
    "ops outside the blocks (embedding, final norm, head, loss) run eagerly and each block is a "
    "graph of its own (a graph break at every block boundary, nothing fused across it), so a "
    "steady-state step can be slower than with the whole model compiled; `bench/compile_time.py` "
    "measures both"
)


class RegionalCompile(Rule):
    """
    ## What it does
    Where a program compiles a whole model (`compiled = torch.compile(model)`,
    `model.compile()`, or `@torch.compile` on the model's `def forward`) and that model runs a
    stack of identical blocks, replaces the whole-model compile by compiling the blocks one by
    one: `for block in model.blocks: block.compile()` where the model was compiled (with the
    same compile options), or the decorator moved onto the block's `forward`. The blocks are
    found wherever the model keeps them: the recorder lists every stack in the compiled module
    (a ModuleList in a ModuleDict, a Sequential, a parent class's `__init__` in another file, a
    pip package's model); without a Profile, the file's own classes are read.

    ## Why is this bad?
    `torch.compile(model)` inlines every block into one graph, and the backend compiles each
    copy on its own: the cold compile grows with depth. A block compiled on its own is traced
    and compiled once, and every other block reuses that code. This is PyTorch's regional
    compilation recipe; unlike `nested_compile_region` (RF004) it trains exactly under every
    backend and torch version, and a graph break in a block is allowed.

    ## Example
    ```python
    model = GPT(config)
    model = torch.compile(model)
    ```
    Use instead:
    ```python
    model = GPT(config)
    for block in model.transformer.h:
        block.compile()
    ```

    ## Fix safety
    The outputs are those of the whole-model compile (exact under the eager and aot_eager
    backends, within float tolerance under inductor, as any compile). The cost is speed, stated
    in the finding: ops outside the blocks run eagerly and each block is a graph of its own. Always
    unsafe: the fix changes what is compiled, so `verify` (and `fix`) can compare the outputs of
    the program but not of the whole model's callable, which no longer compiles; and the steady
    state may be slower: each block boundary adds about 15 us a call for each input of the
    block's graph, its parameters and buffers and its forward's arguments (torch 2.13, CPU:
    `bench/block_boundary.py`), which the finding weighs against the profiled step. For a
    program that trains it is still the better of the two (the step compiles in about one
    block's time, and a nested compile region is unsafe in training). Also unsafe when the
    program reads the compiled wrapper's own API (`_orig_mod`, or `state_dict`
    keys, which lose their `_orig_mod.` prefix once `torch.compile(model)`'s wrapper is gone),
    and when the blocks are built with their index and their `forward` reads what it sets (torch
    guards a module's int attributes by value: each block could compile on its own). No fix,
    with the reason, when the blocks index a key/value cache per layer
    (`cache.update(k, v, self.layer_idx)`) and the program does not turn the cache off
    (`use_cache=False`): each layer would compile on its own (measured: 4 compiles for 4 Llama
    layers); when the model runs its blocks through a per-layer function instead of calling
    them; when the compile passes the module positionally with other arguments; and for torch
    older than 2.2 (`nn.Module.compile`). Where RF004 could edit the same blocks, one of the two
    is chosen: RF007 when the program trains; for inference, RF007 when the Profile timed the
    model's steady-state call and the block boundaries add at most 10% to it (it compiles in
    about one block's time, RF004 in 1.2x to 1.4x), RF004 otherwise (small blocks, or no call
    timed: it keeps the whole model in one graph).

    ## Profile evidence
    No guard failure: a frame of the model's `forward` (or its wrapper) compiles once, and the
    recorder saw, at compile start, a stack of at least four blocks of one class in the module
    being compiled (its attribute path, count, class and file). The statement that compiled it
    is found in the program's files by the name the program calls it by at the recorded call
    site. For inference, the time of the model's calls that compiled nothing (its steady state,
    timed on `torch.compile(model)`'s wrapper in the calling thread's CPU seconds, which a busy
    machine inflates far less than wall seconds). Without a Profile (static mode), a
    compile statement and the model's class in the same file.
    """

    id = "RF007"
    name = "regional-compile"
    message = "`{module}` is compiled whole and runs {stacks}: compile {what} one by one instead"
    consumes = ()
    # Static mode needs the compile and the model's class in one file (a Profile finds them apart).
    triggers = ("ModuleList", "Sequential")
    requires = ("compile",)
    verify_allows = ("regional",)
    emits = (MODULE_COMPILE,)
    examples = (
        Example(
            before="model = torch.compile(model)\n",
            after="for block in model.transformer.h:\n    block.compile()\n",
            golden="RF007/nanogpt_training",
        ),
        Example(  # each layer indexes the cache by its own number: one compile per layer, no edit
            before="compiled = torch.compile(decoder)\n",
            after=None,
            golden="RF007/per_layer_cache",
        ),
    )

    # -- planning ----------------------------------------------------------------------
    def plan(self, profile: Profile, project: Project) -> list[Finding]:
        user_files = [p for p in profile.sources if not os.path.isabs(p)]
        sites: dict[str, list[CompileSite]] = {}
        for path in user_files:
            source = project.source(path)
            if source is None or "compile" not in source.text:
                continue
            try:
                sites[path] = compile_sites(source)
            except SourceError:
                continue
        if not any(sites.values()):
            return []
        training = training_in_any((path, project.source(path)) for path in user_files)
        findings: dict[tuple[str, int], Finding] = {}
        for frame in sorted(profile.frames, key=lambda f: -f.compile_seconds):
            stacks = _outermost([s for s in frame.block_stacks if s.argument == "self" and s.count >= MIN_BLOCKS])
            if is_resume(frame.name) or not stacks:
                continue
            match = _match(frame, sites, project)
            if match is None:
                continue
            path, site = match
            if (path, site.line) in findings:
                continue
            refs = [StackRef(s.path, s.block.rsplit(".", 1)[-1], s.file, s.line, s.count, s.container) for s in stacks]
            source = project.source(path)
            assert source is not None, "its compile sites were read from it"
            findings[(path, site.line)] = self._finding(source, path, site, refs, training, profile, project, frame)
        return list(findings.values())

    def honour_facts(self, finding: Finding, profile: Profile, source: SourceFile) -> Finding | None:
        """Left out where the run recorded every stack's blocks, fewer than MIN_BLOCKS of each."""
        blocks = [(b["file"], b["block"]) for b in finding.params.get("blocks", [])]
        return None if recorded_too_few(profile, blocks) else finding

    def plan_static(self, source: SourceFile, path: str) -> list[Finding]:
        try:
            sites = compile_sites(source)
        except SourceError:
            return []
        if not sites:
            return []
        analysis = Analysis(source)
        training = training_in(source, path, analysis.tree)
        findings = []
        for site in sites:
            class_name = module_class(analysis, site)
            if class_name is None:
                continue
            refs = _outermost_refs(
                [r for r in static_stacks(analysis, path, class_name) if r.count is None or r.count >= MIN_BLOCKS]
            )
            if not refs:
                continue
            finding = self._finding(source, path, site, refs, training, None, None, None, analysis=analysis)
            finding.confidence = "static"
            findings.append(finding)
        return findings

    def _finding(
        self,
        source: SourceFile,
        path: str,
        site: CompileSite,
        refs: list[StackRef],
        training: str | None,
        profile: Profile | None,
        project: Project | None,
        frame: Frame | None,
        *,
        analysis: Analysis | None = None,
    ) -> Finding:
        blockers: list[str] = []
        risks: list[str] = []
        notes: list[str] = []
        if site.problem:
            blockers.append(f"{site.problem}: the statement cannot be replaced as it is written")
        version = torch_release(profile.torch_version) if profile is not None else _installed_release()
        if version is not None and version < MIN_TORCH:
            blockers.append(f"torch {'.'.join(map(str, version))} has no `nn.Module.compile()` (added in 2.2)")
        self._stack_problems(source, path, refs, training, project, frame, analysis, (blockers, risks, notes))
        if site.target is not None and site.target != site.module:
            wrapper_api = [w for w in ("_orig_mod", "state_dict") if re.search(rf"\b{w}\b", source.text)]
            if wrapper_api:
                risks.append(
                    f"the program uses `{'`, `'.join(wrapper_api)}`: without `torch.compile`'s wrapper "
                    f"`{site.target}` is the model itself (no `_orig_mod`, and `state_dict()` keys lose "
                    "their `_orig_mod.` prefix)"
                )
        if site.kind == "decorator" and not blockers:
            problem = _decorator_target_problem(source, path, refs)
            if problem:
                blockers.append(problem)
        existing = {expr for _, expr in regional_loops(source)}
        refs_to_compile = [r for r in refs if f"{site.module}{module_path_code(r.path)}" not in existing]
        if not refs_to_compile:
            notes.append("the blocks are already compiled one by one here: only the whole-model compile goes")
        stacks_text = " and ".join(
            f"{r.count if r.count is not None else 'its'} `{r.block}` blocks (`{r.path}`)" for r in refs
        )
        what = "the blocks" if len(refs) > 1 else f"the `{refs[0].block}` blocks"
        first = site.line
        assert site.end_line is not None, "parsed: every statement has its end"
        location = Location(
            file=path,
            line=first,
            end_line=site.end_line,
            col=0,
            end_col=len(source.lines[site.end_line - 1]) if site.end_line <= len(source.lines) else None,
            function=None,
        )
        evidence, blocks, inputs = _evidence(path, site, refs, training, frame)
        finding = Finding(
            rule=self.id,
            file=path,
            location=location,
            # Never [*]: the whole model's callable stops compiling, so its outputs cannot be
            # compared by verify, and the steady state is a trade-off (see the docstring).
            safety=Safety.UNSAFE,
            message=self.message.format(module=site.called, stacks=stacks_text, what=what),
            params={
                "kind": site.kind,
                "line": site.line,
                "module": site.module,
                "target": site.target,
                "keywords": site.keywords,
                "paths": [r.path for r in refs_to_compile],
                "blocks": [{"block": r.block, "path": r.path, "file": r.file} for r in refs],
            },
            evidence=evidence,
        )
        _weigh(finding, training, frame, blocks, inputs, (blockers, risks, notes))
        return finding

    def _stack_problems(
        self,
        source: SourceFile,
        path: str,
        refs: list[StackRef],
        training: str | None,
        project: Project | None,
        frame: Frame | None,
        analysis: Analysis | None,
        said: tuple[list[str], list[str], list[str]],
    ) -> None:
        """What each stack's blocks say against compiling them one by one, added to ``said``
        (blockers, risks, notes): a region already, a loop the analysis cannot follow, a per-layer
        cache, a forward that reads the index the block was built with."""
        blockers, risks, notes = said
        cache_off = turns_off_cache(source)
        for ref in refs:
            block_analysis = _analysis_for(ref, path, analysis, project)
            if block_analysis is None:
                continue
            site_in_file = ref.site
            if site_in_file is None and frame is not None and not os.path.isabs(frame.file):
                site_in_file = _loop_site(project, frame, ref)
            forward = block_analysis.all_methods(ref.block).get("forward")
            if forward is not None and already_marked(forward):
                blockers.append(
                    f"`{ref.block}.forward` is a nested compile region already (RF004, or by hand): "
                    "compiling the blocks one by one as well adds nothing"
                )
                continue
            checks = stack_checks(block_analysis, ref.block, site_in_file)
            if checks.loop_problem:
                blockers.append(checks.loop_problem)
            if checks.unchecked:
                risks.append(checks.unchecked)
            if checks.per_layer_cache:
                calls = ", ".join(checks.per_layer_cache[:2])
                if ref.file != path:
                    calls = f"{_shown(ref.file)}: {calls}"
                if cache_off is None:
                    if training:
                        advice = "pass `use_cache=False` to the model (training needs no cache) to make this fix apply"
                    elif os.path.isabs(ref.file):
                        advice = (
                            "decoding needs the cache, so the whole-model compile stays; a nested compile region "
                            f"(RF004) would go on `{ref.block}.forward` in {_shown(ref.file)}, a pip package's "
                            "file, which is not edited"
                        )
                    else:
                        advice = "decoding needs the cache, so the whole-model compile stays (see RF004)"
                    blockers.append(
                        f"`{ref.block}` updates a key/value cache per layer ({calls}): compiled one by one, "
                        "each layer would compile on its own (measured: 4 compiles for 4 Llama layers, and "
                        f"past 8 layers the rest run eagerly at torch's recompile limit); {advice}"
                    )
                else:
                    notes.append(
                        f"`{ref.block}` keeps a per-layer cache ({calls}); the program passes "
                        f"`use_cache=False` ({path}:{cache_off}), so one compile serves every layer"
                    )
            if checks.index_reads:
                risks.append(
                    f"the `{ref.block}` blocks are built with their index and their forward reads "
                    f"{', '.join(checks.index_reads[:3])}: torch guards a module's int attributes by "
                    "value, so each block may compile on its own"
                )

    # -- one fix per stack of blocks -------------------------------------------------------
    def claims(self, finding: Finding) -> list[Claim]:
        """Every stack of blocks the fix compiles one by one, by its path from the compiled
        module (RF004 claims a stack by the same name: ``stack of `Block` blocks``)."""
        return [
            Claim(f"stack of `{stack.get('block')}` blocks", str(stack.get("path", "")), BLOCKS_ONE_BY_ONE)
            for stack in finding.params.get("blocks", [])
        ]

    def prefer(self, finding: Finding, rival: Finding) -> Preference:
        """Against a nested compile region on the same blocks (RF004): ``block_boundaries``."""
        return preference(finding, rival)

    # -- rewriting ---------------------------------------------------------------------
    def fix(self, finding: Finding, source: SourceFile, torch_name: str) -> list[Edit]:
        p = finding.params
        site = next(
            (
                s
                for s in compile_sites(source)
                if s.line == p["line"] and s.kind == p["kind"] and s.module == p["module"]
            ),
            None,
        )
        if site is None:
            return []
        keywords = ", ".join(site.keywords)
        if site.kind == "decorator":
            return self._move_decorator(finding, source, site, torch_name, keywords)
        statement = site.statement
        assert statement is not None and statement.end_lineno is not None and statement.end_col_offset is not None
        line_text = source.lines[statement.lineno - 1]
        indent = line_text[: len(line_text) - len(line_text.lstrip())]
        start_col = source.char_column(statement.lineno, statement.col_offset)
        end_text = source.lines[statement.end_lineno - 1]
        end_col = source.char_column(statement.end_lineno, statement.end_col_offset)
        rest = end_text[end_col:].strip()
        if line_text[:start_col].strip() or (rest and not rest.startswith("#")):
            return []  # shares its line with another statement: not a line of its own to replace
        var = _loop_variable(source, statement)
        lines = []
        for path in p["paths"]:
            lines.append(f"{indent}for {var} in {site.module}{module_path_code(path)}:")
            lines.append(f"{indent}    {var}.compile({keywords})")
        if site.target is not None and site.target != site.module:
            lines.append(f"{indent}{site.target} = {site.module}")
        if rest:  # the statement's trailing comment stays with what replaces it
            lines[-1] += f"  {rest}"
        start = source.offset(statement.lineno, 0)
        end = source.line_offsets[statement.end_lineno]
        ending = _line_ending(source.text[start:end])
        return [Edit(finding.file, start, end, (ending or "\n").join(lines) + ending, self.id)]

    def _move_decorator(
        self, finding: Finding, source: SourceFile, site: CompileSite, torch_name: str, keywords: str
    ) -> list[Edit]:
        """``@torch.compile`` from the model's forward onto each block class's forward."""
        decorator = site.decorator
        assert decorator is not None and decorator.end_lineno is not None, "a decorator site's"
        first, last = decorator.lineno, decorator.end_lineno
        line_text = source.lines[first - 1]
        if line_text[: source.char_column(first, decorator.col_offset)].strip() != "@":
            return []
        edits = [Edit(finding.file, source.offset(first, 0), source.line_offsets[last], "", self.id)]
        ending = _line_ending(source.text[source.offset(first, 0) : source.line_offsets[last]]) or "\n"
        tree = tree_of(source)
        classes = {n.name: n for n in tree.order if isinstance(n, ast.ClassDef)}
        call = f"@{torch_name}.compile({keywords})" if keywords else f"@{torch_name}.compile"
        for block in dict.fromkeys(b["block"] for b in finding.params["blocks"]):
            forward = next((n for n in classes[block].body if isinstance(n, DEFS) and n.name == "forward"), None)
            if forward is None:
                return []
            indent = source.lines[forward.lineno - 1][: source.char_column(forward.lineno, forward.col_offset)]
            at = source.offset(forward.lineno, 0)
            edits.append(Edit(finding.file, at, at, f"{indent}{call}{ending}", self.id))
        return edits


def _evidence(
    path: str, site: CompileSite, refs: list[StackRef], training: str | None, frame: Frame | None
) -> tuple[dict[str, Any], int, int]:
    """The Finding's evidence (the compile, the stacks, the profiled steady-state call), with the
    blocks and the graph inputs their boundaries pass."""
    evidence: dict[str, Any] = {
        "compile": f"{path}:{site.line}",
        "module": site.module,
        "stacks": [{"path": r.path, "block": r.block, "count": r.count, "file": r.file, "line": r.line} for r in refs],
        "trains": bool(training),
    }
    blocks = sum(r.count or 0 for r in refs)
    recorded = {s.path: s.graph_inputs for s in frame.block_stacks} if frame is not None else {}
    inputs = boundary_inputs((r.count or 0, recorded.get(r.path)) for r in refs)
    if blocks:
        evidence["blocks"] = blocks
        evidence["boundary_inputs"] = inputs
    if frame is not None:
        evidence.update(
            {
                "frame": f"{frame.name} ({frame.file}:{frame.first_line})",
                "compiles": len(frame.compiles),
                "compile_seconds": round(frame.compile_seconds, 3),
            }
        )
        if frame.steady is not None:
            # The calling thread's CPU time where recorded: a busy machine inflates it far less.
            evidence["steady_ms"] = round(1000 * frame.steady.step_seconds, 3)
            evidence["steady_wall_ms"] = round(1000 * frame.steady.seconds, 3)
            evidence["steady_calls"] = frame.steady.calls
    return evidence, blocks, inputs


def _weigh(
    finding: Finding,
    training: str | None,
    frame: Frame | None,
    blocks: int,
    inputs: int,
    said: tuple[list[str], list[str], list[str]],
) -> None:
    """The finding's safety and notes: what training or the steady state says, then no fix with
    a blocker, unsafe with a risk."""
    blockers, risks, notes = said
    if training:
        notes.insert(0, f"the program trains ({training}): the blocks compiled one by one train exactly")
    else:
        # Inference runs the steady state for as long as it serves: its cost is the user's to weigh.
        share = boundary_share(inputs, frame.steady.step_seconds) if frame is not None and frame.steady else None
        cost = (
            f"the profiled steady-state call took {1000 * frame.steady.step_seconds:.1f} ms, to which {blocks} "
            f"block boundaries add about {100 * share:.1f}% (about 15 us for each of the {inputs} graph inputs they pass)"
            if frame is not None and frame.steady is not None and share is not None
            else "each block boundary adds about 15 us a call for each input of a block's graph (no steady-state call was timed)"
        )
        risks.append(
            f"no training step was seen, and for inference the steady state is what the compile pays for: {cost}"
        )
    notes.append(TRADE_OFF)
    if blockers:
        finding.safety = Safety.NONE
        finding.notes = blockers + risks + notes
    elif risks:
        finding.safety = Safety.UNSAFE
        finding.notes = risks + notes
    else:
        finding.notes = notes


def _shown(path: str) -> str:
    """A path as a note shows it: a pip package's file from its package directory on."""
    return path.split("site-packages" + os.sep, 1)[-1]


def _line_ending(text: str) -> str:
    for ending in ("\r\n", "\n", "\r"):
        if text.endswith(ending):
            return ending
    return ""


def _decorator_target_problem(source: SourceFile, path: str, refs: list[StackRef]) -> str | None:
    classes = {n.name: n for n in source.syntax.body if isinstance(n, ast.ClassDef)}
    for ref in refs:
        # The blocks' class by identity: its file and name (this file's class of the same name
        # is another class).
        cls_ = classes.get(ref.block) if ref.file == path else None
        if cls_ is None:
            return (
                f"`{ref.block}` is not a class of this file: the decorator cannot move onto its forward here; "
                f"compile the blocks where the model is built (`for block in model{module_path_code(ref.path)}: block.compile()`)"
            )
        forward = next((n for n in cls_.body if isinstance(n, DEFS) and n.name == "forward"), None)
        if forward is None:
            return f"`{ref.block}` inherits its forward: the decorator has no `def forward` of its own to go on"
        if any(dotted(d.func if isinstance(d, ast.Call) else d).endswith("compile") for d in forward.decorator_list):
            return f"`{ref.block}.forward` is already compiled"
    return None


def _loop_variable(source: SourceFile, statement: ast.stmt) -> str:
    """A name for the loop variable that no code of its scope reads: in a function, any name of
    the function (and what it nests); at module level, the module's own names and the names its
    functions read without binding them (globals)."""
    tree = tree_of(source)
    scope = next((a for a in tree.ancestors(statement) if isinstance(a, DEFS)), None)
    if scope is not None:
        used = identifiers(tree.walk(scope))
    else:
        used = identifiers(n for n in tree.walk(source.syntax, skip_defs=True))
        for func in (n for n in tree.order if isinstance(n, (*DEFS, ast.Lambda))):
            nodes = list(tree.walk(func))
            bound = {n.id for n in nodes if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load)}
            bound |= {a.arg for a in nodes if isinstance(a, ast.arg)}
            used |= {n.id for n in nodes if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)} - bound
            used |= {n for g in nodes if isinstance(g, (ast.Global, ast.Nonlocal)) for n in g.names}
    return next(name for name in ("block", "layer", "blk", "block_", "block__") if name not in used)


def _outermost(stacks: list[BlockStack]) -> list[BlockStack]:
    """Stacks not inside another stack's blocks (a block's own ModuleList of experts)."""
    paths = [s.path for s in stacks]
    return [s for s in stacks if not any(s.path.startswith(p + ".") for p in paths if p != s.path)]


def _outermost_refs(refs: list[StackRef]) -> list[StackRef]:
    paths = [r.path for r in refs]
    return [r for r in refs if not any(r.path.startswith(p + ".") for p in paths if p != r.path)]


def _match(frame: Frame, sites: dict[str, list[CompileSite]], project: Project) -> tuple[str, CompileSite] | None:
    """The compile statement that compiled ``frame``'s module: a decorator on that very def, or the
    statement binding the name the program calls it by at a recorded call site."""
    for path, found in sites.items():
        for site in found:
            if site.kind == "decorator" and path == frame.file:
                assert site.decorated is not None, "a decorator site's"
                lines = [d.lineno for d in site.decorated.decorator_list] + [site.decorated.lineno]
                if min(lines) <= frame.first_line <= site.decorated.lineno:
                    return path, site
    candidates = [(path, s) for path, found in sites.items() for s in found if s.kind != "decorator"]
    called = []
    for compile_ in frame.compiles:
        for location in reversed(compile_.stack):
            if location.file not in sites:
                continue
            text = _call_text(project.source(location.file), location)
            for path, site in candidates:
                if re.search(rf"(?<![\w.]){re.escape(site.called)}(?!\w)", text) and (path, site) not in called:
                    called.append((path, site))
    if len(called) >= 1:
        return called[0]
    if len(candidates) == 1:
        return candidates[0]
    return None


def _call_text(source: SourceFile | None, location: Location) -> str:
    if source is None or not 0 < location.line <= len(source.lines):
        return ""
    if location.col is None or location.end_line is None or location.end_col is None:
        return source.lines[location.line - 1]
    start = source.byte_offset(location.line, location.col)
    end = source.byte_offset(location.end_line, location.end_col)
    return source.text[start:end]


def _loop_site(project: Project | None, frame: Frame, ref: StackRef):
    """The loop of the compiled frame's file that runs this stack (for the per-layer function check)."""
    if project is None:
        return None
    source = project.source(frame.file)
    if source is None:
        return None
    try:
        analysis = Analysis(source)
    except SourceError:
        return None
    func = analysis.function_def(frame.first_line, frame.name)
    if func is None:
        return None
    for site in analysis.reachable_sites(func):
        if site.block == ref.block and (ref.path == site.attr or ref.path.endswith("." + site.attr)):
            return site
    return None


def _analysis_for(ref: StackRef, path: str, analysis: Analysis | None, project: Project | None) -> Analysis | None:
    """The analysis of the file defining the blocks' class (read only: a pip package's file is read,
    never edited)."""
    if analysis is not None and ref.file == path:
        return analysis
    source = project.source(ref.file) if project is not None else None
    if source is None and project is not None:
        source = project.as_is(ref.file)
    if source is None:
        return None
    try:
        return Analysis(source)
    except SourceError:
        return None


def _installed_release() -> tuple[int, int] | None:
    """Static mode's torch: the user's interpreter's (``installed_torch_version``)."""
    return torch_release(installed_torch_version())


RULE = RegionalCompile()
