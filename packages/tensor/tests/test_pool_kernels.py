"""The max-pooling kernels on ties, NaN and every window geometry, against loops.

The kernels find each window's first maximum from per-offset masks; these cases
stress what the registered cases (distinct values) do not: many equal values,
windows tiling the input exactly, remainders, overlap and padding.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from asgrad.tensor.ir.registry import get_op

GEOMETRIES: list[tuple[tuple[int, int, int, int], dict[str, Any]]] = [
    ((2, 3, 8, 6), {"kernel_size": (2, 2), "stride": (2, 2), "padding": (0, 0)}),
    ((1, 2, 9, 6), {"kernel_size": (3, 3), "stride": (3, 3), "padding": (0, 0)}),
    ((1, 2, 7, 5), {"kernel_size": (2, 2), "stride": (2, 2), "padding": (0, 0)}),
    ((1, 2, 6, 6), {"kernel_size": (3, 3), "stride": (1, 1), "padding": (1, 1)}),
    ((2, 1, 7, 8), {"kernel_size": (3, 2), "stride": (2, 3), "padding": (1, 1)}),
    ((1, 1, 4, 4), {"kernel_size": (1, 1), "stride": (1, 1), "padding": (0, 0)}),
]


def _first_argmax(x: np.ndarray, attrs: dict[str, Any]) -> dict[tuple[int, ...], tuple[int, int]]:
    """(n, c, oy, ox) -> the input cell of the window's first maximum (loops)."""
    (kh, kw), (sh, sw), (ph, pw) = attrs["kernel_size"], attrs["stride"], attrs["padding"]
    n, c, h, w = x.shape
    oh, ow = (h + 2 * ph - kh) // sh + 1, (w + 2 * pw - kw) // sw + 1
    found: dict[tuple[int, ...], tuple[int, int]] = {}
    for b, ch, oy, ox in np.ndindex(n, c, oh, ow):
        best, where = -np.inf, (-1, -1)
        for i in range(kh):
            for j in range(kw):
                r, cc = oy * sh + i - ph, ox * sw + j - pw
                if 0 <= r < h and 0 <= cc < w and x[b, ch, r, cc] > best:
                    best, where = x[b, ch, r, cc], (r, cc)
        found[(b, ch, oy, ox)] = where
    return found


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize(("shape", "attrs"), GEOMETRIES)
def test_max_pool_backward_and_select_with_ties(
    shape: tuple[int, int, int, int], attrs: dict[str, Any], dtype: str
) -> None:
    rng = np.random.default_rng(3)
    x = rng.integers(-2, 2, shape).astype(dtype)  # many ties in every window
    pooled = get_op("max_pool2d").kernel(x, **attrs)
    g = rng.standard_normal(pooled.shape).astype(dtype)
    h = rng.standard_normal(shape).astype(dtype)
    dx = get_op("max_pool2d_backward").kernel(g, x, **attrs)
    sel = get_op("max_pool2d_select").kernel(h, x, **attrs)
    assert dx.dtype == sel.dtype == np.dtype(dtype)
    assert dx.shape == x.shape
    assert sel.shape == pooled.shape
    want_dx, want_sel = np.zeros(shape), np.zeros(pooled.shape)
    for (b, ch, oy, ox), (r, cc) in _first_argmax(x, attrs).items():
        want_dx[b, ch, r, cc] += g[b, ch, oy, ox]
        want_sel[b, ch, oy, ox] = h[b, ch, r, cc]
    np.testing.assert_allclose(dx, want_dx, rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(sel, want_sel.astype(dtype))


@pytest.mark.parametrize(("shape", "attrs"), GEOMETRIES[:2])
def test_max_pool_backward_nan(shape: tuple[int, int, int, int], attrs: dict[str, Any]) -> None:
    """A NaN never wins a window except at its first offset, where nothing beats it."""
    x = np.arange(np.prod(shape), dtype=np.float32).reshape(shape)
    x[0, 0, 0, 0] = np.nan  # offset 0 of window (0, 0): it keeps the gradient
    x[0, 0, 1, 1] = np.nan  # the last offset of window (0, 0) for 2x2 (never wins)
    x[0, 1, 0, 1] = np.nan  # not offset 0: the window's maximum wins
    pooled = get_op("max_pool2d").kernel(np.nan_to_num(x), **attrs)
    g = np.ones(pooled.shape, dtype=np.float32)
    dx = get_op("max_pool2d_backward").kernel(g, x, **attrs)
    assert dx[0, 0, 0, 0] == 1.0
    assert dx[0, 0].sum() == pooled.shape[2] * pooled.shape[3]
    assert dx[0, 1, 0, 1] == 0.0
    assert dx[0, 1].sum() == pooled.shape[2] * pooled.shape[3]
    assert not np.isnan(dx).any()


def test_max_pool_backward_keeps_the_gradient_bits() -> None:
    """Tiled windows: the winner gets g exactly (signed zeros, infinities), others +0."""
    x = np.array([[[[1.0, 0.0], [0.0, 0.0]]]], dtype=np.float32)
    attrs = {"kernel_size": (2, 2), "stride": (2, 2), "padding": (0, 0)}
    for value in (-0.0, np.inf, -np.inf):
        g = np.full((1, 1, 1, 1), value, dtype=np.float32)
        dx = get_op("max_pool2d_backward").kernel(g, x, **attrs)
        assert dx[0, 0, 0, 0] == value
        assert np.signbit(dx[0, 0, 0, 0]) == np.signbit(value)
        assert not np.signbit(dx[0, 0, 1, 1])
        assert dx[0, 0, 1, 1] == 0.0
