"""A scan's gradient reads the forward values its steps need (an LSTM's gates) from
the forward loop, which saves them, instead of computing each forward step again."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from asgrad.autograd import grad, gradient_check
from asgrad.tensor import Graph, Tensor, evaluate, make_schedule, scan

RNG = np.random.default_rng(3)
STEPS, BATCH, HIDDEN = 4, 2, 3


def _gate(t: Tensor, k: int) -> Tensor:
    return t[:, k * HIDDEN : (k + 1) * HIDDEN]


def _lstm(h0: Tensor, c0: Tensor, xw: Tensor, w: Tensor, b: Tensor, **kw: object) -> Tensor:
    """PyTorch's LSTM over the per-step input projections ``xw``; returns the hs."""

    def step(carry: list[Tensor], x: Tensor) -> tuple[list[Tensor], Tensor]:
        h, c = carry
        gates = x + h @ w + b
        i, f = _gate(gates, 0).sigmoid(), _gate(gates, 1).sigmoid()
        g, o = _gate(gates, 2).tanh(), _gate(gates, 3).sigmoid()
        c_new = f * c + i * g
        h_new = o * c_new.tanh()
        return [h_new, c_new], h_new

    _, hs = scan(step, [h0, c0], xw, **kw)
    out: Tensor = hs
    return out


def _gru(h0: Tensor, xw: Tensor, w: Tensor, b: Tensor, **kw: object) -> Tensor:
    """PyTorch's GRU over the per-step input projections ``xw``; returns the hs."""

    def step(h: Tensor, x: Tensor) -> tuple[Tensor, Tensor]:
        hw = h @ w + b
        r = (_gate(x, 0) + _gate(hw, 0)).sigmoid()
        z = (_gate(x, 1) + _gate(hw, 1)).sigmoid()
        n = (_gate(x, 2) + r * _gate(hw, 2)).tanh()
        new = (1.0 - z) * n + z * h
        return new, new

    _, hs = scan(step, h0, xw, **kw)
    out: Tensor = hs
    return out


def _lstm_inputs() -> list[np.ndarray]:
    return [
        RNG.standard_normal((BATCH, HIDDEN)),
        RNG.standard_normal((BATCH, HIDDEN)),
        RNG.standard_normal((STEPS, BATCH, 4 * HIDDEN)),
        RNG.standard_normal((HIDDEN, 4 * HIDDEN)) * 0.5,
        RNG.standard_normal(4 * HIDDEN) * 0.5,
    ]


def _gru_inputs() -> list[np.ndarray]:
    return [
        RNG.standard_normal((BATCH, HIDDEN)),
        RNG.standard_normal((STEPS, BATCH, 3 * HIDDEN)),
        RNG.standard_normal((HIDDEN, 3 * HIDDEN)) * 0.5,
        RNG.standard_normal(3 * HIDDEN) * 0.5,
    ]


def test_lstm_gradients_from_saved_gates_pass_the_numerical_check() -> None:
    gradient_check(_lstm, _lstm_inputs())


def test_gru_gradients_from_saved_gates_pass_the_numerical_check() -> None:
    gradient_check(_gru, _gru_inputs())


def _scans(build: object, arrays: list[np.ndarray], **kw: object) -> tuple[list, list[Tensor]]:
    """The scans of the schedule of ``build``'s loss and gradients, and those tensors."""
    g = Graph()
    ins = [g.input(f"x{i}", a.shape, "float64", free=()) for i, a in enumerate(arrays)]
    out = build(*ins, **kw)  # type: ignore[operator]
    loss = (out * out).sum()
    outputs = [loss, *grad(loss, ins)]
    nodes = make_schedule(outputs).nodes
    return [n for n in nodes if n.op == "scan"], outputs


def _ops(scan_node: object) -> Counter[str]:
    body = scan_node.attrs["loop"]  # type: ignore[attr-defined]
    return Counter(n.op for n in body.schedule().nodes)


@pytest.mark.parametrize(
    ("build", "inputs", "saved"), [(_lstm, _lstm_inputs, 5), (_gru, _gru_inputs, 5)]
)
def test_one_forward_loop_saves_what_the_backward_steps_read(
    build: object, inputs: object, saved: int
) -> None:
    arrays = inputs()  # type: ignore[operator]
    scans, _ = _scans(build, arrays)
    forward = [s for s in scans if not s.attrs["reverse"]]
    backward = [s for s in scans if s.attrs["reverse"]]
    # the loop the loss reads and the one saving the gates are one scan
    assert len(forward) == 1
    assert len(backward) == 1
    body = forward[0].attrs["loop"]
    assert body.extends is not None
    assert body.n_y == body.extends.n_y + saved
    ops = _ops(backward[0])
    # no gate is computed again: one product (the hidden state's gradient), no sigmoid
    assert (ops["matmul"], ops["sigmoid"], ops["tanh"]) == (1, 0, 0)


def test_loops_that_keep_no_carries_compute_their_steps_again() -> None:
    scans, _ = _scans(_lstm, _lstm_inputs(), save_carries=False)
    backward = [s for s in scans if s.attrs["reverse"]]
    assert len(backward) == 1
    ops = _ops(backward[0])
    assert (ops["matmul"], ops["sigmoid"]) == (2, 3)


@pytest.mark.parametrize(("build", "inputs"), [(_lstm, _lstm_inputs), (_gru, _gru_inputs)])
def test_saved_and_recomputed_forward_values_give_the_same_gradients(
    build: object, inputs: object
) -> None:
    arrays = inputs()  # type: ignore[operator]
    feeds = {f"x{i}": a for i, a in enumerate(arrays)}
    _, saved = _scans(build, arrays)
    _, again = _scans(build, arrays, save_carries=False)
    for a, b in zip(evaluate(saved, feeds), evaluate(again, feeds), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)


def test_second_order_gradient_through_saved_gates() -> None:
    def build(h0: Tensor, c0: Tensor, xw: Tensor, w: Tensor, b: Tensor) -> Tensor:
        hs = _lstm(h0, c0, xw, w, b)
        (dw,) = grad((hs * hs).sum(), [w])
        return dw

    arrays = _lstm_inputs()
    gradient_check(build, [a[:2] if i == 2 else a for i, a in enumerate(arrays)])
