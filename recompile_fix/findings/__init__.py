"""Stage 2, Findings: which rule fires where, on what evidence, with what fix safety.

* ``finding``: the Finding data type and its Safety;
* ``rule``: the contract every rule in ``rules/`` implements;
* ``plan``: Profile -> Findings (every rule's ``plan``);
* ``arbitration``: one fix kept of two that would edit the same thing, as the rules declare.
"""
