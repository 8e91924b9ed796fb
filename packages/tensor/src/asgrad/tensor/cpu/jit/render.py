"""Numba source of a scalar expression: one spelling per primitive of the IR.

An elementwise op's meaning is its scalar expression (``OpDef.expression``, built from
the primitives of `asgrad.tensor.ir.scalar`). `render_numba` writes it as
one Numba source expression over the elements of its inputs; the whole-step kernels
(`asgrad.tensor.cpu.jit.step`) and the compiled elementwise loops of the line path
(`asgrad.tensor.cpu.jit.kernels`) are made of it. `SPELLINGS` has one entry
per primitive and none per op.

Types follow numpy: every node of the expression has the dtype numpy gives it (found
by its primitive's numpy function on 0-d arrays of its operands' dtypes), a constant
takes the dtype numpy gives a Python scalar next to its operands (NEP 50: ``x > 0.1``
compares in float32 for a float32 ``x``), and a float32 value stays float32 (Numba
keeps float32 through arithmetic and its math functions when the literals are typed).

The per-primitive helpers a spelling calls (`PRELUDE`, defined in every generated
module) give numpy's semantics where Python's or Numba's differ: NaN-propagating
maximum and minimum; and float32 forms of the exponential (within 2 ulp) and the error
function (absolute error below 1e-6, as the numpy float32 path) that vectorise, where
a loop calling the C library does not (`asgrad.tensor.cpu.jit._numba`; measured:
a loop of e**x over 2 million float32 took 3.4 ms with the helper, 29.6 ms with
``np.exp``, 3.6 ms in numpy's own vectorised loop).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from asgrad.tensor.cpu.jit.emit import FLOATS, UnsupportedError, dt, literal
from asgrad.tensor.ir.scalar import PRIMITIVES, Expr

__all__ = ["NJIT", "PRELUDE", "SPELLINGS", "Spelling", "cost", "njit_module", "render_numba"]

# Helpers the spellings call, in every generated module: NaN-propagating max and min
# as source (the module's on-disk cache is keyed on its own file), exp and erf from
# _numba (edit them, and clear the cache: see that module).
PRELUDE = """
from asgrad.tensor.cpu.jit._numba import erf as _erf
from asgrad.tensor.cpu.jit._numba import exp as _exp
from asgrad.tensor.cpu.jit._numba import exp_neg as _exp_neg
from asgrad.tensor.cpu.jit._numba import tanh as _tanh


@numba.njit(inline="always", error_model="numpy")
def _fmax(a, b):
    return a if (a >= b or a != a) else b


@numba.njit(inline="always", error_model="numpy")
def _fmin(a, b):
    return a if (a <= b or a != a) else b
