"""interpolate, the pixel shuffles and scaled_dot_product_attention against PyTorch:
values and gradients in float64 (PyTorch's answers saved as fixtures)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import asgrad.nn as nn
import asgrad.nn.functional as F
from asgrad.autograd import grad
from asgrad.tensor import Graph, Tensor, evaluate
from asgrad.tensor.errors import ArgumentError

Reference = Callable[..., Any]  # the torch_reference fixture (PyTorch's saved answers)


def _check(
    torch_reference: Reference,
    ours: Callable[..., Tensor],
    theirs: Callable[..., Any],
    *arrays: np.ndarray,
) -> None:
    """``ours(*tensors)`` against ``theirs(torch.nn.functional, *tensors)``: the values and
    the gradients of the float inputs."""
    g = Graph()
    ts = [g.input(f"a{i}", a.shape, a.dtype.name, free=()) for i, a in enumerate(arrays)]
    y = ours(*ts)
    w = np.cos(np.arange(int(np.prod(y.shape))) * 0.7).reshape(y.shape)
    floats = [t for t in ts if t.dtype == "float64"]
    grads = grad((y * g.constant(w, "float64")).sum(), floats)
    got = evaluate([y, *grads], {f"a{i}": a for i, a in enumerate(arrays)})

    def run(torch: Any, w: np.ndarray, *arrays: np.ndarray) -> Any:
        tt = [torch.tensor(a, requires_grad=a.dtype == np.float64) for a in arrays]
        want = theirs(torch.nn.functional, *tt)
        (want * torch.tensor(w)).sum().backward()
        return want, [t.grad for t in tt if t.requires_grad]

    want, want_grads = torch_reference(run, w, *arrays)
    np.testing.assert_allclose(got[0], want, rtol=1e-10, atol=1e-12)
    for mine, theirs_grad in zip(got[1:], want_grads, strict=True):
        np.testing.assert_allclose(mine, theirs_grad, rtol=1e-9, atol=1e-11)


def _r(*shape: int) -> np.ndarray:
    return np.random.default_rng(sum(shape)).standard_normal(shape)


RESIZES: list[dict[str, Any]] = [
    {"size": (7, 9), "mode": "nearest"},
    {"scale_factor": 2, "mode": "nearest"},
    {"size": (3, 2), "mode": "nearest"},
    {"size": (7, 3), "mode": "nearest-exact"},
    {"size": (7, 9), "mode": "bilinear"},
    {"size": (7, 9), "mode": "bilinear", "align_corners": True},
    {"scale_factor": 1.5, "mode": "bilinear"},
    {"scale_factor": 1.5, "mode": "bilinear", "recompute_scale_factor": True},
    {"size": (2, 3), "mode": "bilinear"},
    {"size": (8, 7), "mode": "bicubic"},
    {"size": (8, 7), "mode": "bicubic", "align_corners": True},
    {"scale_factor": (0.5, 2.0), "mode": "bicubic"},
]


@pytest.mark.parametrize("kwargs", RESIZES, ids=lambda k: "-".join(f"{v}" for v in k.values()))
def test_interpolate_2d(kwargs: dict[str, Any], torch_reference: Reference) -> None:
    _check(
        torch_reference,
        lambda t: F.interpolate(t, **kwargs),
        lambda TF, t: TF.interpolate(t, **kwargs),
        _r(2, 3, 4, 5),
    )


@pytest.mark.parametrize(
    "kwargs",
    [
        {"size": 9, "mode": "linear"},
        {"scale_factor": 2.5, "mode": "linear", "align_corners": False},
        {"size": 9, "mode": "linear", "align_corners": True},
        {"size": 3, "mode": "nearest"},
    ],
)
def test_interpolate_1d(kwargs: dict[str, Any], torch_reference: Reference) -> None:
    _check(
        torch_reference,
        lambda t: F.interpolate(t, **kwargs),
        lambda TF, t: TF.interpolate(t, **kwargs),
        _r(2, 2, 5),
    )


def test_interpolate_3d_trilinear_and_nearest(torch_reference: Reference) -> None:
    x = _r(1, 2, 3, 4, 2)
    for kwargs in (
        {"size": (5, 3, 4), "mode": "trilinear"},
        {"scale_factor": 2, "mode": "nearest"},
    ):
        _check(
            torch_reference,
            lambda t, k=kwargs: F.interpolate(t, **k),
            lambda TF, t, k=kwargs: TF.interpolate(t, **k),
            x,
        )


def test_pixel_shuffles_round_trip_and_match(torch_reference: Reference) -> None:
    _check(
        torch_reference,
        lambda t: F.pixel_shuffle(t, 2),
        lambda TF, t: TF.pixel_shuffle(t, 2),
        _r(2, 8, 3, 4),
    )
    _check(
        torch_reference,
        lambda t: F.pixel_unshuffle(t, 3),
        lambda TF, t: TF.pixel_unshuffle(t, 3),
        _r(1, 2, 6, 9),
    )


@pytest.mark.parametrize("variant", ["plain", "causal", "bool mask", "float mask", "scale"])
def test_scaled_dot_product_attention(variant: str, torch_reference: Reference) -> None:
    q, k, v = _r(2, 3, 5, 4), _r(2, 3, 6, 4), _r(2, 3, 6, 7)
    extra: tuple[np.ndarray, ...] = ()
    kwargs: dict[str, Any] = {}
    if variant == "causal":
        k, v = k[:, :, :5], v[:, :, :5]
        kwargs["is_causal"] = True
    elif variant == "bool mask":
        keep = np.random.default_rng(1).random((5, 6)) > 0.4
        keep[:, 0] = True
        extra = (keep,)
    elif variant == "float mask":
        extra = (_r(3, 1, 6),)
    elif variant == "scale":
        kwargs["scale"] = 0.25

    def ours(*t: Tensor) -> Tensor:
        return F.scaled_dot_product_attention(*t[:3], *t[3:], **kwargs)

    def theirs(TF: Any, *t: Any) -> Any:
        return TF.scaled_dot_product_attention(*t[:3], *t[3:], **kwargs)

    _check(torch_reference, ours, theirs, q, k, v, *extra)


def test_layers_and_errors(torch_reference: Reference) -> None:
    x = _r(1, 4, 3, 3).astype(np.float32)
    g = Graph()
    t = g.input("x", x.shape)
    outs = evaluate(
        [
            nn.Upsample(scale_factor=2, mode="bilinear")(t),
            nn.UpsamplingBilinear2d(scale_factor=2)(t),
            nn.UpsamplingNearest2d(size=(5, 4))(t),
            nn.PixelShuffle(2)(t),
            nn.PixelUnshuffle(3)(t),
        ],
        {"x": x},
    )

    def run(torch: Any, x: np.ndarray) -> list[Any]:
        xt = torch.tensor(x)
        return [
            torch.nn.Upsample(scale_factor=2, mode="bilinear")(xt),
            torch.nn.UpsamplingBilinear2d(scale_factor=2)(xt),
            torch.nn.UpsamplingNearest2d(size=(5, 4))(xt),
            torch.nn.PixelShuffle(2)(xt),
            torch.nn.PixelUnshuffle(3)(xt),
        ]

    for got, want in zip(outs, torch_reference(run, x), strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
    with pytest.raises(ArgumentError, match="exactly one of size and scale_factor"):
        F.interpolate(t)
    with pytest.raises(Exception, match=r"bicubic.*resizes 2-D"):
        F.interpolate(g.input("y", (1, 1, 4)), size=8, mode="bicubic")
    with pytest.raises(ArgumentError, match="dropout_p must be 0"):
        F.scaled_dot_product_attention(t, t, t, dropout_p=0.1)
