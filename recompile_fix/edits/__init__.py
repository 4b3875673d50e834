"""Stage 3, Edits: character-offset replacements in one file (``edit``), a file's Findings turned
into Edits and the new text (``rewrite``), and black for the inserted statements only
(``format``).
"""
