"""`recompile-fix profile --from-trace DIR`: read a TORCH_TRACE directory written by plain
PyTorch (``TORCH_TRACE=DIR python train.py``, or torchrun with any number of ranks) into the
raw records the recorder writes, and merge them with ``merge.build_profile`` into the
same Profile.

What torch 2.13 writes: one file per process that compiled (opened at its first record; a
torchrun launcher writes none), ``dedicated_log_torch_trace_<random>.log``, or
``dedicated_log_torch_trace_rank_<R>_<random>.log`` when torch.distributed was initialised by
then (each record's JSON then also carries ``"rank": R``). Each record is one line, a glog
prefix and a JSON object, followed by tab-indented payload lines. File names in stacks are
interned per file: ``{"str": [path, idx]}`` records, then ``"filename": idx``. We read:

* ``compilation_metrics``: frame (co_name / co_filename / co_firstlineno), compile id, seconds,
  failure and restart reasons; one per compile.
* ``artifact`` ``recompile_reasons``: every cache entry's guard failure for a recompile (a JSON
  list, or a bare string when there is one).
* ``dynamo_start``: the stack when the compile started. Torch drops the two innermost Python
  frames above the compiled one, so for a function called straight through ``torch.compile`` the
  calling line is lost; it is taken from ``create_symbol`` stacks (full ones) of the same compile,
  from later stacks of the same call (the compiled frame's own graph-break pieces), or from the
  resume-function names, in that order; a compile whose call site none of these shows gets no
  stack (no rule places a fix at a guessed line).
* ``artifact`` ``dynamo_graph_break_reason``: user file:line and reason of each graph break.
* ``describe_tensor`` / ``describe_source``, ``create_symbol``, ``dynamo_cpp_guards_str``: the
  compiled frame's arguments (tensor shapes, strides, dtypes; guarded or symbolic scalars).

Every other event kind, and any line that is not a record, is skipped. Source hashes are taken
from the files on disk when the trace is read: read it against the checkout that produced it.
Paths of a run on another machine are matched to this checkout by their longest suffix that
exists under the current directory. A library file (``.../site-packages/torch/optim/adam.py``,
``.../lib/python3.11/contextlib.py``) is spelled as the recorder's Profile spells it
(``/site-packages/torch/optim/adam.py``, ``/stdlib/contextlib.py``: ``libraries.spell_library_file``,
called by ``merge.build_profile`` for both), so the two read the same Profile. Standard library only.
"""

from __future__ import annotations

import ast
import json
import os
import re
from pathlib import Path
from typing import overload

from recompile_fix.errors import UserError
from recompile_fix.profile.graph_breaks import logging_call, parse_graph_break  # the recorder's reading too
from recompile_fix.profile.libraries import STDLIB_ROOT, spell_library_file
from recompile_fix.profile.resume import PREFIX as RESUME_PREFIX
from recompile_fix.profile.resume import function_of, is_resume, parse_resume, resumed_function
from recompile_fix.profile.sources import parse_source

__all__ = ["profile_from_trace", "read_trace", "trace_files"]

_PREFIX = re.compile(r"^(?:\[rank(?P<rank>\d+)\]:)?[VIWEC]\d{4} [\d:.]+\s+(?P<pid>\d+) [^\]]*\]")
_FILE_RANK = re.compile(r"rank_(\d+)_")
_LOCAL = re.compile(r"""^L\[['"](?P<name>\w+)['"]\](?:\[(?P<index>\d+)\])?$""")
_LOCAL_ROOT = re.compile(r"""^L\[['"](?P<name>\w+)['"]\]""")
# What the recorder does not walk: a module's parameters, buffers and submodules, and torch's own
# objects (an optimizer's param_groups).
_MODULE_INTERNALS = ("._modules", "._parameters", "._buffers", ".param_groups[")
# One guard a line; torch 2.8 writes no ``# comment`` after the value, so ``$`` ends each line.
_EQUALS = re.compile(r"""EQUALS_MATCH: L\[['"](?P<name>\w+)['"]\] == (?P<value>.+?)\s*(?:#|$)""", re.M)
_MAX_STACK = 12  # as the recorder: the innermost user frames
# Events whose payload we read; every other payload is skipped unread.
_PAYLOADS = {
    "artifact:recompile_reasons",
    "artifact:dynamo_graph_break_reason",
    "artifact:torch_version",
    "dynamo_cpp_guards_str",
}
_COMMON_KEYS = {"frame_id", "frame_compile_id", "attempt", "has_payload", "compiled_autograd_id", "rank"}


