"""Scalar expressions: the one meaning of an elementwise op, rendered for every backend.

An elementwise op states what it computes per element once, as an `Expr` over
its inputs (``arg(0)``, ``arg(1)``...) built from a fixed set of primitives
(`PRIMITIVES`), each with its numpy meaning. Backends *render* expressions: numpy
arrays here (`render_numpy`), WGSL and Numba in the backends (the GPU package,
the compiled CPU path). A renderer has one entry per primitive, never one per op, so a
new op needs no backend work; numerically careful forms (a stable sigmoid, softplus's
thresholds) live in the op's expression and reach every backend.

>>> x = arg(0)
>>> e = where(gt(x, 0.0), x, x * 0.01)  # leaky ReLU
>>> render_numpy(e, [np.array([-2.0, 3.0])], "float64")
array([-0.02,  3.  ])

Semantics are numpy's, NaN and infinities included: ``maximum``/``minimum`` propagate
NaN, comparisons with NaN are false (``ne``: true), ``floor`` of inf is inf. Constants
take the type of what they meet (``x * 0.5`` stays float32; ``maximum(i, 0)`` is an
int), as a Python scalar does in numpy.
"""

from __future__ import annotations

import functools
import inspect
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from asgrad.tensor.errors import ArgumentError

__all__ = [
    "PRIMITIVES",
    "Expr",
    "Primitive",
    "arg",
    "build",
    "cast",
    "const",
    "render_numpy",
    "replace",
    "substitute",
    "where",
]

Number = float | int | bool


@dataclass(frozen=True, slots=True)
class Expr:
    """One node of a scalar expression: a primitive applied to ``args``, an input
    (``op == "arg"``, ``value`` its index) or a constant (``op == "const"``).

    Build them with `arg`, `const`, the primitive functions of this module
    and the operators ``+ - * / ** -x abs(x)`` (a number operand becomes a constant).
    """

    op: str
    args: tuple[Expr, ...] = ()
    value: object = None

    def __add__(self, other: Expr | Number) -> Expr:
        return add(self, other)

    def __radd__(self, other: Expr | Number) -> Expr:
        return add(other, self)

    def __sub__(self, other: Expr | Number) -> Expr:
        return sub(self, other)

    def __rsub__(self, other: Expr | Number) -> Expr:
        return sub(other, self)

    def __mul__(self, other: Expr | Number) -> Expr:
        return mul(self, other)

    def __rmul__(self, other: Expr | Number) -> Expr:
        return mul(other, self)

    def __truediv__(self, other: Expr | Number) -> Expr:
        return div(self, other)

    def __rtruediv__(self, other: Expr | Number) -> Expr:
        return div(other, self)

    def __pow__(self, other: Expr | Number) -> Expr:
        return pow(self, other)

    def __rpow__(self, other: Expr | Number) -> Expr:
        return pow(other, self)

    def __neg__(self) -> Expr:
        return neg(self)

    def __abs__(self) -> Expr:
        return abs(self)

    def __repr__(self) -> str:
        if self.op == "arg":
            return f"x{self.value}"
        if self.op == "const":
            return repr(self.value)
        if self.op == "cast":
            return f"cast({self.args[0]!r}, {self.value!r})"
        return f"{self.op}({', '.join(map(repr, self.args))})"


def arg(i: int) -> Expr:
    """The op's ``i``-th input."""
    return Expr("arg", (), i)


def const(v: Number) -> Expr:
    """A number; it takes the type of the values it meets (as a Python scalar in numpy)."""
    if isinstance(v, np.generic):
        v = v.item()
    if not isinstance(v, bool | int | float):
        raise ArgumentError(f"a scalar expression's constant must be a number, got {v!r}")
    return Expr("const", (), v)


def _e(x: Expr | Number) -> Expr:
    return x if isinstance(x, Expr) else const(x)


@dataclass(frozen=True)
class Primitive:
    """A primitive of scalar expressions: how many operands it takes, and what it means
    (its numpy function, the reference every renderer is tested against)."""

    arity: int
    numpy: Callable[..., Any]
    doc: str = ""


_math_erf = np.frompyfunc(math.erf, 1, 1)


@functools.cache
def _erf_ufunc() -> Any:
    """scipy's erf (exact and fast; scipy is optional), else ``math.erf`` per element:
    imported on first use, since importing ``scipy.special`` takes about a second."""
    try:
        from scipy.special import erf  # type: ignore[import-untyped]  # no stubs
    except ImportError:  # pragma: no cover - depends on the environment
        return _math_erf
    return erf


