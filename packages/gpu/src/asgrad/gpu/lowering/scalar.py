"""Scalar expressions (`asgrad.tensor.ir.scalar`) rendered as WGSL: one spelling
per primitive, never one per op.

WGSL lets a compiler assume that floats are finite, so every float primitive whose
numpy value at NaN or +-inf WGSL leaves undefined goes through its per-primitive helper
in ``kernels/prelude.wgsl`` (``asg_max``, ``asg_lt``, ``asg_floor``...).

>>> from asgrad.tensor.ir.scalar import arg, gt, where
>>> x = arg(0)
>>> render_wgsl(where(gt(x, 0.0), x, x * 0.01), ["x0"], ["f32"], "f32")
'select((x0 * 0.01), x0, asg_gt(x0, 0.0))'
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from asgrad.gpu.errors import GpuUnsupportedError
from asgrad.gpu.lowering.common import literal
from asgrad.tensor.ir.scalar import PRIMITIVES, Expr, const

__all__ = [
    "TYPED",
    "WGSL",
    "height",
    "render_wgsl",
    "render_wgsl_lets",
    "simplify",
    "typed",
    "wgsl_call",
]

# A node's WGSL kind: "f16", "f32", "i32", "bool" (a WGSL bool; stored as u32 0/1).
_COMPARE = {"lt": "<", "le": "<=", "gt": ">", "ge": ">=", "eq": "==", "ne": "!="}
_PREDICATES = {"logical_and", "logical_or", "logical_not", "isnan", "isinf", "isfinite"}
# float spellings through prelude.wgsl, where numpy defines a value at NaN or +-inf
# that WGSL leaves undefined (or a driver gets wrong)
_FLOAT_CALLS = {
    "sign": "asg_sign",
    "exp": "asg_exp",
    "expm1": "asg_expm1",
    "log": "asg_log",
    "log1p": "asg_log1p",
    "sqrt": "asg_sqrt",
    "rsqrt": "asg_rsqrt",
    "sin": "asg_sin",
    "cos": "asg_cos",
    "tanh": "asg_tanh",
    "erf": "asg_erf",
    "floor": "asg_floor",
    "ceil": "asg_ceil",
    "trunc": "asg_trunc",
    "rint": "asg_rint",
    "pow": "asg_pow",
    "maximum": "asg_max",
    "minimum": "asg_min",
    "isnan": "asg_isnan",
    "isinf": "asg_isinf",
    "isfinite": "asg_isfinite",
    **{op: f"asg_{op}" for op in _COMPARE},
}
_INT_CALLS = {"sign": "sign", "maximum": "max", "minimum": "min"}
_WGSL_KIND = {
    "float16": "f16",
    "float32": "f32",
    "float64": "f32",
    "int32": "i32",
    "int64": "i32",
    "bool": "bool",
}
# float16 (kind "f16", see kernels/prelude_f16.wgsl): add, subtract, multiply, negate,
# abs and select run on f16 itself (WGSL rounds them correctly, as numpy); every other
# float primitive runs its f32 spelling on widened operands and rounds once.
_F16_NATIVE = {"add", "sub", "mul", "neg", "abs"}
_BOOL_RESULTS = {*_COMPARE, "isnan", "isinf", "isfinite"}


def _wgsl_literal(v: object, kind: str) -> str:
    if kind == "bool":
        return "true" if v else "false"
    return literal(v, kind)  # type: ignore[arg-type]  # a constant holds a number


def render_wgsl(e: Expr, args: Sequence[str], types: Sequence[str], out: str) -> str:
    """``e`` as one WGSL expression over the values named ``args``.

    ``types`` are the arguments' WGSL storage types (``f32``, ``i32``; ``u32`` holds a
    bool as 0 or 1) and ``out`` the storage type the expression must yield. Float
    primitives whose numpy value at NaN or +-inf WGSL leaves undefined go through
    ``prelude.wgsl``'s per-primitive helpers (``asg_max``, ``asg_lt``, ``asg_floor``...).
    """
    lets, body = _render(e, args, types, out, None)
    assert not lets
    return body


def render_wgsl_lets(
    e: Expr, args: Sequence[str], types: Sequence[str], out: str, prefix: str = "t"
) -> tuple[list[str], str]:
    """``e`` as WGSL statements and an expression: every subexpression that ``e``
    reads more than once (the same `Expr` object; see
    `simplify`, which makes equal subtrees one object) is computed once,
    as ``let {prefix}0 = ...;``, and named where it is read. Arguments as `render_wgsl`.

    >>> from asgrad.tensor.ir.scalar import arg, exp
    >>> shared = exp(arg(0))
    >>> render_wgsl_lets(shared * shared + shared, ["x0"], ["f32"], "f32")
    (['let t0 = asg_exp(x0);'], '(t0 * t0) + t0')
    """
    key = (id(e), tuple(args), tuple(types), out, prefix)
    hit = _RENDERED.get(key)
    if hit is not None and hit[0] is e:
        return list(hit[1]), hit[2]
    lets, body = _render(e, args, types, out, prefix)
    if len(_RENDERED) >= _MAX_CACHED:
        _RENDERED.clear()
    _RENDERED[key] = (e, tuple(lets), body)
    return lets, body


# Renderings by expression object (kept alive here, so its id is not reused), names,
# types and prefix: `simplify` makes equal expressions one object, so the kernels of
# a model's repeated blocks render once.
_RENDERED: dict[tuple[object, ...], tuple[Expr, tuple[str, ...], str]] = {}
_MAX_CACHED = 1 << 14


def _render(
    e: Expr, args: Sequence[str], types: Sequence[str], out: str, prefix: str | None
) -> tuple[list[str], str]:
    arg_kinds = ["bool" if t == "u32" else t for t in types]
    kinds: dict[tuple[int, str], str] = {}
    texts: dict[tuple[int, str], str] = {}
    lets: list[str] = []
    shared = _shared_nodes(e) if prefix is not None else set()
    # 1 + erf(y) (a GELU's CDF) without a branch; beside exp(-y * y) (a GELU's
    # gradient: its density) from that exp
    erfs = _erf_with_exp(e) if prefix is not None else {}
    shared |= {id(found) for found in erfs.values()}

    def kind(node: Expr, hint: str) -> str:
        key = (id(node), hint)
        found = kinds.get(key)
        if found is None:
            found = kinds[key] = _kind(node, hint)
        return found

    def _kind(node: Expr, hint: str) -> str:
        if node.op == "arg":
            return arg_kinds[int(node.value)]  # type: ignore[call-overload]  # the index
        if node.op == "const":
            return hint
        if node.op == "cast":
            return _WGSL_KIND[str(node.value)]
        if node.op in (TYPED, WGSL):
            return _fixed_kind(node)
        if node.op in _COMPARE or node.op in _PREDICATES:
            return "bool"
        return operand_kind(node, hint)

    def operand_kind(node: Expr, hint: str) -> str:
        """The kind the operands of ``node`` share (where's branches, not its cond)."""
        operands = node.args[1:] if node.op == "where" else node.args
        for a in operands:
            if a.op != "const":
                return kind(a, hint)
        return hint

    def text(node: Expr, hint: str) -> str:
        k = kind(node, hint)
        key = (id(node), k)
        found = texts.get(key)
        if found is None:
            found = _text(node, k)
            if id(node) in shared:
                name = f"{prefix}{len(lets)}"
                lets.append(f"let {name} = {_unwrapped(found)};")
                found = name
            texts[key] = found
        return found

    def _text(node: Expr, k: str) -> str:
        if node.op == "arg":
            name = args[int(node.value)]  # type: ignore[call-overload]  # the index
            return f"({name} != 0u)" if k == "bool" else name
        if node.op == "const":
            return _wgsl_literal(node.value, k)
        if node.op == "cast":
            return _convert(node.args[0], k, "f32")
        if node.op == TYPED:
            return _convert(node.args[0], k, k)
        if node.op == WGSL:
            template, operand_kinds = _call_parts(node)
            return template.format(  # a float16 operand widened to the call's f32
                *(_convert(a, ok, ok) for a, ok in zip(node.args, operand_kinds, strict=True))
            )
        inner = "bool" if node.op in ("logical_and", "logical_or", "logical_not") else None
        ok = inner or operand_kind(node, "f32" if k == "bool" else k)
        y = _erf_of(node) if prefix is not None else None
        if y is not None and k == ok == kind(y, "f32") == "f32":
            shared_exp = erfs.get(id(node))
            if shared_exp is None:  # a GELU: its own exp, still no branch
                return f"asg_one_plus_erf_exp({text(y, 'f32')})"
            if kind(shared_exp, "f32") == "f32":
                return f"asg_one_plus_erf({text(y, 'f32')}, {text(shared_exp, 'f32')})"
        if node.op == "where":
            branch = operand_kind(node, k)
            a = [text(node.args[0], "bool"), *(text(x, branch) for x in node.args[1:])]
            return f"select({a[2]}, {a[1]}, {a[0]})"
        return _primitive(node.op, ok, [text(x, ok) for x in node.args])

    def _convert(src: Expr, k: str, source_hint: str) -> str:
        """``src`` as a value of kind ``k`` (numpy's astype)."""
        sk = kind(src, source_hint)
        x = text(src, sk)
        if sk == k:
            return x
        if sk == "f16":  # through f32, exact: +-inf and NaN carried over
            sk, x = "f32", f"asg_h2f({x})"
            if k == "f32":
                return x
        if k == "f16":  # rounded once; beyond the f16 range +-inf, as numpy
            return f"asg_f2h({x if sk == 'f32' else f'f32({x})'})"
        if k == "bool":
            return f"asg_truthy({x})" if sk == "f32" else f"({x} != 0i)"
        if sk == "f32" and k == "i32":
            return f"asg_f2i({x})"
        return f"{k}({x})"  # WGSL converts bool to 0/1 and i32 to f32 as numpy does

    body = text(e, "bool" if out == "u32" else out)
    if kind(e, out) == "bool" and out != "bool":
        body = f"select(0u, 1u, {body})" if out == "u32" else f"{out}({body})"
    return lets, _unwrapped(body)


# GPU-only nodes of a fused expression (never in an op's own expression):
# ``typed``: its operand as the kind named by its value (a fused input's storage kind),
# ``wgsl``: a call of the GPU's own (an integer op that checks its values), see `wgsl_call`.
TYPED = "typed"
WGSL = "wgsl"


def typed(e: Expr, storage: str) -> Expr:
    """``e`` as a value of the WGSL storage type ``storage`` (``u32``: a bool), as a
    fused input of that type is read: the kind an expression's constants take."""
    return Expr(TYPED, (e,), "bool" if storage == "u32" else storage)


def wgsl_call(template: str, args: Sequence[Expr], kind: str, operand_kinds: Sequence[str]) -> Expr:
    """A WGSL call ``template`` (``{0}``, ``{1}``... its operands, of ``operand_kinds``)
    yielding a value of ``kind``: a node for what no primitive says (a checked integer op)."""
    return Expr(WGSL, tuple(args), (template, kind, tuple(operand_kinds)))


def _call_parts(node: Expr) -> tuple[str, tuple[str, ...]]:
    """A `wgsl_call` node's template and its operands' kinds."""
    value = node.value
    assert isinstance(value, tuple)  # (template, kind, operand kinds): see `wgsl_call`
    return str(value[0]), tuple(str(k) for k in value[2])


def _fixed_kind(node: Expr) -> str:
    if node.op == TYPED:
        return str(node.value)
    value = node.value
    assert isinstance(value, tuple)  # (template, kind, operand kinds): see `wgsl_call`
    return str(value[1])


def _erf_with_exp(e: Expr) -> dict[int, Expr]:
    """The ``1 + erf(c * t)`` nodes of ``e`` (by id) whose ``exp(-c**2 * t * t)`` ``e``
    computes too, and that exp: rendered as ``asg_one_plus_erf`` of it (prelude.wgsl),
    which needs no exp of its own (the exp a GELU's gradient computes for its density
    serves its CDF's erf as well)."""
    nodes = _walk(e)
    exps: dict[tuple[int, float], Expr] = {}  # (id of t, k) of exp(k * t * t)
    for n in nodes:
        if n.op == "exp":
            found = _scaled_square(n.args[0])
            if found is not None:
                exps.setdefault((id(found[0]), found[1]), n)
    pairs: dict[int, Expr] = {}
    if not exps:
        return pairs
    for n in nodes:
        y = _erf_of(n)
        scaled = None if y is None else _scaled(y)
        if scaled is None:
            continue
        t, c = scaled
        for (tid, k), exp_node in exps.items():
            if tid == id(t) and math.isclose(k, -c * c, rel_tol=1e-12):
                pairs[id(n)] = exp_node
                break
    return pairs


def _erf_of(n: Expr) -> Expr | None:
    """``y`` where ``n`` is ``1 + erf(y)`` (either order), else None."""
    if n.op != "add":
        return None
    a, b = n.args
    if _is(a, 1.0) and b.op == "erf":
        return b.args[0]
    if _is(b, 1.0) and a.op == "erf":
        return a.args[0]
    return None


def _scaled(y: Expr) -> tuple[Expr, float] | None:
    """``(t, c)`` where ``y`` is ``c * t`` or ``t * c`` (c a float constant)."""
    if y.op != "mul":
        return None
    a, b = y.args
    if _float_const(b) and not _float_const(a):
        return a, float(b.value)  # type: ignore[arg-type]  # a float constant
    if _float_const(a) and not _float_const(b):
        return b, float(a.value)  # type: ignore[arg-type]  # a float constant
    return None


def _scaled_square(x: Expr) -> tuple[Expr, float] | None:
    """``(t, k)`` where ``x`` is ``k * t * t`` in any grouping, or ``-(t * t)`` (k = -1)."""
    if x.op == "neg" and x.args[0].op == "mul" and x.args[0].args[0] is x.args[0].args[1]:
        return x.args[0].args[0], -1.0
    if x.op != "mul":
        return None
    a, b = x.args
    for one, other in ((a, b), (b, a)):
        inner = _scaled(one)
        if inner is not None and inner[0] is other:  # (k * t) * t
            return other, inner[1]
        if _float_const(one) and other.op == "mul" and other.args[0] is other.args[1]:
            return other.args[0], float(one.value)  # type: ignore[arg-type]  # k * (t * t)
    return None


def _shared_nodes(e: Expr) -> set[int]:
    """The ids of the computed nodes of ``e`` read by more than one parent."""
    nodes = _walk(e)
    parents: dict[int, int] = {}
    for n in nodes:
        for a in n.args:
            parents[id(a)] = parents.get(id(a), 0) + 1
    for n in reversed(nodes):  # parents first: a shared annotation shares its value
        if n.op == TYPED:
            child = id(n.args[0])
            parents[child] = max(parents.get(child, 0), parents.get(id(n), 0))
    return {
        id(n) for n in nodes if parents.get(id(n), 0) > 1 and n.op not in ("arg", "const", TYPED)
    }


def height(e: Expr) -> int:
    """The levels of nodes of ``e`` (1 for an argument or a constant).

    >>> from asgrad.tensor.ir.scalar import arg, exp
    >>> height(exp(arg(0)) + 1.0)
    3
    """
    levels: dict[int, int] = {}
    for node in _walk(e):
        levels[id(node)] = 1 + max((levels[id(a)] for a in node.args), default=0)
    return levels[id(e)]


def _walk(e: Expr) -> list[Expr]:
    """Every distinct node of ``e`` once, each after the nodes it reads."""
    order: list[Expr] = []
    seen: set[int] = set()
    stack: list[tuple[Expr, bool]] = [(e, False)]
    while stack:
        node, expanded = stack.pop()
        if expanded:
            order.append(node)
        elif id(node) not in seen:
            seen.add(id(node))
            stack.append((node, True))
            stack.extend((a, False) for a in node.args if id(a) not in seen)
    return order


def _unwrapped(text: str) -> str:
    """``text`` without the parentheses around all of it (``x0 + x1`` for an add):
    a rendered operand that starts with one is wrapped whole, by construction."""
    return text[1:-1] if text.startswith("(") else text


def _primitive(op: str, k: str, a: list[str]) -> str:
    """The WGSL of primitive ``op`` on operands ``a`` of kind ``k``."""
    if k == "f16" and op not in _F16_NATIVE and (op in _FLOAT_CALLS or op == "div"):
        wide = _primitive(op, "f32", [f"asg_h2f({x})" for x in a])
        return wide if op in _BOOL_RESULTS else f"asg_f2h({_unwrapped(wide)})"
    if k == "f32" and op in _FLOAT_CALLS:
        return f"{_FLOAT_CALLS[op]}({', '.join(a)})"
    if op in _COMPARE:
        return f"({a[0]} {_COMPARE[op]} {a[1]})"
    simple = {"add": "+", "sub": "-", "mul": "*", "div": "/"}
    if op in simple:
        return f"({a[0]} {simple[op]} {a[1]})"
    if op == "neg":
        return f"(-{a[0]})"
    if op == "abs":
        return f"abs({a[0]})"
    if k == "bool":
        bools = {
            "logical_and": "&&",
            "logical_or": "||",
            "bitwise_and": "&",
            "bitwise_or": "|",
            "bitwise_xor": "!=",
            "maximum": "|",
            "minimum": "&",
        }
        if op in bools:
            return f"({a[0]} {bools[op]} {a[1]})"
        if op in ("logical_not", "bitwise_not"):
            return f"(!{a[0]})"
    if k == "i32":
        if op in _INT_CALLS:
            return f"{_INT_CALLS[op]}({', '.join(a)})"
        if op in ("isnan", "isinf"):
            return "false"
        if op == "isfinite":
            return "true"
        ints = {"bitwise_and": "&", "bitwise_or": "|", "bitwise_xor": "^"}
        if op in ints:
            return f"({a[0]} {ints[op]} {a[1]})"
        if op == "bitwise_not":
            return f"(~{a[0]})"
        if op == "left_shift":  # numpy: 0 for a shift outside [0, 32); wraps within
            return f"select(0i, {a[0]} << u32({a[1]}), {a[1]} >= 0i && {a[1]} < 32i)"
        if op == "right_shift":  # numpy: the sign for a shift of 31 or more
            return (
                f"select(select(0i, -1i, {a[0]} < 0i), {a[0]} >> u32(min({a[1]}, 31i)),"
                f" {a[1]} >= 0i)"
            )
    raise GpuUnsupportedError(
        f"the primitive {op!r} has no WGSL form for {k} operands; integer division,"
        " remainder and powers are lowered with their checks by the GPU package"
    )


# -- simplification -------------------------------------------------------------------
# Primitives folded when every operand is a float constant: evaluated as numpy does a
# Python scalar's (float64), rounded to the kernel's type where it is written.
_FOLDED = frozenset(
    {"add", "sub", "mul", "div", "neg", "pow", "abs", "exp", "expm1", "log", "log1p",
     "sqrt", "rsqrt", "sin", "cos", "tanh", "maximum", "minimum"}
)  # fmt: skip


def simplify(e: Expr) -> Expr:
    """``e`` with equal subtrees made one object, here and across calls (so
    `render_wgsl_lets` computes them once, and renders an expression seen before from
    its cache), float constants folded, and ``x * 1``, ``x / 1``, ``x - 0``, ``--x`` and a
    ``where`` of a constant condition reduced: each exact, NaN and infinities included.
    Linear in the distinct nodes of ``e``.

    >>> from asgrad.tensor.ir.scalar import arg, const
    >>> simplify((arg(0) * (const(1.0) - 0.25)) * 1.0)
    mul(x0, 0.75)
    """
    if len(_INTERNED) >= _MAX_INTERNED:
        _INTERNED.clear()
    interned = _INTERNED
    done: dict[int, Expr] = {}
    for node in _walk(e):  # operands first
        if node.args:
            args = tuple([done[id(a)] for a in node.args])
            new = _reduced(node, args) if node.op in _REDUCIBLE else None
            if new is None:
                same = all(a is b for a, b in zip(args, node.args, strict=True))
                new = node if same else Expr(node.op, args, node.value)
            key: tuple[object, ...] = (new.op, *map(id, new.args), _value_key(new))
        else:
            new, key = node, (node.op, _value_key(node))
        done[id(node)] = interned.setdefault(key, new)
    return done[id(e)]


_REDUCIBLE = _FOLDED | {"where"}


# Every simplified node, by (op, ids of its operands, value): equal subtrees of any
# expression simplified are one object (each entry keeps its operands alive, so the ids
# in the keys stay theirs).
_INTERNED: dict[tuple[object, ...], Expr] = {}
_MAX_INTERNED = 1 << 16


def _value_key(node: Expr) -> object:
    v = node.value
    if isinstance(v, float) and math.isnan(v):
        return "nan"
    return (type(v).__name__, v)  # 1, 1.0 and True stay apart


def _reduced(node: Expr, args: tuple[Expr, ...]) -> Expr | None:
    """``node`` over ``args`` folded or reduced, or None to keep it."""
    op = node.op
    if op in _FOLDED and args and all(_float_const(a) for a in args):
        with np.errstate(all="ignore"):
            value = PRIMITIVES[op].numpy(*(a.value for a in args))
        return const(float(value))
    if op in ("mul", "div") and _is(args[1], 1.0):
        return args[0]
    if op == "mul" and _is(args[0], 1.0):
        return args[1]
    if op == "sub" and _is(args[1], 0.0):
        return args[0]
    if op == "neg" and args[0].op == "neg":
        return args[0].args[0]
    if op == "where" and args[0].op == "const" and isinstance(args[0].value, bool):
        return args[1] if args[0].value else args[2]
    return None


def _float_const(e: Expr) -> bool:
    return e.op == "const" and isinstance(e.value, float)


def _is(e: Expr, v: float) -> bool:
    return _float_const(e) and e.value == v
