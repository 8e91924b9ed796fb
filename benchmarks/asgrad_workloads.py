"""The reference workloads of WORKLOADS.md in asgrad: each a compiled training step.

``build(name, backend)`` returns a :class:`Workload`: a ``step()`` that launches one
whole training step (forward, backward, optimizer update: one compiled program) and
returns the loss as a :class:`~asgrad.tensor.DeviceValue`, a ``sync()`` that waits for
the steps launched, and the number of timed steps. Workloads whose layers have not
landed in ``asgrad.nn`` yet raise :class:`UnavailableError` with the missing names.

On the GPU the feeds are placed on the device once (``asgrad.gpu.to_gpu``), as JAX's
workloads hold their data in device arrays and PyTorch's make theirs on the CUDA device:
a step fed the same device arrays moves no data (the feed's copy into the plan's input
buffer is skipped too). On the CPU the feeds are the numpy arrays, as before.
"""

from __future__ import annotations

import importlib
import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from asgrad import nn
from asgrad.tensor import Graph, Tensor

STEPS = {"xor": 1000, "mlp": 300, "cnn": 40, "transformer": 20, "transformer_large": 10}


class UnavailableError(Exception):
    """The workload needs something asgrad does not provide yet."""


@dataclass
class Workload:
    """A compiled training step, its feeds, and how many steps to time."""

    program: Any
    feeds: dict[str, Any]  # numpy arrays, or on the GPU device arrays (see `placed`)
    steps: int
    last: Any = None

    def step(self) -> Any:
        """One training step, launched: returns the loss as a value read when asked.

        Steps queue on the device back to back, as JAX's jitted steps do; on the CPU
        the step has run when this returns.
        """
        launch = getattr(self.program, "launch", self.program)  # older asgrad: a call
        self.last = launch(self.feeds)[0]
        return self.last

    def sync(self) -> None:
        """Wait until every launched step has run (reads the last loss)."""
        if self.last is not None:
            float(self.last)


def placed(feeds: dict[str, np.ndarray], backend: str) -> dict[str, Any]:
    """``feeds`` on ``backend``'s device: uploaded once for the GPU, as they are for the CPU."""
    if backend != "gpu":
        return dict(feeds)
    to_gpu = importlib.import_module("asgrad.gpu").to_gpu
    return {name: to_gpu(value) for name, value in feeds.items()}


def _need(*names: str) -> list[Any]:
    layers: Any = importlib.import_module("asgrad.nn.layers")
    found = {n: getattr(nn, n, None) or getattr(layers, n, None) for n in names}
    missing = [n for n, v in found.items() if v is None]
    if missing:
        raise UnavailableError(
            "asgrad.nn has no " + ", ".join(missing) + " yet (waiting for the layers to land)"
        )
    return list(found.values())


def xor(backend: str) -> Workload:
    model = nn.Sequential(nn.Linear(2, 8), nn.ReLU(), nn.Linear(8, 1), nn.Sigmoid())
    model.initialize(0)
    g = Graph("xor")
    x, y = g.input("x", (4, 2)), g.input("y", (4, 1))
    loss = nn.mse_loss(model(x), y)
    program = nn.SGD(model.parameters(), lr=0.5, momentum=0.9).compile(loss, backend=backend)
    feeds: dict[str, np.ndarray] = {
        "x": np.array([[0, 0], [0, 1], [1, 0], [1, 1]], dtype=np.float32),
        "y": np.array([[0], [1], [1], [0]], dtype=np.float32),
    }
    return Workload(program, placed(feeds, backend), STEPS["xor"])


def mlp(backend: str) -> Workload:
    rng = np.random.default_rng(0)
    model = nn.Sequential(
        nn.Linear(784, 128), nn.ReLU(), nn.Linear(128, 64), nn.ReLU(), nn.Linear(64, 10)
    )
    model.initialize(0)
    g = Graph("mlp")
    x, y = g.input("x", (64, 784)), g.input("y", (64,), "int64")
    loss = nn.cross_entropy(model(x), y)
    program = nn.Adam(model.parameters(), lr=1e-3).compile(loss, backend=backend)
    feeds: dict[str, np.ndarray] = {
        "x": rng.standard_normal((64, 784)).astype(np.float32),
        "y": rng.integers(0, 10, (64,)).astype(np.int64),
    }
    return Workload(program, placed(feeds, backend), STEPS["mlp"])


