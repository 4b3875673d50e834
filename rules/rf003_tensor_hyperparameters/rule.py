"""RF003 tensor-lr: a learning rate that a scheduler changes recompiles the compiled optimizer
step, because the optimizer holds it as a Python float."""

from __future__ import annotations

import os
import re
from typing import Any

import libcst as cst

from recompile_fix.analysis.project import Project
from recompile_fix.analysis.source import SourceFile
from recompile_fix.analysis.torch_vocabulary import makes_tensor
from recompile_fix.edits.compile_keyword import append_keywords, compile_keyword_edits
from recompile_fix.edits.edit import Edit
from recompile_fix.findings.finding import UNPROVEN, Finding, Safety, frame_evidence
from recompile_fix.findings.releases import DYNAMIC_FLOATS, TorchApi
from recompile_fix.findings.rule import Example, Rule
from recompile_fix.profile.model import Frame, Location, Profile
from recompile_fix.rules.rf003_tensor_hyperparameters.compiled_step import (
    compiled_step,
    dynamic_step_finding,
    floats_reach_the_step,
    innermost_user_location,
)
from recompile_fix.rules.rf003_tensor_hyperparameters.lr_writes import is_tensor_call, lr_assignments
from recompile_fix.rules.rf003_tensor_hyperparameters.param_groups import shared_default_problem
from recompile_fix.rules.rf003_tensor_hyperparameters.readbacks import lr_readbacks

__all__ = ["RULE", "TensorHyperparameters"]

# ``opt.param_groups[0]['lr']``, and an item of a tuple-valued key (``...['betas'][0]``).
_PARAM_GROUP = re.compile(r"""^(?P<owner>.+?)\.param_groups\[(?P<group>\d+)\]\[['"](?P<key>\w+)['"]\](?:\[\d+\])?$""")
_OPTIM_FILE = re.compile(r"(?:^|/)torch/optim/(?P<module>\w+)\.py$")
# Each optimizer: the torch/optim module its `step` lives in (AdamW is an Adam subclass since
# 2.6; adamw.py had its own step before) and its default lr (checked against torch by a test).
OPTIMIZERS = {
    "Adam": (("adam",), "0.001"),
    "AdamW": (("adam", "adamw"), "0.001"),
    "SGD": (("sgd",), "0.001"),
    "RMSprop": (("rmsprop",), "0.01"),
    "Adagrad": (("adagrad",), "0.01"),
    "Adamax": (("adamax",), "0.002"),
    "NAdam": (("nadam",), "0.002"),
    "RAdam": (("radam",), "0.001"),
    "ASGD": (("asgd",), "0.01"),
    "Adadelta": (("adadelta",), "1.0"),
    "Rprop": (("rprop",), "0.01"),
    "SparseAdam": (("sparse_adam",), "0.001"),
    "Adafactor": (("_adafactor",), "0.01"),
}
# A tensor lr with foreach=True needs capturable=True in these (ValueError at construction).
CAPTURABLE_FOR_FOREACH = {"Adam", "AdamW"}
# Schedulers keep a tensor lr (fill_ in place) since torch 2.4 (pytorch#123753); these wrote a
# Python float back, or aliased the tensor, until the version given (pytorch#163098, #162360).
TENSOR_LR = TorchApi("torch.tensor", None, "every release")
TENSOR_LR_IN_SCHEDULERS = TorchApi("torch.optim.lr_scheduler with a tensor lr", (2, 4), "pytorch#123753", in_text=False)
TENSOR_LR_IN_REDUCE_ON_PLATEAU = TorchApi(
    "torch.optim.lr_scheduler.ReduceLROnPlateau with a tensor lr", (2, 10), "pytorch#163098", in_text=False
)
TENSOR_LR_IN_SEQUENTIAL = TorchApi(
    "torch.optim.lr_scheduler.SequentialLR with a tensor lr", (2, 10), "pytorch#162360", in_text=False
)


def _since(api: TorchApi) -> tuple[int, int]:
    """The first release with ``api``, which every API here names."""
    assert api.since is not None, api.name
    return api.since


