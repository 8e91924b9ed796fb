"""The multi-tensor optimizer update on the GPU: every parameter's update
rule in one dispatch (or one per binding limit), in place, matching the CPU.

Also pins the dispatch counts of an mlp-like and a transformer-like training step by
kind: a count that goes up fails here.
"""

from __future__ import annotations

import itertools
import math
from typing import Any

import numpy as np
import pytest

from asgrad import nn
from asgrad.gpu import Device
from asgrad.gpu import plan as plan_module
from asgrad.gpu.plan import build_plan
from asgrad.gpu.plan.attention import MAX_SCORES_VARIABLE
from asgrad.gpu.plan.dispatch_kinds import count_kinds
from asgrad.tensor import Graph, Tensor

pytestmark = pytest.mark.gpu

# 18 layers, 36 parameters of 25 different sizes: more than one dispatch binds on
# lavapipe (32 storage buffers) or at the 128 asgrad asks for at most.
WIDTHS = [6, 9, 3, 12, 5, 7, 4, 11, 2, 8, 6, 10, 3, 9, 5, 7, 4, 6, 3]

CONFIGS: list[tuple[type[nn.Optimizer], dict[str, Any]]] = [
    (nn.Adam, {"lr": 0.01}),
    (nn.AdamW, {"lr": 0.01, "weight_decay": 0.1}),
    (nn.Adam, {"lr": 0.01, "weight_decay": 0.05, "amsgrad": True}),
    (nn.Adam, {"lr": 0.01, "clip_grad_norm": 0.5}),
    (nn.SGD, {"lr": 0.05, "momentum": 0.9, "nesterov": True, "weight_decay": 0.01}),
    (nn.SGD, {"lr": 0.5, "momentum": 0.9, "dampening": 0.1, "weight_decay": 0.01}),
]
IDS = ["adam", "adamw", "adam-amsgrad-l2", "adam-clip", "sgd-nesterov", "sgd-dampening"]


def _deep_model() -> nn.Module:
    layers: list[nn.Module] = []
    for a, b in itertools.pairwise(WIDTHS):
        layers += [nn.Linear(a, b), nn.Tanh()]
    model = nn.Sequential(*layers[:-1])
    model.initialize(0)
    return model


def _train(
    cls: type[nn.Optimizer], kwargs: dict[str, Any], backend: str
) -> tuple[nn.Module, nn.Optimizer, Any, dict[str, np.ndarray]]:
    model = _deep_model()
    g = Graph()
    x, y = g.input("x", (16, WIDTHS[0])), g.input("y", (16, WIDTHS[-1]))
    opt = cls(model.parameters(), **kwargs)
    step = opt.compile(nn.mse_loss(model(x), y), backend=backend)
    rng = np.random.default_rng(1)
    feeds: dict[str, np.ndarray] = {}
    for _ in range(4):
        feeds = {
            "x": rng.standard_normal((16, WIDTHS[0])).astype(np.float32),
            "y": rng.standard_normal((16, WIDTHS[-1])).astype(np.float32),
        }
        step(feeds)
    return model, opt, step, feeds