def cnn(backend: str) -> Workload:
    Conv2d, MaxPool2d = _need("Conv2d", "MaxPool2d")
    rng = np.random.default_rng(0)
    model = nn.Sequential(
        Conv2d(1, 16, 3, padding=1), nn.ReLU(), MaxPool2d(2),
        Conv2d(16, 32, 3, padding=1), nn.ReLU(), MaxPool2d(2),
        nn.Flatten(), nn.Linear(32 * 7 * 7, 10),
    )  # fmt: skip
    model.initialize(0)
    g = Graph("cnn")
    x, y = g.input("x", (32, 1, 28, 28)), g.input("y", (32,), "int64")
    loss = nn.cross_entropy(model(x), y)
    program = nn.Adam(model.parameters(), lr=1e-3).compile(loss, backend=backend)
    feeds: dict[str, np.ndarray] = {
        "x": rng.standard_normal((32, 1, 28, 28)).astype(np.float32),
        "y": rng.integers(0, 10, (32,)).astype(np.int64),
    }
    return Workload(program, placed(feeds, backend), STEPS["cnn"])


class Block(nn.Module):
    """Pre-norm transformer block: causal self-attention (qkv in one Linear), GELU FF."""

    def __init__(self, d: int, heads: int, ff: int) -> None:
        super().__init__()
        (LayerNorm,) = _need("LayerNorm")
        self.heads = heads
        self.ln1, self.ln2 = LayerNorm(d), LayerNorm(d)
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
        att = att.softmax(-1)
        y = (att @ v).transpose(0, 2, 1, 3).reshape(B, T, D)
        x = x + self.proj(y)
        result: Tensor = x + self.ff2(self.ff1(self.ln2(x)).gelu())
        return result


class TinyGPT(nn.Module):
    def __init__(self, vocab: int, seq: int, d: int, heads: int, ff: int, layers: int) -> None:
        super().__init__()
        Embedding, LayerNorm = _need("Embedding", "LayerNorm")
        self.emb = Embedding(vocab, d)
        self.pos = nn.Parameter((1, seq, d), nn.init.zeros)
        self.blocks = nn.Sequential(*[Block(d, heads, ff) for _ in range(layers)])
        self.lnf, self.head = LayerNorm(d), nn.Linear(d, vocab)

    def forward(self, idx: Tensor) -> Tensor:
        h = self.lnf(self.blocks(self.emb(idx) + self.pos))
        logits: Tensor = self.head(h)
        return logits


def transformer(
    backend: str, large: bool = False, precision: str = "float32", batch: int | None = None
) -> Workload:
    """The transformer workloads; ``precision="mixed"``: float16 products under a
    `nn.GradScaler` (see ``benchmarks/mixed_precision.py``); ``batch``: another batch
    size (diagnostics on a small machine)."""
    V, T, D, H, FF, L, B = (
        (256, 256, 512, 8, 2048, 4, 32) if large else (64, 64, 128, 4, 512, 2, 16)
    )
    B = B if batch is None else batch
    rng = np.random.default_rng(0)
    model = TinyGPT(V, T, D, H, FF, L)
    model.initialize(0)
    g = Graph("transformer")
    idx, tgt = g.input("idx", (B, T), "int64"), g.input("tgt", (B * T,), "int64")
    logits = model(idx).reshape(B * T, V)
    loss = nn.cross_entropy(logits, tgt)
    opt = nn.AdamW(model.parameters(), lr=1e-3)
    if precision == "float32":
        program = opt.compile(loss, backend=backend)
    else:
        scaled = nn.GradScaler().scale(loss)
        program = opt.compile(scaled, backend=backend, precision=precision)
    feeds: dict[str, np.ndarray] = {
        "idx": rng.integers(0, V, (B, T)).astype(np.int64),
        "tgt": rng.integers(0, V, (B * T,)).astype(np.int64),
    }
    name = "transformer_large" if large else "transformer"
    return Workload(program, placed(feeds, backend), STEPS[name])


def build(name: str, backend: str, precision: str = "float32") -> Workload:
    """The workload ``name`` compiled for ``backend`` ("cpu" or "gpu"); the transformers
    also with ``precision="mixed"`` (under a `nn.GradScaler`)."""
    if name == "xor":
        return xor(backend)
    if name == "mlp":
        return mlp(backend)
    if name == "cnn":
        return cnn(backend)
    if name in ("transformer", "transformer_large"):
        return transformer(backend, large=name == "transformer_large", precision=precision)
    if precision != "float32":
        raise ValueError(f"precision={precision!r} is for the transformer workloads")
    raise ValueError(f"unknown workload {name!r}")
