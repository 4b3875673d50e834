"""Type and merge the raw records (one per process: the recorder's, or the trace reader's) into
one Profile: frames keyed by (file, first line, name), typed reasons, graph breaks, and the
hashes of the sources they name."""

from __future__ import annotations

import os
import platform
from collections import Counter
from collections.abc import Callable

import recompile_fix
from recompile_fix.profile.libraries import Interpreter, spell_library_file, spell_library_paths_in
from recompile_fix.profile.model import (
    BlockStack,
    Compile,
    Frame,
    GraphBreak,
    Location,
    Profile,
    Reason,
    SteadyCalls,
    relative_to_root,
    sha256_file,
)
from recompile_fix.profile.reasons import (
    VALUE_KINDS,
    first_use_is_tail,
    is_limit_hit,
    limit_hit_reason,
    parse_reason,
    parse_reasons,
    strip_local_scope,
)

__all__ = ["build_profile"]


def _location(raw: dict, spell: Callable[[str], str]) -> Location:
    return Location(
        file=spell(raw["file"]),
        line=raw["line"],
        end_line=raw.get("end_line"),
        col=raw.get("col"),
        end_col=raw.get("end_col"),
        function=raw.get("function"),
    )


def build_profile(records: list[dict], *, command: list[str], root: str) -> Profile:
    """Type and merge the recorder's raw records (one per process) into a Profile."""
    merge = _Merge(records, command=command, root=root)
    ranked = sorted(records, key=lambda r: (r.get("rank") is None, r.get("rank") or 0, r.get("pid", 0)))
    any_rank = any(r.get("rank") is not None for r in records)
    for record in ranked:
        if any_rank and record.get("rank") is None and not record.get("compiles") and not record.get("graph_breaks"):
            continue  # the launcher (torchrun imports torch too): it compiled nothing
        merge.add_process(record)
    return merge.finish(records, ranked)


