"""What compiled code does with a tensor argument's sizes, as RF001 needs to know before it marks a
dimension dynamic (libcst, one function body):

* ``loop_dims``: dimensions that set how often Python code runs (``range(x.size(1))``, a loop
  over the tensor, ``x.unbind(1)``). Torch must specialise those: a hard ``mark_dynamic`` raises
  ``ConstraintViolationError`` on every call and ``maybe_mark_dynamic`` changes nothing, so such a
  dimension gets no mark (measured: staging/measure A.7).
* ``compared_dims``: dimensions compared for equality (``if x.shape[0] == 4``, ``n in (4, 8)``),
  matched (``match x.shape[0]:`` / ``case 4:``; ``match x.shape:`` / ``case (4, n):`` for the
  positions before a ``*rest``), or looked up in a container (``TABLE[n]``, ``TABLE.get(n)``
  where ``TABLE`` is a dict, list, tuple or set built in this file): torch guards them, and a
  hard mark would raise, so the mark is ``maybe_mark_dynamic``.
* ``unseen_call``: the first call into code the analysis cannot read (a model from a package,
  a module passed in), where a size may be specialised out of sight.

Sizes are followed through plain locals (``n = x.size(1)``, ``B, T, C = x.shape``).
"""

from __future__ import annotations

import builtins

import libcst as cst

from recompile_fix.analysis.cst_names import number_literal
from recompile_fix.analysis.cst_walk import dotted_name, is_name, walk
from recompile_fix.analysis.source import SourceFile

__all__ = ["SizeUses", "unseen_call"]

# Builtins that run no user or library code on a tensor's behalf.
_SEEN_BUILTINS = frozenset(name for name in dir(builtins) if not name.startswith("_")) - {"exec", "eval"}
# Modules whose functions the analysis trusts not to specialise a size out of sight.
_SEEN_MODULES = ("torch", "math", "operator", "functools", "itertools", "collections", "typing")


