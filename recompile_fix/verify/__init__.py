"""`recompile-fix verify` and `apply --verify`: prove each fix by running it.

The command runs twice, both times under the recorder (``profile.run.run_profiled``), which also
keeps what each compiled callable returned (``profile.compiled_outputs``):

* before: on the user's tree as it is, from the project root;
* after: on a copy of the tree (``tree.copy_tree``) with the fixes written into the copy, from
  the copy's root. The user's files are not touched.

The two Profiles are compared frame by frame (``compare``). Frames are matched by (file, name)
and, within that, by order of first line (an edit shifts line numbers; a resume function's
``_at_LINE`` suffix is ignored). The recorded tensors are compared call by call, with torch's
default tolerances, given ones, or exactly. A fix is *worse* when, after it, the command fails;
a frame compiles more often, recompiles more, hits the recompile limit more or breaks its graph
more; a new frame compiles; or a compiled callable returns different tensors (or is called a
different number of times).

``prove.apply_verified`` first tries all the planned fixes together (two runs); when that is
worse it adds them one by one (one run each), keeping a fix only when it makes nothing worse
than the fixes kept before it. The kept set is what the last accepted run ran, so it is
verified as a whole.

Modules: ``tree`` (the copy), ``runs`` (running the command, reading what it recorded),
``compare`` (before against after), ``prove`` (the two commands), ``render`` (text) and
``chart`` (the HTML page).
"""