class _Merge:
    """One Profile being built from the processes' raw records: its frames by (file, first line,
    name), and every file the records name (hashed into ``sources`` at the end)."""

    def __init__(self, records: list[dict], *, command: list[str], root: str) -> None:
        torch_version = next((r.get("torch_version") for r in records if r.get("torch_version")), None)
        self.profile = Profile(
            command=command,
            torch_version=torch_version,
            python_version=platform.python_version(),
            tool_version=recompile_fix.__version__,
        )
        self.root = root
        # Library files by import path, decided by the directories of the interpreter that ran.
        self.interpreter = next(
            (i for i in map(Interpreter.from_record, (r.get("interpreter") for r in records)) if i), None
        )
        if self.interpreter is not None:
            self.profile.interpreter = self.interpreter.relative_to(root)
        self.frames: dict[tuple, Frame] = {}
        self.named: set[str] = set()
        self.project_files = _ProjectFiles(root)

    def spell(self, path: str) -> str:
        return relative_to_root(path, self.root, self.interpreter)

    def add_process(self, record: dict) -> None:
        """One process: its entry in ``processes``, then its compiles, graph breaks and steady calls."""
        self.profile.processes.append(
            {
                "pid": record.get("pid"),
                "rank": record.get("rank"),
                "exit": record.get("exit", {}).get("status"),
                "exception": record.get("exit", {}).get("exception"),
                "compiles": len(record.get("compiles", [])),
                # How this process was recorded: "in-process" (the recorder: its sources, the
                # cross-check against torch's compile ids, what it had to repair) or "torch_trace".
                "recorder": record.get("recorder") or {"path": record.get("source", "in-process")},
            }
        )
        frame_of_id = self._add_compiles(record)
        self._add_graph_breaks(record, frame_of_id)
        for raw in record.get("steady", []):
            _add_steady(self.frames, raw, self.spell)

    def _add_compiles(self, record: dict) -> dict[str, Frame]:
        """The process's compiles, each on its frame; returns its frames by frame id (``0`` of
        ``0/1``, per generation), which its graph breaks name."""
        frame_of_id: dict[str, Frame] = {}
        compile_of_id: dict[str, Compile] = {}
        for raw in record.get("compiles", []):
            compile_id = _generation_id(raw)
            frame_id = compile_id.rsplit("/", 1)[0]
            frame = self._named_frame(raw) or frame_of_id.get(frame_id)
            if frame is None:
                continue  # a failure before torch named the frame: nothing to attach it to
            frame_of_id[frame_id] = frame
            existing = compile_of_id.get(compile_id)
            if existing is not None:  # a later record of the same compile (e.g. lazy backward)
                _add_seconds(existing, raw.get("seconds", {}))
                continue
            compile_ = self._compile(raw, compile_id, record.get("rank"), frame)
            frame.compiles.append(compile_)
            compile_of_id[compile_id] = compile_
        return frame_of_id

    def _named_frame(self, raw: dict) -> Frame | None:
        """The frame a compile's record names, made on first sight; None where it names none."""
        if not raw.get("frame"):
            return None
        f = raw["frame"]
        key = (self.spell(f["file"]), f["line"], f["name"])
        frame = self.frames.get(key)
        if frame is None:
            frame = self.frames[key] = Frame(file=key[0], first_line=key[1], name=key[2])
            self.named.add(f["file"])
        return frame

    def _spelled_function(self, where: dict) -> dict:
        """Where a closed-over function is (and the one it wraps, ``wraps``), paths spelled."""
        spelled = {**where, "file": self.spell(where["file"])}
        wraps = where.get("wraps")
        if isinstance(wraps, dict) and isinstance(wraps.get("file"), str):
            spelled["wraps"] = {**wraps, "file": self.spell(wraps["file"])}
        else:
            spelled.pop("wraps", None)
        return spelled

    def _compile(self, raw: dict, compile_id: str, rank: int | None, frame: Frame) -> Compile:
        """One compile typed: its inputs (the signature goes to its frame), reasons, failure,
        stack and block stacks, every path spelled as the Profile spells paths."""
        inputs = self._spelled_inputs(raw.get("inputs", {}))
        signature = inputs.pop("__signature__", None)
        failed_values = inputs.pop("__failed_values__", None)
        if frame.signature is None and isinstance(signature, dict):
            frame.signature = signature
            closes_over = signature.get("closes_over")
            if isinstance(closes_over, dict):  # where the functions it closes over are, spelled
                signature["closes_over"] = {
                    name: self._spelled_function(where)
                    for name, where in closes_over.items()
                    if isinstance(where, dict) and isinstance(where.get("file"), str)
                }
        compile_ = Compile(
            id=compile_id,
            rank=rank,
            seconds=dict(raw.get("seconds", {})),
            inputs=inputs,
            fail_type=raw.get("fail_type"),
            backend=raw.get("backend") if isinstance(raw.get("backend"), str) else None,
            dims=_dims(raw.get("dims")),
            float_operands=_strings(raw.get("float_operands")),
            also_failed=_value_guards(_strings(failed_values)),
        )
        texts = raw.get("guard_failures") or ([raw["recompile_reason"]] if raw.get("recompile_reason") else [])
        for text in texts:
            compile_.reasons.extend(parse_reasons(text))
        if not compile_.reasons and raw.get("recompile_reason"):
            compile_.reasons.append(parse_reason(raw["recompile_reason"]))
        fail_reason = raw.get("fail_reason")
        if fail_reason:
            compile_.fail_reason = spell_library_paths_in(fail_reason.split("\n", 1)[0], self.interpreter)
            if is_limit_hit(fail_reason):
                compile_.limit_hit = True
                compile_.reasons.insert(0, limit_hit_reason(fail_reason))
        compile_.stack = [_location(s, self.spell) for s in raw.get("stack", [])]
        if raw.get("blocks"):
            compile_.blocks = [BlockStack(**{**b, "file": self.spell(b["file"])}) for b in raw["blocks"]]
            self.named.update(b["file"] for b in raw["blocks"])
        self.named.update(s["file"] for s in raw.get("stack", []))
        self._place_reasons(compile_, raw)
        return compile_

    def _spelled_inputs(self, raw_inputs: dict) -> dict:
        """A module's class file: a library's by import path, the program's as recorded; and
        ``defined_in``, spelled as the Profile spells every path (relative to the root when
        under it), beside its ``qualname``: the class by identity, wherever the tree is."""
        return {
            name: {
                **entry,
                "file": spell_library_file(entry["file"], self.interpreter) or entry["file"],
                **({"defined_in": self.spell(entry["file"])} if isinstance(entry.get("qualname"), str) else {}),
            }
            if isinstance(entry, dict) and isinstance(entry.get("file"), str)
            else entry
            for name, entry in raw_inputs.items()
        }

    def _place_reasons(self, compile_: Compile, raw: dict) -> None:
        """Each reason's text with library paths spelled, and its first use in the file a guard's
        path tail names (the compiled frame's, a stack's, another of the Profile's or the project's)."""
        places = [f["file"] for f in [raw.get("frame") or {}] if f] + [s["file"] for s in raw.get("stack", [])]
        for reason in compile_.reasons:
            reason.text = spell_library_paths_in(reason.text, self.interpreter)
            if reason.first_use is not None and first_use_is_tail(reason.first_use):
                reason.first_use = _resolve_tail(reason.first_use, places + sorted(self.named), self.project_files)
            if reason.first_use is not None:
                self.named.add(reason.first_use.file)
                reason.first_use = Location(**{**reason.first_use.__dict__, "file": self.spell(reason.first_use.file)})

    def _add_graph_breaks(self, record: dict, frame_of_id: dict[str, Frame]) -> None:
        """The process's graph breaks, counted per (file, line, reason) on their frame; the same
        break on another rank adds to its count."""
        breaks: dict[tuple, tuple[Frame, Counter]] = {}
        for raw in record.get("graph_breaks", []):
            frame = frame_of_id.get(_generation_id(raw).rsplit("/", 1)[0])
            if frame is None:
                continue
            self.named.add(raw["file"])
            file = self.spell(raw["file"])
            reason = spell_library_paths_in(raw.get("reason", ""), self.interpreter)
            logger = (raw.get("logger"), raw.get("logger_method")) if isinstance(raw.get("logger"), str) else None
            key = (file, raw["line"], reason, logger)
            breaks.setdefault(frame.key, (frame, Counter()))[1][key] += 1
        for frame, counts in breaks.values():
            for (file, line, reason, logger), count in counts.items():
                same = next(
                    (
                        b
                        for b in frame.graph_breaks
                        if (b.location.file, b.location.line, b.reason) == (file, line, reason)
                    ),
                    None,
                )  # the same break on another rank
                if same is not None:
                    same.count += count
                else:
                    frame.graph_breaks.append(
                        GraphBreak(
                            location=Location(file=file, line=line),
                            reason=reason,
                            count=count,
                            logger=logger[0] if logger else None,
                            logger_method=logger[1] if logger else None,
                        )
                    )

    def finish(self, records: list[dict], ranked: list[dict]) -> Profile:
        """Whether the program trained, its import paths, the frames in order, and the hashes of
        every source the Profile names."""
        profile = self.profile
        if any("backward_ran" in r for r in records):  # a trace does not say
            profile.trains = any(r.get("backward_ran") for r in records)
        for record in ranked:
            for entry in record.get("import_paths", []):
                spelled = self.spell(entry)
                if spelled not in profile.import_paths:
                    profile.import_paths.append(spelled)
        profile.frames = sorted(self.frames.values(), key=lambda f: (f.file, f.first_line, f.name))
        for path in sorted(self.named):
            digest = sha256_file(path)
            if digest is not None:
                profile.sources[self.spell(path)] = digest
        return profile