TENSOR_LR_SCHEDULERS_SINCE = _since(TENSOR_LR_IN_SCHEDULERS)
FLOAT_WRITERS = {
    "ReduceLROnPlateau": (
        _since(TENSOR_LR_IN_REDUCE_ON_PLATEAU),
        "writes a Python float back into `param_groups[i]['lr']`",
    ),
    "SequentialLR": (
        _since(TENSOR_LR_IN_SEQUENTIAL),
        "aliases the tensor lr with `initial_lr`, corrupting later learning rates",
    ),
}
# Schedulers of other libraries that set `param_group['lr'] = value` (a Python float) at every
# step on every release: timm's (`Scheduler.update_groups`). A tensor lr does not survive them.
LIBRARY_FLOAT_WRITERS = ("timm.scheduler.",)
# These write Python floats into `betas`/`momentum` every step while cycle_momentum=True.
MOMENTUM_CYCLERS = {"OneCycleLR", "CyclicLR"}


class TensorHyperparameters(Rule):
    """
    ## What it does
    Makes the learning rate a tensor where the optimizer is constructed,
    `torch.optim.Adam(params, lr=torch.tensor(0.01, dtype=torch.float64))`, when a compiled
    optimizer step recompiles because an LR scheduler changes `param_groups[i]['lr']`.

    ## Why is this bad?
    A compiled `optimizer.step()` guards the Python float lr on its value
    (`self.param_groups[0]['lr'] == 0.01`). Every scheduler step changes it: with `dynamic=False`
    `step` compiles again every step (until the recompile limit), with `dynamic=None` once more
    before the float becomes dynamic. A tensor lr is a graph input that the scheduler updates in
    place (`fill_`), so `step` compiles once. So is a float that torch traces as an input from
    the first compile, as it does under `dynamic=True` (torch >= 2.6): the rule's other fix, at
    the step's `torch.compile` call.

    ## Example
    ```python
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    sched = torch.optim.lr_scheduler.ExponentialLR(opt, 0.9)
    ```
    Use instead:
    ```python
    opt = torch.optim.Adam(model.parameters(), lr=torch.tensor(0.01, dtype=torch.float64))
    sched = torch.optim.lr_scheduler.ExponentialLR(opt, 0.9)
    ```

    ## Fix safety
    The guard fires in torch's `optim/<name>.py`; the fix goes where the user builds the
    optimizer, found from the compiles' call stacks and the profiled files (also an lr given
    positionally, in param-group dicts, or left to its default). float64 keeps the scheduler's
    arithmetic in double precision as with a float lr (the PyTorch guide's float32
    `torch.tensor(0.01)` is within 2e-8 but not bit-identical), but the compiled update reads a
    0-d tensor where it read a number, and rounds differently: measured on torch 2.13, Adam's
    parameters after 8 steps under ExponentialLR within 3e-8 (its first steps' outputs bit for
    bit), 1e-9 relative on AdamW's under a cosine schedule (diffusers' `get_scheduler("cosine")`,
    6 steps), up to 3e-8 on SGD's. So the fix is unsafe, unproven: `fix --unsafe-fixes` keeps it
    where a run of the program shows fewer compiles and the same outputs, and the parameters the
    optimizer holds at exit, within `assert_close`. A program that anneals the lr itself, as CleanRL's PPO does
    (`optimizer.param_groups[0]["lr"] = lrnow`, or a loop over `opt.param_groups`), gets
    `...["lr"].fill_(lrnow)` there, which keeps the tensor (LeanRL's hand fix); its Adam updates
    then round within 3e-8 of the float lr's (measured on golden RF003/ppo_anneal_lr).
    `foreach=True` on Adam/AdamW needs `capturable=True` for a tensor lr: the fix adds it and is
    unsafe (on CPU, eager `capturable` steps raise; use `foreach=False` there). No edit where a
    tensor does not help: when the Profile's run of the file recorded no recompile of the lr (a
    static finding is then overruled), when the changing hyper-parameter is not `lr` (`OneCycleLR` and
    `CyclicLR` write Python floats into `betas`/`momentum` while `cycle_momentum=True`), when the
    program assigns `group['lr'] = ...` where the fix cannot tell the group is this optimizer's
    (another file, a dict passed around), when `ReduceLROnPlateau` writes floats back
    (torch < 2.10) or a timm scheduler does (`CosineLRScheduler`: every release), or when the schedulers cannot keep a tensor lr (torch < 2.4). torch may
    compile one small extra frame (`_to_scalar`) once: judge by recompiles of `step`. Where the
    program reads the lr back (`sched.get_last_lr()`, `opt.param_groups[0]['lr']`), it gets a 0-d
    tensor there: `print` shows `tensor(...)` and `round(lr, 6)` raises, so the fix is unsafe and
    unproven there (`fix` keeps it only if a run of the program succeeds with it), and the note
    names the lines.

    The other fix, `@torch.compile(dynamic=True)` where the step is compiled (found from the
    compiles' call stacks), keeps the lr a Python float that the compiled update reads as before:
    measured on torch 2.13, Adam under ExponentialLR, the parameters bit for bit and 5 -> 4
    compiles (PGO's second run: 4), and AdamW under OneCycleLR, whose `betas` change beside the
    lr so that no tensor lr helps, 5 -> 4. It also traces the sizes of the tensors the compiled
    code reads as dynamic. Where that code is only the optimizer's `step`/`zero_grad`, those are
    the parameters and their state, whose sizes never change, in a pointwise update: safe
    (measured on torch 2.13 under inductor on CPU, Adam and AdamW over 81 parameters of 40 sizes:
    bit for bit, 5 -> 4 compiles, 38 s of compiling against the static step's 48 s), and the
    tensor lr is its fallback (`fix` tries it only where `dynamic=True` is not kept). Where the
    compiled code is more (a whole training step) it is a trade-off (unproven under a backend
    that generates no kernels, `backend="eager"`: `fix` tries it), and the tensor lr's fallback: `apply --unsafe-fixes` writes the tensor lr, and `fix` tries `dynamic=True` only
    where it does not keep the tensor lr; where the program reads the lr back the two swap places. No
    such fix under CUDA graphs (`mode="reduce-overhead"`), which specialise every float, nor
    where inductor may compile the step and specialise the float again: only Adam's and AdamW's
    lr reach its kernels as inputs (SGD's `alpha=-lr` and the betas of a `lerp_` do not), so
    for the rest the program must compile with the eager backend itself. The tensor lr is no fix
    where param groups would share it (torch puts the constructor's one tensor in every group
    that sets no `lr`) or where the groups are built out of sight.

    ## Profile evidence
    `self.param_groups[0]['lr'] == 0.01   # for group in self.param_groups:  # optim/adam.py:229
    in step`, the frame `step` in torch's `optim/adam.py`, and the user frames on its compiles'
    stacks. Static mode (no Profile) finds the documented pattern in one file: a float lr, a
    scheduler on that optimizer, and a compiled function that calls its `step()`.
    """

    id = "RF003"
    # A tensor lr makes torch compile `Optimizer._to_scalar` once (a new frame that pays off).
    verify_allows = ("frame_once",)
    name = "tensor-lr"
    message = "{optimizer}'s {key} changes every step and recompiles its compiled `step` ({compiles} compiles): {fix}"
    consumes = ("optimizer_param_group",)
    triggers = ("optim",)
    emits = (
        TENSOR_LR,
        TENSOR_LR_IN_SCHEDULERS,
        TENSOR_LR_IN_REDUCE_ON_PLATEAU,
        TENSOR_LR_IN_SEQUENTIAL,
        DYNAMIC_FLOATS,
    )
    # Static mode's pattern also needs a torch LR scheduler and a compile in the same file.
    requires = ("lr_scheduler", "compile")
    examples = (
        Example(
            before="opt = torch.optim.Adam(mod.parameters(), lr=0.01)\n",
            after="opt = torch.optim.Adam(mod.parameters(), lr=torch.tensor(0.01, dtype=torch.float64))\n",
            golden="RF003/seed_lr_scheduler",
        ),
    )

    # -- planning ----------------------------------------------------------------------
    def plan(self, profile: Profile, project: Project) -> list[Finding]:
        version = profile.torch_release
        frames: dict[tuple, list] = {}
        for frame in profile.frames:
            # Every hyper-parameter the run saw change (a OneCycleLR's betas beside its lr), where
            # torch named one (not a recompile it put down to the optimizer's state being made).
            named = any(r.kind == "optimizer_param_group" for r in frame.reasons())
            for reason in frame.value_reasons() if named else ():
                match = _PARAM_GROUP.match(reason.source or "") if reason.kind == "optimizer_param_group" else None
                if match:
                    frames.setdefault(frame.key, [frame, set(), set()])[1].add(match.group("key"))
                    frames[frame.key][2].add(match.group("owner"))
        findings: list[Finding] = []
        done: set[tuple] = set()
        for frame, keys, owners in frames.values():
            files = _user_files(frame, profile, project)
            constructions = []
            for file in files:
                for built in _Construction.find(project.source(file), file):
                    if built.matches(frame, owners) and (file, built.line) not in done:
                        constructions.append(built)
            evidence = frame_evidence(
                frame, [r for r in frame.reasons() if r.kind == "optimizer_param_group"], keys=sorted(keys)
            )
            if not constructions:
                # Built where the profiled files do not show (timm's `create_optimizer_v2`): no
                # tensor lr, but `dynamic=True` at the compiled step needs no construction.
                dynamic = (
                    self._dynamic_step(frame, keys, [], findings, evidence, version, project)
                    if floats_reach_the_step(profile, frame, keys)
                    else []
                )
                for found in dynamic:
                    found.notes.append(
                        f"no `torch.optim` construction in the profiled files ({', '.join(files) or 'none'}): the lr "
                        "cannot be made a tensor where the optimizer is built"
                    )
                if dynamic:
                    findings.extend(dynamic)
                    continue
                site = innermost_user_location(frame) or Location(file=frame.file, line=frame.first_line)
                findings.append(
                    Finding(
                        rule=self.id,
                        file=site.file,
                        location=site,
                        safety=Safety.NONE,
                        evidence=evidence,
                        message=self.message.format(
                            optimizer="the optimizer", key=_keys(keys), compiles=frame.compile_count, fix="no edit"
                        ),
                        notes=[
                            f"no `torch.optim` construction matching `{frame.name}` in {frame.file} was found in "
                            f"the profiled files ({', '.join(files) or 'none'})"
                        ],
                    )
                )
                continue
            for built in constructions:
                done.add((built.file, built.line))
                findings.append(self._finding(built, keys, frame, evidence, version, project, files))
            if floats_reach_the_step(profile, frame, keys):
                findings.extend(self._dynamic_step(frame, keys, constructions, findings, evidence, version, project))
        return findings

    def _dynamic_step(self, frame, keys, constructions, findings, evidence, version, project) -> list[Finding]:
        """``dynamic=True`` at the step's compile call: a fallback for the tensor lr where that
        one is offered, the only fix where it is not (betas beside the lr, floats written back),
        and the preferred one where the program reads the lr back (a 0-d tensor there can fail)."""
        label = f"`{constructions[0].label}`" if len(constructions) == 1 else "the optimizer"
        message = self.message.format(
            optimizer=label, key=_keys(keys), compiles=frame.compile_count, fix="compile the step with `dynamic=True`"
        )
        offered = [f for f in findings if f.fixable and f.evidence is evidence]
        found = dynamic_step_finding(frame, project, version, message, evidence)
        if found is None:
            return []
        # The tensor lr's fallback, unless `dynamic=True` is safe (only the step compiled: the
        # same rounding) or the program reads the lr back (a float stays a float).
        read_back = any(f.params.get("reads_back") for f in offered)
        preferred = read_back or found.safety is Safety.SAFE
        for fallback in (offered if preferred else [found]) if offered else []:
            fallback.fallback = True
            fallback.notes.append("tried where the other fix of these recompiles is not kept")
        if read_back:
            found.notes.append("preferred to the tensor lr: the lr stays a float where the program reads it back")
        elif preferred and offered:
            found.notes.append("preferred to the tensor lr, which rounds differently")
        return [found]

    def plan_static(self, source: SourceFile, path: str) -> list[Finding]:
        """The documented pattern from the source alone: a float lr, a scheduler on that
        optimizer, and a compiled function (or compiled `step`) that calls its `step()`."""
        findings = []
        for built in _Construction.find(source, path):
            if built.lr_is_tensor or built.name is None:
                continue
            schedulers = built.schedulers(source)
            compiled = compiled_step(source, built.name)
            if not schedulers or compiled is None:
                continue
            evidence = {"scheduler": f"{path}:{schedulers[0].line}", "compiled_step": f"{path}:{compiled}"}
            finding = self._finding(built, {"lr"}, None, evidence, None, None, [path], static_source=source)
            finding.confidence = "static"
            finding.message = finding.message.replace(
                "changes every step and recompiles its compiled `step` (several compiles)",
                f"is a Python float that `{schedulers[0].cls}` changes, and `{built.name}.step()` is compiled",
            )
            finding.notes.insert(
                0,
                f"found without a Profile: `{schedulers[0].cls}` at line {schedulers[0].line} "
                f"changes the lr, and the compiled code at line {compiled} calls "
                f"`{built.name}.step()`; profile the program to confirm",
            )
            findings.append(finding)
        return findings

    def honour_facts(self, finding: Finding, profile: Profile, source: SourceFile) -> Finding:
        """A run of this file that compiled and recorded no recompile of an optimizer's lr
        contradicts the static guess: no edit (a tensor lr would change nothing it measured)."""
        ran_here = finding.file in profile.sources and any(frame.compiles for frame in profile.frames)
        lr_recompiled = any(
            reason.kind == "optimizer_param_group" and "'lr'" in (reason.source or "").replace('"', "'")
            for frame in profile.frames
            for reason in frame.reasons()
        )
        if finding.safety is Safety.NONE or not ran_here or lr_recompiled:
            return finding
        finding.safety = Safety.NONE
        finding.notes = [
            "the Profile's run of this file recorded no recompile for a changing lr: "
            "a tensor lr would change nothing it measured; no edit"
        ]
        finding.message = finding.message.split(": make the lr", 1)[0] + ": no edit"
        return finding

    def _finding(
        self,
        built: "_Construction",
        keys: set[str],
        frame: Frame | None,
        evidence: dict,
        version,
        project: Project | None,
        files: list[str],
        static_source: SourceFile | None = None,
    ) -> Finding:
        source = static_source or (project.source(built.file) if project is not None else None)
        assert source is not None, "the construction was read from it"
        compiles = frame.compile_count if frame else "several"
        notes: list[str] = []
        blockers: list[str] = []
        _scheduler_problems(built, source, version, keys, blockers, notes)
        fills = _program_lr_writes(built, files, project, static_source, blockers)
        shared = shared_default_problem(
            source, built.params_arg, built.lr is None or not is_tensor_call(source, built.lr.value)
        )
        blockers.extend([shared] if shared else [])
        if "lr" in keys and keys & {"betas", "momentum"}:
            blockers.append(
                f"{_keys(keys - {'lr'})} changed with the lr at the same steps (recorded): a tensor lr "
                "alone leaves those recompiles"
            )
        elif "lr" not in keys:
            blockers.append(
                f"the changing hyper-parameter is {_keys(keys)}, not `lr`: only a tensor lr is "
                "supported by every optimizer and kept by the schedulers"
            )
        fix = "make the lr a float64 tensor where the optimizer is built"
        if blockers:
            return Finding(
                rule=self.id,
                file=built.file,
                location=built.location,
                safety=Safety.NONE,
                evidence=evidence,
                notes=blockers + notes,
                message=self.message.format(
                    optimizer=f"`{built.label}`", key=_keys(keys), compiles=compiles, fix="no edit"
                ),
            )
        # Unproven: the compiled update reads a float64 0-d tensor where it read a Python float,
        # and rounds differently in some programs (measured on torch 2.13: AdamW under diffusers'
        # cosine schedule, 1e-9 relative on the parameters after 6 steps; exact under
        # ExponentialLR). `fix` keeps it where a run shows the same outputs within assert_close.
        safety = Safety.UNSAFE
        notes.insert(
            0,
            "float64 keeps the scheduler's arithmetic in double precision, as with a float lr; the "
            "compiled update may still round differently with a tensor lr (measured on torch 2.13: "
            "Adam's parameters within 3e-8 under ExponentialLR, 1e-9 relative under a cosine schedule): "
            "unproven, `fix --unsafe-fixes` keeps it where a run shows fewer compiles and the same "
            "outputs within assert_close",
        )
        if built.foreach and not built.capturable and built.cls in CAPTURABLE_FOR_FOREACH:
            safety = Safety.UNSAFE
            notes.append(
                "`foreach=True` with a tensor lr needs `capturable=True` (else ValueError): added; "
                "capturable steps need CUDA/XPU/HPU parameters when run eagerly; on CPU use "
                "`foreach=False` instead"
            )
        if built.lr is None and not built.group_lrs:
            notes.append(f"the lr was left to its default ({built.default}): it is now given explicitly")
        if fills:
            lines = ", ".join(str(source.text.count("\n", 0, f[0]) + 1) for f in fills)
            notes.append(
                f"the program sets the lr itself (line {lines}): written `...['lr'].fill_(value)`, which "
                "keeps the tensor (an assignment would put a Python float back and recompile)"
            )
        reads = [r for file in files for r in lr_readbacks(_source_of(file, project, static_source), file)]
        if reads:
            # A run shows whether the program only prints it (kept) or needs a number (it fails).
            safety = Safety.UNSAFE
            more = f" and {len(reads) - 2} more" if len(reads) > 2 else ""
            notes.append(
                f"the program reads the lr back at {', '.join(reads[:2])}{more}: a 0-d tensor there after this "
                "fix (`round()` of it raises, `print` shows `tensor(...)`); `float(...)` it where a number is needed"
            )
        if frame is not None and frame.limit_hits:
            notes.append("`step` no longer hits the recompile limit")
        return Finding(
            rule=self.id,
            file=built.file,
            location=built.location,
            safety=safety,
            evidence=evidence,
            notes=notes,
            params={**built.params(), "fill": fills, "reads_back": len(reads)},
            message=self.message.format(optimizer=f"`{built.label}`", key=_keys(keys), compiles=compiles, fix=fix),
            # capturable steps run or raise on this program's devices: a run settles it.
            unsafe_because=UNPROVEN,
            tolerance={"why": "the compiled update may round differently with a tensor lr"},
        )

    # -- rewriting ---------------------------------------------------------------------
    def fix(self, finding: Finding, source: SourceFile, torch_name: str) -> list[Edit]:
        p = finding.params
        if "compile_call" in p:  # `dynamic=True` where the step is compiled
            return compile_keyword_edits(finding.file, p, source, self.id)
        edits = []
        for start, end in p["wrap"]:
            value = source.text[start:end]
            edits.append(
                Edit(finding.file, start, end, f"{torch_name}.tensor({value}, dtype={torch_name}.float64)", self.id)
            )
        keywords = []
        if p.get("default") is not None:
            keywords.append(f"lr={torch_name}.tensor({p['default']}, dtype={torch_name}.float64)")
        if p.get("capturable"):
            keywords.append("capturable=True")
        if keywords:
            call = next(n for n in source.nodes(cst.Call) if _position(source, n) == p["call"])
            edits.append(append_keywords(source, finding.file, call, keywords, self.id))
        for start, end, target, value in p.get("fill", ()):
            edits.append(Edit(finding.file, start, end, f"{target}.fill_({value})", self.id))
        return edits

    def already_present(self, finding: Finding, source: SourceFile) -> str | None:
        """Every learning rate it would wrap is already a tensor (``lr=torch.tensor(0.01)``, ours
        or hand-written); those that are drop out of the finding."""
        p = finding.params
        if "compile_call" in p:  # planned only where the call has no `dynamic=True`
            return None
        tensors = [span for span in p["wrap"] if makes_tensor(source.text[span[0] : span[1]])]
        if not tensors:
            return None
        p["wrap"] = [span for span in p["wrap"] if span not in tensors]
        if p["wrap"] or p.get("default") is not None or p.get("capturable") or p.get("fill"):
            return None
        start, end = tensors[0]
        return f"line {source.text.count(chr(10), 0, start) + 1}: `{source.text[start:end]}`"