@pytest.mark.parametrize(("cls", "kwargs"), CONFIGS, ids=IDS)
def test_multi_tensor_update_matches_the_cpu(
    device: Device, cls: type[nn.Optimizer], kwargs: dict[str, Any], monkeypatch: Any
) -> None:
    cpu_model, cpu_opt, _, _ = _train(cls, kwargs, "cpu")
    gpu_model, gpu_opt, program, feeds = _train(cls, kwargs, "gpu")
    with monkeypatch.context() as patch:  # each rule its own kernel, as before the batch
        patch.setattr(plan_module, "update_batch", lambda *args: None)
        single_model, single_opt, _, _ = _train(cls, kwargs, "gpu")
    start = [p.value for p in _deep_model().parameters()]
    cpu_params = [np.array(p.value) for p in cpu_model.parameters()]
    moved = [np.abs(c - s).max() for c, s in zip(cpu_params, start, strict=True)]
    assert min(moved) > 1e-4  # every parameter took its steps
    # Against the CPU: four Adam steps through 18 layers turn float32 rounding of the
    # gradients into differences of up to ~1e-3 of a step (lr 0.01).
    for c, g in zip(cpu_params, gpu_model.parameters(), strict=True):
        np.testing.assert_allclose(g.value, c, rtol=1e-4, atol=2e-5)
    cpu_state, gpu_state = cpu_opt.state_dict(), gpu_opt.state_dict()
    assert cpu_state.keys() == gpu_state.keys()
    for key, value in cpu_state.items():
        np.testing.assert_allclose(gpu_state[key], value, rtol=1e-3, atol=2e-5, err_msg=key)
    # Against the same rules launched one kernel each: the same expressions, though a
    # driver may contract them into fused multiply-adds differently in the two kernels
    # (NVIDIA's did: 2.5e-6 relative after four AdamW steps), so a few ulps apart.
    single = single_opt.state_dict()
    for key, value in gpu_state.items():
        np.testing.assert_allclose(value, single[key], rtol=1e-5, atol=1e-7, err_msg=key)
    for s, g in zip(single_model.parameters(), gpu_model.parameters(), strict=True):
        np.testing.assert_allclose(g.value, s.value, rtol=1e-5, atol=1e-7)
    # the whole update: one dispatch per binding limit, no copies, no per-parameter kernel
    plan = build_plan(program.executable.schedule, feeds, device)
    kinds = count_kinds(plan.commands)
    params = len(WIDTHS[:-1]) * 2
    limit = device.limits["max-storage-buffers-per-shader-stage"]
    per_param = 2 + len(gpu_opt.state)  # the parameter, its gradient, its state slots
    # the step scalars and constants shared (at most 6: SGD with dampening reads the step,
    # 1, 1 - dampening, momentum, weight decay and the learning rate, since its buffer's
    # rule runs in the batch too)
    per_dispatch = (limit - 6) // per_param
    assert kinds["copy"] == 0
    # (lavapipe's 32 bindings need several dispatches; the H200's 128 may hold them all)
    assert 1 <= kinds["optimizer update"] <= math.ceil(params / per_dispatch)


def _count(program: Any, feeds: dict[str, np.ndarray], device: Device) -> Any:
    return count_kinds(build_plan(program.executable.schedule, feeds, device).commands)


def test_mlp_step_dispatch_counts(device: Device) -> None:
    model = nn.Sequential(
        nn.Linear(20, 16), nn.ReLU(), nn.Linear(16, 8), nn.ReLU(), nn.Linear(8, 4)
    )
    model.initialize(0)
    g = Graph()
    x, y = g.input("x", (8, 20)), g.input("y", (8,), "int64")
    program = nn.Adam(model.parameters()).compile(nn.cross_entropy(model(x), y), backend="gpu")
    rng = np.random.default_rng(0)
    feeds: dict[str, np.ndarray] = {
        "x": rng.standard_normal((8, 20)).astype(np.float32),
        "y": rng.integers(0, 4, 8).astype(np.int64),
    }
    kinds = _count(program, feeds, device)
    # measured on lavapipe when pinned: 26 (65 before the multi-tensor update: 18 of them
    # copies); 30 since cross_entropy ignores PyTorch's ignore_index=-100 by default (the mask
    # of ignored labels and the count of the others are four elementwise kernels more); 25
    # while a matmul stored any elementwise chain reading it (x @ w + b and the ReLU, the
    # gradient through the ReLU) as its epilogue; 30 again since only chains of the product
    # alone are (asgrad.gpu.plan.fusion.EPILOGUE_LEAVES); 25 since cross-entropy's
    # log-softmax, product and sums are row kernels with their chains (fusion_rows); 24
    # since the loss's sum is divided by the count as it is written
    assert sum(kinds.values()) <= 24, kinds
    assert kinds["copy"] == 0
    assert kinds["optimizer update"] == 1


