"""Row kernels reading float16 values and writing them (mixed precision): a float16
value widened into a float32 norm or softmax is read as stored, the float16 chains
before it computed in f16 as their own kernels would, and a cast of the row program's
output to float16 is rounded as the kernel stores it. No cast runs as a kernel of its
own; every value matches the numpy reference, NaN, infinities and float16 overflow
included.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from asgrad.gpu import Device
from asgrad.gpu.plan import build_plan
from asgrad.gpu.plan.dispatch_kinds import count_kinds
from asgrad.tensor import Graph, Tensor, compile
from asgrad.tensor.api.nn_functional import layer_norm

pytestmark = pytest.mark.gpu

# one float16 ulp, relative: a float32 row value within float32 rounding of the
# reference's may round to the float16 neighbour of the reference's
HALF_ULP = 2.0**-10


def _both(outs: list[Tensor], feeds: dict[str, np.ndarray], device: Device) -> tuple[Any, Any]:
    """The GPU's values, the numpy reference's and the GPU's dispatch kinds."""
    gpu = compile(outs, backend="gpu")
    got = gpu(feeds)
    with np.errstate(all="ignore"):  # numpy warns where NaN and infinities flow
        want = compile(outs, backend="cpu")(feeds)
    schedule = gpu.executable.schedule  # type: ignore[attr-defined]  # the GPU executable has one
    return got, want, count_kinds(build_plan(schedule, feeds, device).commands)


def _normal(*shape: int, seed: int = 0, dtype: Any = np.float32) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


def test_a_layer_norm_reads_a_float16_residual_branch_and_stores_float16(
    device: Device,
) -> None:
    B, T, D = 3, 5, 32
    feeds = {
        "x": _normal(B, T, D),
        "h": _normal(B, T, D, seed=1, dtype=np.float16),
        "b": _normal(D, seed=2),
        "w": _normal(D, seed=3),
        "wb": _normal(D, seed=4),
    }
    feeds["h"][0, 0, 3] = np.nan
    feeds["h"][1, 2, 5] = np.inf
    feeds["b"][9] = 600.0
    feeds["h"][2, 3, 9] = 65400.0  # + 600 overflows float16: inf, a NaN row after the norm
    g = Graph()
    x, h, b, w, wb = (g.input(k, v.shape, str(v.dtype), free=()) for k, v in feeds.items())
    s = x + (h + b.astype("float16")).astype("float32")  # the mixed step's residual sum
    y = layer_norm(s, w, wb)
    out = (y * 4e4).astype("float16")  # past 65504 (inf) where |y| > 1.64
    later = s * 2.0  # reads the sum the norm kernel stores
    got, want, kinds = _both([out, later], feeds, device)
    assert got[0].dtype == np.float16
    np.testing.assert_array_equal(np.isnan(got[0]), np.isnan(want[0]))
    np.testing.assert_array_equal(np.isinf(got[0]), np.isinf(want[0]))
    assert np.isinf(want[0]).any()
    assert np.isnan(want[0]).any()
    np.testing.assert_allclose(got[0], want[0], rtol=HALF_ULP, atol=1e-3, equal_nan=True)
    np.testing.assert_array_equal(got[1], want[1])  # elementwise only: exact
    assert kinds["norm"] == 1
    assert kinds["elementwise"] == 1  # ``later``: no cast kernel of its own


def test_softmax_reads_float16_scores_and_stores_float16_probabilities(device: Device) -> None:
    B, H, T = 2, 3, 8
    feeds = {
        "q": _normal(B, H, T, T, dtype=np.float16),
        "mask": np.triu(np.full((T, T), -1e9, np.float32), 1),
    }
    feeds["q"][0, 0, 1, :] = [np.inf] * 2 + [0.0] * (T - 2)  # two infinities: NaN row
    feeds["q"][1, 2, 3, 0] = np.nan
    g = Graph()
    q, mask = (g.input(k, v.shape, str(v.dtype), free=()) for k, v in feeds.items())
    scores = (q * g.constant(np.float16(0.125))).astype("float32") + mask
    p = scores.softmax(-1).astype("float16")
    got, want, kinds = _both([p], feeds, device)
    assert got[0].dtype == np.float16
    np.testing.assert_array_equal(np.isnan(got[0]), np.isnan(want[0]))
    assert np.isnan(want[0]).any()
    np.testing.assert_allclose(got[0], want[0], rtol=HALF_ULP, atol=1e-6, equal_nan=True)
    assert dict(kinds) == {"softmax": 1}


