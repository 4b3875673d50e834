"""Loaded by every Python process that ``recompile-fix profile`` starts (through PYTHONPATH).

It starts the recorder, then hands over to the sitecustomize this one shadows, if any.
"""

import os
import sys


def _chain_to_shadowed_sitecustomize() -> None:
    here = os.path.dirname(os.path.abspath(__file__))
    ours = sys.modules.pop("sitecustomize", None)
    saved = list(sys.path)
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != here]
    try:
        import sitecustomize  # type: ignore[import-not-found]  # noqa: F401  (the user's own, if any)
    except ImportError:
        pass
    finally:
        sys.path[:] = saved
        if ours is not None and "sitecustomize" not in sys.modules:
            sys.modules["sitecustomize"] = ours


try:
    # A warm runner's server (profile/warm.py) installs the recorder in each run it forks, not in itself.
    if not os.environ.get("RECOMPILE_FIX_ZYGOTE"):
        from recompile_fix.profile.recorder.install import install_when_torch_imported

        install_when_torch_imported()
        from recompile_fix._bootstrap.watchdog import watch

        watch()  # the program ends when the recompile-fix that runs it is killed
except Exception as exc:  # the user's program must run even if the recorder cannot
    print(f"recompile-fix: recorder not started: {exc!r}", file=sys.stderr)

_chain_to_shadowed_sitecustomize()
