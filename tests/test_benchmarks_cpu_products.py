"""The tiles of `benchmarks/cpu_products.py`: every tile of the grid is the product of its
rows of the first operand and its columns of the second, whatever the operands' layout."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from asgrad.tensor.cpu.jit.batched_matmul import gemm_batch


@pytest.mark.parametrize("layout", ["nn", "tn", "nt"])
@pytest.mark.parametrize("grid", [(2, 2), (4, 1), (1, 2)])
def test_tiles_over_gemm_batch_make_the_whole_product(
    layout: str, grid: tuple[int, int], benchmark_script: Callable[[str], Any]
) -> None:
    bench = benchmark_script("cpu_products")
    a, b = bench.operands(256, 160, 256, layout, seed=3)
    assert (a.flags.c_contiguous, b.flags.c_contiguous) == (layout[0] == "n", layout[1] == "n")
    out = np.full((256, 256), np.nan, np.float32)
    assert gemm_batch(*bench.tiles(a, b, out, *grid))
    expected = a.astype(np.float64) @ b.astype(np.float64)
    np.testing.assert_allclose(out, expected, rtol=1e-4, atol=1e-3)
