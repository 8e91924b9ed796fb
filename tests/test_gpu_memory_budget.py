"""A training step under a memory budget on the GPU: its device buffers fit, losses unchanged."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from asgrad import nn
from asgrad.tensor import Graph, MemoryBudgetError, Program, Tensor

pytestmark = pytest.mark.gpu

VOCAB, BATCH, CONTEXT, DIM = 23, 16, 32, 32


class _TinyLM(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        rng = np.random.default_rng(0)
        self.embed = nn.Embedding(VOCAB, DIM, rng=rng)
        self.block = nn.TransformerBlock(DIM, 4, 4 * DIM, 0.0, causal=True, rng=rng)
        self.head = nn.Linear(DIM, VOCAB, rng=rng)

    def forward(self, ids: Tensor) -> Tensor:
        logits: Tensor = self.head(self.block(self.embed(ids)))
        return logits


def _step(budget: int | None) -> Program:
    model = _TinyLM()
    g = Graph()
    x = g.input("x", (BATCH, CONTEXT), "int64")
    y = g.input("y", (BATCH, CONTEXT), "int64")
    loss = nn.cross_entropy(model(x), y, axis=-1)
    optimizer = nn.AdamW(model.parameters(), lr=1e-2)
    return optimizer.compile(loss, backend="gpu", memory_budget=budget)


def _device_bytes(step: Program, feeds: dict[str, np.ndarray]) -> int:
    """The variables, feeds and constants, and the buffers of the step's GPU plan."""
    plan = step.memory()
    transient = step.executable.transient_bytes(feeds)  # type: ignore[attr-defined]
    return int(plan.parameters + plan.state + plan.inputs + transient)


def _budgeted_step_fits() -> None:
    """The check, run in a fresh process (below)."""
    rng = np.random.default_rng(1)
    batches = [
        {
            "x": rng.integers(0, VOCAB, (BATCH, CONTEXT)),
            "y": rng.integers(0, VOCAB, (BATCH, CONTEXT)),
        }
        for _ in range(3)
    ]
    free = _step(None)
    unbudgeted = _device_bytes(free, batches[0])
    # the smallest reachable is ~0.97x on this model (3.20 of 3.30 MB on lavapipe; 3.41 of
    # 3.63 MB before row kernels took the chains around them)
    budget = int(unbudgeted * 0.98)
    budgeted = _step(budget)
    assert _device_bytes(budgeted, batches[0]) <= budget < unbudgeted
    assert [float(free(b)[0]) for b in batches] == [float(budgeted(b)[0]) for b in batches]


def test_budgeted_gpu_step_fits_its_device_buffers_and_trains_the_same() -> None:
    # A GPU plan's buffers depend on what the process built before (its caches and when
    # values die): 0.97x of the unbudgeted buffers is reachable from a fresh process, up
    # to 1.07x after other tests in the same worker. The check runs in a fresh process.
    code = (
        f"import sys; sys.path.insert(0, {str(Path(__file__).parent)!r}); "
        "import test_gpu_memory_budget as t; t._budgeted_step_fits()"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=600, check=False
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_gpu_budget_the_schedule_meets_but_the_device_cannot_names_the_device_peak() -> None:
    with pytest.raises(MemoryBudgetError) as planned:
        _step(1)
    schedule_floor = planned.value.reachable  # the smallest peak of the schedule's plan
    with pytest.raises(MemoryBudgetError, match="on the gpu backend") as caught:
        _step(schedule_floor)
    assert caught.value.reachable > schedule_floor == caught.value.budget