def trace_files(path: str | os.PathLike) -> list[Path]:
    """The TORCH_TRACE logs in a directory (or the one file named)."""
    path = Path(path)
    if path.is_file():
        return [path]
    if not path.is_dir():
        raise UserError(f"{path}: no such TORCH_TRACE directory")
    files = sorted(p for p in path.glob("*.log") if p.is_file())
    if not files:
        raise UserError(
            f"{path}: no TORCH_TRACE logs here (dedicated_log_torch_trace_*.log); "
            f"run the program with TORCH_TRACE={path} first"
        )
    return files


def profile_from_trace(path: str | os.PathLike, *, root: str | None = None):
    """A Profile of the run that wrote the TORCH_TRACE directory ``path``."""
    from recompile_fix.profile.merge import build_profile

    root = os.path.abspath(root or os.getcwd())
    records = read_trace(path, root=root)
    profile = build_profile(records, command=["--from-trace", str(path)], root=root)
    return profile


def read_trace(path: str | os.PathLike, *, root: str | None = None) -> list[dict]:
    """One raw record (the recorder's format) per process found in the trace."""
    root = os.path.abspath(root or os.getcwd())
    paths = _PathMap(root)
    records = []
    for file in trace_files(path):
        for process in _read_file(file):
            if process.metrics:
                records.append(process.record(paths))
    return records


# -- parsing ---------------------------------------------------------------------------------


