"""Numba's on-disk cache shared by processes: the float32 forms of ``exp``, ``tanh``
and ``erf`` (`asgrad.tensor.cpu.jit._numba`) compile under names of their own.

They come from one factory. Numba names compiled code by the function's qualified
name, a per-process counter and the argument types, so with the factory's name two
processes could give two of them one name: a process loading kernels that two others
had compiled and cached linked one function into the other's caller (a whole step's
losses came out NaN). Each form's name now says which function it is.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pytest

numba = pytest.importorskip("numba")

from asgrad.tensor.cpu.jit import _numba as j  # noqa: E402  (after the skip: needs Numba)


def _names(fn: Any) -> set[str]:
    """The mangled names of the float32 forms a compiled kernel refers to."""
    fn(np.float32(0.5))
    llvm = fn.inspect_llvm(fn.signatures[0])
    return set(re.findall(r"6_numba\d+(\w+?_f32)B", llvm))


def test_each_float32_form_compiles_under_its_own_name() -> None:
    @numba.njit
    def k_exp(x: Any) -> Any:
        return j.exp(x)

    @numba.njit
    def k_tanh(x: Any) -> Any:
        return j.tanh(x)

    @numba.njit
    def k_erf(x: Any) -> Any:
        return j.erf(x)

    assert _names(k_exp) == {"exp_f32"}
    assert _names(k_tanh) == {"tanh_f32"}
    assert _names(k_erf) == {"erf_f32"}
    assert k_erf(np.float32(0.5)) == pytest.approx(0.5204999, rel=1e-6)
