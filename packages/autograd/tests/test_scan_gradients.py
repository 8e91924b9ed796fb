"""Gradients of scan, fori_loop and while_loop, checked by central differences in float64."""

from __future__ import annotations

import numpy as np

from asgrad.autograd import grad, gradient_check
from asgrad.tensor import Tensor, fori_loop, scan, while_loop

RNG = np.random.default_rng(1)


def _rnn(h0: Tensor, xs: Tensor, w: Tensor, **kw: object) -> tuple[Tensor, Tensor]:
    def step(h: Tensor, x: Tensor) -> tuple[Tensor, Tensor]:
        new = (h @ w + x).tanh()
        return new, (new * h).sum(axis=1)

    out: tuple[Tensor, Tensor] = scan(step, h0, xs, **kw)
    return out


def _inputs(steps: int = 5) -> list[np.ndarray]:
    return [
        RNG.standard_normal((2, 3)),
        RNG.standard_normal((steps, 2, 3)),
        RNG.standard_normal((3, 3)) * 0.6,
    ]


def test_gradient_of_carry_ys_and_captured_weight() -> None:
    def build(h0: Tensor, xs: Tensor, w: Tensor) -> Tensor:
        h, ys = _rnn(h0, xs, w)
        return ys.sum() * 0.5 + (h * h).sum()

    gradient_check(build, _inputs())


def test_gradient_reversed_and_recomputed_carries() -> None:
    def build(h0: Tensor, xs: Tensor, w: Tensor) -> Tensor:
        _, ys = _rnn(h0, xs, w, reverse=True, save_carries=False)
        return ys

    gradient_check(build, _inputs())


def test_second_order_gradient() -> None:
    def build(h0: Tensor, xs: Tensor, w: Tensor) -> Tensor:
        _, ys = _rnn(h0, xs, w)
        (dw,) = grad((ys * ys).sum(), [w])
        return dw

    gradient_check(build, _inputs(3))


def test_gradient_of_a_nested_scan() -> None:
    def build(c0: Tensor, xs: Tensor, w: Tensor) -> Tensor:
        def outer(c: Tensor, row: Tensor) -> tuple[Tensor, Tensor]:
            inner, _ = scan(lambda d, x: ((d * w + x).sin(), None), c, row)
            return inner, inner.sum()

        c, sums = scan(outer, c0, xs)
        return c * sums.sum()

    gradient_check(
        build, [RNG.standard_normal(2), RNG.standard_normal((3, 4, 2)), RNG.standard_normal(2)]
    )


def test_fori_loop_and_while_loop_gradients() -> None:
    gradient_check(
        lambda x, a: fori_loop(0, 4, lambda i, v: (v * a).cos() + i.cast("float64"), x),
        [RNG.standard_normal(3), RNG.standard_normal(3)],
    )
    gradient_check(
        lambda x: while_loop(lambda v: v.sum() < 10.0, lambda v: v * 1.5 + 0.1, x, max_steps=30),
        [np.abs(RNG.standard_normal(3)) + 0.5],
    )


def test_integer_xs_get_no_gradient_but_others_do() -> None:
    table = RNG.standard_normal((5, 3))

    def build(h0: Tensor, emb: Tensor) -> Tensor:
        ids = h0.graph.constant(np.array([[0, 3], [4, 1], [2, 2]], np.int64))

        def step(h: Tensor, i: Tensor) -> tuple[Tensor, Tensor]:
            new = (h + emb.gather(i, axis=0)).tanh()
            return new, new

        _, ys = scan(step, h0, ids)
        return ys

    gradient_check(build, [RNG.standard_normal((2, 3)), table])