class SizeUses:
    """How one function body uses the sizes of its parameter ``param``, and the functions of the
    same file it passes the tensor to (``self.step(x)``, ``helper(x)``, ``self.block(x)`` of a
    class defined here), ``depth`` calls deep."""

    def __init__(self, func: cst.FunctionDef, param: str, source: SourceFile | None = None, depth: int = 3):
        self.func = func
        self.param = param
        self.source = source
        self.aliases: dict[str, int] = {}  # local name -> the dimension it holds
        self.loops: dict[int, str] = {}  # dimension -> the code that loops over it
        self.compared: set[int] = set()
        # dimension -> the integer literals it is compared with; None: not only literals
        self.values: dict[int, set[int] | None] = {}
        self._read_aliases()
        self._read_uses()
        if source is not None and depth > 0:
            self._follow_calls(source, depth)

    def loop_dims(self) -> dict[int, str]:
        return dict(self.loops)

    def compared_dims(self) -> set[int]:
        return set(self.compared)

    def compared_values(self, dim: int) -> set[int] | None:
        """The integers the code compares ``dim``'s size with (``== 4``, ``in (4, 8)``, ``case
        4:``), where it compares it only with integer literals; else None."""
        found = self.values.get(dim) if dim in self.compared else None
        return set(found) if found is not None else None

    def _note_values(self, dim: int, values: set[int] | None) -> None:
        self.compared.add(dim)
        known = self.values.get(dim, set())
        self.values[dim] = None if known is None or values is None else known | values

    # -- sizes ---------------------------------------------------------------------------
    def size_dim(self, node: cst.CSTNode) -> int | None:
        """The dimension of ``param`` this expression is the size of: ``x.shape[d]``,
        ``x.size()[d]``, ``x.size(d)``, ``len(x)`` (0), or a local holding one."""
        param = self.param
        if isinstance(node, cst.Name) and node.value in self.aliases:
            return self.aliases[node.value]
        if isinstance(node, cst.Subscript) and len(node.slice) == 1:
            index = node.slice[0].slice
            if isinstance(index, cst.Index) and isinstance(index.value, cst.Integer) and self._is_shape(node.value):
                return int(index.value.evaluated_value)
        if isinstance(node, cst.Call) and _is_method(node, param, "size") and len(node.args) == 1:
            value = node.args[0].value
            if isinstance(value, cst.Integer):
                return int(value.evaluated_value)
        if isinstance(node, cst.Call) and is_name(node.func, "len") and len(node.args) == 1:
            if is_name(node.args[0].value, param):
                return 0
        return None

    def _is_shape(self, node: cst.CSTNode) -> bool:
        """``x.shape`` or ``x.size()``."""
        if isinstance(node, cst.Attribute) and node.attr.value == "shape" and is_name(node.value, self.param):
            return True
        return isinstance(node, cst.Call) and _is_method(node, self.param, "size") and not node.args

    def _contains_size(self, root: cst.CSTNode) -> int | None:
        for node in walk(root):
            dim = self.size_dim(node)
            if dim is not None:
                return dim
        return None

    def _read_aliases(self) -> None:
        for node in walk(self.func.body):
            if not isinstance(node, cst.Assign) or len(node.targets) != 1:
                continue
            target = node.targets[0].target
            if isinstance(target, cst.Name):
                dim = self.size_dim(node.value)
                if dim is not None:
                    self.aliases[target.value] = dim
            elif isinstance(target, (cst.Tuple, cst.List)) and self._is_shape(_unsliced(node.value)):
                for i, element in enumerate(target.elements):
                    if isinstance(element.value, cst.Name):
                        self.aliases[element.value.value] = i

    # -- uses ----------------------------------------------------------------------------
    def _read_uses(self) -> None:
        for node in walk(self.func.body):
            if isinstance(node, cst.Call) and is_name(node.func, "range"):
                dim = self._contains_size(node)
                if dim is not None:
                    self.loops.setdefault(dim, f"range() over dim {dim}")
            elif isinstance(node, (cst.For, cst.CompFor)):
                dim = self._iterated_dim(node.iter)
                if dim is not None:
                    self.loops.setdefault(dim, f"a Python loop over dim {dim}")
            elif isinstance(node, cst.Comparison):
                if any(type(c.operator).__name__ in _EQUALITY for c in node.comparisons):
                    dim = self._contains_size(node)
                    if dim is not None:
                        self._note_values(dim, self._literal_comparison(node, dim))
            elif isinstance(node, cst.Match):
                literal = self._literal_match(node)
                for dim in self._matched_dims(node):
                    self._note_values(dim, literal[1] if literal is not None and literal[0] == dim else None)
            elif isinstance(node, (cst.Subscript, cst.Call)):
                dim = self._looked_up_dim(node)
                if dim is not None:
                    self._note_values(dim, None)

    def _literal_comparison(self, node: cst.Comparison, dim: int) -> set[int] | None:
        """``x.shape[0] == 4``, ``n != 4``, ``n in (4, 8)``: the literals; else None."""
        if len(node.comparisons) != 1 or self.size_dim(node.left) != dim:
            return None
        target = node.comparisons[0]
        if isinstance(target.operator, (cst.Equal, cst.NotEqual)):
            value = _int_literal(target.comparator)
            return {value} if value is not None else None
        if isinstance(target.comparator, (cst.Tuple, cst.List, cst.Set)):
            values = [_int_literal(e.value) for e in target.comparator.elements]
            return {v for v in values if v is not None} if None not in values else None
        return None

    def _literal_match(self, match: cst.Match) -> tuple[int, set[int]] | None:
        """``match x.shape[0]:`` whose cases are integer literals or captures: (dim, literals)."""
        dim = self.size_dim(match.subject)
        if dim is None:
            return None
        values: set[int] = set()
        for case in match.cases:
            patterns = (
                [e.pattern for e in case.pattern.patterns] if isinstance(case.pattern, cst.MatchOr) else [case.pattern]
            )
            for pattern in patterns:
                if _captures(pattern):
                    continue
                value = _int_literal(pattern.value) if isinstance(pattern, cst.MatchValue) else None
                if value is None:
                    return None
                values.add(value)
        return dim, values

    def _matched_dims(self, match: cst.Match) -> set[int]:
        """The sizes a ``match`` statement tests: every size in its subject (``match n:``,
        ``match (x.shape[0], mode):``), and for ``match x.shape:`` the positions its case patterns
        test with a value (``case (4, n):`` -> dim 0; a capture or ``_`` tests nothing). Positions
        after a ``*rest`` count from the end, which the source does not tell: not counted."""
        dims = {dim for node in walk(match.subject) if (dim := self.size_dim(node)) is not None}
        subject = match.subject
        if isinstance(subject, cst.Subscript) and len(subject.slice) == 1:
            whole = subject.slice[0].slice
            if isinstance(whole, cst.Slice) and whole.lower is None:
                subject = subject.value  # x.shape[:2]: the same positions
        if self._is_shape(subject):
            for case in match.cases:
                dims |= _shape_pattern_dims(case.pattern)
        return dims

    def _looked_up_dim(self, node: cst.Subscript | cst.Call) -> int | None:
        """The dimension whose size is a key or index into a Python container built in this
        file (``TABLE[n]``, ``TABLE.get(n)``, ``self.table[x.size(0)]``): a lookup needs the
        value, so torch specialises it. A tensor indexed by a size (``pos[n]``) is not one."""
        if isinstance(node, cst.Subscript):
            if len(node.slice) != 1 or not isinstance(node.slice[0].slice, cst.Index):
                return None
            key, container = node.slice[0].slice.value, node.value
        else:
            func = node.func
            if not (isinstance(func, cst.Attribute) and func.attr.value == "get" and node.args):
                return None
            key, container = node.args[0].value, func.value
        dim = self.size_dim(key)
        return dim if dim is not None and self._is_container(container) else None

    def _is_container(self, node: cst.BaseExpression) -> bool:
        """A dict, list, tuple or set: a literal, or a local, module-level name or ``self``
        attribute of this file bound to one."""
        if _container_value(node):
            return True
        if isinstance(node, cst.Name):
            for n in walk(self.func.body):
                if isinstance(n, cst.Assign) and len(n.targets) == 1 and is_name(n.targets[0].target, node.value):
                    return _container_value(n.value)
            if self.source is not None:
                bound = _module_bindings(self.source).get(node.value)
                return isinstance(bound, cst.BaseExpression) and _container_value(bound)
            return False
        if isinstance(node, cst.Attribute) and is_name(node.value, "self") and self.source is not None:
            cls = self.source.enclosing_class(self.func)
            value = _self_assignment(self.source, cls, node.attr.value) if cls is not None else None
            return value is not None and _container_value(value)
        return False

    def _follow_calls(self, source: SourceFile, depth: int) -> None:
        cls = source.enclosing_class(self.func)
        for node in walk(self.func.body):
            if not isinstance(node, cst.Call):
                continue
            callee = _callee_def(source, node.func, cls)
            if callee is None or callee is self.func:
                continue
            func, bound = callee
            params = [p.name.value for p in (*func.params.posonly_params, *func.params.params)][bound:]
            keyword_params = params + [p.name.value for p in func.params.kwonly_params]
            positional = [a for a in node.args if a.keyword is None and not a.star]
            for arg in node.args:
                if not is_name(arg.value, self.param) or arg.star:
                    continue
                if arg.keyword is not None:
                    target = arg.keyword.value if arg.keyword.value in keyword_params else None
                else:
                    index = next(i for i, a in enumerate(positional) if a is arg)
                    target = params[index] if index < len(params) else None
                if target is None:
                    continue
                inner = SizeUses(func, target, source, depth - 1)
                where = f" in `{func.name.value}` (line {source.positions[func].start.line})"
                for dim, what in inner.loops.items():
                    self.loops.setdefault(dim, what if " in `" in what else what + where)
                for dim in inner.compared:
                    self._note_values(dim, inner.compared_values(dim))

    def _iterated_dim(self, iterable: cst.BaseExpression) -> int | None:
        """The dimension a ``for`` loop runs over: the tensor itself (dim 0), ``enumerate(x)``,
        ``zip(x, ...)``, ``x.unbind(d)``, ``torch.unbind(x, d)``."""
        if is_name(iterable, self.param):
            return 0
        if not isinstance(iterable, cst.Call):
            return None
        func = iterable.func
        args = iterable.args
        if isinstance(func, cst.Name) and func.value in ("enumerate", "zip", "list", "tuple", "reversed"):
            return 0 if any(is_name(a.value, self.param) for a in args) else None
        if _is_method(iterable, self.param, "unbind"):
            return _dim_argument(args, 0)
        if (
            isinstance(func, cst.Attribute)
            and func.attr.value == "unbind"
            and args
            and is_name(args[0].value, self.param)
        ):
            return _dim_argument(args[1:], 0)
        return None


