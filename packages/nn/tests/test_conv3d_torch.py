"""3-D convolution and pooling against PyTorch: values and gradients in float64, and
the layers with PyTorch's weights (PyTorch optional)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import asgrad.nn as nn
import asgrad.nn.functional as F
from asgrad.autograd import grad
from asgrad.tensor import Graph, evaluate

torch = pytest.importorskip("torch")
TF = torch.nn.functional


def _r(*shape: int) -> np.ndarray:
    return np.random.default_rng(sum(shape)).standard_normal(shape)


def test_conv3d_values_and_gradients() -> None:
    x, w, b = _r(2, 4, 5, 4, 5), _r(6, 2, 3, 2, 3), _r(6)
    kwargs: dict[str, Any] = {"stride": (2, 1, 2), "padding": 1, "dilation": (1, 2, 1), "groups": 2}
    g = Graph()
    tx, tw, tb = (
        g.input(n, a.shape, "float64", free=()) for n, a in zip("xwb", (x, w, b), strict=True)
    )
    y = F.conv3d(tx, tw, tb, **kwargs)
    got = evaluate([y, *grad((y * y).sum(), [tx, tw, tb])], {"x": x, "w": w, "b": b})
    xt, wt, bt = (torch.tensor(a, requires_grad=True) for a in (x, w, b))
    want = TF.conv3d(xt, wt, bt, **kwargs)
    (want * want).sum().backward()
    np.testing.assert_allclose(got[0], want.detach().numpy(), rtol=1e-10)
    for mine, t in zip(got[1:], (xt, wt, bt), strict=True):
        np.testing.assert_allclose(mine, t.grad.numpy(), rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize(
    ("ours", "theirs"),
    [
        (
            lambda t: F.max_pool3d(t, (3, 2, 3), (2, 1, 2), 1),
            lambda t: TF.max_pool3d(t, (3, 2, 3), (2, 1, 2), 1),
        ),
        (lambda t: F.avg_pool3d(t, 2), lambda t: TF.avg_pool3d(t, 2)),
        (
            lambda t: F.avg_pool3d(t, 3, 2, 1, count_include_pad=False),
            lambda t: TF.avg_pool3d(t, 3, 2, 1, count_include_pad=False),
        ),
        (
            lambda t: F.adaptive_avg_pool3d(t, (2, 3, 2)),
            lambda t: TF.adaptive_avg_pool3d(t, (2, 3, 2)),
        ),
    ],
    ids=["max", "avg", "avg exclude", "adaptive"],
)
def test_pools3d_values_and_gradients(ours: Any, theirs: Any) -> None:
    x = np.random.default_rng(0).permutation(2 * 2 * 5 * 6 * 5).reshape(2, 2, 5, 6, 5) / 9.0
    g = Graph()
    t = g.input("x", x.shape, "float64")
    y = ours(t)
    got, dx = evaluate([y, *grad((y * y).sum(), [t])], {"x": x})
    xt = torch.tensor(x, requires_grad=True)
    want = theirs(xt)
    (want * want).sum().backward()
    np.testing.assert_allclose(got, want.detach().numpy(), rtol=1e-12)
    np.testing.assert_allclose(dx, xt.grad.numpy(), rtol=1e-12)


def test_layers_match_pytorch() -> None:
    x = _r(2, 3, 4, 6, 6).astype(np.float32)
    ours, theirs = (
        nn.Conv3d(3, 4, (2, 3, 3), padding=(0, 1, 1)),
        torch.nn.Conv3d(3, 4, (2, 3, 3), padding=(0, 1, 1)),
    )
    ours.load_state_dict({k: v.detach().numpy() for k, v in theirs.state_dict().items()})
    t = Graph().input("x", x.shape)
    outs = evaluate(
        [ours(t), nn.MaxPool3d(2)(t), nn.AvgPool3d(2)(t), nn.AdaptiveAvgPool3d(1)(t)], {"x": x}
    )
    xt = torch.tensor(x)
    wants = [
        theirs(xt),
        torch.nn.MaxPool3d(2)(xt),
        torch.nn.AvgPool3d(2)(xt),
        torch.nn.AdaptiveAvgPool3d(1)(xt),
    ]
    for got, want in zip(outs, wants, strict=True):
        np.testing.assert_allclose(got, want.detach().numpy(), rtol=1e-5, atol=1e-5)
    bound = 1.0 / np.sqrt(3 * 2 * 3 * 3)
    fresh = nn.Conv3d(3, 4, (2, 3, 3), rng=0)
    assert 0.8 * bound < np.abs(fresh.weight.value).max() <= bound