def erf_numpy(x: Any) -> np.ndarray:
    """The error function, exact to float64 rounding (scipy's, or ``math.erf``)."""
    x = np.asarray(x)
    return np.asarray(_erf_ufunc()(x), dtype=x.dtype)


def _rsqrt(x: Any) -> Any:
    return 1.0 / np.sqrt(x)


PRIMITIVES: Mapping[str, Primitive] = {
    "add": Primitive(2, np.add),
    "sub": Primitive(2, np.subtract),
    "mul": Primitive(2, np.multiply),
    "div": Primitive(2, np.divide, "true division (floats)"),
    "neg": Primitive(1, np.negative),
    "pow": Primitive(2, np.power),
    "abs": Primitive(1, np.abs),
    "sign": Primitive(1, np.sign, "-1, 0 or 1; NaN for NaN"),
    "exp": Primitive(1, np.exp),
    "expm1": Primitive(1, np.expm1),
    "log": Primitive(1, np.log),
    "log1p": Primitive(1, np.log1p),
    "sqrt": Primitive(1, np.sqrt),
    "rsqrt": Primitive(1, _rsqrt, "1 / sqrt(x)"),
    "sin": Primitive(1, np.sin),
    "cos": Primitive(1, np.cos),
    "tanh": Primitive(1, np.tanh),
    "erf": Primitive(1, erf_numpy, "the error function"),
    "floor": Primitive(1, np.floor),
    "ceil": Primitive(1, np.ceil),
    "trunc": Primitive(1, np.trunc),
    "rint": Primitive(1, np.rint, "round half to even"),
    "maximum": Primitive(2, np.maximum, "NaN-propagating"),
    "minimum": Primitive(2, np.minimum, "NaN-propagating"),
    "lt": Primitive(2, np.less),
    "le": Primitive(2, np.less_equal),
    "gt": Primitive(2, np.greater),
    "ge": Primitive(2, np.greater_equal),
    "eq": Primitive(2, np.equal),
    "ne": Primitive(2, np.not_equal),
    "logical_and": Primitive(2, np.logical_and),
    "logical_or": Primitive(2, np.logical_or),
    "logical_not": Primitive(1, np.logical_not),
    "where": Primitive(3, np.where, "cond ? a : b"),
    "isnan": Primitive(1, np.isnan),
    "isinf": Primitive(1, np.isinf),
    "isfinite": Primitive(1, np.isfinite),
    "cast": Primitive(1, lambda x, dtype: np.asarray(x).astype(dtype), "to the dtype named"),
    "bitwise_and": Primitive(2, np.bitwise_and, "integers or bools"),
    "bitwise_or": Primitive(2, np.bitwise_or, "integers or bools"),
    "bitwise_xor": Primitive(2, np.bitwise_xor, "integers or bools"),
    "bitwise_not": Primitive(1, np.invert, "integers or bools"),
    "left_shift": Primitive(2, np.left_shift, "integers"),
    "right_shift": Primitive(2, np.right_shift, "integers"),
    "floor_divide": Primitive(2, np.floor_divide, "integers, rounded down"),
    "remainder": Primitive(2, np.remainder, "integers, the sign of the divisor"),
}


def _node(op: str, *args: Expr | Number) -> Expr:
    return Expr(op, tuple(_e(a) for a in args))


def _unary(op: str) -> Callable[[Expr | Number], Expr]:
    def make(x: Expr | Number) -> Expr:
        return _node(op, x)

    make.__name__ = make.__qualname__ = op
    make.__doc__ = f"The primitive ``{op}``: numpy's ``{PRIMITIVES[op].numpy.__name__}``."
    return make


def _binary(op: str) -> Callable[[Expr | Number, Expr | Number], Expr]:
    def make(a: Expr | Number, b: Expr | Number) -> Expr:
        return _node(op, a, b)

    make.__name__ = make.__qualname__ = op
    make.__doc__ = f"The primitive ``{op}``: numpy's ``{PRIMITIVES[op].numpy.__name__}``."
    return make