# libcst node classes by name: reading cst.* here would load libcst when the module is imported.
_EQUALITY = frozenset({"Equal", "NotEqual", "In", "NotIn"})
_CONTAINERS = frozenset({"Dict", "List", "Tuple", "Set", "DictComp", "ListComp", "SetComp"})


def _container_value(node: cst.BaseExpression) -> bool:
    """``{4: a, 8: b}``, ``[...]``, ``(...)``, ``{...}``, a comprehension of one, ``dict(...)``."""
    if type(node).__name__ in _CONTAINERS:
        return True
    return isinstance(node, cst.Call) and any(is_name(node.func, n) for n in ("dict", "list", "tuple", "set"))


def _shape_pattern_dims(pattern: cst.MatchPattern) -> set[int]:
    """The positions of ``x.shape`` a case pattern tests with a value (see ``_matched_dims``)."""
    if isinstance(pattern, cst.MatchOr):
        return set().union(*(_shape_pattern_dims(p.pattern) for p in pattern.patterns))
    if isinstance(pattern, cst.MatchAs):
        return _shape_pattern_dims(pattern.pattern) if pattern.pattern is not None else set()
    dims: set[int] = set()
    if isinstance(pattern, (cst.MatchList, cst.MatchTuple)):
        for i, element in enumerate(pattern.patterns):
            if isinstance(element, cst.MatchStar):
                break
            if not _captures(element.value):
                dims.add(i)
    return dims


