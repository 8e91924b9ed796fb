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


def _cell(h: Tensor, x: Tensor, w: Tensor, b: Tensor, v: Tensor) -> Tensor:
    """A step reading its captures as a product (w), a broadcast bias (b) and through a
    sum of its own (v, whose gradient keeps a carry of the backward scan)."""
    return (h @ w + b + x).tanh() * v + v.sum()


def _captures(steps: int) -> list[np.ndarray]:
    return [
        RNG.standard_normal((2, 3)),
        RNG.standard_normal((steps, 2, 3)),
        RNG.standard_normal((3, 3)) * 0.6,
        RNG.standard_normal(3),
        RNG.standard_normal(3),
    ]


def _backward_scans(loss: Tensor, wrt: list[Tensor]) -> tuple[list[Tensor], list[int]]:
    grads = grad(loss, wrt)
    scans = [n for n in loss.graph.nodes if n.op == "scan" and not n.attrs["save"]]
    return grads, [n.attrs["loop"].n_carry for n in scans]


def test_capture_gradients_summed_after_the_loop_equal_the_unrolled_loops() -> None:
    from asgrad.tensor import Graph, evaluate

    values = _captures(6)
    g = Graph("scan")
    h0, xs, w, b, v = (g.input(n, a.shape, "float64") for n, a in zip("hxwbv", values, strict=True))
    _, ys = scan(lambda h, x: (_cell(h, x, w, b, v), _cell(h, x, w, b, v)), h0, xs)
    grads, carries = _backward_scans((ys * ys).sum(), [h0, xs, w, b, v])
    # The backward scan carries the gradients of h and of v (the rest of w's and b's
    # terms is summed after the loop, as one product over the stacked steps).
    assert carries == [2]
    u = Graph("unrolled")
    h1, xs1, w1, b1, v1 = (
        u.input(n, a.shape, "float64") for n, a in zip("hxwbv", values, strict=True)
    )
    h, total = h1, None
    for t in range(values[1].shape[0]):
        h = _cell(h, xs1[t], w1, b1, v1)
        total = (h * h).sum() if total is None else total + (h * h).sum()
    assert total is not None
    expected = grad(total, [h1, xs1, w1, b1, v1])
    feeds = dict(zip("hxwbv", values, strict=True))
    for got, want in zip(evaluate(grads, feeds), evaluate(expected, feeds), strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)


def test_capture_gradients_summed_after_the_loop_pass_the_numerical_check() -> None:
    def build(h0: Tensor, xs: Tensor, w: Tensor, b: Tensor, v: Tensor) -> Tensor:
        _, ys = scan(
            lambda h, x: (_cell(h, x, w, b, v), _cell(h, x, w, b, v)), h0, xs, reverse=True
        )
        return ys

    gradient_check(build, _captures(4))
    gradient_check(build, _captures(0))  # no steps: the sums are zeros
