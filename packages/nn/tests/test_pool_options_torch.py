"""max_pool2d with dilation, ceil_mode and return_indices, avg_pool2d with ceil_mode
and divisor_override: values, indices and gradients against PyTorch's committed answers."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import asgrad.nn as nn
import asgrad.nn.functional as F
from asgrad.autograd import grad
from asgrad.tensor import Graph, evaluate

Reference = Callable[..., Any]  # the torch_reference fixture (PyTorch's answers)


def _x(*shape: int) -> np.ndarray:
    rng = np.random.default_rng(sum(shape))
    return rng.permutation(int(np.prod(shape))).reshape(shape) / 7.0 - 3.0  # no ties


MAX = [
    {"kernel_size": 2, "ceil_mode": True},
    {"kernel_size": 3, "stride": 2, "padding": 1, "ceil_mode": True},
    {"kernel_size": (3, 2), "stride": (1, 2), "dilation": 2},
    {"kernel_size": 3, "stride": (3, 2), "padding": 1, "dilation": (2, 1), "ceil_mode": True},
    {"kernel_size": 2},
]


@pytest.mark.parametrize("kwargs", MAX, ids=lambda k: ",".join(f"{a}={b}" for a, b in k.items()))
def test_max_pool2d_options(kwargs: dict[str, Any], torch_reference: Reference) -> None:
    x = _x(2, 3, 9, 10)
    g = Graph()
    t = g.input("x", x.shape, "float64")
    y, idx = F.max_pool2d(t, **kwargs, return_indices=True)
    got, got_idx, dx = evaluate([y, idx, *grad((y * y).sum(), [t])], {"x": x})

    def run(torch: Any, x: np.ndarray) -> Any:
        xt = torch.tensor(x, requires_grad=True)
        want, want_idx = torch.nn.functional.max_pool2d(xt, **kwargs, return_indices=True)
        (want * want).sum().backward()
        return want, want_idx, xt.grad

    want, want_idx, want_dx = torch_reference(run, x)
    np.testing.assert_allclose(got, want, rtol=1e-12)
    np.testing.assert_array_equal(got_idx, want_idx)
    assert got_idx.dtype == np.int64
    np.testing.assert_allclose(dx, want_dx, rtol=1e-12)


AVG = [
    {"kernel_size": 2, "ceil_mode": True},
    {"kernel_size": 3, "stride": 2, "padding": 1, "ceil_mode": True},
    {"kernel_size": 3, "stride": 2, "padding": 1, "ceil_mode": True, "count_include_pad": False},
    {"kernel_size": 3, "stride": 2, "padding": 1, "divisor_override": 4},
    {"kernel_size": (2, 3), "stride": 2, "ceil_mode": True, "divisor_override": 5},
]


@pytest.mark.parametrize("kwargs", AVG, ids=lambda k: ",".join(f"{a}={b}" for a, b in k.items()))
def test_avg_pool2d_options(kwargs: dict[str, Any], torch_reference: Reference) -> None:
    x = _x(2, 2, 9, 8)
    g = Graph()
    t = g.input("x", x.shape, "float64")
    y = F.avg_pool2d(t, **kwargs)
    got, dx = evaluate([y, *grad((y * y).sum(), [t])], {"x": x})

    def run(torch: Any, x: np.ndarray) -> Any:
        xt = torch.tensor(x, requires_grad=True)
        want = torch.nn.functional.avg_pool2d(xt, **kwargs)
        (want * want).sum().backward()
        return want, xt.grad

    want, want_dx = torch_reference(run, x)
    np.testing.assert_allclose(got, want, rtol=1e-12)
    np.testing.assert_allclose(dx, want_dx, rtol=1e-12)


def test_layers_take_the_options(torch_reference: Reference) -> None:
    x = _x(1, 2, 7, 7).astype(np.float32)
    g = Graph()
    t = g.input("x", x.shape)
    values, indices = nn.MaxPool2d(3, 2, 1, dilation=1, return_indices=True, ceil_mode=True)(t)
    avg = nn.AvgPool2d(2, ceil_mode=True, divisor_override=3)(t)
    got_v, got_i, got_a = evaluate([values, indices, avg], {"x": x})

    def run(torch: Any, x: np.ndarray) -> Any:
        xt = torch.tensor(x)
        want_v, want_i = torch.nn.MaxPool2d(3, 2, 1, return_indices=True, ceil_mode=True)(xt)
        return want_v, want_i, torch.nn.AvgPool2d(2, ceil_mode=True, divisor_override=3)(xt)

    want_v, want_i, want_a = torch_reference(run, x)
    np.testing.assert_allclose(got_v, want_v)
    np.testing.assert_array_equal(got_i, want_i)
    np.testing.assert_allclose(got_a, want_a, rtol=1e-6)