def _int_literal(node: cst.BaseExpression) -> int | None:
    value = number_literal(node)
    return value if isinstance(value, int) else None


def _captures(pattern: cst.MatchPattern) -> bool:
    """``n``, ``_``: a pattern that matches any value."""
    return isinstance(pattern, cst.MatchAs) and (pattern.pattern is None or _captures(pattern.pattern))


def _callee_def(
    source: SourceFile, callee: cst.BaseExpression, cls: cst.ClassDef | None
) -> tuple[cst.FunctionDef, int] | None:
    """The def a call runs, when this file has it: ``helper(x)`` (a module-level function),
    ``self.step(x)`` (a method of this class), ``self.block(x)`` (the forward of a class of this
    file assigned to ``self.block``). With how many leading parameters are bound (``self``)."""
    module = _module_bindings(source)
    if isinstance(callee, cst.Name):
        bound = module.get(callee.value)
        if isinstance(bound, cst.FunctionDef):
            return bound, 0
        if isinstance(bound, cst.ClassDef):
            forward = _method(bound, "forward")
            return (forward, 1) if forward is not None else None
        return None
    if cls is None or not isinstance(callee, cst.Attribute) or not is_name(callee.value, "self"):
        return None
    method = _method(cls, callee.attr.value)
    if method is not None:
        return method, 1
    value = _self_assignment(source, cls, callee.attr.value)
    if isinstance(value, cst.Call) and isinstance(value.func, cst.Name):
        owner = module.get(value.func.value)
        if isinstance(owner, cst.ClassDef):
            forward = _method(owner, "forward")
            return (forward, 1) if forward is not None else None
    return None


def _method(cls: cst.ClassDef, name: str) -> cst.FunctionDef | None:
    return next((n for n in cls.body.body if isinstance(n, cst.FunctionDef) and n.name.value == name), None)


def unseen_call(source: SourceFile, func: cst.FunctionDef, opaque: frozenset[str] = frozenset()) -> str | None:
    """The first call in ``func`` into code the analysis cannot read, as ``self.lm(...)``
    (line N); None when every call goes to torch, a builtin, a tensor method or code of this
    file. ``opaque``: parameters known not to be tensors (a cache object passed in): their
    methods, and those of what is taken from them (``for layer in cache.layers``), are not a
    tensor's, and may be a library's."""
    cls = source.enclosing_class(func)
    names = {**_module_bindings(source), **_local_bindings(source, func, cls)}
    opaque = _opaque_locals(func, opaque)
    for node in walk(func.body):
        if not isinstance(node, cst.Call):
            continue
        root = _root_name(node.func)
        if (root in opaque and isinstance(node.func, cst.Attribute)) or not _seen_callee(source, node.func, cls, names):
            line = source.positions[node].start.line
            return f"`{_short(source.code(node.func))}(...)` (line {line})"
    return None