def _resolve_tail(first_use: Location, files: list[str], project: _ProjectFiles | None = None) -> Location | None:
    """The file a path tail from a guard comment names: the compiled frame's, a stack's or
    another file of the Profile that ends with it; else the one file of the project that does
    (a library frame's guard first used in a project file no stack names); None (no first use)
    when none does, or several project files do."""
    tail = first_use.file.replace("\\", "/")
    found = _ends_with(tail, files)
    if not found and project is not None:
        found = _ends_with(tail, project.files())
        found = found if len(found) == 1 else []  # two files end with it: which one is a guess
    if not found:
        return None
    return Location(**{**first_use.__dict__, "file": found[0]})


def _ends_with(tail: str, files: list[str]) -> list[str]:
    ends = [f for f in files if f.replace("\\", "/").endswith("/" + tail)]
    return ends or [f for f in files if f.replace("\\", "/").endswith(tail)]  # torch cut one more character


class _ProjectFiles:
    """The project's Python files (absolute paths), listed on first need: not its virtualenvs,
    hidden folders or installed packages. At most ``LIMIT`` files: a tree bigger than that
    resolves tails against the Profile's own files only."""

    LIMIT = 20_000
    _SKIPPED = {"site-packages", "dist-packages", "node_modules", "__pycache__"}

    def __init__(self, root: str):
        self.root = root
        self._files: list[str] | None = None

    def files(self) -> list[str]:
        if self._files is None:
            self._files = []
            for directory, dirnames, filenames in os.walk(self.root):
                dirnames[:] = sorted(
                    d
                    for d in dirnames
                    if not d.startswith(".")
                    and d not in self._SKIPPED
                    and not os.path.exists(os.path.join(directory, d, "pyvenv.cfg"))
                )
                self._files.extend(os.path.join(directory, n) for n in sorted(filenames) if n.endswith(".py"))
                if len(self._files) > self.LIMIT:
                    self._files = []
                    break
        return self._files


