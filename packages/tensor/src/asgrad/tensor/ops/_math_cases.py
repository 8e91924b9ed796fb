"""Test cases of the math ops: rounding, tests, logic, integers, reductions,
scans. Each makes an op's [`OpCase`][asgrad.tensor.OpCase] list from a random
generator, with the edge cases that matter: halves for rounding, NaN and infinities
for the tests, negative operands for floor division, ties and zeros."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from asgrad.tensor.ir.common import randn
from asgrad.tensor.ir.registry import CasesFn, OpCase
from asgrad.tensor.ops._elementwise_cases import binary_cases, positive

_SPECIAL = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1.5, -2.5, 1e30])


def rounding_cases(attrs: Sequence[dict[str, object]] = ({},)) -> CasesFn:
    """Away from the kinks (integers and halves) for gradients; halves (ties to even),
    integers and specials as value cases."""

    def cases(rng: np.random.Generator) -> list[OpCase]:
        x = rng.uniform(-4, 4, (3, 5))
        x = x + 0.2 * (np.abs(x - np.round(x * 2) / 2) < 0.05)
        halves = np.array([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 3.0, -3.0, 0.0, 7.25])
        out = []
        for a in attrs:
            out += [
                OpCase((x,), a, label=f"(3, 5) {a}"),
                OpCase((np.asarray(x[0, 0]),), a, label=f"scalar {a}"),
                OpCase((halves,), a, grad=False, label=f"halves {a}"),
                OpCase((_SPECIAL,), a, grad=False, label=f"specials {a}"),
            ]
        return out

    return cases


def predicate_cases(rng: np.random.Generator) -> list[OpCase]:
    x = randn(rng, 3, 4)
    x.flat[[1, 5]], x.flat[[2, 9]], x.flat[7] = np.nan, np.inf, -np.inf
    ints = rng.integers(-5, 5, (2, 3))
    return [
        OpCase((x,), grad=False),
        OpCase((_SPECIAL,), grad=False, label="specials"),
        OpCase((ints,), grad=False, label="int64"),
    ]


def isclose_cases(rng: np.random.Generator) -> list[OpCase]:
    a = randn(rng, 4, 6)
    b = a + rng.choice([0.0, 1e-9, 1e-3, 1.0], a.shape) * rng.choice([-1, 1], a.shape)
    a.flat[:4], b.flat[:4] = [np.nan, np.inf, np.inf, 1.0], [np.nan, np.inf, -np.inf, np.inf]
    out = []
    for attrs in ({}, {"rtol": 1e-2, "atol": 0.0}, {"equal_nan": True}):
        out.append(OpCase((a, b), attrs, grad=False, label=f"{attrs}"))
    out.append(OpCase((a[0], b[:, :1]), grad=False, label="broadcast"))
    return out


def nan_to_num_cases(rng: np.random.Generator) -> list[OpCase]:
    x = randn(rng, 3, 4)
    special = x.copy()
    special.flat[[0, 5]], special.flat[3], special.flat[7] = np.nan, np.inf, -np.inf
    return [
        OpCase((x,), label="finite"),
        OpCase((np.where(np.isinf(special), 1.0, special),), label="NaN, default"),
        OpCase((special,), {"nan": 1.5, "posinf": 9.0, "neginf": -7.0}, label="given"),
    ]


def frac_cases(rng: np.random.Generator) -> list[OpCase]:
    x = rng.uniform(-4, 4, (3, 5))
    x = x + 0.2 * (np.abs(x - np.round(x)) < 0.05)
    return [OpCase((x,)), OpCase((np.array([-2.5, -0.25, 0.0, 3.0, 1e30]),), grad=False)]


def logical_cases(unary: bool = False) -> CasesFn:
    def cases(rng: np.random.Generator) -> list[OpCase]:
        a, b = rng.random((3, 4)) > 0.5, rng.random((4,)) > 0.5
        ints = rng.integers(-2, 3, (3, 4))
        if unary:
            return [OpCase((a,), grad=False), OpCase((ints,), grad=False, label="int64")]
        return [
            OpCase((a, b), grad=False, label="bools, broadcast"),
            OpCase(
                (ints, rng.normal(size=(3, 4)) * (rng.random((3, 4)) > 0.5)),
                grad=False,
                label="int64 and float64: nonzero is true",
            ),
        ]

    return cases


def _int_pair(rng: np.random.Generator, nonzero: bool) -> tuple[np.ndarray, np.ndarray]:
    a = rng.integers(-50, 50, (3, 4))
    b = rng.integers(-7, 8, (4,))
    if nonzero:
        b = np.where(b == 0, 3, b)
    return a, b


def int_binary_cases(nonzero: bool = False, bools: bool = False) -> CasesFn:
    """int64 and int32 operands of both signs (floor semantics for negatives)."""

    def cases(rng: np.random.Generator) -> list[OpCase]:
        a, b = _int_pair(rng, nonzero)
        out = [
            OpCase((a, b), grad=False, label="int64"),
            OpCase((a.astype(np.int32), b.astype(np.int32)), grad=False, label="int32"),
            OpCase((np.asarray(-7), b), grad=False, label="scalar"),
        ]
        if bools:
            out.append(OpCase((a > 0, b > 0), grad=False, label="bool"))
        return out

    return cases


def shift_cases(rng: np.random.Generator) -> list[OpCase]:
    a = rng.integers(-1000, 1000, (3, 5))
    s = np.array([0, 1, 3, 7, 20])
    big = np.array([31, 32, 40, 63, 64, 100, -1])
    small = np.array([-3, 0, 5, -1, 2, 7, -9])
    # int64: results within int32, which the GPU holds (others raise there)
    wide = (np.array([-3, 0, 5, -1, 0, 7, -9]), np.array([64, 40, 100, 31, 63, -1, 70]))
    return [
        OpCase((a, s), grad=False, label="int64"),
        OpCase((a.astype(np.int32), s.astype(np.int32)), grad=False, label="int32"),
        OpCase(wide, grad=False, label="beyond the width"),
        OpCase(
            (small.astype(np.int32), big.astype(np.int32)),
            grad=False,
            label="int32 beyond the width",
        ),
    ]


def invert_cases(rng: np.random.Generator) -> list[OpCase]:
    ints = rng.integers(-50, 50, (3, 4))
    return [
        OpCase((ints,), grad=False, label="int64"),
        OpCase((ints.astype(np.int32),), grad=False, label="int32"),
        OpCase((ints > 0,), grad=False, label="bool"),
    ]


def pow_cases(rng: np.random.Generator) -> list[OpCase]:
    out = binary_cases(positive, lambda r, s: randn(r, *s))(rng)
    a = rng.integers(-6, 7, (3, 4))
    b = rng.integers(0, 6, (4,))
    return [
        *out,
        OpCase((a, b), grad=False, label="int64"),
        OpCase((a.astype(np.int32), b.astype(np.int32)), grad=False, label="int32"),
    ]


def minmax_cases(rng: np.random.Generator) -> list[OpCase]:
    a, b = _int_pair(rng, False)
    return [
        *binary_cases()(rng),
        OpCase((a, b), grad=False, label="int64"),
        OpCase((a.astype(np.int32), b.astype(np.int32)), grad=False, label="int32"),
        OpCase((a > 0, b > 0), grad=False, label="bool"),
    ]


# -- reductions -----------------------------------------------------------------------
def _axes_cases(x3: np.ndarray, rng: np.random.Generator) -> list[OpCase]:
    return [
        OpCase((x3,), {"axis": (0, 1, 2), "keepdims": False}, label="all"),
        OpCase((x3,), {"axis": (1,), "keepdims": True}, label="axis 1 keepdims"),
        OpCase((x3,), {"axis": (0, 2), "keepdims": False}, label="axes 0,2"),
        OpCase((randn(rng, 3, 70),), {"axis": (1,), "keepdims": False}, label="long row"),
    ]


def max_cases(rng: np.random.Generator) -> list[OpCase]:
    x3 = randn(rng, 2, 3, 4)
    ints = rng.integers(-9, 9, (3, 5))
    one = {"axis": (1,), "keepdims": False}
    return [
        *_axes_cases(x3, rng),
        OpCase((randn(rng, 5, 1),), one, label="size-1 axis"),
        OpCase((ints,), one, grad=False, label="int64"),
        OpCase((ints.astype(np.int32),), {"axis": (0,)}, grad=False, label="int32"),
        OpCase((ints > 0,), one, grad=False, label="bool"),
    ]


def moment_cases(rng: np.random.Generator) -> list[OpCase]:
    x3 = randn(rng, 2, 3, 4)
    out = _axes_cases(x3, rng)
    for c in (1, 2.5):
        out.append(OpCase((x3,), {"axis": (1, 2), "correction": c}, label=f"correction {c}"))
    out.append(OpCase((x3,), {"axis": (2,), "keepdims": True, "correction": 1}, label="keep"))
    return out


def prod_cases(rng: np.random.Generator) -> list[OpCase]:
    x = rng.uniform(0.5, 1.5, (3, 6)) * rng.choice([-1.0, 1.0], (3, 6))
    one_zero, zeros = x.copy(), x.copy()
    one_zero[0, 2] = one_zero[2, 5] = 0.0
    zeros[1, [0, 3]] = zeros[2, [1, 2, 4]] = 0.0
    x3 = rng.uniform(0.5, 1.5, (2, 3, 4))
    return [
        OpCase((x,), {"axis": (1,)}, label="row"),
        OpCase((x3,), {"axis": (0, 2), "keepdims": True}, label="axes 0,2"),
        OpCase((x3,), {"axis": (0, 1, 2)}, label="all"),
        OpCase((one_zero,), {"axis": (1,)}, label="one zero in a row"),
        OpCase((zeros,), {"axis": (1,)}, label="several zeros in a row"),
        OpCase((zeros,), {"axis": (0,)}, label="zeros, columns"),
    ]


def logsumexp_cases(rng: np.random.Generator) -> list[OpCase]:
    x3 = randn(rng, 2, 3, 4, scale=3.0)
    big = rng.uniform(-1e4, 1e4, (3, 8))
    ninf = randn(rng, 3, 4)
    ninf[0, :3] = -np.inf  # a row all -inf is in test_math_ops.py (log 0 warns)
    ninf[1, 2] = -np.inf
    return [
        *_axes_cases(x3, rng),
        OpCase((big,), {"axis": (1,)}, grad=False, label="large magnitudes"),
        OpCase((ninf,), {"axis": (1,)}, grad=False, label="-inf values"),
    ]


def truth_cases(rng: np.random.Generator) -> list[OpCase]:
    b = rng.random((3, 4)) > 0.6
    b[0] = True
    b[1] = False
    x = randn(rng, 2, 3) * (rng.random((2, 3)) > 0.5)
    return [
        OpCase((b,), {"axis": (1,)}, grad=False, label="rows all/none/some"),
        OpCase((b,), {"axis": (0, 1), "keepdims": True}, grad=False, label="all axes"),
        OpCase((x,), {"axis": (0,)}, grad=False, label="float64: nonzero"),
        OpCase((np.zeros((2, 0)),), {"axis": (1,)}, grad=False, label="empty axis"),
    ]


def arg_cases(rng: np.random.Generator) -> list[OpCase]:
    x = randn(rng, 3, 5)
    ties = np.array([[1.0, 3.0, 3.0, -2.0, -2.0], [np.nan, 1.0, np.nan, 0.0, 5.0]])
    return [
        OpCase((x,), {"axis": 1}, grad=False),
        OpCase((x,), {"axis": 0, "keepdims": True}, grad=False),
        OpCase((ties,), {"axis": 1}, grad=False, label="ties, NaN"),
        OpCase((rng.integers(-3, 3, (4, 6)),), {"axis": 1}, grad=False, label="int64"),
    ]


# -- scans and sorts ----------------------------------------------------------------------
def _distinct(rng: np.random.Generator, *shape: int) -> np.ndarray:
    """Values at least 0.05 apart (no ties), so that a gradient check can move them."""
    n = int(np.prod(shape))
    return (rng.permutation(n) * 0.1 + rng.uniform(0, 0.05, n)).reshape(shape) - n * 0.05


def cumsum_cases(rng: np.random.Generator) -> list[OpCase]:
    x3 = randn(rng, 2, 3, 4)
    ints = rng.integers(-9, 9, (3, 5))
    return [
        OpCase((x3,), {"axis": 2}, label="last axis"),
        OpCase((x3,), {"axis": 0, "reverse": True}, label="axis 0 reversed"),
        OpCase((x3,), {"axis": 1}, label="axis 1"),
        OpCase((randn(rng, 3, 70),), {"axis": 1, "reverse": True}, label="long rows"),
        OpCase((ints,), {"axis": 1}, grad=False, label="int64"),
        OpCase((ints.astype(np.int32),), {"axis": 0}, grad=False, label="int32 to int64"),
        OpCase((np.zeros((2, 0)),), {"axis": 1}, grad=False, label="empty axis"),
    ]


def cumprod_cases(rng: np.random.Generator) -> list[OpCase]:
    x = rng.uniform(0.5, 1.5, (3, 6)) * rng.choice([-1.0, 1.0], (3, 6))
    one_zero, zeros = x.copy(), x.copy()
    one_zero[0, 2] = one_zero[1, 0] = one_zero[2, 5] = 0.0
    zeros[1, [1, 3]] = zeros[2, [0, 2, 4]] = 0.0
    return [
        OpCase((x,), {"axis": 1}, label="row"),
        OpCase((rng.uniform(0.5, 1.5, (4, 2, 3)),), {"axis": 0}, label="axis 0"),
        OpCase((one_zero,), {"axis": 1}, label="one zero in a row"),
        OpCase((zeros,), {"axis": 1}, label="several zeros in a row"),
        OpCase((zeros,), {"axis": 0}, label="zeros, columns"),
    ]


def _extreme_cases(rng: np.random.Generator, grad: bool) -> list[OpCase]:
    ties = np.array([[1.0, 3.0, 3.0, 2.0, 3.0], [2.0, 1.0, 1.0, 0.0, 0.0]])
    nan = np.array([[1.0, np.nan, 2.0, np.nan, 5.0], [4.0, 3.0, np.nan, 9.0, -1.0]])
    return [
        OpCase((_distinct(rng, 3, 7),), {"axis": 1}, grad=grad, label="row"),
        OpCase((_distinct(rng, 4, 2, 3),), {"axis": 0}, grad=grad, label="axis 0"),
        OpCase((ties,), {"axis": 1}, grad=False, label="ties"),
        OpCase((nan,), {"axis": 1}, grad=False, label="NaN"),
        OpCase((rng.integers(-5, 5, (3, 6)),), {"axis": 1}, grad=False, label="int64"),
    ]


def cummax_cases(rng: np.random.Generator) -> list[OpCase]:
    return _extreme_cases(rng, True)


cummin_cases = cummax_cases


def cummax_index_cases(rng: np.random.Generator) -> list[OpCase]:
    return _extreme_cases(rng, False)


cummin_index_cases = cummax_index_cases


def logcumsumexp_cases(rng: np.random.Generator) -> list[OpCase]:
    x3 = randn(rng, 2, 3, 4, scale=3.0)
    ninf = randn(rng, 3, 5)
    ninf[0, :2] = ninf[1, 3] = -np.inf
    return [
        OpCase((x3,), {"axis": 2}, label="last axis"),
        OpCase((x3,), {"axis": 1, "reverse": True}, label="reversed"),
        OpCase((rng.uniform(-1e3, 1e3, (3, 9)),), {"axis": 1}, grad=False, label="large"),
        OpCase((ninf,), {"axis": 1}, grad=False, label="-inf"),
    ]


def _sort_cases(rng: np.random.Generator, grad: bool) -> list[OpCase]:
    ties = np.array([[3.0, 1.0, np.nan, 1.0, 2.0, -0.0, 0.0], [5.0, 5.0, 5.0, 1.0, 1.0, 0, 9]])
    out = []
    for d in (False, True):
        out += [
            OpCase((_distinct(rng, 3, 8),), {"axis": 1, "descending": d}, grad=grad),
            OpCase((_distinct(rng, 5, 2, 3),), {"axis": 0, "descending": d}, grad=grad),
            OpCase((ties,), {"axis": 1, "descending": d}, grad=False, label=f"ties, NaN {d}"),
        ]
    ints = rng.integers(-4, 4, (3, 40))
    out.append(OpCase((ints,), {"axis": 1}, grad=False, label="int64 long rows"))
    return out


def sort_cases(rng: np.random.Generator) -> list[OpCase]:
    return _sort_cases(rng, True)


def argsort_cases(rng: np.random.Generator) -> list[OpCase]:
    return _sort_cases(rng, False)