class _Process:
    """What one process wrote: events by compile id, in file order."""

    def __init__(self, pid: int, rank: int | None) -> None:
        self.pid, self.rank = pid, rank
        self.strings: dict[int, str] = {}
        self.torch_version: str | None = None
        self.metrics: list[dict] = []
        self.starts: dict[str, list[dict]] = {}
        self.stacks: list[tuple[str, str, list[dict]]] = []  # (kind, compile id, stack) in order
        self.symbol_stacks: dict[str, list[dict]] = {}
        self.reasons: dict[str, list[str]] = {}
        self.graph_breaks: list[dict] = []
        self.tensors: dict[str, dict[tuple, dict]] = {}
        self.sources: dict[str, list[tuple]] = {}
        self.scalars: dict[str, dict[str, dict]] = {}
        self.paths = _PathMap(os.getcwd())
        self.generation = 0
        self.started_ids: set[str] = set()

    # -- events ----------------------------------------------------------------------------
    def on_event(self, kind: str, meta: dict, payload: str | None) -> None:
        body = meta.get(kind.split(":")[0])
        cid = _compile_id(meta)
        if kind == "dynamo_start" and cid:
            # torch starts each compile id once; one started again means torch._dynamo.reset()
            # numbered them from 0/0 again: a new generation (as the recorder numbers them).
            if cid in self.started_ids:
                self.generation += 1
                self.started_ids = set()
            self.started_ids.add(cid)
        cid = _qualified(self.generation, cid)
        if kind == "str" and isinstance(body, list) and len(body) == 2:
            self.strings[body[1]] = body[0]
        elif kind == "dynamo_start" and cid and isinstance(body, dict):
            stack = self._stack(body.get("stack"))
            self.starts.setdefault(cid, stack)
            self.stacks.append(("start", cid, stack))
        elif kind == "create_symbol" and cid and isinstance(body, dict):
            stack = self._stack(body.get("stack"))
            if stack:
                self.symbol_stacks.setdefault(cid, stack)
                self.stacks.append(("symbol", cid, stack))
            self._symbol_value(cid, body)
        elif kind == "compilation_metrics" and isinstance(body, dict) and body.get("compile_id"):
            self.metrics.append({**body, "_generation": self.generation})
            self.torch_version = self.torch_version or body.get("pytorch_version")
        elif kind == "artifact:recompile_reasons" and cid and payload is not None:
            self.reasons.setdefault(cid, []).extend(_reason_texts(payload))
        elif kind == "artifact:dynamo_graph_break_reason" and payload is not None:
            self._graph_break(_compile_id(meta), payload)
        elif kind == "artifact:torch_version" and payload:
            try:
                self.torch_version = json.loads(payload).get("pytorch_version") or self.torch_version
            except (json.JSONDecodeError, AttributeError):
                pass
        elif kind == "describe_tensor" and cid and isinstance(body, dict):
            self.tensors.setdefault(cid, {})[(body.get("describer_id"), body.get("id"))] = body
        elif kind == "describe_source" and cid and isinstance(body, dict):
            self.sources.setdefault(cid, []).append((body.get("describer_id"), body.get("id"), body.get("source")))
        elif kind == "dynamo_cpp_guards_str" and cid and payload:
            for match in _EQUALS.finditer(payload):
                value = _literal(match.group("value"))
                if isinstance(value, (bool, int, float)):
                    self.scalars.setdefault(cid, {}).setdefault(
                        match.group("name"), {"type": type(value).__name__, "value": value}
                    )

    def _stack(self, entries) -> list[dict]:
        stack = []
        for entry in entries or []:
            if not isinstance(entry, dict):
                continue
            filename = entry.get("filename")
            file = self.strings.get(filename) if isinstance(filename, int) else filename
            stack.append({"file": file or "<unknown>", "line": entry.get("line"), "name": entry.get("name")})
        return stack

    def _symbol_value(self, cid: str, body: dict) -> None:
        local = _LOCAL.match(str(body.get("source", "")))
        if not local or local.group("index"):
            return
        value = _literal(str(body.get("val", "")))
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            self.scalars.setdefault(cid, {}).setdefault(
                local.group("name"), {"type": type(value).__name__, "value": value}
            )

    def _graph_break(self, cid: str | None, text: str) -> None:
        graph_break = parse_graph_break(text)
        if graph_break is not None:
            file, line, reason = graph_break
            entry = {"compile_id": cid, "generation": self.generation, "file": file, "line": line, "reason": reason}
            logger = logging_call(text)
            if logger is not None:
                entry["logger"], entry["logger_method"] = logger
            self.graph_breaks.append(entry)

    # -- the raw record ---------------------------------------------------------------------
    def record(self, paths: "_PathMap") -> dict:
        self.paths = paths
        torch_dir = self._torch_dir()
        if self.torch_version is None and torch_dir:
            # torch < 2.10 names its version nowhere in the trace: ask the torch whose files it
            # names, when that is installed here (the trace is read where it was written).
            self.torch_version = _installed_version(torch_dir)
        frames_by_id: dict[str, dict] = {}
        compiles = []
        for m in self.metrics:
            cid = _qualified(m["_generation"], str(m["compile_id"]))
            frame = None  # as the trace spells it; the record gets this checkout's path
            if m.get("co_name"):
                frame = {"file": m["co_filename"], "line": m.get("co_firstlineno"), "name": m["co_name"]}
                frames_by_id[_frame_id(cid)] = frame
            known = frame or frames_by_id.get(_frame_id(cid))
            stack = self._call_stack(cid, known, torch_dir) if known else []
            compiles.append(
                {
                    "compile_id": str(m["compile_id"]),
                    "generation": m["_generation"],
                    "frame": {**frame, "file": paths.local(frame["file"])} if frame else None,
                    "is_forward": m.get("is_forward", True),
                    "recompile_reason": m.get("recompile_reason"),
                    "guard_failures": list(self.reasons.get(cid, [])),
                    "fail_type": m.get("fail_type"),
                    "fail_reason": m.get("fail_reason"),
                    "restart_reasons": sorted(m.get("restart_reasons") or []),
                    "stack": [_location(s, paths) for s in stack],
                    "inputs": self._inputs(cid),
                    "seconds": {
                        "dynamo": _seconds(m, "dynamo_cumulative_compile_time_us", "entire_frame_compile_time_s"),
                        "backend": _seconds(m, "aot_autograd_cumulative_compile_time_us", "backend_compile_time_s"),
                        "inductor": _seconds(m, "inductor_cumulative_compile_time_us", "inductor_compile_time_s"),
                    },
                }
            )
        self._add_call_columns(compiles, paths)
        breaks = [{**b, "file": paths.local(b["file"])} for b in self.graph_breaks]
        return {
            "pid": self.pid,
            "rank": self.rank,
            "local_rank": None,
            "argv": [],
            "torch_version": self.torch_version,
            "compiles": compiles,
            "graph_breaks": breaks,
            "exit": {},
            "source": "torch_trace",
        }

    def _torch_dir(self) -> str | None:
        for path in self.strings.values():
            if path.endswith(os.sep.join(("", "torch", "_dynamo", "convert_frame.py"))):
                return path[: -len(os.sep.join(("", "_dynamo", "convert_frame.py")))]
        return None

    def _internal(self, file: str, torch_dir: str | None) -> bool:
        if file.startswith("<"):
            return True
        if torch_dir and file.startswith(torch_dir + os.sep):
            return True
        if re.search(r"[/\\](?:site|dist)-packages[/\\]torch[/\\]", file):
            return True
        if re.search(r"[/\\]recompile_fix[/\\]", file):
            return True
        # The standard library's wrappers (contextlib, functools, runpy): never a call site. The
        # Profile's own spelling decides, as it does for the records this reader writes.
        return (spell_library_file(file) or "").startswith(STDLIB_ROOT + "/")

    def _call_stack(self, cid: str, frame: dict, torch_dir: str | None) -> list[dict]:
        """The user frames (outermost first) when ``cid`` started compiling; the last one is
        the call site. See the module docstring for where each part comes from."""
        full = self.symbol_stacks.get(cid)
        if full:
            callback = os.path.join("_dynamo", "convert_frame.py")  # torch's frame callback: ours ends there
            cut = next((i for i, s in enumerate(full) if s["file"].endswith(callback)), len(full))
            return self._user(full[:cut], torch_dir)
        start = self.starts.get(cid)
        if not start:
            return []
        callers = start[:-1]
        resume = parse_resume(frame["name"])
        if resume:
            return self._user(callers + self._resume_callers(frame, resume), torch_dir)
        if callers and self._internal(callers[-1]["file"], torch_dir):
            return self._user(callers, torch_dir)  # the two frames torch dropped were its own wrappers
        caller = self._caller_from_later_stacks(cid, callers, frame, torch_dir)
        if caller is not None:
            return self._user(callers + [caller], torch_dir)
        if callers and _calls_named(self.paths.local(callers[-1]["file"]), callers[-1]["line"], frame["name"]):
            return self._user(callers, torch_dir)  # e.g. a comprehension calling it on that line
        return []

    def _user(self, stack: list[dict], torch_dir: str | None) -> list[dict]:
        return [s for s in stack if not self._internal(s["file"], torch_dir)][-_MAX_STACK:]

    def _resume_callers(self, frame: dict, resume: tuple[str, int]) -> list[dict]:
        """The two frames torch dropped above a resume function: the piece of the original
        function that reached the graph break at line K, and the piece (if any) that called it."""
        name, line = resume
        pieces = {
            piece[1]
            for piece in (parse_resume(n) for n in self._code_names(frame["file"]))
            if piece and piece[0] == name
        }

        def piece_before(at: int) -> tuple[str, int | None]:
            earlier = [k for k in pieces if k < at]
            if earlier:
                k = max(earlier)
                return f"{RESUME_PREFIX}{name}_at_{k}", k
            return name, None

        inner_name, inner_start = piece_before(line)
        dropped = [{"file": frame["file"], "line": line, "name": inner_name}]
        if inner_start is not None:
            outer_name, _ = piece_before(inner_start)
            dropped.insert(0, {"file": frame["file"], "line": inner_start, "name": outer_name})
        return dropped

    def _code_names(self, file: str) -> set[str]:
        names = {m["co_name"] for m in self.metrics if m.get("co_name") and m.get("co_filename") == file}
        names.update(s[-1]["name"] for s in self.starts.values() if s and s[-1]["file"] == file)
        return names

    def _caller_from_later_stacks(
        self, cid: str, callers: list[dict], frame: dict, torch_dir: str | None
    ) -> dict | None:
        """The caller torch dropped, read off a later stack of the same call: one captured while
        the compiled frame (or one of its graph-break pieces) was running, before the frame's
        code was entered again."""
        frame_id = _frame_id(cid)
        order = [i for i, (kind, c, _) in enumerate(self.stacks) if kind == "start" and c == cid]
        if not order:
            return None
        prefix = [_key(s) for s in callers]
        for kind, other, stack in self.stacks[order[0] + 1 :]:
            if kind == "start" and _frame_id(other) == frame_id:
                return None  # the frame was called again: a later stack may be another call
            if len(stack) < len(prefix) + 2 or [_key(s) for s in stack[: len(prefix)]] != prefix:
                continue
            candidate = stack[len(prefix)]
            rest = stack[len(prefix) + 1 :]
            if self._internal(candidate["file"], torch_dir):
                continue
            if any(_is_piece_of(s, frame) for s in rest[:3]):
                return candidate
        return None

    def _inputs(self, cid: str) -> dict:
        inputs: dict[str, dict] = {}
        tensors = self.tensors.get(cid, {})
        for describer, tensor_id, source in self.sources.get(cid, []):
            tensor = tensors.get((describer, tensor_id))
            # L['x'], L['args'][0], L['kwargs']['input_ids'], L['self'].cache.layers[0].keys: the
            # recorder's spelling (torch 2.13's guard spelling) is the source without its L[...].
            name = _LOCAL_ROOT.sub(r"\g<name>", str(source), count=1)
            if tensor is None or name == str(source) or parse_source(name) is None:
                continue
            if any(internal in name for internal in _MODULE_INTERNALS):
                continue  # the recorder walks plain objects and a module's plain attributes only
            inputs.setdefault(
                name,
                {
                    "type": "Tensor",
                    "shape": list(tensor.get("size") or []),
                    "stride": list(tensor.get("stride") or []),
                    "dtype": str(tensor.get("dtype", "")).replace("torch.", ""),
                },
            )
        for name, value in self.scalars.get(cid, {}).items():
            inputs.setdefault(name, value)
        return inputs

    def _add_call_columns(self, compiles: list[dict], paths: "_PathMap") -> None:
        """The trace names lines, not the columns of the calls on them: find each user frame's
        call (of the next frame's function by name, else the only outermost call on the line),
        as CPython would give its span. Lines that call a graph-break piece stay without."""
        for raw in compiles:
            stack = raw["stack"]
            frame = raw["frame"]
            for i, site in enumerate(stack):
                callee = stack[i + 1]["function"] if i + 1 < len(stack) else (frame or {}).get("name")
                if (
                    not callee
                    or callee.startswith("<")
                    or (is_resume(callee) and function_of(callee) == function_of(site["function"]))
                ):
                    continue  # a comprehension, or the jump from one graph-break piece to the next
                span = _call_span(site["file"], site["line"], callee)
                if span is not None:
                    site["end_line"], site["col"], site["end_col"] = span[1], span[2], span[3]


