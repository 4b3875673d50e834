"""`profile` of a notebook (``recompile-fix profile -- nb.ipynb``, or ``-- python nb.ipynb``): its
code cells run in order in one Python process, as ``jupyter nbconvert --execute`` runs them, but
without Jupyter: the notebook's text (``recompile_fix.notebook``) is written to
``.recompile-fix/notebooks/<notebook>.py`` and run as any script, and the Profile it gives is
renamed to name the notebook (its lines are the text's, which the rules read for the notebook)."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from recompile_fix.errors import UserError
from recompile_fix.notebook import Notebook, is_notebook, notebook_script
from recompile_fix.profile.libraries import is_python
from recompile_fix.profile.model import Profile, sha256_bytes

__all__ = ["NotebookRun", "prepare_notebook", "rename_to_notebook"]

SCRIPTS_DIR = os.path.join(".recompile-fix", "notebooks")


@dataclass
class NotebookRun:
    notebook: str  # absolute
    script: str  # absolute
    text: str  # the notebook's Python text (what the Profile's hash is of)


def _notebook_argument(argv: list[str]) -> int | None:
    """Which argument of ``argv`` is the notebook to run: a bare ``nb.ipynb``, or the script
    argument of ``python nb.ipynb`` (options before it: ``python -X dev nb.ipynb``)."""
    if argv and is_notebook(argv[0]):
        return 0
    if len(argv) > 1 and is_python(argv[0]):
        index = 1
        while index < len(argv):
            if argv[index] in ("-m", "-c"):
                return None
            if not argv[index].startswith("-"):
                return index if is_notebook(argv[index]) else None
            index += 2 if argv[index] in ("-X", "-W") else 1
    return None


def prepare_notebook(command: list[str], *, cwd: str, root: str) -> tuple[list[str], NotebookRun | None]:
    """The command (run in ``cwd``) with a notebook replaced by the script of its cells (written
    under ``root``'s ``.recompile-fix/notebooks/``); unchanged, with None, when it runs none."""
    index = _notebook_argument(command)
    if index is None:
        return command, None
    given = command[index]
    path = os.path.join(cwd, given)
    try:
        notebook = Notebook(path, Path(path).read_bytes())
    except OSError as exc:
        raise UserError(f"{given}: cannot read the notebook: {exc.strerror}") from None
    path = os.path.abspath(path)
    try:
        relative = os.path.relpath(path, root)
    except ValueError:
        relative = os.path.basename(path)
    if relative.startswith(os.pardir):
        relative = os.path.basename(path)
    script = os.path.join(root, SCRIPTS_DIR, relative + ".py")
    os.makedirs(os.path.dirname(script), exist_ok=True)
    with open(script, "w", encoding="utf-8", newline="") as fh:
        fh.write(notebook_script(notebook))
    argv = list(command)
    if index == 0:
        argv[0:1] = ["python", script]
    else:
        argv[index] = script
    return argv, NotebookRun(notebook=path, script=script, text=notebook.text)


def rename_to_notebook(profile: Profile, run: NotebookRun, root: str) -> Profile:
    """The Profile with the script's paths (absolute and as the Profile spells them) naming the
    notebook instead, and the notebook hashed as the rules read it (its Python text)."""
    pairs = [(run.script, run.notebook)]
    if not os.path.relpath(run.script, root).startswith(os.pardir):
        pairs.append((os.path.relpath(run.script, root), os.path.relpath(run.notebook, root)))

    def rename(value: Any) -> Any:
        if isinstance(value, str):
            for old, new in pairs:
                value = value.replace(old, new)
            return value
        if isinstance(value, list):
            return [rename(v) for v in value]
        if isinstance(value, dict):
            return {rename(k): rename(v) for k, v in value.items()}
        return value

    data = json.loads(json.dumps(profile.to_json()))
    renamed = Profile.from_json(rename(data))
    # The script's folder was the first import path; the notebook's is (Jupyter's kernel's cwd).
    folders = [spell for spell in (os.path.dirname(run.script), os.path.relpath(os.path.dirname(run.script), root))]
    notebook_folder = os.path.relpath(os.path.dirname(run.notebook), root)
    renamed.import_paths = list(dict.fromkeys(notebook_folder if p in folders else p for p in renamed.import_paths))
    name = pairs[-1][1]
    if name in renamed.sources:
        renamed.sources[name] = sha256_bytes(run.text.encode("utf-8"))
    renamed.exit_code, renamed.backend = profile.exit_code, profile.backend
    return renamed
