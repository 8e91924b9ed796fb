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

from collections.abc import Sequence

from asgrad.gpu.errors import GpuUnsupportedError
from asgrad.gpu.lowering.common import literal
from asgrad.tensor.ir.scalar import Expr

__all__ = ["render_wgsl"]

# A node's WGSL kind: "f32", "i32", "bool" (a WGSL bool; stored as u32 0/1).
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
_WGSL_KIND = {"float32": "f32", "float64": "f32", "int32": "i32", "int64": "i32", "bool": "bool"}


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
    arg_kinds = ["bool" if t == "u32" else t for t in types]

    def kind(node: Expr, hint: str) -> str:
        if node.op == "arg":
            return arg_kinds[int(node.value)]  # type: ignore[call-overload]  # the index
        if node.op == "const":
            return hint
        if node.op == "cast":
            return _WGSL_KIND[str(node.value)]
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
        if node.op == "arg":
            name = args[int(node.value)]  # type: ignore[call-overload]  # the index
            return f"({name} != 0u)" if k == "bool" else name
        if node.op == "const":
            return _wgsl_literal(node.value, k)
        if node.op == "cast":
            return _cast(node, k)
        inner = "bool" if node.op in ("logical_and", "logical_or", "logical_not") else None
        ok = inner or operand_kind(node, "f32" if k == "bool" else k)
        a = [text(x, ok) for x in node.args]
        if node.op == "where":
            branch = operand_kind(node, k)
            a = [text(node.args[0], "bool"), *(text(x, branch) for x in node.args[1:])]
            return f"select({a[2]}, {a[1]}, {a[0]})"
        return _primitive(node.op, ok, a)

    def _cast(node: Expr, k: str) -> str:
        src = node.args[0]
        sk = kind(src, "f32")
        x = text(src, sk)
        if sk == k:
            return x
        if k == "bool":
            return f"asg_truthy({x})" if sk == "f32" else f"({x} != 0i)"
        if sk == "f32" and k == "i32":
            return f"asg_f2i({x})"
        return f"{k}({x})"  # WGSL converts bool to 0/1 and i32 to f32 as numpy does

    body = text(e, "bool" if out == "u32" else out)
    if kind(e, out) == "bool" and out != "bool":
        return f"select(0u, 1u, {body})" if out == "u32" else f"{out}({body})"
    return _unwrapped(body)


def _unwrapped(text: str) -> str:
    """``text`` without the parentheses around all of it (``x0 + x1`` for an add)."""
    if not text.startswith("("):
        return text
    depth = 0
    for i, c in enumerate(text):
        depth += (c == "(") - (c == ")")
        if depth == 0:
            return text[1:-1] if i == len(text) - 1 else text
    return text


def _primitive(op: str, k: str, a: list[str]) -> str:
    """The WGSL of primitive ``op`` on operands ``a`` of kind ``k``."""
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