def _read_file(path: Path) -> list[_Process]:
    file_rank = _FILE_RANK.search(path.name)
    processes: dict[int, _Process] = {}
    pending: tuple | None = None  # (process, kind, meta, payload lines or None)

    def flush() -> None:
        if pending is not None:
            process, kind, meta, payload = pending
            try:
                process.on_event(kind, meta, "\n".join(payload) if payload is not None else None)
            except (KeyError, TypeError, ValueError, AttributeError):
                pass  # a record of a shape we do not know: skipped, not fatal

    with open(path, encoding="utf-8", errors="replace") as fh:
        for line in fh:
            if line.startswith("\t"):
                if pending is not None and pending[3] is not None:
                    pending[3].append(line[1:].rstrip("\n"))
                continue
            flush()
            pending = None
            prefix = _PREFIX.match(line)
            if not prefix:
                continue
            start = line.find("{", prefix.end())
            if start < 0:
                continue
            try:
                meta = json.loads(line[start:])
            except json.JSONDecodeError:
                continue
            if not isinstance(meta, dict):
                continue
            kind = _kind(meta)
            if kind is None:
                continue
            pid = int(prefix.group("pid"))
            rank = meta.get("rank", prefix.group("rank") or (file_rank.group(1) if file_rank else None))
            process = processes.get(pid)
            if process is None:
                process = processes[pid] = _Process(pid, int(rank) if rank is not None else None)
            elif process.rank is None and rank is not None:
                process.rank = int(rank)
            wants_payload = kind in _PAYLOADS and "has_payload" in meta
            pending = (process, kind, meta, [] if wants_payload else None)
        flush()
    return list(processes.values())