"""

# How a whole step's functions (and a segment's) are compiled: cached on disk, numpy's
# error model (a division by zero gives inf, as numpy's).
NJIT = '@numba.njit(cache=True, error_model="numpy")'


def njit_module(
    name: str, params: Sequence[str], body: Sequence[str], defs: Sequence[str] = ()
) -> str:
    """The source of a generated module: `PRELUDE`, the functions ``defs`` (source lines,
    decorators included) and ``name(params)`` with ``body``, compiled by `NJIT`."""
    head = ["import numpy as np", "import numba", PRELUDE, *defs, "", NJIT]
    return "\n".join([*head, f"def {name}({', '.join(params)}):", *body, ""])


@dataclass(frozen=True)
class Spelling:
    """How a primitive is written in Numba.

    Attributes:
        write: ``write(operands, operand dtypes, result dtype, node value)`` -> source.
        cost: Its weight in a whole step's work estimate per element (a libm call
            is a scalar call here, not numpy's vectorised loop).
        vectorises: Whether LLVM vectorises a loop of it (a loop made only of such
            primitives beats numpy's one pass per primitive).
    """

    write: Callable[[Sequence[str], Sequence[str], str, Any], str]
    cost: int = 1
    vectorises: bool = True


def _infix(symbol: str) -> Spelling:
    return Spelling(lambda a, d, r, v: f"({a[0]} {symbol} {a[1]})")


def _call(fn: str, cost: int = 8, vectorises: bool = False) -> Spelling:
    return Spelling(lambda a, d, r, v: f"{fn}({', '.join(a)})", cost, vectorises)


def _float_only(inner: Spelling) -> Spelling:
    def write(a: Sequence[str], d: Sequence[str], r: str, v: Any) -> str:
        if r not in FLOATS:
            raise UnsupportedError(f"a float primitive on {r}")
        return inner.write(a, d, r, v)

    return Spelling(write, inner.cost, inner.vectorises)


def _rsqrt(a: Sequence[str], d: Sequence[str], r: str, v: Any) -> str:
    return f"({literal(1, r)} / np.sqrt({a[0]}))"


def _cast(a: Sequence[str], d: Sequence[str], r: str, v: Any) -> str:
    if r == "bool":
        return f"({a[0]} != 0)"
    if d[0] in FLOATS and r not in FLOATS:
        raise UnsupportedError("a float to integer cast")  # out-of-range values differ
    return f"{dt(r)}({a[0]})"


def _pow(a: Sequence[str], d: Sequence[str], r: str, v: Any) -> str:
    if r not in FLOATS:
        raise UnsupportedError("an integer power")  # numpy raises for a negative one
    return f"({a[0]} ** {a[1]})"


def _integer_division(a: Sequence[str], d: Sequence[str], r: str, v: Any) -> str:
    # numpy's kernels raise for an integer division by zero (and these primitives are
    # integer ones): a compiled loop would have to guess, so it declines.
    raise UnsupportedError(f"an integer division of {r}")


def _bits(symbol: str) -> Spelling:
    def write(a: Sequence[str], d: Sequence[str], r: str, v: Any) -> str:
        if r in FLOATS:
            raise UnsupportedError(f"bits of {r}")
        return f"({a[0]} {symbol} {a[1]})"

    return Spelling(write)


def _invert(a: Sequence[str], d: Sequence[str], r: str, v: Any) -> str:
    if r in FLOATS:
        raise UnsupportedError(f"bits of {r}")
    return f"(not {a[0]})" if r == "bool" else f"(~{a[0]})"


def _shift(left: bool) -> Spelling:
    # numpy: 0 (a left shift) or the sign (a right shift) for a shift of the width or
    # more; Numba computes in 64 bits, where larger shifts are undefined.
    def write(a: Sequence[str], d: Sequence[str], r: str, v: Any) -> str:
        if r in FLOATS or r == "bool":
            raise UnsupportedError(f"a shift of {r}")
        x, n = a
        if left:
            return f"(({x} << {n}) if ({n} >= 0 and {n} < 64) else {literal(0, r)})"
        return f"(({x} >> min({n}, 63)) if {n} >= 0 else ({x} >> 63))"

    return Spelling(write)


def _erf(a: Sequence[str], d: Sequence[str], r: str, v: Any) -> str:
    if r not in FLOATS:
        raise UnsupportedError(f"erf of {r}")
    return f"_erf({a[0]})"


# One spelling per primitive of the IR; a primitive missing here makes the expression
# unsupported (the line keeps numpy, the step stays on the line-by-line function).
SPELLINGS: dict[str, Spelling] = {
    "add": _infix("+"),
    "sub": _infix("-"),
    "mul": _infix("*"),
    "div": _infix("/"),
    "pow": Spelling(_pow, 8, False),
    "neg": Spelling(lambda a, d, r, v: f"(-{a[0]})"),
    "abs": Spelling(lambda a, d, r, v: f"abs({a[0]})"),
    "sign": _call("np.sign", 1, True),
    "exp": _float_only(_call("_exp", 8, True)),
    "expm1": _float_only(_call("np.expm1")),
    "log": _float_only(_call("np.log")),
    "log1p": _float_only(_call("np.log1p")),
    "sqrt": _float_only(_call("np.sqrt", 1, True)),
    "rsqrt": _float_only(Spelling(_rsqrt, 1, True)),
    "sin": _float_only(_call("np.sin")),
    "cos": _float_only(_call("np.cos")),
    "tanh": _float_only(_call("_tanh", 8, True)),
    "erf": Spelling(_erf, 8, True),
    "floor": _call("np.floor", 1, True),
    "ceil": _call("np.ceil", 1, True),
    "trunc": _call("np.trunc", 1, True),
    "rint": _call("np.rint", 1, True),
    "maximum": _call("_fmax", 1, True),
    "minimum": _call("_fmin", 1, True),
    "lt": _infix("<"),
    "le": _infix("<="),
    "gt": _infix(">"),
    "ge": _infix(">="),
    "eq": _infix("=="),
    "ne": _infix("!="),
    "logical_and": _infix("and"),
    "logical_or": _infix("or"),
    "logical_not": Spelling(lambda a, d, r, v: f"(not {a[0]})"),
    "where": Spelling(lambda a, d, r, v: f"({a[1]} if {a[0]} else {a[2]})"),
    "isnan": _call("np.isnan", 1, True),
    "isinf": _call("np.isinf", 1, True),
    "isfinite": _call("np.isfinite", 1, True),
    "cast": Spelling(_cast),
    "bitwise_and": _bits("&"),
    "bitwise_or": _bits("|"),
    "bitwise_xor": _bits("^"),
    "bitwise_not": Spelling(_invert),
    "left_shift": _shift(True),
    "right_shift": _shift(False),
    "floor_divide": Spelling(_integer_division),
    "remainder": Spelling(_integer_division),
}

# e**-(y*y): the exponential of a non-positive argument, spelled as `erf`'s float32 form
# spells its own (`_math32.erf32`: exp_neg32 of -(|x| * |x|)), so that where both apply
# to one value (GELU's gradient: erf(z) and the density exp(-z*z)) LLVM computes the
# exponential once. Its float32 form is 0 below e**-87 where ``_exp`` gives subnormals.
_EXP_NEG = _float_only(_call("_exp_neg", 8, True))


def _negated_square(e: Expr) -> bool:
    """Whether ``e`` is ``-(y * y)`` (never above zero; NaN where y is)."""
    if e.op != "neg" or e.args[0].op != "mul":
        return False
    a, b = e.args[0].args
    return a == b


# The operands whose dtypes type a constant next to them (a condition's does not).
_VALUE_OPERANDS: dict[str, slice] = {"where": slice(1, None)}


def _dtype(e: Expr, operands: Sequence[tuple[Expr, str]]) -> str:
    """The dtype numpy gives ``e``: its primitive's numpy function on 0-d arrays of the
    operands' dtypes (a constant as the Python number it is)."""
    if e.op == "cast":
        return str(np.dtype(str(e.value)))
    samples = [a.value if a.op == "const" else np.zeros((), np.dtype(d)) for a, d in operands]
    try:
        with np.errstate(all="ignore"):
            value = PRIMITIVES[e.op].numpy(*samples)
    except (TypeError, ValueError) as exc:  # numpy has no loop for these dtypes
        dtypes = ", ".join(d for _, d in operands)
        raise UnsupportedError(f"{e.op} of {dtypes}: {exc}") from None
    return str(np.asarray(value).dtype)


class _Writer:
    def __init__(self, args: Sequence[str], dtypes: Sequence[str], out: str) -> None:
        self.args, self.dtypes, self.out = args, dtypes, out
        self.memo: dict[Expr, tuple[str, str]] = {}

    def write(self, e: Expr, near: Sequence[str] = ()) -> tuple[str, str]:
        """``(source, dtype)`` of ``e``; ``near``: the dtypes of the operands beside it."""
        if e.op == "arg":
            i = int(e.value)  # type: ignore[call-overload]  # an arg's value is its index
            return self.args[i], self.dtypes[i]
        if e.op == "const":
            value = e.value
            if not isinstance(value, bool | int | float | np.generic):
                raise UnsupportedError(f"a constant {value!r}")
            dtype = str(np.result_type(*[np.dtype(d) for d in near], value)) if near else self.out
            if dtype == "bool" and not isinstance(value, bool | np.bool_):
                dtype = self.out
            return literal(value, dtype), dtype  # type: ignore[arg-type]  # a number
        if e in self.memo:
            return self.memo[e]
        spelling = SPELLINGS.get(e.op)
        if e.op == "exp" and _negated_square(e.args[0]):
            spelling = _EXP_NEG
        if spelling is None:
            raise UnsupportedError(f"no Numba spelling of the primitive {e.op!r}")
        picked = _VALUE_OPERANDS.get(e.op, slice(None))
        beside = [self.write(a)[1] for a in e.args[picked] if a.op != "const"]
        operands = [self.write(a, beside) for a in e.args]
        result = _dtype(e, [(a, d) for a, (_, d) in zip(e.args, operands, strict=True)])
        dt(result)
        text = spelling.write([s for s, _ in operands], [d for _, d in operands], result, e.value)
        self.memo[e] = (text, result)
        return text, result


def render_numba(e: Expr, args: Sequence[str], dtypes: Sequence[str], out: str) -> str:
    """Numba source computing ``e`` on the elements ``args`` (of ``dtypes``) as ``out``.

    Raises:
        UnsupportedError: A primitive without a Numba spelling, or one that has none
            at these dtypes (a float to integer cast, erf of an integer).
    """
    dt(out)
    for d in dtypes:
        dt(d)
    text, dtype = _Writer(args, dtypes, out).write(e)
    return text if dtype == out else f"{dt(out)}({text})"


def _walk(e: Expr) -> list[Expr]:
    seen: dict[Expr, None] = {}
    stack = [e]
    while stack:
        node = stack.pop()
        if node in seen or node.op in ("arg", "const"):
            continue
        seen[node] = None
        stack.extend(node.args)
    return list(seen)


def cost(e: Expr) -> int:
    """The work per element of ``e`` (see `Spelling.cost`)."""
    return sum(SPELLINGS[n.op].cost if n.op in SPELLINGS else 1 for n in _walk(e)) or 1


def primitives(e: Expr) -> list[str]:
    """The primitives ``e`` applies (each shared subtree once)."""
    return [n.op for n in _walk(e)]


def vectorises(e: Expr) -> bool:
    """Whether a loop of ``e`` vectorises: every primitive's spelling does."""
    return all(n.op in SPELLINGS and SPELLINGS[n.op].vectorises for n in _walk(e))
