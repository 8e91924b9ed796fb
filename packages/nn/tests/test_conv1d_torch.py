"""1-D convolution and pooling against PyTorch: functional values and gradients in
float64, and the layers with PyTorch's weights (PyTorch's answers saved as fixtures)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import asgrad.nn as nn
import asgrad.nn.functional as F
from asgrad.autograd import grad
from asgrad.tensor import Graph, evaluate

Reference = Callable[..., Any]  # the torch_reference fixture


def _r(*shape: int) -> np.ndarray:
    return np.random.default_rng(sum(shape)).standard_normal(shape)


@pytest.mark.parametrize(
    ("kwargs", "wshape"),
    [
        ({}, (4, 3, 3)),
        ({"stride": 2, "padding": 2, "dilation": 2, "groups": 3}, (6, 1, 3)),
        ({"padding": "same"}, (2, 3, 5)),
    ],
)
def test_conv1d_values_and_gradients(
    kwargs: dict[str, Any], wshape: tuple[int, ...], torch_reference: Reference
) -> None:
    x, w, b = _r(2, 3, 11), _r(*wshape), _r(wshape[0])
    g = Graph()
    tx, tw, tb = (
        g.input(n, a.shape, "float64", free=()) for n, a in zip("xwb", (x, w, b), strict=True)
    )
    y = F.conv1d(tx, tw, tb, **kwargs)
    got = evaluate([y, *grad((y * y).sum(), [tx, tw, tb])], {"x": x, "w": w, "b": b})

    def run(torch: Any, *arrays: np.ndarray) -> Any:
        xt, wt, bt = (torch.tensor(a, requires_grad=True) for a in arrays)
        want = torch.nn.functional.conv1d(xt, wt, bt, **kwargs)
        (want * want).sum().backward()
        return want, [xt.grad, wt.grad, bt.grad]

    want, want_grads = torch_reference(run, x, w, b)
    np.testing.assert_allclose(got[0], want, rtol=1e-10)
    for mine, theirs in zip(got[1:], want_grads, strict=True):
        np.testing.assert_allclose(mine, theirs, rtol=1e-9, atol=1e-12)


def test_conv_transpose1d_values_and_gradients(torch_reference: Reference) -> None:
    x, w = _r(2, 4, 6), _r(4, 3, 3)
    g = Graph()
    tx, tw = g.input("x", x.shape, "float64"), g.input("w", w.shape, "float64", free=())
    y = F.conv_transpose1d(tx, tw, stride=2, padding=1, output_padding=1, groups=1)
    got = evaluate([y, *grad((y * y).sum(), [tx, tw])], {"x": x, "w": w})

    def run(torch: Any, x: np.ndarray, w: np.ndarray) -> Any:
        xt, wt = torch.tensor(x, requires_grad=True), torch.tensor(w, requires_grad=True)
        want = torch.nn.functional.conv_transpose1d(xt, wt, stride=2, padding=1, output_padding=1)
        (want * want).sum().backward()
        return want, xt.grad, wt.grad

    want, want_dx, want_dw = torch_reference(run, x, w)
    np.testing.assert_allclose(got[0], want, rtol=1e-10)
    np.testing.assert_allclose(got[1], want_dx, rtol=1e-9)
    np.testing.assert_allclose(got[2], want_dw, rtol=1e-9)


@pytest.mark.parametrize(
    ("ours", "theirs"),
    [
        (lambda t: F.max_pool1d(t, 3, 2, 1), lambda TF, t: TF.max_pool1d(t, 3, 2, 1)),
        (lambda t: F.avg_pool1d(t, 3, 2, 1), lambda TF, t: TF.avg_pool1d(t, 3, 2, 1)),
        (
            lambda t: F.avg_pool1d(t, 3, 2, 1, count_include_pad=False),
            lambda TF, t: TF.avg_pool1d(t, 3, 2, 1, count_include_pad=False),
        ),
        (lambda t: F.adaptive_avg_pool1d(t, 4), lambda TF, t: TF.adaptive_avg_pool1d(t, 4)),
    ],
    ids=["max", "avg", "avg exclude pad", "adaptive"],
)
def test_pools_values_and_gradients(ours: Any, theirs: Any, torch_reference: Reference) -> None:
    x = _r(2, 3, 9)
    g = Graph()
    t = g.input("x", x.shape, "float64")
    y = ours(t)
    got, dx = evaluate([y, *grad((y * y).sum(), [t])], {"x": x})

    def run(torch: Any, x: np.ndarray) -> Any:
        xt = torch.tensor(x, requires_grad=True)
        want = theirs(torch.nn.functional, xt)
        (want * want).sum().backward()
        return want, xt.grad

    want, want_dx = torch_reference(run, x)
    np.testing.assert_allclose(got, want, rtol=1e-12)
    np.testing.assert_allclose(dx, want_dx, rtol=1e-12)


def test_layers_load_pytorch_weights_and_agree(torch_reference: Reference) -> None:
    x = _r(2, 6, 12).astype(np.float32)

    def run(torch: Any, x: np.ndarray) -> Any:
        layers = [
            torch.nn.Conv1d(6, 4, 3, stride=2, padding=1),
            torch.nn.Conv1d(6, 6, 3, groups=2, bias=False),
            torch.nn.ConvTranspose1d(6, 2, 4, 2, 1),
        ]
        pools = [torch.nn.MaxPool1d(2), torch.nn.AvgPool1d(3, 1, 1), torch.nn.AdaptiveAvgPool1d(5)]
        return (
            [(dict(layer.state_dict()), layer(torch.tensor(x))) for layer in layers],
            [pool(torch.tensor(x)) for pool in pools],
        )

    layers, pools = torch_reference(run, x)
    convs = [
        nn.Conv1d(6, 4, 3, stride=2, padding=1),
        nn.Conv1d(6, 6, 3, groups=2, bias=False),
        nn.ConvTranspose1d(6, 2, 4, stride=2, padding=1),
    ]
    for ours, (state, want) in zip(convs, layers, strict=True):
        assert {k: v.shape for k, v in ours.state_dict().items()} == {
            k: v.shape for k, v in state.items()
        }
        ours.load_state_dict(state)
        (got,) = evaluate([ours(Graph().input("x", x.shape))], {"x": x})
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    ours_pools = [nn.MaxPool1d(2), nn.AvgPool1d(3, 1, 1), nn.AdaptiveAvgPool1d(5)]
    for pool, want in zip(ours_pools, pools, strict=True):
        (got,) = evaluate([pool(Graph().input("x", x.shape))], {"x": x})
        np.testing.assert_allclose(got, want, rtol=1e-6)


def test_default_initialisation_has_pytorchs_bounds() -> None:
    layer = nn.Conv1d(4, 8, 5, rng=0)
    bound = 1.0 / np.sqrt(4 * 5)
    assert np.abs(layer.weight.value).max() <= bound
    assert np.abs(layer.weight.value).max() > 0.8 * bound
    assert layer.bias is not None
    assert np.abs(layer.bias.value).max() <= bound
