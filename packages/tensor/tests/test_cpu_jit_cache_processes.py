"""The float32 forms of ``exp``, ``exp_neg``, ``tanh`` and ``erf``
(`asgrad.tensor.cpu.jit._math32`) are written into each kernel that calls them.

They were Numba functions of their own once. Numba names compiled code by the
function's qualified name, a per-process counter and the argument types, so two
processes could give two of them one name: a process loading kernels that two others
had compiled and cached linked one function into the other's caller (a whole step's
losses came out NaN). And LLVM inlined them at its discretion: in a kernel with many
calls it left some as calls, and the loops around them ran scalar. Written as
instructions, a kernel calls no function for them, so neither can happen.
"""

from __future__ import annotations

import math
import re
from typing import Any

import numpy as np
import pytest

numba = pytest.importorskip("numba")

from asgrad.tensor.cpu.jit import _numba as j  # noqa: E402  (after the skip: needs Numba)


def _calls(fn: Any, *args: Any) -> list[str]:
    """The functions a compiled kernel's own code calls (LLVM intrinsics left out)."""
    fn(*args)
    llvm = fn.inspect_llvm(fn.signatures[0])
    return [c for c in re.findall(r"call [^@\n]*@\"?([\w.$]+)", llvm) if not c.startswith("llvm.")]


def test_the_float32_forms_are_instructions_of_the_kernel() -> None:
    @numba.njit
    def k_exp(x: Any) -> Any:
        return j.exp(x)

    @numba.njit
    def k_erf(x: Any) -> Any:
        return j.erf(x)

    for fn in (k_exp, k_erf):
        assert not [c for c in _calls(fn, np.float32(0.5)) if "_numba" in c or "math32" in c]
    assert k_erf(np.float32(0.5)) == pytest.approx(0.5204999, rel=1e-6)
    assert k_exp(np.float32(0.5)) == pytest.approx(math.exp(0.5), rel=1e-6)


def test_a_loop_of_many_calls_calls_no_function() -> None:
    """An LSTM cell's forward step over a flat buffer, as a whole step writes it
    (three sigmoid loops, two tanh loops): LLVM had left its tanh calls as calls."""

    @numba.njit(error_model="numpy")
    def cell(w: Any, _u: int) -> Any:
        if _u < 0 or _u > 1:
            raise ValueError("_u must be 1")
        one = np.float32(1.0)
        for t in range(8):
            for i in range(16 * _u):
                for c in range(64 * _u):
                    w[4096 + t * 1024 + i * 64 + c] = one / (one + j.exp(-w[i * 256 + c]))
            for i in range(16 * _u):
                for c in range(64 * _u):
                    w[12288 + t * 1024 + i * 64 + c] = one / (one + j.exp(-w[i * 256 + 64 + c]))
            for i in range(16 * _u):
                for c in range(64 * _u):
                    w[20480 + t * 1024 + i * 64 + c] = one / (one + j.exp(-w[i * 256 + 192 + c]))
            for i in range(16 * _u):
                for c in range(64 * _u):
                    w[28672 + t * 1024 + i * 64 + c] = j.tanh(w[i * 256 + 128 + c])
            for i in range(16 * _u):
                for c in range(64 * _u):
                    at = t * 1024 + i * 64 + c
                    w[36864 + i * 64 + c] = (
                        w[12288 + at] * w[36864 + i * 64 + c] + w[4096 + at] * w[28672 + at]
                    )
            for i in range(16 * _u):
                for c in range(64 * _u):
                    at = t * 1024 + i * 64 + c
                    w[4096 + at] = w[20480 + at] * j.tanh(w[36864 + i * 64 + c])
        return 0

    w = np.linspace(-3, 3, 40_000, dtype=np.float32)
    assert not [c for c in _calls(cell, w, 1) if "exp" in c or "tanh" in c]
    assert np.all(np.abs(w[4096:12288]) < 1)


@pytest.mark.parametrize("name", ["exp", "exp_neg", "tanh", "erf"])
def test_float64_and_integer_arguments_take_the_exact_function(name: str) -> None:
    stub, exact = getattr(j, name), getattr(math, name.removesuffix("_neg"))

    @numba.njit
    def call(x: Any) -> Any:
        return stub(x)

    assert call(-0.75) == exact(-0.75)
    assert call(np.int64(-1)) == exact(-1.0)
    assert call(np.float32(-0.75)) == pytest.approx(exact(-0.75), rel=1e-6)