add = _binary("add")
sub = _binary("sub")
mul = _binary("mul")
div = _binary("div")
pow = _binary("pow")  # the primitive's name
maximum = _binary("maximum")
minimum = _binary("minimum")
lt = _binary("lt")
le = _binary("le")
gt = _binary("gt")
ge = _binary("ge")
eq = _binary("eq")
ne = _binary("ne")
logical_and = _binary("logical_and")
logical_or = _binary("logical_or")
bitwise_and = _binary("bitwise_and")
bitwise_or = _binary("bitwise_or")
bitwise_xor = _binary("bitwise_xor")
left_shift = _binary("left_shift")
right_shift = _binary("right_shift")
floor_divide = _binary("floor_divide")
remainder = _binary("remainder")
neg = _unary("neg")
abs = _unary("abs")  # the primitive's name
sign = _unary("sign")
exp = _unary("exp")
expm1 = _unary("expm1")
log = _unary("log")
log1p = _unary("log1p")
sqrt = _unary("sqrt")
rsqrt = _unary("rsqrt")
sin = _unary("sin")
cos = _unary("cos")
tanh = _unary("tanh")
erf = _unary("erf")
floor = _unary("floor")
ceil = _unary("ceil")
trunc = _unary("trunc")
rint = _unary("rint")
logical_not = _unary("logical_not")
isnan = _unary("isnan")
isinf = _unary("isinf")
isfinite = _unary("isfinite")
bitwise_not = _unary("bitwise_not")


def where(cond: Expr | Number, a: Expr | Number, b: Expr | Number) -> Expr:
    """``a`` where ``cond`` holds, else ``b`` (numpy's ``where``)."""
    return _node("where", cond, a, b)


def cast(x: Expr | Number, dtype: str) -> Expr:
    """``x`` converted to the dtype named (``"float32"``, ``"int64"``, ``"bool"``...),
    as numpy's ``astype``."""
    return Expr("cast", (_e(x),), dtype)


def clip(x: Expr, lo: Number | None, hi: Number | None) -> Expr:
    """``x`` within ``[lo, hi]`` (a bound of None: none), NaN kept, as ``np.clip``."""
    if lo is not None:
        x = maximum(x, lo)
    if hi is not None:
        x = minimum(x, hi)
    return x


def substitute(e: Expr, args: Sequence[Expr]) -> Expr:
    """``e`` with ``arg(i)`` replaced by ``args[i]``: the expression of a chain of ops."""
    if e.op == "arg":
        return args[int(e.value)]  # type: ignore[call-overload]  # an arg's value is its index
    if not e.args:
        return e
    return Expr(e.op, tuple(substitute(a, args) for a in e.args), e.value)


def replace(e: Expr, old: Expr, new: Expr) -> Expr:
    """``e`` with every subexpression equal to ``old`` replaced by ``new``.

    >>> replace(exp(arg(0) - arg(1)) + arg(1), arg(1), const(0.5))
    add(exp(sub(x0, 0.5)), 0.5)
    """
    if e == old:
        return new
    if not e.args:
        return e
    return Expr(e.op, tuple(replace(a, old, new) for a in e.args), e.value)


def build(fn: Callable[..., Expr], arity: int, attrs: Mapping[str, Any], dtype: str) -> Expr:
    """An op's expression: ``fn(arg(0), ..., **attrs)``, with ``dtype=`` (the result's
    dtype name) for an expression function that takes it."""
    kwargs = dict(attrs)
    if _takes_dtype(fn):
        kwargs["dtype"] = dtype
    return fn(*(arg(i) for i in range(arity)), **kwargs)


def _takes_dtype(fn: Callable[..., Expr]) -> bool:
    try:
        return "dtype" in inspect.signature(fn).parameters
    except (TypeError, ValueError):  # pragma: no cover - builtins without a signature
        return False


# -- numpy ----------------------------------------------------------------------------
def render_numpy(e: Expr, args: Sequence[np.ndarray], dtype: str) -> np.ndarray:
    """The value of ``e`` on numpy arrays (broadcast together), as an array of ``dtype``.

    Each primitive is its numpy function (`PRIMITIVES`); a shared subexpression
    is computed once. To evaluate one expression many times, make its function once
    with `numpy_function`.
    """
    return numpy_function(e, len(args), dtype)(*args)