def _sgd_mlp_step(backend: str) -> tuple[Any, nn.Module, dict[str, np.ndarray]]:
    """The xor workload's optimizer (SGD with momentum) on a small MLP, two steps."""
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))
    model.initialize(0)
    g = Graph()
    x, y = g.input("x", (32, 8)), g.input("y", (32, 4))
    opt = nn.SGD(model.parameters(), lr=0.5, momentum=0.9)
    program = opt.compile(nn.mse_loss(model(x), y), backend=backend)
    rng = np.random.default_rng(2)
    feeds = {
        "x": rng.standard_normal((32, 8)).astype(np.float32),
        "y": rng.standard_normal((32, 4)).astype(np.float32),
    }
    for _ in range(2):
        program(feeds)
    return program, model, feeds


def test_sgd_momentum_parameter_rules_run_in_the_batch(device: Device, monkeypatch: Any) -> None:
    """SGD with momentum: each parameter's rule (param - lr * buf) runs in the batch
    with its buffer's, though a bias's gradient (a sum_to_like) names the parameter for
    its shape only (no read of its old value), and the values match the CPU."""
    program, model, feeds = _sgd_mlp_step("gpu")
    _, cpu_model, _ = _sgd_mlp_step("cpu")
    for c, g in zip(cpu_model.parameters(), model.parameters(), strict=True):
        np.testing.assert_allclose(g.value, c.value, rtol=1e-5, atol=1e-6, err_msg=g.name)
    batches: list[Any] = []
    find = plan_module.update_batch

    def record(*args: Any) -> Any:
        batches.append(find(*args))
        return batches[-1]

    monkeypatch.setattr(plan_module, "update_batch", record)
    kinds = _count(program, feeds, device)
    (batch,) = batches
    written = {id(v) for v in batch.variables.values()}
    assert all(id(p) in written for p in model.parameters())
    # measured on lavapipe when pinned: 12 (17 while each parameter's rule ran as an
    # elementwise kernel of its own and the biases' gradients as column reductions)
    assert sum(kinds.values()) <= 12, kinds
    assert kinds["elementwise"] <= 4, kinds
    assert kinds["optimizer update"] == 1, kinds


class _Block(nn.Module):
    """The transformer workload's block (benchmarks/asgrad_workloads.py), small."""

    def __init__(self, d: int, heads: int, ff: int | None = None) -> None:
        super().__init__()
        self.heads = heads
        ff = 2 * d if ff is None else ff
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.ff1, self.ff2 = nn.Linear(d, ff), nn.Linear(ff, d)

    def forward(self, x: Tensor) -> Tensor:
        B, T, D = x.shape
        h, dh = self.heads, D // self.heads
        qkv = self.qkv(self.ln1(x))
        q, k, v = (
            qkv[:, :, i * D : (i + 1) * D].reshape(B, T, h, dh).transpose(0, 2, 1, 3)
            for i in range(3)
        )
        mask = np.triu(np.full((T, T), -1e9, dtype=np.float32), 1)
        att = (q @ k.swapaxes(-1, -2)) * (1.0 / math.sqrt(dh)) + x.graph.constant(mask)
        y = (att.softmax(-1) @ v).transpose(0, 2, 1, 3).reshape(B, T, D)
        x = x + self.proj(y)
        out: Tensor = x + self.ff2(self.ff1(self.ln2(x)).gelu())
        return out


def _transformer(backend: str) -> tuple[Any, list[Any], dict[str, np.ndarray]]:
    B, T, D, V = 2, 8, 16, 12
    emb, block, head = nn.Embedding(V, D), _Block(D, 2), nn.Linear(D, V)
    model = nn.Sequential(block, head)
    emb.initialize(0)
    model.initialize(0)
    g = Graph()
    idx, tgt = g.input("idx", (B, T), "int64"), g.input("tgt", (B * T,), "int64")
    logits = model(emb(idx)).reshape(B * T, V)
    params = [*emb.parameters(), *model.parameters()]
    # eps 1e-4: the k bias's gradient is rounding noise (softmax ignores a shift of a
    # row), which a tiny eps would turn into full steps of either sign
    opt = nn.AdamW(params, lr=0.01, eps=1e-4)
    program = opt.compile(nn.cross_entropy(logits, tgt), backend=backend)
    rng = np.random.default_rng(0)
    feeds: dict[str, np.ndarray] = {
        "idx": rng.integers(0, V, (B, T)).astype(np.int64),
        "tgt": rng.integers(0, V, (B * T,)).astype(np.int64),
    }
    for _ in range(3):
        program(feeds)
    return program, params, feeds


