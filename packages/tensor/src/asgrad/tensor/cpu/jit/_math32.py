"""The float32 forms of ``exp``, ``exp_neg``, ``tanh`` and ``erf``, written into the
calling kernel as LLVM instructions.

Each is branch free, so that a loop of it vectorises. They used to be Numba functions
that LLVM inlined at its discretion: in a kernel with many calls (an LSTM step's loop,
three sigmoids and two tanhs a time step) it stopped inlining some of them, and the
loops calling them ran scalar (that loop: 1.0 ms against 0.21 ms with every call
inlined). Written as instructions at each call (`register`: Numba's typing and
lowering of the stub), no call is left to decide on. The arithmetic is what Numba
writes for the same Python without fast-math, in the same order, so the results are
the same bits as the Numba functions' were.

Only `asgrad.tensor.cpu.jit._numba` imports this module, after Numba's cache is set up.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
from llvmlite import ir
from numba import types
from numba.core.typing import signature
from numba.extending import lower_builtin, type_callable

_F = np.float32


def _coefficients(*values: float) -> tuple[np.float32, ...]:
    """A polynomial's coefficients as float32 constants."""
    return tuple(_F(v) for v in values)


_Real = float | np.floating[Any]
_FLOAT = ir.FloatType()
_INT = ir.IntType(32)


class _Float32:
    """float32 and int32 arithmetic on LLVM values, one instruction per method."""

    def __init__(self, builder: Any) -> None:
        self.b = builder

    @staticmethod
    def c(v: _Real) -> Any:
        return ir.Constant(_FLOAT, float(_F(v)))

    def _v(self, v: Any) -> Any:
        return self.c(v) if isinstance(v, float | np.floating) else v

    def mul(self, a: Any, b: Any) -> Any:
        return self.b.fmul(self._v(a), self._v(b))

    def add(self, a: Any, b: Any) -> Any:
        return self.b.fadd(self._v(a), self._v(b))

    def sub(self, a: Any, b: Any) -> Any:
        return self.b.fsub(self._v(a), self._v(b))

    def div(self, a: Any, b: Any) -> Any:
        return self.b.fdiv(self._v(a), self._v(b))

    def neg(self, a: Any) -> Any:
        return self.b.fneg(a)

    def fabs(self, a: Any) -> Any:
        fn = self.b.module.declare_intrinsic("llvm.fabs", [_FLOAT])
        return self.b.call(fn, [a])

    def cmp(self, op: str, a: Any, b: Any) -> Any:
        """An ordered comparison (false when either side is NaN); ``!=`` unordered."""
        if op == "!=":
            return self.b.fcmp_unordered("!=", self._v(a), self._v(b))
        return self.b.fcmp_ordered(op, self._v(a), self._v(b))

    def select(self, cond: Any, a: Any, b: Any) -> Any:
        return self.b.select(cond, self._v(a), self._v(b))

    def clamp(self, x: Any, low: _Real, high: _Real) -> Any:
        """x within [low, high]; NaN stays."""
        return self.select(self.cmp("<", x, low), low, self.select(self.cmp(">", x, high), high, x))

    def poly(self, x: Any, coefficients: tuple[np.float32, ...]) -> Any:
        """Horner's rule: ``(c0 * x + c1) * x + c2 ...``."""
        p = self.c(coefficients[0])
        for k in coefficients[1:]:
            p = self.add(self.mul(p, x), k)
        return p

    def bits(self, a: Any) -> Any:
        return self.b.bitcast(a, _INT)

    def from_bits(self, n: Any) -> Any:
        return self.b.bitcast(n, _FLOAT)

    def int(self, n: int) -> Any:
        return ir.Constant(_INT, n)

    def two_to(self, n: Any) -> Any:
        """2**n as a float32, for an int32 n in [-126, 127]."""
        return self.from_bits(self.b.shl(self.b.add(n, self.int(127)), self.int(23)))


_MAGIC = _F(12582912.0)  # 1.5 * 2**23: adding it rounds to an integer in the low bits
_MAGIC_BITS = int(np.array(_MAGIC).view(np.int32))
_LOG2E = _F(1.4426950408889634)
_LN2_HI, _LN2_LO = _F(0.693145751953125), _F(1.428606765330187e-06)
_EXP_P = _coefficients(
    1.9875691500e-4,
    1.3981999507e-3,
    8.3334519073e-3,
    4.1665795894e-2,
    1.6666665459e-1,
    5.0000001201e-1,
)


def _exp_core(f: _Float32, c: Any) -> tuple[Any, Any]:
    """e**c = p * 2**n for a clamped c: p (the polynomial of the remainder) and the
    rounded ``c * log2(e) + MAGIC`` whose low bits hold n."""
    t = f.add(f.mul(c, _LOG2E), _MAGIC)
    n = f.sub(t, _MAGIC)
    r = f.sub(c, f.mul(n, _LN2_HI))
    r = f.sub(r, f.mul(n, _LN2_LO))
    p = f.poly(r, _EXP_P)
    return f.add(f.add(f.mul(f.mul(p, r), r), r), 1.0), t