def _seen_callee(
    source: SourceFile, callee: cst.BaseExpression, cls: cst.ClassDef | None, module_names: dict[str, cst.CSTNode]
) -> bool:
    if isinstance(callee, cst.Call) and is_name(callee.func, "super"):
        return cls is not None and all(_seen_class_expr(source, b.value, module_names) for b in cls.bases)
    if isinstance(callee, cst.Subscript):  # self.layers[i](x)
        return _seen_callee(source, callee.value, cls, module_names)
    if isinstance(callee, cst.Attribute):
        if isinstance(callee.value, cst.Call) and is_name(callee.value.func, "super"):
            return _seen_callee(source, callee.value, cls, module_names)
        root = _root_name(callee)
        if root is None:
            return True  # a method of a value computed here: a tensor's
        if root == "self":
            attr = _self_attribute(callee)
            if attr is None or cls is None:
                return True  # a method of something held on self: a tensor's (self.weight.t())
            value = _self_assignment(source, cls, attr)
            if value is not None:
                return _seen_value(source, value, module_names)
            if any(isinstance(n, cst.FunctionDef) and n.name.value == attr for n in cls.body.body):
                return True  # a method of this class
            # Inherited (self.register_buffer) or set elsewhere: readable when the bases are.
            return all(_seen_class_expr(source, b.value, module_names) for b in cls.bases)
        return _seen_name(source, root, module_names, method=True)
    if isinstance(callee, cst.Name):
        return _seen_name(source, callee.value, module_names, method=False)
    return True


def _seen_name(source: SourceFile, name: str, module_names: dict[str, cst.CSTNode], *, method: bool) -> bool:
    imported = source.imports.get(name)
    if imported is not None:
        return imported.split(".")[0] in _SEEN_MODULES
    bound = module_names.get(name)
    if bound is None:
        # A local or parameter: calling a method on it is a tensor method; calling it is not readable.
        return method or name in _SEEN_BUILTINS
    if isinstance(bound, (cst.FunctionDef, cst.ClassDef)):
        return True
    return _seen_value(source, bound, module_names)


def _seen_value(source: SourceFile, value: cst.CSTNode, module_names: dict[str, cst.CSTNode]) -> bool:
    """Is every call in this expression (what a name or ``self.attr`` is bound to) one whose code
    is readable: ``nn.Linear(8, 16)``, ``nn.ModuleList([Block() for _ in range(4)])``?"""
    calls = [n for n in walk(value) if isinstance(n, cst.Call)]
    if not calls:
        return False  # bound to something passed in: cannot tell what it is
    return all(_seen_class_expr(source, call.func, module_names) for call in calls)


def _seen_class_expr(source: SourceFile, node: cst.BaseExpression, module_names: dict[str, cst.CSTNode]) -> bool:
    name = dotted_name(node)
    if not name:
        return False
    head = name.split(".")[0]
    if head in _SEEN_BUILTINS and head not in module_names:
        return True
    qualified = source.qualified_name(node)
    if qualified.split(".")[0] in _SEEN_MODULES and (head in source.imports or head == "torch"):
        return True
    return isinstance(module_names.get(head), (cst.ClassDef, cst.FunctionDef))


def _module_bindings(source: SourceFile) -> dict[str, cst.CSTNode]:
    bound: dict[str, cst.CSTNode] = {}
    for statement in source.module.body:
        if isinstance(statement, (cst.FunctionDef, cst.ClassDef)):
            bound[statement.name.value] = statement
        elif isinstance(statement, cst.SimpleStatementLine):
            for small in statement.body:
                if isinstance(small, cst.Assign) and len(small.targets) == 1:
                    if isinstance(small.targets[0].target, cst.Name):
                        bound[small.targets[0].target.value] = small.value
    return bound


