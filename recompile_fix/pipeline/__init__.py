"""The one fix pipeline every surface calls (``fix``: Profile + configuration -> Findings ->
selected fixes -> per-file rewrite -> written files or a diff), and static mode's fast scan of
many files (``scan``).
"""
