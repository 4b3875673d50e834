"""`recompile-fix lsp`: the Findings and fixes of `apply`, in any editor that speaks LSP (stdio).

* Diagnostics on open, on change (debounced) and on save: from the Profile for a file whose text
  (the editor's buffer, saved or not) hashes to what the Profile saw, and from the rules that
  need no Profile (``plan_static``). A file the Profile saw in other bytes gets one information
  diagnostic saying to profile again. Hover shows a Finding's notes and evidence.
* Code actions: a quick fix per Finding, whose edits are the ``rewrite()`` Edits that `apply`
  writes; "fix all safe fixes in this file" (``source.fixAll.recompile-fix``; unsafe fixes only
  ever as explicit quick fixes); "suppress", which adds ``# recompile-fix: ignore[ID]``.
* The server only reads: the Profile, ``pyproject.toml``, and source it parses with libcst. It
  never imports or runs the user's code, and a buffer that does not parse gives no actions.

Applying one quick fix changes the buffer, and a Profile matches by hash. So that the other
Findings stay usable, the server remembers each text it produced: a buffer that is the profiled
text with some of the server's own fixes applied (state ``S``), give or take suppression
comments, is still "the profiled file with S fixed". Quick fixes and fix-all in that state are
``rewrite(profiled text, S + more)`` minus ``rewrite(profiled text, S)``: the same Edits `apply`
would write for the whole set, so fixing one by one ends where `apply` ends.

Modules: ``positions`` (character offsets <-> LSP positions), ``items`` (what the engine
hands the server: diagnostics, actions, hover text), ``engine`` (``Engine``: Findings and fixes
per buffer, found by the fix pipeline's ``find`` with the editor's buffers as its texts; knows
nothing of LSP messages), ``server`` (``build_server`` wires the engine to pygls, which is
imported only there and in ``transport``: ``pip install 'recompile-fix[lsp]'``) and
``transport`` (reading messages on stdio, the LSP lifecycle).
"""