def _generation_id(raw: dict) -> str:
    """Compile ids start again at 0/0 after ``torch._dynamo.reset()``: the ids of each later
    generation get a prefix (``g1:0/0``), so they neither merge with nor replace earlier ones."""
    compile_id = raw.get("compile_id") or ""
    generation = raw.get("generation") or 0
    return f"g{generation}:{compile_id}" if generation else compile_id


def _add_steady(frames: dict[tuple, Frame], raw: dict, spell: Callable[[str], str]) -> None:
    """A compiled module's steady-state calls, on the frame of its forward. Where several processes
    timed it (ranks), the one with the most calls speaks for it."""
    try:
        key = (spell(raw["file"]), int(raw["line"]), raw["name"])
        calls, seconds, cpu = int(raw["calls"]), raw["seconds"], raw.get("cpu_seconds")
    except (KeyError, TypeError, ValueError):
        return
    frame = frames.get(key)
    if frame is None or calls < 1 or not isinstance(seconds, (int, float)) or seconds < 0:
        return
    if not isinstance(cpu, (int, float)) or cpu < 0:
        cpu = None
    if frame.steady is None or calls > frame.steady.calls:
        frame.steady = SteadyCalls(calls=calls, seconds=float(seconds), cpu_seconds=cpu)


def _add_seconds(compile_: Compile, seconds: dict) -> None:
    for key, value in seconds.items():
        if value is not None:
            compile_.seconds[key] = (compile_.seconds.get(key) or 0.0) + value


def _value_guards(texts: list[str] | None) -> list[Reason] | None:
    """The value guards a recompile failed, as the recorder wrote them (``<entry>: <code part>``),
    parsed as torch's failure texts are; None where none were recorded."""
    if texts is None:
        return None
    return [r for text in texts for r in parse_reasons(text) if r.kind in VALUE_KINDS and r.source]


def _strings(raw: object) -> list[str] | None:
    """A recorded list of strings, or None where it is not one."""
    if not isinstance(raw, list) or not all(isinstance(item, str) for item in raw):
        return None
    return list(raw)


def _dims(raw: object) -> dict[str, list[dict]] | None:
    """The graph's dims as the recorder read them, keyed as ``inputs`` are (``x``, not ``L['x']``)."""
    if not isinstance(raw, dict):
        return None
    found: dict[str, list[dict]] = {}
    for source, entries in raw.items():
        if isinstance(source, str) and isinstance(entries, list):
            kept = [
                {**e, **({"tied": strip_local_scope(e["tied"])} if isinstance(e.get("tied"), str) else {})}
                for e in entries
                if isinstance(e, dict)
            ]
            found.setdefault(strip_local_scope(source), []).extend(kept)
    return found
