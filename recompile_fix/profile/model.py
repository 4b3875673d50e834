"""The Profile: what one run of the user's program compiled, and why it compiled again.

This is the first stage of the flow (Profile -> Finding -> Edit). It is plain data: dataclasses
that round-trip through versioned JSON. Nothing here imports torch or libcst.

Paths inside a Profile are relative to the directory the program was profiled from when the
file lies under it (so a Profile can travel with a checkout), absolute otherwise; ``resolve``
turns them back into paths against a project root.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from recompile_fix.errors import UserError
from recompile_fix.profile.files import (
    MAX_PROFILE_BYTES,
    UnsafeFile,
    read_bounded,
    same_as_profiled,
    sha256_bytes,
    shown_path,
)
from recompile_fix.profile.json_depth import MAX_JSON_DEPTH, json_depth
from recompile_fix.profile.libraries import (
    Interpreter,
    is_library_spelling,
    locate_library_file,
    spell_library_file,
)
from recompile_fix.profile.resume import function_of
from recompile_fix.profile.schema import validate_profile_json
from recompile_fix.profile.sources import attribute_path, canonical_source, source_of_expression

__all__ = [
    "REASON_KINDS",
    "SCHEMA",
    "SCHEMA_VERSION",
    "BlockStack",
    "Compile",
    "Frame",
    "GraphBreak",
    "Location",
    "Profile",
    "Reason",
    "SteadyCalls",
    "is_library_path",
    "relative_to_root",
    "resolve",
    "same_as_profiled",
    "save_profile",
    "sha256_bytes",
    "sha256_file",
    "torch_release",
]

SCHEMA = "recompile-fix/profile"
SCHEMA_VERSION = 1


@dataclass(frozen=True)
class Location:
    """A span of user source. ``col``/``end_col`` are 0-based UTF-8 offsets, as CPython gives them."""

    file: str
    line: int
    end_line: int | None = None
    col: int | None = None
    end_col: int | None = None
    function: str | None = None


@dataclass
class Reason:
    """One guard failure, typed. ``kind`` is one of REASON_KINDS; ``text`` is torch's own words."""

    kind: str
    text: str
    entry: str | None = None  # compile id of the cache entry whose guard failed
    source: str | None = None  # the guarded expression, e.g. ``x``, ``self.scale``, ``G['LR']``
    dim: int | None = None
    expected: Any = None
    actual: Any = None
    value: Any = None  # the value the failed entry was specialised on (value guards)
    value_type: str | None = None  # float / int / bool / str / None
    first_use: Location | None = None  # the user line that first used the guarded value
    # The guarded arithmetic of ``source`` where torch guarded one (``(1.0 + ((-1)*self.p))``), or
    # the comparison a ``value_branch`` guard made (``self.current_epoch <= 0``).
    expression: str | None = None

    def __post_init__(self) -> None:
        self.source = canonical_source(self.source)
        chain = source_of_expression(self.source)
        if chain is not None:
            # ``(1.0 + ((-1)*self.drop_prob)) == 0.95``: torch guards what the code computed from
            # the attribute (timm's ``keep_prob = 1 - drop_prob``, a float traced as a symbol, then
            # specialised by ``bernoulli_``). The guard is the attribute's; its value is not the
            # attribute's, so none is kept.
            self.expression, self.source, self.value = self.source, chain, None


REASON_KINDS = {
    "size_mismatch": "tensor size changed",
    "size_specialization": "size 0/1 specialised",
    "rank_mismatch": "tensor rank changed",
    "dtype_mismatch": "tensor dtype changed",
    "device_mismatch": "tensor device changed",
    "stride_mismatch": "tensor strides changed",
    "requires_grad_mismatch": "requires_grad changed",
    "dispatch_key_mismatch": "tensor dispatch keys changed",
    "scalar_value": "Python scalar argument changed",
    "module_attribute": "attribute value changed",
    "attribute_presence": "attribute added or removed",
    "global_value": "module global changed",
    "optimizer_param_group": "optimizer hyper-parameter changed",
    "training_flag": "train/eval mode flipped",
    "grad_mode": "grad mode changed",
    "global_state": "global torch state changed",
    "container_length": "list/tuple/dict length changed",
    "type_mismatch": "argument type changed",
    "id_mismatch": "object identity changed",
    "limit_hit": "recompile limit hit: frame runs eagerly from here on",
    "other": "other guard",
    "value_branch": "a branch on a dynamic value took its other side",
    "storage_offset": "tensor storage offset changed",
    "dim_marking_added": "a tensor marked dynamic met a graph compiled for unmarked tensors",
}