def _kind(meta: dict) -> str | None:
    for key in meta:
        if key in _COMMON_KEYS:
            continue
        if key == "artifact":
            name = meta[key].get("name") if isinstance(meta[key], dict) else None
            return f"artifact:{name}"
        return key
    return None


def _compile_id(meta: dict) -> str | None:
    frame_id, frame_compile_id = meta.get("frame_id"), meta.get("frame_compile_id")
    if frame_id is None or frame_compile_id is None:
        return None
    base = f"{frame_id}/{frame_compile_id}"
    autograd = meta.get("compiled_autograd_id")
    return f"!{autograd}/{base}" if autograd is not None else base


@overload
def _qualified(generation: int, compile_id: str) -> str: ...
@overload
def _qualified(generation: int, compile_id: str | None) -> str | None: ...
def _qualified(generation: int, compile_id: str | None) -> str | None:
    """A compile id unique in the process: ids of later generations are prefixed (``g1:0/0``)."""
    return f"g{generation}:{compile_id}" if generation and compile_id else compile_id


def _installed_version(torch_dir: str) -> str | None:
    try:
        text = Path(torch_dir, "version.py").read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    match = re.search(r"""^__version__\s*=\s*['"]([^'"]+)['"]""", text, re.M)
    return match.group(1) if match else None