def test_transformer_step_matches_the_cpu_and_pins_dispatches(device: Device) -> None:
    program, params, feeds = _transformer("gpu")
    _, cpu_params, _ = _transformer("cpu")
    for c, g in zip(cpu_params, params, strict=True):
        np.testing.assert_allclose(g.value, c.value, rtol=1e-4, atol=2e-5, err_msg=g.name)
    kinds = _count(program, feeds, device)
    # measured on lavapipe when pinned: 66 (153 before the multi-tensor update: three Adam kernels
    # and three update copies for each of the 15 parameters, each weight gradient a
    # batched matmul and a column reduction, each bias gradient two reductions, each
    # head split and slice of qkv a copy, qkv's gradient zeros and adds); 69 since
    # cross_entropy ignores PyTorch's ignore_index=-100 by default (the mask and the count);
    # 61 while a matmul stored any elementwise chain reading it as its epilogue (biases,
    # residual adds, attention's mask...); 69 again since only chains of the product alone
    # are (asgrad.gpu.plan.fusion.EPILOGUE_LEAVES: the others measured slower on the H200);
    # 52 since row kernels take the chains around them (layer norm its residual sum,
    # softmax its scale and mask, the reductions of the gradients their products, a
    # layer norm's backward the weight's gradient term: asgrad.gpu.plan.fusion_rows);
    # and fewer since attention is one kernel forward and two backward
    # (asgrad.gpu.plan.attention: six products, the scale and mask, the softmax and its
    # gradient's row sum were 11); 43 since the attention kernels write the merged heads
    # and qkv's gradient in place (asgrad.gpu.plan.destinations: four view copies)
    assert sum(kinds.values()) <= 43, kinds
    assert kinds["view copy"] == 0, kinds
    assert kinds["attention"] == 1, kinds
    assert kinds["attention backward"] == 2, kinds
    assert kinds["fill"] == 0
    assert kinds["copy"] == 0
    assert kinds["column reduction"] <= 1  # the embedding's gradient
    per_dispatch = (device.limits["max-storage-buffers-per-shader-stage"] - 4) // 4
    assert kinds["optimizer update"] <= math.ceil(len(params) / per_dispatch)


def test_a_rule_with_a_broadcast_input_runs_unfused_with_its_sum(device: Device) -> None:
    """A chain whose input has neither its element count nor one element (a row
    broadcast over the parameter) runs rule by rule, its column sum finished from the
    batch's partial sums, and is copied into its variable: the same values."""
    from asgrad.tensor import Variable, compile

    start = np.arange(12, dtype=np.float32).reshape(3, 4)
    var = Variable("p", start.copy())
    g = Graph()
    x, row = g.input("x", (5, 3, 4), free=()), g.input("row", (1, 4), free=())
    # the sum and the row both read by the rule itself (not through a fused expression)
    step = compile([], [(var, (x * 2.0).sum(axis=0) + row)], backend="gpu")
    rng = np.random.default_rng(0)
    xs = rng.standard_normal((5, 3, 4)).astype(np.float32)
    rows = rng.standard_normal((1, 4)).astype(np.float32)
    step.run({"x": xs, "row": rows})
    # float32 sums of five terms in another order than numpy's: one rounding apart
    np.testing.assert_allclose(var.value, (xs * 2).sum(axis=0) + rows, rtol=1e-6, atol=1e-6)
    schedule = step.executable.schedule  # type: ignore[attr-defined]
    kinds = count_kinds(build_plan(schedule, {"x": xs, "row": rows}, device).commands)
    assert kinds["gradient sums"] == 1, kinds
    assert kinds["copy"] == 1, kinds


