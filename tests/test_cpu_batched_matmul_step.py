"""The benchmark transformer's compiled training step (its model, heads of 64 over 128
positions: attention's products above `batched_matmul.BATCH_MIN_MNK`) with their batch
over BLAS's threads (`asgrad.tensor.cpu.jit.batched_matmul`), against the numpy path.

Each matrix's product is then one BLAS call on one thread, so the compiled step with the
route agrees with the compiled step without it to np.matmul's own thread-count rounding
(bit for bit where OpenBLAS rounds its threaded and one-thread products alike), and with
the numpy reference path as closely as the compiled path itself does.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from asgrad import nn
from asgrad.tensor import Graph
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
    V, T, D, H, FF, B = 64, 128, 128, 2, 256, 2
    model = asgrad_workloads.TinyGPT(V, T, D, H, FF, 1)
    model.initialize(0)
    g = Graph("transformer")
    idx, tgt = g.input("idx", (B, T), "int64"), g.input("tgt", (B * T,), "int64")
    loss = nn.cross_entropy(model(idx).reshape(B * T, V), tgt)
    program = nn.AdamW(model.parameters(), lr=1e-3).compile(loss, backend="cpu")
    rng = np.random.default_rng(0)
    feeds = {
        "idx": rng.integers(0, V, (B, T)).astype(np.int64),
        "tgt": rng.integers(0, V, (B * T,)).astype(np.int64),
    }
    losses = [float(program(feeds)[0]) for _ in range(steps)]
    params = [v.value.copy() for v in program.schedule.variables()]
    assert isinstance(program.executable, CPUExecutable)
    (fn,) = program.executable._fns.values()
    return losses, params, fn.source


@pytest.mark.skipif(numba.config.NUMBA_NUM_THREADS < 2, reason="Numba starts one thread here")
def test_the_transformer_step_with_the_batch_over_threads_matches_the_numpy_path() -> None:
    threads.set_threads(2)
    threaded = _run(True, "parallel")
    plain = _run(True, "serial")
    reference = _run(False, None)
    # The forward products q @ k^T and p @ v and the backward products of their four
    # gradients (transposed operands).
    assert threaded[2].count("_batched_matmul(") == 6
    assert "_batched_matmul" not in reference[2]
    # The compiled path's own float32 differences from the reference (its fused kernels)
    # and np.matmul's threads' rounding, after three steps of AdamW.
    for other in (plain, reference):
        np.testing.assert_allclose(threaded[0], other[0], rtol=1e-5)
        for a, b in zip(threaded[1], other[1], strict=True):
            np.testing.assert_allclose(a, b, rtol=1e-4, atol=5e-5)