@dataclass
class GraphBreak:
    location: Location
    reason: str
    count: int = 1
    # A break at a ``logging.Logger`` method call: the logger's name and the method (torch's
    # debug context names them; None: another break, or an older Profile).
    logger: str | None = None
    logger_method: str | None = None


@dataclass(frozen=True)
class BlockStack:
    """A container of identical blocks held by the module whose code was compiled (its first
    argument, ``self`` for a forward), seen by the recorder at compile start: where real models
    keep them (``transformer.h`` in a ModuleDict, a Sequential, a parent class's ``__init__``, a
    pip package's class) without reading any source."""

    path: str  # attribute path from the compiled frame's first argument, e.g. "transformer.h"
    count: int
    block: str  # the blocks' class (``__qualname__``)
    file: str  # the file defining that class (relative to the root when under it)
    line: int  # its ``class`` line
    container: str = "ModuleList"  # ModuleList / Sequential
    argument: str = "self"  # the compiled frame's argument that holds the module
    owner: str = ""  # that module's class (``__qualname__``)
    # What one block's graph takes at each call: its parameters and buffers, and its forward's
    # arguments (None: an older Profile).
    graph_inputs: int | None = None


@dataclass(frozen=True)
class SteadyCalls:
    """The calls of a compiled module (``torch.compile(module)``) during which nothing compiled:
    how many, and the median wall seconds of one (under the backend the profile ran)."""

    calls: int
    seconds: float
    # The calling thread's CPU seconds of the fastest call (None: an older Profile): what the
    # choice reads, as machine load inflates it less than the wall time (a machine so busy that
    # the intra-op threads spin inflates both: profile on a quiet one).
    cpu_seconds: float | None = None

    @property
    def step_seconds(self) -> float:
        return self.seconds if self.cpu_seconds is None else self.cpu_seconds


@dataclass
class Compile:
    """One compile attempt of a frame (one ``compile_id``)."""

    id: str
    reasons: list[Reason] = field(default_factory=list)
    # The user frames on the stack when the compile started, outermost first. The last one is
    # the call site: the user line that called into the compiled code.
    stack: list[Location] = field(default_factory=list)
    seconds: dict[str, float | None] = field(default_factory=dict)
    # The compiled frame's arguments at this compile: tensors' shape/stride/dtype, scalars' values.
    inputs: dict[str, dict[str, Any]] = field(default_factory=dict)
    fail_type: str | None = None
    fail_reason: str | None = None
    limit_hit: bool = False
    rank: int | None = None
    # Stacks of identical blocks in the module being compiled (None: not recorded, or none).
    blocks: list[BlockStack] | None = None
    # The backend torch compiled this with, read from torch's own objects at compile time
    # ("eager", "inductor", a callable backend's name): however the program chose it. None: an
    # older Profile, a trace.
    backend: str | None = None
    # What the compile's graph did with the sizes torch traced as symbols, by tensor (spelled as
    # ``inputs`` are): [{"dim", "state": "dynamic" | "specialized", "size", "tied"}], where
    # ``tied`` names a parameter whose static size the specialised one equals. None: not
    # recorded (an older Profile, a trace); {} none traced as a symbol.
    dims: dict[str, list[dict[str, Any]]] | None = None
    # The tensors the graph's Python float constants meet, as ``dtype:rank`` (``mul(x, 0.5)``
    # with a 2-d float32 ``x``: "float32:2"), distinct. None: not recorded or no float constant.
    float_operands: list[str] | None = None
    # The value guards this call failed beside the ones ``reasons`` names (torch names the first
    # failing guard of each cached graph): a second number that changed with the first, read by
    # evaluating every cached graph's ``<source> == <number>`` guards on the call. None: not
    # recorded (an older Profile, a trace, a first compile).
    also_failed: list[Reason] | None = None

    def value_reasons(self) -> list[Reason]:
        """The guards this call failed: torch's named ones, then the recorded value guards it
        did not name (one per source)."""
        named = {r.source for r in self.reasons}
        return self.reasons + [r for r in self.also_failed or () if r.source not in named]

    def specialized(self, source: str, dim: int) -> dict[str, Any] | None:
        """The record of ``source``'s dimension ``dim`` where this compile's graph specialised it."""
        return next(
            (d for d in (self.dims or {}).get(source, []) if d.get("dim") == dim and d.get("state") == "specialized"),
            None,
        )

    @property
    def call_site(self) -> Location | None:
        return self.stack[-1] if self.stack else None

    @property
    def user_call_site(self) -> Location | None:
        """The innermost frame of the user's own code: the call site itself, or, where library
        code made the call (a ``model.generate()``, a Trainer), the user's call into it."""
        return next((s for s in reversed(self.stack) if not is_library_path(s.file)), None)

    @property
    def library_frames(self) -> list[Location]:
        """The library frames between the user's call and the compiled frame, outermost first
        (empty when the user's code called the compiled code itself)."""
        user = self.user_call_site
        if user is None:
            return list(self.stack)
        return self.stack[self.stack.index(user) + 1 :]

    @property
    def is_recompile(self) -> bool:
        return not self.id.endswith("/0")