def _wide_batch_step(backend: str, rows: int) -> tuple[Any, nn.Module, dict[str, np.ndarray]]:
    """Two linear layers over many rows: each weight's gradient has a deep K."""
    model = nn.Sequential(nn.Linear(64, 64), nn.GELU(), nn.Linear(64, 64))
    model.initialize(0)
    g = Graph()
    x, y = g.input("x", (rows, 64)), g.input("y", (rows, 64))
    program = nn.AdamW(model.parameters(), lr=0.01).compile(
        nn.mse_loss(model(x), y), backend=backend
    )
    rng = np.random.default_rng(3)
    feeds = {
        "x": rng.standard_normal((rows, 64)).astype(np.float32),
        "y": rng.standard_normal((rows, 64)).astype(np.float32),
    }
    for _ in range(3):
        program(feeds)
    return program, model, feeds


def test_split_k_weight_gradients_are_summed_by_the_update(device: Device) -> None:
    """A weight gradient whose K (the rows) is split into partial products is not
    summed by a column reduction: the update adds the pieces, with the same values."""
    from asgrad.gpu.lowering.linalg import select

    rows = 2048
    assert select(64, 64, rows, 1, layouts=("m", "n"))[1] > 1  # x^T @ dy splits K
    program, model, feeds = _wide_batch_step("gpu", rows)
    _, cpu_model, _ = _wide_batch_step("cpu", rows)
    for c, g in zip(cpu_model.parameters(), model.parameters(), strict=True):
        np.testing.assert_allclose(g.value, c.value, rtol=1e-4, atol=1e-5, err_msg=g.name)
    kinds = _count(program, feeds, device)
    assert kinds["column reduction"] == 0, kinds
    assert kinds["optimizer update"] == 1, kinds


class _TinyGPT(nn.Module):
    """The benchmarks' transformer workload (benchmarks/asgrad_workloads.py)."""

    def __init__(self, vocab: int, seq: int, d: int, heads: int, ff: int, layers: int) -> None:
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        self.pos = nn.Parameter((1, seq, d), nn.init.zeros)
        self.blocks = nn.Sequential(*[_Block(d, heads, ff) for _ in range(layers)])
        self.lnf, self.head = nn.LayerNorm(d), nn.Linear(d, vocab)

    def forward(self, idx: Tensor) -> Tensor:
        out: Tensor = self.head(self.lnf(self.blocks(self.emb(idx) + self.pos)))
        return out


# Blocks of the benchmarks' transformer step.
BENCH_LAYERS = 2


def _benchmark_transformer_kinds(
    device: Device, *, mixed: bool = False
) -> tuple[dict[str, int], _TinyGPT]:
    """The dispatches by kind of the benchmarks' transformer step (2 blocks, batch 16 x
    64 tokens, width 128, AdamW), built without running it; ``mixed``: with
    ``precision="mixed"`` and a GradScaler, as ``benchmarks/mixed_precision.py``."""
    V, T, D, H, FF, B = 64, 64, 128, 4, 512, 16
    model = _TinyGPT(V, T, D, H, FF, BENCH_LAYERS)
    model.initialize(0)
    g = Graph()
    idx, tgt = g.input("idx", (B, T), "int64"), g.input("tgt", (B * T,), "int64")
    loss = nn.cross_entropy(model(idx).reshape(B * T, V), tgt)
    optimizer = nn.AdamW(model.parameters(), lr=1e-3)
    if mixed:
        program = optimizer.compile(nn.GradScaler().scale(loss), backend="gpu", precision="mixed")
    else:
        program = optimizer.compile(loss, backend="gpu")
    rng = np.random.default_rng(0)
    feeds: dict[str, np.ndarray] = {
        "idx": rng.integers(0, V, (B, T)).astype(np.int64),
        "tgt": rng.integers(0, V, (B * T,)).astype(np.int64),
    }
    return _count(program, feeds, device), model


