"""What the rules ask of the user's source: a file's ``ast`` and libcst trees made on first use
(``source``), the hash-checked files a Profile names (``project``), and the analyses behind
several rules (``scalar_uses``: would a 0-d tensor do what this Python number does?
``block_stacks``: which stacks of identical blocks can become one compiled region?).
"""