def _opaque_locals(func: cst.FunctionDef, opaque: frozenset[str]) -> frozenset[str]:
    """``opaque`` and the locals bound from them (``layer`` in ``for block, layer in
    zip(self.blocks, cache.layers)``; ``keys = cache.keys``)."""
    found = set(opaque)
    if not found:
        return frozenset()
    for node in walk(func.body):
        targets: list[cst.BaseExpression]
        values: list[cst.BaseExpression]
        if isinstance(node, cst.For):
            targets, values = [node.target], [node.iter]
            if isinstance(node.iter, cst.Call) and isinstance(node.target, cst.Tuple):
                if is_name(node.iter.func, "zip") and len(node.target.elements) == len(node.iter.args):
                    targets = [e.value for e in node.target.elements]
                    values = [a.value for a in node.iter.args]
        elif isinstance(node, cst.Assign) and len(node.targets) == 1:
            targets, values = [node.targets[0].target], [node.value]
        else:
            continue
        for target, value in zip(targets, values):
            if _root_name(value) in found:
                found.update(n.value for n in walk(target) if isinstance(n, cst.Name))
    return frozenset(found)


def _local_bindings(source: SourceFile, func: cst.FunctionDef, cls: cst.ClassDef | None) -> dict[str, cst.CSTNode]:
    """Locals bound to what ``self.<attr>`` holds: ``for block in self.blocks``, ``for i, block
    in enumerate(self.blocks)``, ``for block, x in zip(self.blocks, xs)``, ``head = self.head``
    (-> what ``self.blocks = ...`` assigned)."""
    bound: dict[str, cst.CSTNode] = {}
    if cls is None:
        return bound
    for node in walk(func.body):
        pairs: list[tuple[cst.BaseExpression, cst.BaseExpression]]
        if isinstance(node, cst.For):
            iterable: cst.BaseExpression = node.iter
            target: cst.BaseExpression = node.target
            pairs = [(target, iterable)]
            if isinstance(iterable, cst.Call) and isinstance(target, cst.Tuple):
                elements = [e.value for e in target.elements]
                args = [a.value for a in iterable.args]
                if is_name(iterable.func, "enumerate") and len(elements) == 2 and args:
                    pairs = [(elements[1], args[0])]
                elif is_name(iterable.func, "zip") and len(elements) == len(args):
                    pairs = list(zip(elements, args))  # for block, layer in zip(self.blocks, ...)
        elif isinstance(node, cst.Assign) and len(node.targets) == 1:
            pairs = [(node.targets[0].target, node.value)]
        else:
            continue
        for name, value in pairs:
            if isinstance(name, cst.Name) and isinstance(value, cst.Attribute) and is_name(value.value, "self"):
                assigned = _self_assignment(source, cls, value.attr.value)
                if assigned is not None:
                    bound[name.value] = assigned
    return bound


def _self_assignment(source: SourceFile, cls: cst.ClassDef, attr: str) -> cst.BaseExpression | None:
    """What ``self.<attr> = ...`` assigns in the class's methods (the first such assignment)."""
    for node in walk(cls.body):
        if isinstance(node, cst.Assign):
            for target in node.targets:
                t = target.target
                if isinstance(t, cst.Attribute) and is_name(t.value, "self") and t.attr.value == attr:
                    return node.value
    return None


def _self_attribute(callee: cst.Attribute) -> str | None:
    """``self.lm`` -> ``lm``; ``self.lm.generate`` -> ``lm``; ``self.layers[0]`` handled above."""
    node: cst.BaseExpression = callee
    while isinstance(node, cst.Attribute):
        if is_name(node.value, "self"):
            return node.attr.value
        node = node.value
    return None


def _root_name(node: cst.BaseExpression) -> str | None:
    while isinstance(node, (cst.Attribute, cst.Subscript)):
        node = node.value
    return node.value if isinstance(node, cst.Name) else None


def _is_method(call: cst.Call, owner: str, method: str) -> bool:
    return isinstance(call.func, cst.Attribute) and call.func.attr.value == method and is_name(call.func.value, owner)


def _dim_argument(args, default: int) -> int | None:
    for arg in args:
        if arg.keyword is not None and arg.keyword.value != "dim":
            continue
        if isinstance(arg.value, cst.Integer):
            return int(arg.value.evaluated_value)
        return None
    return default


def _unsliced(node: cst.BaseExpression) -> cst.BaseExpression:
    """``x.shape[:2]`` -> ``x.shape`` (unpacking its first dimensions)."""
    if isinstance(node, cst.Subscript) and len(node.slice) == 1 and isinstance(node.slice[0].slice, cst.Slice):
        return node.value
    return node


def _short(code: str) -> str:
    code = " ".join(code.split())
    return code if len(code) <= 40 else code[:37] + "..."