class _Scheduler:
    def __init__(self, cls: str, line: int, cycles_momentum: bool, writes_floats: bool = False):
        self.cls, self.line, self.cycles_momentum = cls, line, cycles_momentum
        self.writes_floats = writes_floats  # a library's scheduler that sets the lr as a Python float


class _Construction:
    """One ``torch.optim.X(...)`` call in a user file, and what a tensor lr needs there."""

    def __init__(self, source: SourceFile, file: str, call: cst.Call, cls: str):
        self.source, self.file, self.call, self.cls = source, file, call, cls
        pos = source.positions[call]
        self.line = pos.start.line
        self.location = source.location_of(call, file)
        self.default = OPTIMIZERS[cls][1]
        args = call.args
        self.lr = next((a for a in args if a.keyword is not None and a.keyword.value == "lr"), None)
        positional = [a for a in args if a.keyword is None and not a.star]
        if self.lr is None and len(positional) > 1:
            self.lr = positional[1]
        self.group_lrs = []
        given = next((a for a in args if a.keyword is not None and a.keyword.value == "params"), None)
        first = positional[0].value if positional else given.value if given is not None else None
        self.params_arg = first
        if isinstance(first, (cst.List, cst.Tuple)):
            for element in first.elements:
                if isinstance(element.value, cst.Dict):
                    for item in element.value.elements:
                        if (
                            isinstance(item, cst.DictElement)
                            and isinstance(item.key, cst.SimpleString)
                            and item.key.evaluated_value == "lr"
                        ):
                            self.group_lrs.append(item.value)
        self.foreach = _keyword_true(call, "foreach")
        self.capturable = _keyword_true(call, "capturable")
        self.name = _bound_name(source, call)
        self.label = f"{self.name} = {cls}(...)" if self.name else f"{cls}(...)"
        values = ([self.lr.value] if self.lr is not None else []) + self.group_lrs
        self.lr_is_tensor = bool(values) and all(is_tensor_call(source, v) for v in values)

    @classmethod
    def find(cls, source: SourceFile | None, file: str) -> list["_Construction"]:
        found: list[_Construction] = []
        if source is None or "optim" not in source.text:
            return found
        for call in source.nodes(cst.Call):
            qualified = source.qualified_name(call.func)
            if (
                qualified.startswith("torch.optim.")
                and qualified.rsplit(".", 1)[1] in OPTIMIZERS
                and ".lr_scheduler." not in qualified
            ):
                found.append(cls(source, file, call, qualified.rsplit(".", 1)[1]))
        return found

    def matches(self, frame: Frame, owners: set[str]) -> bool:
        """Is this the optimizer whose `step` the frame is? By torch's optim module, or by the
        variable a user-compiled function read it from (``G['opt'].param_groups``)."""
        module = _OPTIM_FILE.search(frame.file.replace(os.sep, "/"))
        if module:
            return module.group("module") in OPTIMIZERS[self.cls][0]
        names = {re.sub(r"""^G\[['"](\w+)['"]\]$""", r"\1", o) for o in owners}
        return self.name is not None and self.name.split(".")[-1] in {n.split(".")[-1] for n in names}

    def schedulers(self, source: SourceFile) -> list[_Scheduler]:
        found: list[_Scheduler] = []
        if self.name is None:
            return found
        for call in source.nodes(cst.Call):
            qualified = source.qualified_name(call.func)
            library = qualified.startswith(LIBRARY_FLOAT_WRITERS)
            if ".lr_scheduler." not in f".{qualified}" and not qualified.startswith("lr_scheduler.") and not library:
                continue
            optimizer = next((a for a in call.args if a.keyword is not None and a.keyword.value == "optimizer"), None)
            optimizer = optimizer or next((a for a in call.args if a.keyword is None), None)
            if optimizer is None or source.code(optimizer.value) != self.name:
                continue
            cycle = next((a for a in call.args if a.keyword is not None and a.keyword.value == "cycle_momentum"), None)
            cycles = cycle is None or not (isinstance(cycle.value, cst.Name) and cycle.value.value == "False")
            found.append(_Scheduler(qualified.rsplit(".", 1)[1], source.positions[call].start.line, cycles, library))
        return found

    def params(self) -> dict:
        wrap = []
        for value in ([self.lr.value] if self.lr is not None else []) + self.group_lrs:
            if not is_tensor_call(self.source, value):
                wrap.append(list(self.source.span(value)))
        return {
            "call": _position(self.source, self.call),
            "wrap": wrap,
            "default": self.default if self.lr is None else None,
            "capturable": self.foreach and not self.capturable and self.cls in CAPTURABLE_FOR_FOREACH,
            "optimizer": self.cls,
        }