def test_the_benchmark_transformer_step_pins_its_dispatches(device: Device) -> None:
    """The plan of the benchmarks' transformer step (2 blocks, batch 16 x 64 tokens,
    width 128), built without running it: a count that goes up fails here."""
    kinds, model = _benchmark_transformer_kinds(device)
    updates = kinds.pop("optimizer update")  # as many as the storage bindings need
    per_dispatch = (device.limits["max-storage-buffers-per-shader-stage"] - 4) // 4
    assert 1 <= updates <= math.ceil(len(model.parameters()) / per_dispatch)
    # measured on lavapipe when pinned: 124 besides the updates (129 in all), 11 of them
    # column reductions summing split-K weight gradients; 81 (86 in all) once the update
    # adds the split-K pieces and row kernels take the chains around them; 71 (76 in all)
    # with attention fused; 63 (68 in all) since the attention kernels write the merged
    # heads and qkv's gradient where their views put them (8 view copies before); 62
    # (67 in all) since the loss's log-softmax read by two kernels is stored by the first
    assert sum(kinds.values()) <= 62, kinds
    assert kinds["column reduction"] == 0, kinds
    assert kinds["view copy"] == 0, kinds


def test_the_benchmark_transformer_step_with_attention_unfused_pins_its_dispatches(
    device: Device, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same step with attention left to products and a softmax, as transformer_large's
    (over the fused kernels' score limit) runs: the value product stores the merged heads,
    and dq, dk and dv go into qkv's gradient, where their views put them."""
    monkeypatch.setenv(MAX_SCORES_VARIABLE, "0")
    kinds, _ = _benchmark_transformer_kinds(device)
    assert kinds["attention"] == 0, kinds
    # measured on lavapipe when pinned: 78 in all; 86 with 8 view copies (2 merges of
    # heads, 6 of dq, dk and dv into qkv's gradient) before the products stored them
    assert sum(kinds.values()) <= 78, kinds
    assert kinds["view copy"] == 0, kinds
    assert kinds["column reduction"] == 0, kinds


def test_the_benchmark_transformer_mixed_step_pins_its_dispatches(device: Device) -> None:
    """The same transformer step with ``precision="mixed"`` and a GradScaler, as
    ``benchmarks/mixed_precision.py`` compiles it: the weights' float16 casts are one
    multi-tensor kernel, and the float16 gradients' split-K and bias sums are added up by
    found_inf's checks and the update (no column reduction of their own)."""
    kinds, _ = _benchmark_transformer_kinds(device, mixed=True)
    kinds.pop("optimizer update")  # as many as the storage bindings need
    kinds.pop("checks")  # likewise
    # measured on lavapipe when pinned: 80 besides the updates and the checks; 88 while
    # the float16 value products and dq, dk and dv were copied through their views (8
    # view copies); 92 while the & of the checks was a tree of kernels binding a few
    # flags each; 102 while the backward recomputed attention's softmax (and its float16
    # copy) and each layer norm's gradient kernel recomputed the earlier ones' (their sum
    # read again by the next layer), and the weight-gradient terms of the norms and the
    # final norm's float16 cast were kernels of their own; 157 while each weight's cast
    # was a kernel of its own and 48 column reductions summed the float16 gradients'
    # split-K pieces and bias rows. Attention runs unfused (no float16 attention backward
    # kernel): the most of the difference from the float32 step's 62
    assert sum(kinds.values()) <= 80, kinds
    assert kinds["view copy"] == 0, kinds
    assert kinds["column reduction"] == 0, kinds
    assert kinds["gradient sums"] == 1, kinds
    assert kinds["variable casts"] == 1, kinds
    # as many row kernels as the float32 step's unfused attention needs: a softmax per
    # layer and the loss's, a norm kernel per layer norm (two a block, and the final
    # one) and one per norm's gradient
    assert kinds["softmax"] == BENCH_LAYERS + 1, kinds
    assert kinds["norm"] == 2 * (2 * BENCH_LAYERS + 1), kinds
