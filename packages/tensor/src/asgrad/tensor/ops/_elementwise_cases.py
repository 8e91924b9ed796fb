"""The test cases of the elementwise ops (`asgrad.tensor.ops.elementwise`).

Each function makes an op's [`OpCase`][asgrad.tensor.OpCase] list from a
random generator: shapes that broadcast, inputs away from kinks and poles, and large
or tail values where a naive formula overflows or underflows.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from asgrad.tensor.ir.common import away_from, randn, uniform
from asgrad.tensor.ir.registry import CasesFn, OpCase

_UNARY_SHAPES = ((3, 4), (2, 1, 5), ())


def unary_cases(
    make: Callable[[np.random.Generator, tuple[int, ...]], np.ndarray],
    attrs: Sequence[dict[str, object]] = ({},),
    large: float | None = None,
) -> CasesFn:
    def cases(rng: np.random.Generator) -> list[OpCase]:
        out = [
            OpCase((make(rng, s),), a, label=f"{list(s)} {a}") for s in _UNARY_SHAPES for a in attrs
        ]
        if large is not None:
            big = rng.uniform(-large, large, (4, 33))
            out.append(OpCase((big,), attrs[0], grad=False, label="large magnitudes"))
        return out

    return cases


def normal(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    return randn(rng, *shape)


def positive(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    return uniform(rng, 0.3, 3.0, *shape)


def kinked_at_zero(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    return away_from(rng, [0.0], *shape)


_BINARY_SHAPES = (
    ((3, 4), (3, 4)),
    ((2, 3, 4), (3, 1)),
    ((4, 1), (1, 5)),
    ((), (2, 3)),
    ((5,), (2, 1, 5)),
)


def binary_cases(
    make_a: Callable[[np.random.Generator, tuple[int, ...]], np.ndarray] = normal,
    make_b: Callable[[np.random.Generator, tuple[int, ...]], np.ndarray] = normal,
) -> CasesFn:
    def cases(rng: np.random.Generator) -> list[OpCase]:
        return [
            OpCase((make_a(rng, sa), make_b(rng, sb)), label=f"{list(sa)} {list(sb)}")
            for sa, sb in _BINARY_SHAPES
        ]

    return cases


def nonzero(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    out: np.ndarray = uniform(rng, 0.5, 2.0, *shape) * rng.choice([-1.0, 1.0], shape)
    return out


def compare_cases(rng: np.random.Generator) -> list[OpCase]:
    out = []
    for sa, sb in _BINARY_SHAPES:
        a = rng.integers(-2, 3, sa).astype(np.float64)
        b = rng.integers(-2, 3, sb).astype(np.float64)
        out.append(OpCase((a, b), grad=False, label=f"{list(sa)} {list(sb)}"))
    return out


def where_cases(rng: np.random.Generator) -> list[OpCase]:
    return [
        OpCase((rng.random((3, 4)) > 0.5, randn(rng, 3, 4), randn(rng, 3, 4)), wrt=(1, 2)),
        OpCase((rng.random((3, 1)) > 0.5, randn(rng, 1, 4), randn(rng, 2, 3, 4)), wrt=(1, 2)),
        OpCase((rng.random((4,)) > 0.5, randn(rng, 3, 4), randn(rng)), wrt=(1, 2)),
    ]


def cast_cases(rng: np.random.Generator) -> list[OpCase]:
    x = randn(rng, 3, 4, scale=3.0)
    return [
        OpCase((x,), {"dtype": "float32"}, grad=False, label="to float32"),
        OpCase((x,), {"dtype": "int64"}, grad=False, label="to int64"),
        OpCase((x > 0,), {"dtype": "float64"}, grad=False, label="bool to float"),
    ]


def gelu_backward_cases(rng: np.random.Generator) -> list[OpCase]:
    out = []
    for approximate in ("none", "tanh"):
        a = {"approximate": approximate}
        out += [
            OpCase((randn(rng, 3, 4), randn(rng, 3, 4) * 2.0), a, label=f"(3, 4) {approximate}"),
            OpCase((randn(rng, 2, 3, 5), randn(rng, 2, 3, 5)), a, label=f"rank 3 {approximate}"),
            OpCase((randn(rng), randn(rng)), a, label=f"scalar {approximate}"),
        ]
    big = (randn(rng, 4, 33), uniform(rng, -30.0, 30.0, 4, 33))
    out.append(OpCase(big, {"approximate": "none"}, grad=False, label="large magnitudes"))
    return out


def clamp_cases(rng: np.random.Generator) -> list[OpCase]:
    x = away_from(rng, [-0.5, 0.7], 3, 4)
    return [
        OpCase((x,), {"min": -0.5, "max": 0.7}),
        OpCase((x,), {"min": -0.5}),
        OpCase((x,), {"max": 0.7}),
    ]


def sigmoid_cases(rng: np.random.Generator) -> list[OpCase]:
    tails = np.array([-40.0, -30.0, -20.0, -17.0, -5.0, 0.0, 5.0, 17.0, 20.0, 30.0])
    return [*unary_cases(normal, large=60.0)(rng), OpCase((tails,), label="tails")]


def softplus_cases(rng: np.random.Generator) -> list[OpCase]:
    # beta x on both sides of the threshold 20, away from it (the value steps by 1e-9)
    around = np.array([-25.0, -3.0, 9.5, 10.5, 19.0, 25.0])
    out = unary_cases(normal, [{"beta": 1.0}, {"beta": 2.0}], large=60.0)(rng)
    return [*out, OpCase((around,), {"beta": 2.0}, label="threshold")]
