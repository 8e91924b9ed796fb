"""Gradients of float16 graphs: float16 values, close to the float64 gradients of the
same graph at float16's precision (each op rounded to 11 significant bits, sums and
products accumulated in float32)."""

from __future__ import annotations

import numpy as np
import pytest

from asgrad.autograd import grad
from asgrad.tensor import Graph, Tensor, evaluate
from asgrad.tensor.api.nn_functional import layer_norm

# float16 has a step of 2**-10 relative: the chain of rounded ops here stays within a
# few of those steps of the exact gradient (about 1e-3 seen), relative to the largest
# entry of each gradient.
F16_GRAD_RTOL = 5e-3


def _block(x: Tensor, w1: Tensor, w2: Tensor, b: Tensor) -> Tensor:
    """A small transformer-like block: layer norm, attention-style softmax, MLP, loss."""
    h = layer_norm(x)
    scores = (h @ h.mT * 0.25).softmax(axis=-1)
    mixed = scores @ h + x
    out = (mixed @ w1 + b).gelu() @ w2
    return (out * out).mean() + out.log_softmax(axis=-1).mean()


def _gradients(dtype: str, values: dict[str, np.ndarray]) -> list[np.ndarray]:
    g = Graph()
    ins = [g.input(name, v.shape, dtype) for name, v in values.items()]
    loss = _block(*ins)
    grads = grad(loss, ins)
    assert all(t.dtype == dtype for t in grads)
    feeds = {name: v.astype(dtype) for name, v in values.items()}
    return evaluate([loss, *grads], feeds)


@pytest.mark.parametrize("seed", [0, 1])
def test_float16_gradients_follow_the_float64_ones(seed: int) -> None:
    rng = np.random.default_rng(seed)
    values = {
        "x": rng.standard_normal((2, 6, 8)),
        "w1": rng.standard_normal((8, 16)) * 0.3,
        "w2": rng.standard_normal((16, 8)) * 0.3,
        "b": rng.standard_normal(16) * 0.1,
    }
    # the float16 inputs, so both graphs see the same values
    values = {k: v.astype(np.float16).astype(np.float64) for k, v in values.items()}
    half = _gradients("float16", values)
    exact = _gradients("float64", values)
    for h, e in zip(half, exact, strict=True):
        assert h.dtype == np.float16
        assert np.isfinite(h).all()
        scale = float(np.abs(e).max())
        np.testing.assert_allclose(h.astype(np.float64), e, rtol=0, atol=F16_GRAD_RTOL * scale)
