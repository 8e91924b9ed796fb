"""Convolutions' padding_mode and max_unpool2d against PyTorch's committed answers."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import asgrad.nn as nn
import asgrad.nn.functional as F
from asgrad.autograd import grad
from asgrad.tensor import Graph, evaluate
from asgrad.tensor.errors import ShapeError

Reference = Callable[..., Any]  # the torch_reference fixture (PyTorch's answers)


@pytest.mark.parametrize("mode", ["reflect", "replicate", "circular", "zeros"])
@pytest.mark.parametrize(
    ("ours", "theirs", "shape"),
    [
        (nn.Conv1d, "Conv1d", (2, 3, 9)),
        (nn.Conv2d, "Conv2d", (2, 3, 7, 8)),
        (nn.Conv3d, "Conv3d", (1, 3, 5, 6, 5)),
    ],
    ids=["1d", "2d", "3d"],
)
def test_padding_mode_matches_pytorch(
    mode: str, ours: Any, theirs: str, shape: tuple[int, ...], torch_reference: Reference
) -> None:
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)

    def run(torch: Any, x: np.ndarray) -> Any:
        ref = getattr(torch.nn, theirs)(3, 4, 3, padding=2, padding_mode=mode)
        return dict(ref.state_dict()), ref(torch.tensor(x))

    state, want = torch_reference(run, x)
    mine = ours(3, 4, 3, padding=2, padding_mode=mode)
    mine.load_state_dict(state)
    (got,) = evaluate([mine(Graph().input("x", x.shape))], {"x": x})
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_padding_mode_is_checked() -> None:
    with pytest.raises(ShapeError, match="padding_mode must be one of"):
        nn.Conv2d(3, 4, 3, padding_mode="mirror")
    with pytest.raises(ShapeError, match="padding_mode must be one of"):
        nn.ConvTranspose2d(3, 4, 3, padding_mode="reflect")  # PyTorch: zeros only


@pytest.mark.parametrize(
    ("kwargs", "size"),
    [({"kernel_size": 2}, None), ({"kernel_size": 3, "stride": 2, "padding": 1}, (9, 8))],
)
def test_max_unpool2d_inverts_max_pool2d(
    kwargs: dict[str, Any], size: Any, torch_reference: Reference
) -> None:
    x = np.random.default_rng(1).permutation(2 * 2 * 9 * 8).reshape(2, 2, 9, 8) / 10.0
    g = Graph()
    t = g.input("x", x.shape, "float64")
    values, indices = F.max_pool2d(t, **kwargs, return_indices=True)
    out = F.max_unpool2d(values, indices, **kwargs, output_size=size)
    got, dx = evaluate([out, *grad((out * out).sum(), [t])], {"x": x})

    def run(torch: Any, x: np.ndarray) -> Any:
        xt = torch.tensor(x, requires_grad=True)
        tv, ti = torch.nn.functional.max_pool2d(xt, **kwargs, return_indices=True)
        want = torch.nn.functional.max_unpool2d(tv, ti, **kwargs, output_size=size)
        (want * want).sum().backward()
        return want, xt.grad

    want, want_dx = torch_reference(run, x)
    np.testing.assert_allclose(got, want, rtol=1e-12)
    np.testing.assert_allclose(dx, want_dx, rtol=1e-12)
    layer_out = nn.MaxUnpool2d(**kwargs)(values, indices, size)
    (again,) = evaluate([layer_out], {"x": x})
    np.testing.assert_array_equal(again, got)
