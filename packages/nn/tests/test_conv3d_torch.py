"""3-D convolution and pooling against PyTorch: values and gradients in float64, and
the layers with PyTorch's weights (PyTorch's answers saved as fixtures)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import asgrad.nn as nn
import asgrad.nn.functional as F
from asgrad.autograd import grad
from asgrad.tensor import Graph, evaluate

Reference = Callable[..., Any]  # the torch_reference fixture (PyTorch's saved answers)


def _torch_values_and_grads(
    torch_reference: Reference, op: str, arrays: tuple[np.ndarray, ...], kwargs: dict[str, Any]
) -> Any:
    """PyTorch's ``op(*arrays, **kwargs)`` and the gradients of its sum of squares."""

    def run(torch: Any, *arrays: np.ndarray) -> Any:
        ts = [torch.tensor(a, requires_grad=True) for a in arrays]
        want = getattr(torch.nn.functional, op)(*ts, **kwargs)
        (want * want).sum().backward()
        return want, [t.grad for t in ts]

    return torch_reference(run, *arrays)


def _r(*shape: int) -> np.ndarray:
    return np.random.default_rng(sum(shape)).standard_normal(shape)


def test_conv3d_values_and_gradients(torch_reference: Reference) -> None:
    x, w, b = _r(2, 4, 5, 4, 5), _r(6, 2, 3, 2, 3), _r(6)
    kwargs: dict[str, Any] = {"stride": (2, 1, 2), "padding": 1, "dilation": (1, 2, 1), "groups": 2}
    g = Graph()
    tx, tw, tb = (
        g.input(n, a.shape, "float64", free=()) for n, a in zip("xwb", (x, w, b), strict=True)
    )
    y = F.conv3d(tx, tw, tb, **kwargs)
    got = evaluate([y, *grad((y * y).sum(), [tx, tw, tb])], {"x": x, "w": w, "b": b})
    want, want_grads = _torch_values_and_grads(torch_reference, "conv3d", (x, w, b), kwargs)
    np.testing.assert_allclose(got[0], want, rtol=1e-10)
    for mine, theirs in zip(got[1:], want_grads, strict=True):
        np.testing.assert_allclose(mine, theirs, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize(
    ("op", "args", "kwargs"),
    [
        ("max_pool3d", ((3, 2, 3), (2, 1, 2), 1), {}),
        ("avg_pool3d", (2,), {}),
        ("avg_pool3d", (3, 2, 1), {"count_include_pad": False}),
        ("adaptive_avg_pool3d", ((2, 3, 2),), {}),
    ],
    ids=["max", "avg", "avg exclude", "adaptive"],
)
def test_pools3d_values_and_gradients(
    op: str, args: tuple[Any, ...], kwargs: dict[str, Any], torch_reference: Reference
) -> None:
    x = np.random.default_rng(0).permutation(2 * 2 * 5 * 6 * 5).reshape(2, 2, 5, 6, 5) / 9.0
    g = Graph()
    t = g.input("x", x.shape, "float64")
    y = getattr(F, op)(t, *args, **kwargs)
    got, dx = evaluate([y, *grad((y * y).sum(), [t])], {"x": x})

    def run(torch: Any, x: np.ndarray) -> Any:
        xt = torch.tensor(x, requires_grad=True)
        want = getattr(torch.nn.functional, op)(xt, *args, **kwargs)
        (want * want).sum().backward()
        return want, xt.grad

    want, want_dx = torch_reference(run, x)
    np.testing.assert_allclose(got, want, rtol=1e-12)
    np.testing.assert_allclose(dx, want_dx, rtol=1e-12)


def test_layers_match_pytorch(torch_reference: Reference) -> None:
    x = _r(2, 3, 4, 6, 6).astype(np.float32)

    def run(torch: Any, x: np.ndarray) -> Any:
        theirs = torch.nn.Conv3d(3, 4, (2, 3, 3), padding=(0, 1, 1))
        xt = torch.tensor(x)
        wants = [
            theirs(xt),
            torch.nn.MaxPool3d(2)(xt),
            torch.nn.AvgPool3d(2)(xt),
            torch.nn.AdaptiveAvgPool3d(1)(xt),
        ]
        return dict(theirs.state_dict()), wants

    state, wants = torch_reference(run, x)
    ours = nn.Conv3d(3, 4, (2, 3, 3), padding=(0, 1, 1))
    ours.load_state_dict(state)
    t = Graph().input("x", x.shape)
    outs = evaluate(
        [ours(t), nn.MaxPool3d(2)(t), nn.AvgPool3d(2)(t), nn.AdaptiveAvgPool3d(1)(t)], {"x": x}
    )
    for got, want in zip(outs, wants, strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    bound = 1.0 / np.sqrt(3 * 2 * 3 * 3)
    fresh = nn.Conv3d(3, 4, (2, 3, 3), rng=0)
    assert 0.8 * bound < np.abs(fresh.weight.value).max() <= bound


def test_conv_transpose3d_values_gradients_and_layer(torch_reference: Reference) -> None:
    x, w, b = _r(2, 4, 3, 3, 4), _r(4, 1, 3, 2, 3), _r(2)
    kwargs: dict[str, Any] = {
        "stride": (2, 1, 2),
        "padding": (1, 0, 1),
        "output_padding": (1, 0, 1),
        "groups": 2,
    }
    g = Graph()
    tx, tw, tb = (
        g.input(n, a.shape, "float64", free=()) for n, a in zip("xwb", (x, w, b), strict=True)
    )
    y = F.conv_transpose3d(tx, tw, tb, **kwargs)
    got = evaluate([y, *grad((y * y).sum(), [tx, tw, tb])], {"x": x, "w": w, "b": b})
    want, want_grads = _torch_values_and_grads(
        torch_reference, "conv_transpose3d", (x, w, b), kwargs
    )
    np.testing.assert_allclose(got[0], want, rtol=1e-10)
    for mine, theirs in zip(got[1:], want_grads, strict=True):
        np.testing.assert_allclose(mine, theirs, rtol=1e-9, atol=1e-12)
    x32 = x.astype(np.float32)

    def run(torch: Any, x32: np.ndarray) -> Any:
        theirs = torch.nn.ConvTranspose3d(4, 2, 2, stride=2)
        return dict(theirs.state_dict()), theirs(torch.tensor(x32))

    state, want32 = torch_reference(run, x32)
    ours = nn.ConvTranspose3d(4, 2, 2, stride=2)
    ours.load_state_dict(state)
    (mine,) = evaluate([ours(Graph().input("x", x32.shape))], {"x": x32})
    np.testing.assert_allclose(mine, want32, rtol=1e-5, atol=1e-5)