@dataclass
class Frame:
    """A compiled code object: (file, first line, name), and every compile of it."""

    file: str
    first_line: int
    name: str
    compiles: list[Compile] = field(default_factory=list)
    graph_breaks: list[GraphBreak] = field(default_factory=list)
    # How the compiled code takes its arguments (recorded by the recorder; None from older
    # Profiles and traces): {"positional": [...], "keyword_only": [...], "varargs": "args" | None,
    # "varkw": "kwargs" | None}. Guards spell *args/**kwargs items ``args[1]``, ``kwargs['k']``.
    signature: dict[str, Any] | None = None
    # The compiled module's steady-state calls (None: not timed: one call, a decorated function,
    # `module.compile()`, an older Profile or a trace).
    steady: SteadyCalls | None = None

    @property
    def key(self) -> tuple[str, int, str]:
        return (self.file, self.first_line, self.name)

    @property
    def shown_name(self) -> str:
        """The name messages give the frame: torch's `inner` wrapper (around an nn.Sequential or a
        decorated function) by what the run recorded it wraps (``Sequential``), a library
        decorator's wrapper (diffusers' `apply_lora_scale`) by the one function it calls, the code
        after a graph break (``torch_dynamo_resume_in_train_step_at_33``) by the function it was
        cut from, others by name."""
        if self.name == "inner" and self.file.replace("\\", "/").endswith("torch/_dynamo/external_utils.py"):
            for compile_ in self.compiles:
                wrapped = compile_.inputs.get("fn")
                if isinstance(wrapped, dict) and (wrapped.get("class") or wrapped.get("qualname")):
                    return str(wrapped.get("class") or wrapped.get("qualname"))
        calls = list(((self.signature or {}).get("closes_over") or {}).values())
        if is_library_path(self.file) and len(calls) == 1 and isinstance(calls[0], dict) and calls[0].get("name"):
            return str(calls[0]["name"])
        return function_of(self.name) or self.name

    @property
    def label(self) -> str:
        """``name (file:line)``: how reports and Findings' evidence name the frame."""
        return f"{self.name} ({self.file}:{self.first_line})"

    @property
    def recompiles(self) -> int:
        return sum(1 for c in self.compiles if c.is_recompile and not c.limit_hit)

    @property
    def limit_hits(self) -> int:
        return sum(1 for c in self.compiles if c.limit_hit)

    @property
    def compile_count(self) -> int:
        """How often torch compiled the frame: a recompile-limit hit is a refused attempt, not a
        compile (torch's own count, which ``len(compiles)`` exceeds by the limit hits)."""
        return sum(1 for c in self.compiles if not c.limit_hit)

    @property
    def compile_seconds(self) -> float:
        total = 0.0
        for c in self.compiles:
            total += c.seconds.get("dynamo") or 0.0
        return total

    @property
    def block_stacks(self) -> list[BlockStack]:
        """The block stacks the recorder saw in the compiled module (at its first compile that
        recorded any)."""
        return next((c.blocks for c in self.compiles if c.blocks), [])

    @property
    def backends(self) -> list[str]:
        """The backends the frame was compiled with, as recorded, in order first seen (empty: not
        recorded)."""
        return list(dict.fromkeys(c.backend for c in self.compiles if c.backend))

    def module_class(self, source: str) -> tuple[str, str] | None:
        """(file, ``__qualname__``) of the class of the nn.Module the compiled code held as
        ``source`` (``self``, ``self.loss``: an argument or its attribute), as the recorder saw
        it: the class by identity, not by a name another file's class may share. None: not
        recorded (an older Profile, a trace, an object deeper than the recorder looks)."""
        wanted = attribute_path(source)
        for compile_ in self.compiles:
            entry = compile_.inputs.get(source)
            if entry is None:  # `args[0].model.q_proj`: the recorder spells submodules `_modules['model']`
                entry = next((e for k, e in compile_.inputs.items() if attribute_path(k) == wanted), None)
            if (
                isinstance(entry, dict)
                and entry.get("type") == "Module"
                and isinstance(entry.get("defined_in"), str)
                and isinstance(entry.get("qualname"), str)
            ):
                return entry["defined_in"], entry["qualname"]
        return None

    def reasons(self) -> list[Reason]:
        """Every guard failure of every compile (all cache entries, not only the newest)."""
        return [r for c in self.compiles for r in c.reasons]

    def value_reasons(self) -> list[Reason]:
        """``reasons()`` and the value guards each compile failed that torch did not name
        (``Compile.also_failed``): every number that changed, not only the first."""
        return [r for c in self.compiles for r in c.value_reasons()]

    def float_operands(self) -> list[str] | None:
        """What the float constants of every compile's graph met (``Compile.float_operands``),
        distinct; None where a compile's graph was not read or held no float, or where the frame
        breaks its graph (a number also meets what the next frame's graph holds)."""
        compiles = [c for c in self.compiles if not c.limit_hit]
        if not compiles or self.graph_breaks or any(not c.float_operands for c in compiles):
            return None
        return sorted({o for c in compiles for o in c.float_operands or ()})

    def tensor_inputs(self) -> dict[str, dict[str, Any]]:
        """Tensor arguments recorded at the frame's compiles: name -> its first record."""
        tensors: dict[str, dict[str, Any]] = {}
        for compile_ in self.compiles:
            for name, entry in compile_.inputs.items():
                if entry.get("type") == "Tensor":
                    tensors.setdefault(name, entry)
        return tensors

    def call_sites(self) -> list[tuple[Location | None, list[Compile]]]:
        """The frame's compiles grouped by the user's call that triggered them (``user_call_site``),
        in the order first seen. Each call site's evidence is its own: a recompile at one call
        says nothing about the shapes another call passes."""
        groups: dict[tuple[Any, ...] | None, tuple[Location | None, list[Compile]]] = {}
        for compile_ in self.compiles:
            site = compile_.user_call_site
            key = None if site is None else (site.file, site.line, site.col, site.end_line, site.end_col)
            groups.setdefault(key, (site, []))[1].append(compile_)
        return list(groups.values())

    def shapes(self, name: str) -> list[list[int]]:
        """The shape tensor argument ``name`` had at each compile that recorded it. Guard failures
        name only the first changed dimension (and only the first failing guard); these show all."""
        return [
            c.inputs[name]["shape"]
            for c in self.compiles
            if c.inputs.get(name, {}).get("type") == "Tensor" and "shape" in c.inputs[name]
        ]


