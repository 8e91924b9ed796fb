"""A training step under a memory budget: the planned peak fits, the numbers do not change."""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest

from asgrad import nn
from asgrad.autograd import grad, recompute_loop_steps
from asgrad.tensor import Graph, MemoryBudgetError, Program, Tensor, compile

VOCAB, BATCH, CONTEXT, DIM = 23, 16, 32, 32


class _TinyLM(nn.Module):
    def __init__(self, layers: int) -> None:
        super().__init__()
        rng = np.random.default_rng(0)
        self.embed = nn.Embedding(VOCAB, DIM, rng=rng)
        self.blocks = nn.ModuleList(
            nn.TransformerBlock(DIM, 4, 4 * DIM, 0.0, causal=True, rng=rng) for _ in range(layers)
        )
        self.head = nn.Linear(DIM, VOCAB, rng=rng)

    def forward(self, ids: Tensor) -> Tensor:
        x = self.embed(ids)
        for block in self.blocks:
            x = block(x)
        logits: Tensor = self.head(x)
        return logits


def _step(budget: int | None, layers: int = 2) -> Program:
    model = _TinyLM(layers)
    g = Graph()
    x = g.input("x", (BATCH, CONTEXT), "int64")
    y = g.input("y", (BATCH, CONTEXT), "int64")
    loss = nn.cross_entropy(model(x), y, axis=-1)
    return nn.AdamW(model.parameters(), lr=1e-2).compile(loss, memory_budget=budget)


def _batches(n: int) -> list[dict[str, np.ndarray]]:
    rng = np.random.default_rng(1)
    return [
        {
            "x": rng.integers(0, VOCAB, (BATCH, CONTEXT)),
            "y": rng.integers(0, VOCAB, (BATCH, CONTEXT)),
        }
        for _ in range(n)
    ]


def test_half_budget_step_fits_and_trains_to_the_same_losses_bit_for_bit() -> None:
    free = _step(None)
    unconstrained = free.memory()
    budget = unconstrained.peak // 2
    budgeted = _step(budget)
    assert budgeted.memory().peak <= budget
    assert unconstrained.activations > 0
    recomputed = [n for n in budgeted.schedule.nodes if n.meta.get("role") == "recompute"]
    assert recomputed  # the budget was met by recomputing, not by luck
    batches = _batches(4)
    assert [float(free(b)[0]) for b in batches] == [float(budgeted(b)[0]) for b in batches]


def test_budgeted_gradients_are_bit_identical_to_the_unbudgeted() -> None:
    model = _TinyLM(2)
    g = Graph()
    x = g.input("x", (BATCH, CONTEXT), "int64")
    y = g.input("y", (BATCH, CONTEXT), "int64")
    loss = nn.cross_entropy(model(x), y, axis=-1)
    params = [g.bind(p) for p in model.parameters()]
    grads = grad(loss, params)
    free = compile([loss, *grads])
    budgeted = compile([loss, *grads], memory_budget=int(free.memory().peak * 0.75))
    assert budgeted.memory().peak <= int(free.memory().peak * 0.75)
    feeds = _batches(1)[0]
    for a, b in zip(free(feeds), budgeted(feeds), strict=True):
        np.testing.assert_array_equal(a, b)


# The numpy path's kernels make temporaries of their own (a rendered expression's, a
# row program's) beyond the room the budget leaves them: its measured peak was 1.09x the
# budget on this model, the compiled path's within it.
NUMPY_PATH_MARGIN = 1.15


@pytest.mark.parametrize("path", ["compiled", "numpy"])
def test_measured_cpu_peak_of_a_budgeted_step_stays_within_the_budget(
    path: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ASGRAD_CPU_JIT", "1" if path == "compiled" else "0")
    # kernels serial: the measured choice of their threaded forms would compile those
    # forms inside the traced step (the compiler's allocations, not the step's buffers)
    monkeypatch.setenv("ASGRAD_CPU_THREADS", "1")
    free = _step(None)
    budget = free.memory().peak // 2
    step = _step(budget)
    plan = step.memory()
    feeds = _batches(1)[0]
    step(feeds)  # makes the function and its scratch buffers
    tracemalloc.start()
    try:
        step(feeds)
        _, transient = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    held = plan.parameters + plan.state + plan.inputs
    measured = held + transient + step.executable.scratch_bytes(feeds)  # type: ignore[attr-defined]
    assert measured <= budget * (1.0 if path == "compiled" else NUMPY_PATH_MARGIN)


def test_impossible_budget_names_the_smallest_reachable_peak() -> None:
    free = _step(None)
    params = free.memory().parameters
    with pytest.raises(MemoryBudgetError) as caught:
        _step(params)  # less than the parameters and the optimizer state need
    error = caught.value
    assert error.budget == params
    assert params < error.reachable < free.memory().peak
    assert f"{error.reachable:,}" in str(error)
    # the smallest reachable peak is itself a budget that compiles
    assert _step(error.reachable).memory().peak <= error.reachable


def test_deeper_model_fits_a_budget_the_unbudgeted_step_exceeds() -> None:
    shallow_peak = _step(None, layers=1).memory().peak
    deep_free = _step(None, layers=8).memory()
    budget = int(deep_free.peak * 0.6)
    assert deep_free.peak > budget > shallow_peak
    assert _step(budget, layers=8).memory().peak <= budget


def test_every_order_tried_computes_the_same_nodes_inputs_first() -> None:
    from asgrad.tensor.ir.memory import plan_memory
    from asgrad.tensor.ir.memory_order import ORDERS

    schedule = _step(None).schedule
    roots = schedule.outputs + [n for _, n in schedule.updates]
    default = {n.id for n in schedule.nodes}
    peaks = []
    for order in ORDERS:
        nodes = order(roots)
        assert {n.id for n in nodes} == default
        position = {n.id: i for i, n in enumerate(nodes)}
        assert all(position[i.id] < position[n.id] for n in nodes for i in n.inputs)
        peaks.append(plan_memory(nodes, roots).peak)
    assert min(peaks) < plan_memory(schedule.nodes, roots).peak  # an order alone saves memory


def _lstm_step(budget: int | None, recompute: bool = False) -> Program:
    model = nn.LSTM(4, 8, rng=0)
    g = Graph()
    x = g.input("x", (12, 3, 4), free=())
    out, _ = model(x)
    loss = (out * out).mean()
    opt = nn.SGD(model.parameters(), lr=0.1)
    if recompute:
        with recompute_loop_steps():
            return opt.compile(loss)
    return opt.compile(loss, memory_budget=budget)


def test_lstm_budget_below_its_saved_gates_recomputes_the_loop_steps() -> None:
    feeds = {"x": np.random.default_rng(2).standard_normal((12, 3, 4)).astype(np.float32)}
    saved, again = _lstm_step(None).memory().peak, _lstm_step(None, recompute=True).memory().peak
    assert again < saved  # the gates of every step are what the saving costs
    budgeted, plain = _lstm_step(again), _lstm_step(None)
    assert budgeted.memory().peak <= again
    for _ in range(2):
        np.testing.assert_array_equal(budgeted(feeds)[0], plain(feeds)[0])
    with pytest.raises(MemoryBudgetError):
        _lstm_step(again // 2)