_EXP_LOW = _F(-87.0)  # below: 0 (the true value is subnormal, under 1.7e-38)


def exp_neg32(f: _Float32, x: Any) -> Any:
    """e**x for float32 x <= 0 (NaN stays NaN), within 2 ulp; 0 below -87."""
    c = f.select(f.cmp("<", x, _EXP_LOW), _EXP_LOW, x)  # NaN stays
    p, t = _exp_core(f, c)
    scale = f.two_to(f.b.sub(f.bits(t), f.int(_MAGIC_BITS)))
    keep = f.b.or_(f.cmp(">=", x, _EXP_LOW), f.cmp("!=", x, x))
    return f.select(keep, f.mul(p, scale), 0.0)


_EXP_HIGH = _F(88.72283935546875)  # above: inf (the largest float32 is e**88.7228...)
_EXP_FLOOR = _F(-104.0)  # below: 0 (under the smallest subnormal)


def exp32(f: _Float32, x: Any) -> Any:
    """e**x for float32 x, within 2 ulp (subnormal results to 1e-45 absolute). The
    scale 2**n is applied in two halves, so that n may reach 128 or -150."""
    c = f.clamp(x, _EXP_FLOOR, _EXP_HIGH)
    p, t = _exp_core(f, c)
    k = f.b.sub(f.bits(t), f.int(_MAGIC_BITS))
    half = f.b.ashr(k, f.int(1))
    value = f.mul(f.mul(p, f.two_to(half)), f.two_to(f.b.sub(k, half)))
    nan_stays = f.select(f.cmp("==", x, x), value, x)
    return f.select(f.cmp(">", x, _EXP_HIGH), math.inf, nan_stays)


# tanh: Eigen's rational form (odd degree 13 over even degree 6, on [-7.905, 7.905],
# where it reaches 1), within 6 ulp; x itself below 4e-4.
_TANH_P = _coefficients(
    -2.76076847742355e-16,
    2.00018790482477e-13,
    -8.60467152213735e-11,
    5.12229709037114e-08,
    1.48572235717979e-05,
    6.37261928875436e-04,
    4.89352455891786e-03,
)
_TANH_Q = _coefficients(
    1.19825839466702e-06,
    1.18534705686654e-04,
    2.26843463243900e-03,
    4.89352518554385e-03,
)
_TANH_CLAMP, _TANH_TINY = _F(7.90531110763549805), _F(0.0004)


def tanh32(f: _Float32, x: Any) -> Any:
    """tanh(x) for float32 x (0.4 ns an element in a vectorised loop, where the C
    library's tanhf, which Numba calls, took 77 ns on the shared machine)."""
    c = f.clamp(x, -_TANH_CLAMP, _TANH_CLAMP)
    c2 = f.mul(c, c)
    ratio = f.div(f.mul(c, f.poly(c2, _TANH_P)), f.poly(c2, _TANH_Q))
    return f.select(f.cmp(">=", f.fabs(x), _TANH_TINY), ratio, x)  # NaN stays


# erf: Abramowitz & Stegun 7.1.26, absolute error below 1e-6 (as the float32 numpy path)
_ERF_P = _F(0.3275911)
_ERF_A = tuple(_F(a) for a in (1.061405429, -1.453152027, 1.421413741, -0.284496736, 0.254829592))


def erf32(f: _Float32, x: Any) -> Any:
    """erf(x) for float32 x."""
    a = f.fabs(x)
    t = f.div(1.0, f.add(1.0, f.mul(_ERF_P, a)))
    y = f.poly(t, _ERF_A)
    e = f.sub(1.0, f.mul(f.mul(y, t), exp_neg32(f, f.neg(f.mul(a, a)))))
    return f.select(f.cmp(">=", x, 0.0), e, f.select(f.cmp("<", x, 0.0), f.neg(e), x))


def register(stub: Callable[[Any], Any], form: Callable[[_Float32, Any], Any], exact: Any) -> None:
    """Compile calls of ``stub`` in Numba: a float32 argument as ``form``'s
    instructions, any other number as ``exact`` (a ``math`` function) in float64."""

    def typer(x: Any) -> Any:
        if x == types.float32:
            return types.float32
        if isinstance(x, types.Number):
            return types.float64
        return None

    def lower32(context: Any, builder: Any, sig: Any, args: Any) -> Any:
        return form(_Float32(builder), args[0])

    def lower(context: Any, builder: Any, sig: Any, args: Any) -> Any:
        x = context.cast(builder, args[0], sig.args[0], types.float64)
        f64 = signature(types.float64, types.float64)
        return context.get_function(exact, f64)(builder, [x])

    type_callable(stub)(lambda context: typer)
    lower_builtin(stub, types.float32)(lower32)
    lower_builtin(stub, types.Number)(lower)
