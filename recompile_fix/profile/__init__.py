"""Stage 1, the Profile: run the user's program, record what torch compiled and why, and merge it
into one Profile (plain, versioned JSON data).

* ``model``: the Profile data model (frames, compiles, typed reasons, graph breaks, source hashes).
* ``reasons``: torch's guard-failure text to typed reasons.
* ``recorder``, ``compiled_outputs``: run inside the user's process; standard library and torch
  only (this package's ``__init__`` imports nothing, so loading them loads nothing else).
* ``run``: runs the user's command with the recorder; ``trace_reader``: reads a TORCH_TRACE
  directory instead; ``merge``: both become one Profile.
"""