def _frame_id(compile_id: str) -> str:
    return compile_id.rsplit("/", 1)[0]


def _key(entry: dict) -> tuple:
    return (entry["file"], entry["line"], entry["name"])


def _is_piece_of(entry: dict, frame: dict) -> bool:
    if entry["file"] != frame["file"]:
        return False
    return entry["name"] == frame["name"] or resumed_function(entry["name"]) == frame["name"]


def _reason_texts(payload: str) -> list[str]:
    text = payload.strip()
    if text.startswith("["):
        try:
            value = json.loads(text)
            if isinstance(value, list):
                return [str(v) for v in value]
        except json.JSONDecodeError:
            pass
    if text.startswith('"'):
        try:
            return [str(json.loads(text))]
        except json.JSONDecodeError:
            pass
    return [payload] if text else []


def _literal(text: str):
    try:
        return ast.literal_eval(text.strip())
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return None


def _seconds(metrics: dict, us_field: str, s_field: str):
    us = metrics.get(us_field)
    if us is not None:
        return us / 1e6
    return metrics.get(s_field)


def _location(entry: dict, paths: "_PathMap") -> dict:
    return {
        "file": paths.local(entry["file"]),
        "line": entry["line"],
        "end_line": None,
        "col": None,
        "end_col": None,
        "function": entry["name"],
    }


_TREES: dict[tuple, ast.AST | None] = {}


def _tree(file: str) -> ast.AST | None:
    try:
        stat = os.stat(file)
    except OSError:
        return None
    key = (file, stat.st_mtime_ns, stat.st_size)
    if key not in _TREES:
        try:
            _TREES[key] = ast.parse(Path(file).read_bytes())
        except (OSError, SyntaxError, ValueError):
            _TREES[key] = None
    return _TREES[key]


def _calls_on_line(file: str, line: int) -> list[ast.Call]:
    tree = _tree(file)
    if tree is None or not isinstance(line, int):
        return []
    return [node for node in ast.walk(tree) if isinstance(node, ast.Call) and node.lineno == line]


def _callee(call: ast.Call) -> str | None:
    func = call.func
    return func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else None


def _calls_named(file: str, line: int, name: str | None) -> list[ast.Call]:
    return [call for call in _calls_on_line(file, line) if name and _callee(call) == name]


def _call_span(file: str, line: int, name: str | None) -> tuple[int, int, int, int] | None:
    calls = _calls_named(file, line, name)
    if not calls:
        everything = _calls_on_line(file, line)
        inner = {id(n) for call in everything for n in ast.walk(call) if n is not call}
        calls = [call for call in everything if id(call) not in inner]
    if len(calls) != 1:
        return None
    call = calls[0]
    if call.end_lineno is None or call.end_col_offset is None:  # a node the parser made has both
        return None
    return (call.lineno, call.end_lineno, call.col_offset, call.end_col_offset)


class _PathMap:
    """Trace paths -> paths in this checkout: unchanged when they exist here, else the longest
    suffix that exists under ``root`` (a run on another machine), else unchanged."""

    def __init__(self, root: str) -> None:
        self.root = root
        self.cache: dict[str, str] = {}

    def local(self, path: str) -> str:
        if path in self.cache:
            return self.cache[path]
        mapped = path
        if not path.startswith("<") and not os.path.exists(path):
            parts = Path(path).parts
            for i in range(1, len(parts)):
                candidate = os.path.join(self.root, *parts[i:])
                if os.path.isfile(candidate):
                    mapped = candidate
                    break
        self.cache[path] = mapped
        return mapped
