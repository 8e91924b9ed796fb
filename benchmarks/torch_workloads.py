"""The reference workloads in PyTorch eager, as ../shared/bench/anchor_torch.py has them.

PyTorch is optional and never a dependency of asgrad: it is imported at run time
(``pip install torch==2.13.0`` for the CPU build). fp32 everywhere, TF32 off.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

STEPS = {"xor": 1000, "mlp": 300, "cnn": 40, "transformer": 20, "transformer_large": 10}


def load_torch() -> Any:
    """The torch module, or None when it is not importable."""
    try:
        return importlib.import_module("torch")
    except ImportError:
        return None


def build(
    name: str, device: str, threads: int
) -> tuple[Callable[[], Any], int, Callable[[], None]]:
    """``(step, timed_steps, sync)`` for workload ``name`` on ``device`` (cpu|cuda)."""
    torch = load_torch()
    if torch is None:
        raise ImportError("PyTorch is not importable")
    nn = torch.nn
    F = torch.nn.functional
    torch.manual_seed(0)
    torch.set_num_threads(threads)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    if device == "cuda":
        torch.set_default_device("cuda")

    Module: Any = nn.Module

    class Block(Module):  # type: ignore[misc]  # torch is imported as Any
        def __init__(self, d: int, h: int, ff: int) -> None:
            super().__init__()
            self.h = h
            self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
            self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
            self.ff1, self.ff2 = nn.Linear(d, ff), nn.Linear(ff, d)

        def forward(self, x: Any) -> Any:
            B, T, D = x.shape
            h = self.h
            q, k, v = self.qkv(self.ln1(x)).split(D, dim=2)
            q, k, v = (t.view(B, T, h, D // h).transpose(1, 2) for t in (q, k, v))
            att = (q @ k.transpose(-2, -1)) / (D // h) ** 0.5
            causal = torch.triu(torch.ones(T, T, dtype=torch.bool), 1)
            att = att.masked_fill(causal, float("-inf")).softmax(-1)
            x = x + self.proj((att @ v).transpose(1, 2).reshape(B, T, D))
            return x + self.ff2(F.gelu(self.ff1(self.ln2(x))))

    m: Any
    lossf: Callable[[], Any]
    if name == "xor":
        m = nn.Sequential(nn.Linear(2, 8), nn.ReLU(), nn.Linear(8, 1), nn.Sigmoid())
        x = torch.tensor([[0.0, 0], [0, 1], [1, 0], [1, 1]])
        y = torch.tensor([[0.0], [1], [1], [0]])
        opt = torch.optim.SGD(m.parameters(), lr=0.5, momentum=0.9)
        lossf = lambda: F.mse_loss(m(x), y)  # noqa: E731
    elif name == "mlp":
        m = nn.Sequential(
            nn.Linear(784, 128), nn.ReLU(), nn.Linear(128, 64), nn.ReLU(), nn.Linear(64, 10)
        )
        x = torch.randn(64, 784)
        y = torch.randint(0, 10, (64,))
        opt = torch.optim.Adam(m.parameters(), lr=1e-3)
        lossf = lambda: F.cross_entropy(m(x), y)  # noqa: E731
    elif name == "cnn":
        m = nn.Sequential(
            nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Flatten(), nn.Linear(32 * 7 * 7, 10),
        )  # fmt: skip
        x = torch.randn(32, 1, 28, 28)
        y = torch.randint(0, 10, (32,))
        opt = torch.optim.Adam(m.parameters(), lr=1e-3)
        lossf = lambda: F.cross_entropy(m(x), y)  # noqa: E731
    elif name in ("transformer", "transformer_large"):
        V, T, D, H, FF, L, B = (
            (64, 64, 128, 4, 512, 2, 16)
            if name == "transformer"
            else (256, 256, 512, 8, 2048, 4, 32)
        )
        emb, pos = nn.Embedding(V, D), nn.Parameter(torch.zeros(1, T, D))
        blocks = nn.Sequential(*[Block(D, H, FF) for _ in range(L)])
        lnf, head = nn.LayerNorm(D), nn.Linear(D, V)
        m = nn.ModuleList([emb, blocks, lnf, head])
        idx = torch.randint(0, V, (B, T))
        tgt = torch.randint(0, V, (B, T))
        opt = torch.optim.AdamW([*m.parameters(), pos], lr=1e-3)

        def lossf() -> Any:
            h = lnf(blocks(emb(idx) + pos))
            return F.cross_entropy(head(h).view(-1, V), tgt.view(-1))

    else:
        raise ValueError(f"unknown workload {name!r}")

    def step() -> Any:
        opt.zero_grad()
        loss = lossf()
        loss.backward()
        opt.step()
        return loss

    sync: Callable[[], None] = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    return step, STEPS[name], sync