@dataclass
class Profile:
    command: list[str]
    torch_version: str | None
    python_version: str
    frames: list[Frame] = field(default_factory=list)
    sources: dict[str, str] = field(default_factory=dict)  # path -> sha256 of its bytes
    exit_code: int | None = None
    processes: list[dict[str, Any]] = field(default_factory=list)  # pid / rank / how each process ended
    tool_version: str | None = None
    # path -> sha256 of the file as `apply` left it: a second apply knows it is already done.
    applied: dict[str, str] = field(default_factory=dict)
    # The backend `profile --backend` forced (None: the program's own); `apply --verify` reuses it.
    backend: str | None = None
    # Facts of the run that outlive edits to the files (static mode honours them): did the program
    # run a backward pass (torch.autograd.backward/grad)? None: not known (an older Profile, a trace).
    trains: bool | None = None
    # The program's own import paths (sys.path less installed code), spelled as paths are: a copy
    # of the project that `verify` and `fix` run in must hold them.
    import_paths: list[str] = field(default_factory=list)
    # Where the interpreter that ran keeps its libraries (None: an older Profile, a trace): its
    # files are spelled by import path (``/site-packages/torch/optim/adam.py``) and found again here.
    interpreter: Interpreter | None = None
    schema: str = SCHEMA
    schema_version: int = SCHEMA_VERSION
    # Where this Profile was read from (not written): the profiled texts kept beside it
    # (profile.kept_sources) map its evidence onto files edited since, from any copy of the
    # project (verify's, fix's) and whatever --profile named.
    origin: Path | None = field(default=None, compare=False, repr=False)

    # -- queries ----------------------------------------------------------------------
    @property
    def torch_release(self) -> tuple[int, int] | None:
        """(major, minor) of the torch that ran, for the rules' feature checks."""
        return torch_release(self.torch_version)

    def frame(self, name: str) -> Frame | None:
        for f in self.frames:
            if f.name == name:
                return f
        return None

    def backends_used(self) -> list[str]:
        """Every backend the run's compiles recorded (``Compile.backend``), in order first seen;
        ``backend`` (the one ``--backend`` forced) where no compile recorded one."""
        found = list(dict.fromkeys(b for f in self.frames for b in f.backends))
        return found or ([self.backend] if self.backend else [])

    def nothing_compiled(self) -> str:
        """What a Profile with no frame says: nothing recompiles, or the run failed first."""
        if self.exit_code:
            return (
                f"No torch.compile compilation was recorded before the program exited with code "
                f"{self.exit_code}: make it run, then profile it again."
            )
        return "No torch.compile compilation was recorded: nothing recompiles."

    @property
    def total_compiles(self) -> int:
        return sum(f.compile_count for f in self.frames)

    # -- JSON -------------------------------------------------------------------------
    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = _strip_none(dataclasses.asdict(self))
        data.pop("origin", None)
        return data

    def dump(self, path: str | os.PathLike[str]) -> None:
        """Write atomically: a temp file of its own (runs at once never share one), synced, then
        renamed over ``path``; on any failure (a full disk) the old Profile stays whole and no
        temp file is left. A failure is one line (UserError)."""
        path = Path(path)
        text = json.dumps(self.to_json(), indent=1, sort_keys=False) + "\n"
        tmp = None
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                fh.write(text)
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, path)
        except OSError as exc:
            raise UserError(f"{path}: cannot write the Profile: {exc.strerror or exc}") from None
        finally:
            if tmp is not None and os.path.exists(tmp):
                os.unlink(tmp)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "Profile":
        if not isinstance(data, dict) or data.get("schema") != SCHEMA:
            raise UserError("not a recompile-fix Profile (no 'schema': 'recompile-fix/profile')")
        version = data.get("schema_version")
        if version != SCHEMA_VERSION or isinstance(version, bool):
            if isinstance(version, str) and version.strip() == str(SCHEMA_VERSION):
                raise UserError(
                    f"Profile schema_version is the string {version!r}; this recompile-fix reads the number "
                    f"{SCHEMA_VERSION} (the Profile was edited or written by another tool); profile the program again"
                )
            raise UserError(
                f"Profile schema_version {version!r} is not supported (this recompile-fix reads "
                f"schema_version {SCHEMA_VERSION}); profile the program again"
            )
        validate_profile_json(data, REASON_KINDS)  # a damaged Profile: one line, not a traceback
        try:
            frames = [_frame_from_json(f) for f in data["frames"]]
            return cls(
                command=list(data["command"]),
                torch_version=data.get("torch_version"),
                python_version=data.get("python_version", ""),
                frames=frames,
                sources=dict(data.get("sources", {})),
                exit_code=data.get("exit_code"),
                processes=list(data.get("processes", [])),
                tool_version=data.get("tool_version"),
                applied=dict(data.get("applied", {})),
                backend=data.get("backend"),
                trains=data.get("trains"),
                import_paths=list(data.get("import_paths", [])),
                interpreter=Interpreter.from_record(data.get("interpreter")),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise UserError(f"malformed Profile: {exc!r}") from None

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> "Profile":
        path = Path(path)
        shown = shown_path(path)
        try:
            # Bounded, and never a device or FIFO (a Profile is repository content: hostile).
            text = read_bounded(path, MAX_PROFILE_BYTES).decode("utf-8")
        except FileNotFoundError:
            raise UserError(
                f"{shown}: no Profile here; run `recompile-fix profile -- python your_script.py` first"
            ) from None
        except UnsafeFile as exc:
            raise UserError(f"{shown}: cannot read Profile: {exc.strerror}") from None
        except (OSError, UnicodeDecodeError) as exc:
            raise UserError(f"{shown}: cannot read Profile: {exc}") from None
        depth = json_depth(text)
        if depth > MAX_JSON_DEPTH:
            raise UserError(f"{shown}: damaged Profile: nested {depth} deep (a Profile is at most {MAX_JSON_DEPTH})")
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise UserError(f"{shown}: Profile is truncated or not JSON ({exc.msg} at line {exc.lineno})") from None
        except (ValueError, RecursionError) as exc:  # a 5,000-digit number: Python's int limit
            raise UserError(f"{shown}: damaged Profile: {str(exc).splitlines()[0]}") from None
        try:
            profile = cls.from_json(data)
        except UserError as exc:
            raise UserError(f"{shown}: {exc}") from None
        profile.origin = path.resolve()
        return profile


def save_profile(profile: Profile, path: str | os.PathLike[str]) -> Path:
    """Write ``profile`` to ``path``, but never over a Profile that recorded compiles with one
    that recorded none (a run that compiled nothing, or failed before compiling: a typo in the
    command): that one goes beside it, ``profile.empty.json`` or ``profile.failed.json``.
    Returns where it went."""
    path = Path(path)
    if not profile.frames and path.exists():
        # The frames as written, not validated: a Profile a stricter check refuses is still one
        # that recorded compiles, and is kept.
        try:
            text = read_bounded(path, MAX_PROFILE_BYTES).decode("utf-8")
            kept = json.loads(text) if json_depth(text) <= MAX_JSON_DEPTH else None
        except (OSError, UnicodeDecodeError, ValueError):  # not a Profile we can read: nothing to lose
            kept = None
        if isinstance(kept, dict) and kept.get("frames"):
            what = "failed" if profile.exit_code else "empty"
            path = path.with_name(f"{path.stem}.{what}{path.suffix}")
    profile.dump(path)
    from recompile_fix.profile.kept_sources import keep_profiled_sources

    keep_profiled_sources(profile, path, Path.cwd())  # its paths are relative to where it was recorded
    return path


_LIBRARY_PARTS = ("site-packages", "dist-packages")


def is_library_path(path: str) -> bool:
    """Is this an installed package's file (transformers, diffusers, ...), not the user's own?
    Such code is read, never edited: a fix goes where the user's code calls into it."""
    return is_library_spelling(path) or any(part in _LIBRARY_PARTS for part in re.split(r"[\\/]", path))


def torch_release(version: str | None) -> tuple[int, int] | None:
    """``"2.13.0+cpu"`` -> ``(2, 13)``; None when unknown."""
    match = re.match(r"(\d+)\.(\d+)", version or "")
    return (int(match.group(1)), int(match.group(2))) if match else None


def _strip_none(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _strip_none(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_strip_none(v) for v in value]
    return value


def _location(data: dict[str, Any] | None) -> Location | None:
    return None if data is None else _location_of(data)


def _location_of(data: dict[str, Any]) -> Location:
    values: dict[str, Any] = {k: data.get(k) for k in ("file", "line", "end_line", "col", "end_col", "function")}
    return Location(**values)


def _reason_from_json(data: dict[str, Any]) -> Reason:
    values: dict[str, Any] = {f.name: data.get(f.name) for f in dataclasses.fields(Reason)}
    values["first_use"] = _location(data.get("first_use"))
    if values["kind"] not in REASON_KINDS:
        raise ValueError(f"unknown reason kind {values['kind']!r}")
    return Reason(**values)


def _frame_from_json(data: dict[str, Any]) -> Frame:
    compiles = [
        Compile(
            id=c["id"],
            reasons=[_reason_from_json(r) for r in c.get("reasons", [])],
            stack=[_location_of(s) for s in c.get("stack", [])],
            seconds=dict(c.get("seconds", {})),
            inputs=dict(c.get("inputs", {})),
            fail_type=c.get("fail_type"),
            fail_reason=c.get("fail_reason"),
            limit_hit=bool(c.get("limit_hit", False)),
            rank=c.get("rank"),
            blocks=[BlockStack(**b) for b in c["blocks"]] if c.get("blocks") else None,
            backend=c.get("backend"),
            dims={k: [dict(d) for d in v] for k, v in c["dims"].items()} if c.get("dims") is not None else None,
            float_operands=list(c["float_operands"]) if c.get("float_operands") is not None else None,
            also_failed=[_reason_from_json(r) for r in c["also_failed"]] if c.get("also_failed") is not None else None,
        )
        for c in data.get("compiles", [])
    ]
    breaks = [
        GraphBreak(
            location=_location_of(b["location"]),
            reason=b.get("reason", ""),
            count=b.get("count", 1),
            logger=b.get("logger"),
            logger_method=b.get("logger_method"),
        )
        for b in data.get("graph_breaks", [])
    ]
    signature = data.get("signature")
    steady = data.get("steady")
    return Frame(
        file=data["file"],
        first_line=int(data["first_line"]),
        name=data["name"],
        compiles=compiles,
        graph_breaks=breaks,
        signature=dict(signature) if isinstance(signature, dict) else None,
        steady=SteadyCalls(
            calls=int(steady["calls"]),
            seconds=float(steady["seconds"]),
            cpu_seconds=None if steady.get("cpu_seconds") is None else float(steady["cpu_seconds"]),
        )
        if steady
        else None,
    )


def sha256_file(path: str | os.PathLike[str]) -> str | None:
    try:
        return hashlib.sha256(read_bounded(path)).hexdigest()
    except OSError:
        return None


def relative_to_root(path: str, root: str, interpreter: Interpreter | None = None) -> str:
    """How a Profile spells ``path``: a library file by its import path (``/site-packages/...``,
    wherever the interpreter's directories lie: inside the project too), else relative to
    ``root`` when it lies under it, else absolute."""
    library = spell_library_file(path, interpreter)
    if library is not None:
        return library
    absolute = os.path.abspath(path)
    root = os.path.abspath(root)
    if absolute == root or absolute.startswith(root + os.sep):
        return os.path.relpath(absolute, root)
    return absolute


def resolve(path: str, root: str | os.PathLike[str], interpreter: Interpreter | None = None) -> Path:
    """The file a Profile path names, for a project rooted at ``root`` (a library file: where
    ``interpreter``, else this interpreter, keeps it)."""
    library = locate_library_file(path, interpreter, root)
    if library is not None:
        return library
    return Path(path) if os.path.isabs(path) else Path(root, path)
