"""The in-process recorder: runs inside the user's Python process and writes one raw record file.

It is loaded by ``_bootstrap/sitecustomize.py`` and waits until the program imports torch; a
program that never imports torch pays nothing. Everything it reads is torch's own bookkeeping:
every compile's metrics record, the guard failures of each recompile, the Python stack and the
compiled frame's arguments when a compile starts, the graph-break log, and two facts about the
program (whether it ran a backward pass, and the steady-state time of each compiled module).
Programs rearrange that bookkeeping (``torch._dynamo.reset()``, ``logging.config``, another
tool's hooks): every hook is put back on each compile, and what was repaired is reported.

Every torch internal is looked up with ``getattr`` (releases 2.6 to 2.15 differ): what is missing
is recorded in ``features`` and degrades the record, never the user's program. Standard library
and torch only (tests/test_layout.py checks it: the user's interpreter may have none of the
tool's dependencies); JSON out (never pickles); torch is asked to write no files. The raw records
are typed and merged into a Profile by ``recompile_fix.profile.merge``.

Modules, in the order a compile meets them:

* ``install``: ``install_when_torch_imported`` and ``install``; the record written at exit, on
  SIGTERM and with the exception that ended the program;
* ``hooks``: the hooks into torch's bookkeeping, put back on each compile;
* ``recording``: ``Recorder``, the compiles, graph breaks and generations of the process, and the
  exit cross-check against the compile ids torch handed out;
* ``stack``, ``inputs``, ``compiled_frame``: what one compile is recorded with (the user's call
  site; the arguments' tensors, scalars and module classes; the module's block stacks and the
  backend);
* ``program_facts``: the backward pass and the steady-state call times;
* ``part_files``: the ``part-<pid>.json`` / ``.jsonl`` files the process leaves;
* ``internals``: torch's internals, each looked up where it is needed.

This ``__init__`` imports nothing (tests/test_layout.py): import what you use from its module
(``recompile_fix.profile.recorder.install.install_when_torch_imported``).
"""