def test_a_float16_norm_still_rounds_once(device: Device) -> None:
    # a row op of float16 (not mixed): read f16, computed in f32, rounded once
    feeds = {"x": _normal(4, 16, dtype=np.float16)}
    feeds["x"][1, 3] = np.inf
    g = Graph()
    x = g.input("x", (4, 16), "float16", free=())
    got, want, _ = _both([x.softmax(-1), x.log_softmax(-1)], feeds, device)
    for a, b in zip(got, want, strict=True):
        assert a.dtype == np.float16
        np.testing.assert_allclose(a, b, rtol=HALF_ULP, atol=1e-6, equal_nan=True)


def test_a_sum_holding_a_row_program_is_stored_once_for_its_other_readers(
    device: Device, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the mixed step's residual gradient: each layer's norm gradient added to the sum so
    # far, read cast to float16 (a product's input) and by the next layer's sum
    import asgrad.gpu.plan.fusion_rows as fusion_rows

    B, T, D = 3, 5, 32
    feeds = {
        "g": _normal(B, T, D),
        "x1": _normal(B, T, D, seed=1),
        "x2": _normal(B, T, D, seed=2),
        "x3": _normal(B, T, D, seed=3),
        "w": _normal(D, seed=4),
        "b": _normal(D, seed=5),
    }
    feeds["g"][1, 2, 7] = 7e4  # overflows float16 in every cast below: inf
    feeds["x2"][0, 1, 4] = np.nan  # a NaN row from the second norm on
    g = Graph()
    gr, x1, x2, x3, w, b = (g.input(k, v.shape, free=()) for k, v in feeds.items())
    s1 = gr + layer_norm(x1, w, b)
    s2 = s1 + layer_norm(x2, w, b)
    s3 = s2 + layer_norm(x3, w, b)
    outs = [s1.astype("float16"), s2.astype("float16"), s3.astype("float16"), s3 * 2.0]
    stages: list[int] = []
    launch = fusion_rows.row_kernel_stores

    def counted(program: Any, *args: Any) -> Any:
        stages.append(len(program.stages))
        return launch(program, *args)

    monkeypatch.setattr(fusion_rows, "row_kernel_stores", counted)
    got, want, kinds = _both(outs, feeds, device)
    for a, e in zip(got[:3], want[:3], strict=True):
        assert a.dtype == np.float16
        np.testing.assert_array_equal(np.isinf(a), np.isinf(e))
        np.testing.assert_array_equal(np.isnan(a), np.isnan(e))
        np.testing.assert_allclose(a, e, rtol=HALF_ULP, atol=1e-3, equal_nan=True)
    assert np.isinf(want[0]).any()
    assert np.isnan(want[1]).any()
    np.testing.assert_allclose(got[3], want[3], rtol=1e-5, atol=1e-5, equal_nan=True)
    assert kinds["norm"] == 3, kinds  # one kernel a norm, each storing its sum
    assert kinds["elementwise"] == 1, kinds  # ``s3 * 2``, reading the stored s3: no cast
    # no kernel repeats an earlier layer's norm (its mean and variance: two stages)
    assert max(stages, default=0) == 2, stages


def test_a_norm_read_by_two_kernels_is_stored_by_the_first(device: Device) -> None:
    # the final norm's gradient of a mixed step: cast to float16 for a product, and
    # added to the residual's gradient
    B, T, D = 3, 5, 32
    feeds = {
        "x": _normal(B, T, D),
        "w": _normal(D, seed=1),
        "b": _normal(D, seed=3),
        "r": _normal(B, T, D, seed=2),
    }
    feeds["w"][3] = 7e4  # overflows float16: inf in the cast, finite in the sum
    feeds["x"][2, 4, 0] = np.nan
    g = Graph()
    x, w, b, r = (g.input(k, v.shape, free=()) for k, v in feeds.items())
    y = layer_norm(x, w, b)
    got, want, kinds = _both([y.astype("float16"), (y + r) * 3.0], feeds, device)
    assert got[0].dtype == np.float16
    np.testing.assert_array_equal(np.isinf(got[0]), np.isinf(want[0]))
    assert np.isinf(want[0]).any()
    np.testing.assert_allclose(got[0], want[0], rtol=HALF_ULP, atol=1e-3, equal_nan=True)
    np.testing.assert_allclose(got[1], want[1], rtol=1e-5, atol=1e-4, equal_nan=True)
    assert kinds["norm"] == 1, kinds  # the float16 output, storing y beside it
    assert kinds["elementwise"] == 1, kinds  # ``(y + r) * 3`` reads the stored y