def numpy_function(e: Expr, arity: int, dtype: str) -> Callable[..., np.ndarray]:
    """A Python function of ``arity`` arrays computing ``e`` as `render_numpy`
    does: straight-line numpy calls, one per distinct node (its text is ``.source``)."""
    env: dict[str, Any] = {"np": np, "_dtype": np.dtype(dtype)}
    lines: list[str] = []
    names: dict[int, str] = {}
    read: set[int] = set()

    def name(node: Expr) -> str:
        key = id(node)
        if key in names:
            return names[key]
        if node.op == "arg":
            read.add(int(node.value))  # type: ignore[call-overload]  # the index
            out = f"x{node.value}"
        elif node.op == "const":  # a Python scalar: numpy gives it the other operand's type
            finite = not isinstance(node.value, float) or math.isfinite(node.value)
            out = repr(node.value) if finite else f"c{len(env)}"
            env.setdefault(out, node.value)
        elif _is_clip(node):  # numpy's one-pass clip: the same values as its two ufuncs
            inner = node.args[0]
            operands = [name(inner.args[0]), name(inner.args[1]), name(node.args[1])]
            env["_clip"] = np.clip
            lines.append(f"    t{len(lines)} = _clip({', '.join(operands)})")
            out = f"t{len(lines) - 1}"
        else:
            operands = [name(a) for a in node.args]
            fn = f"_{node.op}"
            if node.op == "cast":
                env[f"_to{len(env)}"] = np.dtype(str(node.value))
                lines.append(
                    f"    t{len(lines)} = np.asarray({operands[0]}).astype(_to{len(env) - 1})"
                )
            else:
                env[fn] = PRIMITIVES[node.op].numpy
                if node.op == "where":  # a Python scalar branch slows np.where down 4x
                    env["_typed"] = _typed_like
                    a, b = operands[1:]
                    if node.args[1].op == "const" and node.args[2].op != "const":
                        operands[1] = f"_typed({a}, {b})"
                    elif node.args[2].op == "const" and node.args[1].op != "const":
                        operands[2] = f"_typed({b}, {a})"
                lines.append(f"    t{len(lines)} = {fn}({', '.join(operands)})")
            out = f"t{len(lines) - 1}"
        names[key] = out
        return out

    result = name(e)
    params = ", ".join(f"x{i}" for i in range(arity))
    body = [*lines, f"    out = np.asarray({result})"]
    body.append("    if out.dtype != _dtype:\n        out = out.astype(_dtype)")
    if len(read) < arity:  # an input the expression does not read still broadcasts
        shapes = ", ".join(f"np.shape(x{i})" for i in range(arity))
        body.append(f"    out = np.broadcast_to(out, np.broadcast_shapes({shapes})).copy()")
    source = f"def rendered({params}):\n" + "\n".join(body) + "\n    return out\n"
    exec(compile(source, "<scalar expression>", "exec"), env)  # our own text, from the expression
    whole: Callable[..., np.ndarray] = env["rendered"]
    fn = _in_chunks(whole, np.dtype(dtype)) if len(lines) > 2 else whole
    fn.source = source  # type: ignore[attr-defined]  # shown to a reader, as the CPU path's
    return fn


def _is_clip(node: Expr) -> bool:
    """``minimum(maximum(x, lo), hi)`` with constant bounds: ``np.clip(x, lo, hi)``."""
    return (
        node.op == "minimum"
        and node.args[1].op == "const"
        and node.args[0].op == "maximum"
        and node.args[0].args[1].op == "const"
    )


def _typed_like(value: Number, other: Any) -> np.ndarray:
    """A constant as the array numpy's promotion makes of it beside ``other``."""
    return np.asarray(value, dtype=np.result_type(other, value))


# Elements per block when a chain of several numpy calls runs over large inputs: the
# temporaries of one block stay in the core's cache instead of costing fresh memory per
# call (numexpr's idea).
CHUNK = 16384


def _in_chunks(whole: Callable[..., np.ndarray], dtype: np.dtype[Any]) -> Callable[..., np.ndarray]:
    """``whole`` evaluated block by block where every input is a C-contiguous array of one
    shape larger than two blocks (an elementwise function gives each element the value
    it gives on the whole array); at once otherwise."""

    def rendered(*xs: Any) -> np.ndarray:
        first = xs[0]
        if not (
            isinstance(first, np.ndarray)
            and first.size >= 2 * CHUNK
            and all(
                isinstance(x, np.ndarray) and x.shape == first.shape and x.flags.c_contiguous
                for x in xs
            )
        ):
            return whole(*xs)
        out = np.empty(first.shape, dtype)
        flat_out = out.reshape(-1)
        flat = [x.reshape(-1) for x in xs]
        for i in range(0, first.size, CHUNK):
            flat_out[i : i + CHUNK] = whole(*(x[i : i + CHUNK] for x in flat))
        return out

    return rendered