def _scheduler_problems(
    built: _Construction,
    source: SourceFile,
    version: tuple[int, int] | None,
    keys: set[str],
    blockers: list[str],
    notes: list[str],
) -> None:
    """What the optimizer's schedulers do to a tensor lr (a release that replaces it with floats,
    a scheduler that writes floats into the momentum), added to ``blockers`` or ``notes``."""
    for scheduler in built.schedulers(source):
        writer = FLOAT_WRITERS.get(scheduler.cls)
        if version is not None and version < TENSOR_LR_SCHEDULERS_SINCE:
            blockers.append(
                f"torch {'.'.join(map(str, version))} schedulers replace a tensor lr with Python "
                "floats (tensor lrs arrived in torch 2.4)"
            )
        elif scheduler.writes_floats:
            blockers.append(
                f"`{scheduler.cls}` (line {scheduler.line}) writes a Python float into "
                "`param_groups[i]['lr']` at every step: a tensor lr does not survive it"
            )
        elif writer and version is not None and version < writer[0]:
            blockers.append(
                f"`{scheduler.cls}` (line {scheduler.line}) {writer[1]} before torch "
                f"{'.'.join(map(str, writer[0]))}: a tensor does not help"
            )
        if scheduler.cls in MOMENTUM_CYCLERS and scheduler.cycles_momentum:
            what = "betas" if built.cls in ("Adam", "AdamW", "Adamax", "NAdam", "RAdam") else "momentum"
            text = (
                f"`{scheduler.cls}` (line {scheduler.line}) writes Python floats into `{what}` every step "
                "(cycle_momentum=True): tensors do not help there; pass cycle_momentum=False if the "
                "momentum need not cycle"
            )
            # Without a run (static mode) nothing shows the momentum did not change: a blocker.
            (blockers if keys <= {"betas", "momentum"} or version is None else notes).append(text)


