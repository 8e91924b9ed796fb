"""The benchmark transformer's compiled training step with its attention products' batch
over threads (`asgrad.tensor.cpu.jit.batched_matmul`) against the numpy reference path.

The route calls ``np.matmul`` on runs of matrices, so the compiled step with it agrees
with the compiled step without it bit for bit, and with the numpy reference path as
closely as the compiled path itself does.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from asgrad.tensor.cpu import CPUExecutable, jit
from asgrad.tensor.cpu.jit import batched_matmul, threads

numba = pytest.importorskip("numba")
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
asgrad_workloads: Any = importlib.import_module("asgrad_workloads")


@pytest.fixture(autouse=True)
def _restore() -> Iterator[None]:
    yield
    batched_matmul.FORCE[0] = None
    threads.set_threads(None)
    jit.set_enabled(None)


def _run(compiled: bool, force: str | None, steps: int = 3) -> tuple[list[float], list[Any], str]:
    jit.set_enabled(compiled)
    batched_matmul.FORCE[0] = force
    w = asgrad_workloads.build("transformer", "cpu")
    losses = [float(w.step()) for _ in range(steps)]
    params = [v.value.copy() for v in w.program.schedule.variables()]
    assert isinstance(w.program.executable, CPUExecutable)
    (fn,) = w.program.executable._fns.values()
    return losses, params, fn.source


@pytest.mark.skipif(numba.config.NUMBA_NUM_THREADS < 2, reason="Numba starts one thread here")
def test_the_transformer_step_with_the_batch_over_threads_matches_the_numpy_path() -> None:
    threads.set_threads(2)
    threaded = _run(True, "parallel")
    plain = _run(True, "serial")
    reference = _run(False, None)
    # Per block, the forward products q @ k^T and p @ v and the backward products of
    # their four gradients (transposed operands): two blocks.
    assert threaded[2].count("_batched_matmul(") == 2 * 6
    assert "_batched_matmul" not in reference[2]
    assert threaded[0] == plain[0]
    for a, b in zip(threaded[1], plain[1], strict=True):
        np.testing.assert_array_equal(a, b, strict=True)
    # The compiled path's own float32 differences from the reference (its fused
    # kernels), after three steps of AdamW: about 1e-5 at most in a parameter.
    np.testing.assert_allclose(threaded[0], reference[0], rtol=1e-5)
    for a, b in zip(threaded[1], reference[1], strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=5e-5)
