"""Convolutions' padding_mode and max_unpool2d against PyTorch (optional)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import asgrad.nn as nn
import asgrad.nn.functional as F
from asgrad.autograd import grad
from asgrad.tensor import Graph, evaluate
from asgrad.tensor.errors import ShapeError

torch = pytest.importorskip("torch")


@pytest.mark.parametrize("mode", ["reflect", "replicate", "circular", "zeros"])
@pytest.mark.parametrize(
    ("ours", "theirs", "shape"),
    [
        (nn.Conv1d, torch.nn.Conv1d, (2, 3, 9)),
        (nn.Conv2d, torch.nn.Conv2d, (2, 3, 7, 8)),
        (nn.Conv3d, torch.nn.Conv3d, (1, 3, 5, 6, 5)),
    ],
    ids=["1d", "2d", "3d"],
)
def test_padding_mode_matches_pytorch(
    mode: str, ours: Any, theirs: Any, shape: tuple[int, ...]
) -> None:
    mine, ref = (
        ours(3, 4, 3, padding=2, padding_mode=mode),
        theirs(3, 4, 3, padding=2, padding_mode=mode),
    )
    mine.load_state_dict({k: v.detach().numpy() for k, v in ref.state_dict().items()})
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    (got,) = evaluate([mine(Graph().input("x", x.shape))], {"x": x})
    np.testing.assert_allclose(got, ref(torch.tensor(x)).detach().numpy(), rtol=1e-5, atol=1e-5)


def test_padding_mode_is_checked() -> None:
    with pytest.raises(ShapeError, match="padding_mode must be one of"):
        nn.Conv2d(3, 4, 3, padding_mode="mirror")
    with pytest.raises(ShapeError, match="padding_mode must be one of"):
        nn.ConvTranspose2d(3, 4, 3, padding_mode="reflect")  # PyTorch: zeros only


@pytest.mark.parametrize(
    ("kwargs", "size"),
    [({"kernel_size": 2}, None), ({"kernel_size": 3, "stride": 2, "padding": 1}, (9, 8))],
)
def test_max_unpool2d_inverts_max_pool2d(kwargs: dict[str, Any], size: Any) -> None:
    x = np.random.default_rng(1).permutation(2 * 2 * 9 * 8).reshape(2, 2, 9, 8) / 10.0
    g = Graph()
    t = g.input("x", x.shape, "float64")
    values, indices = F.max_pool2d(t, **kwargs, return_indices=True)
    out = F.max_unpool2d(values, indices, **kwargs, output_size=size)
    got, dx = evaluate([out, *grad((out * out).sum(), [t])], {"x": x})
    xt = torch.tensor(x, requires_grad=True)
    tv, ti = torch.nn.functional.max_pool2d(xt, **kwargs, return_indices=True)
    want = torch.nn.functional.max_unpool2d(tv, ti, **kwargs, output_size=size)
    (want * want).sum().backward()
    np.testing.assert_allclose(got, want.detach().numpy(), rtol=1e-12)
    np.testing.assert_allclose(dx, xt.grad.numpy(), rtol=1e-12)
    layer_out = nn.MaxUnpool2d(**kwargs)(values, indices, size)
    (again,) = evaluate([layer_out], {"x": x})
    np.testing.assert_array_equal(again, got)