def _program_lr_writes(
    built: _Construction,
    files: list[str],
    project: Project | None,
    static_source: SourceFile | None,
    blockers: list[str],
) -> list[list[Any]]:
    """The program's own ``...['lr'] = value`` on this optimizer, kept as ``fill_``: (start, end,
    target, value) each; an assignment to another optimizer's lr is a blocker."""
    fills: list[list[Any]] = []  # the program's own `...['lr'] = value` on this optimizer, kept as fill_
    for file in files:
        other = project.source(file) if project else static_source
        for assignment in lr_assignments(other, file):
            if file == built.file and built.name is not None and assignment.owner == built.name:
                fills.append([*assignment.span, assignment.target, assignment.value])
                continue
            blockers.append(
                f"`{assignment.text}` at {assignment.where} assigns a Python float to the lr: it would "
                "replace a tensor lr (write `group['lr'].fill_(...)` to keep it)"
            )
    return fills


def _source_of(file: str, project: Project | None, static_source: SourceFile | None) -> SourceFile | None:
    return project.source(file) if project is not None else static_source


def _user_files(frame: Frame, profile: Profile, project: Project) -> list[str]:
    """The profiled user files, those on the frame's compile stacks first."""
    on_stack = []
    for compile_ in frame.compiles:
        for location in compile_.stack:
            if location.file not in on_stack:
                on_stack.append(location.file)
    others = [p for p in profile.sources if p not in on_stack]
    return [p for p in on_stack + others if not os.path.isabs(p) and project.source(p) is not None]


def _bound_name(source: SourceFile, call: cst.Call) -> str | None:
    parent = source.parents.get(call)
    if isinstance(parent, cst.Assign) and len(parent.targets) == 1:
        target = parent.targets[0].target
        if isinstance(target, (cst.Name, cst.Attribute)):
            return source.code(target)
    if isinstance(parent, cst.AnnAssign):
        return source.code(parent.target)
    return None


def _keyword_true(call: cst.Call, name: str) -> bool:
    arg = next((a for a in call.args if a.keyword is not None and a.keyword.value == name), None)
    return arg is not None and isinstance(arg.value, cst.Name) and arg.value.value == "True"


def _position(source: SourceFile, node: cst.CSTNode) -> list[int]:
    pos = source.positions[node]
    return [pos.start.line, pos.start.column, pos.end.line, pos.end.column]


def _keys(keys: set[str]) -> str:
    return ", ".join(f"`{k}`" for k in sorted(keys))


RULE = TensorHyperparameters()
