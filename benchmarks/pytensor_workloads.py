"""The reference workloads in PyTensor, as ../shared/bench/anchor_pytensor.py has them.

PyTensor is optional and never a dependency of asgrad: it is imported at run time
(``pip install pytensor``; its C backend needs a C++ compiler, ``g++``). A symbolic
graph, gradients by ``pytensor.grad`` (graph to graph), the optimizer as shared-variable
updates, compiled by ``pytensor.function`` with the C backend (linker ``cvm``,
optimizer ``fast_run``): the closest peer to asgrad's design. xor and mlp only, on
the CPU, float32.

``build(name, cache_dir)`` returns ``(step, timed_steps)``; with ``cache_dir`` PyTensor
compiles its C modules into that folder (``base_compiledir``), so a second process
reusing it loads them instead of compiling them. The folder must be chosen before
PyTensor is imported, which :func:`load_pytensor` does.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable
from typing import Any

import numpy as np

STEPS = {"xor": 1000, "mlp": 300}
WORKLOADS = tuple(STEPS)


def load_pytensor(cache_dir: str | None = None) -> Any:
    """The pytensor module (float32, C modules in ``cache_dir``), or None when absent."""
    if cache_dir:
        flags = os.environ.get("PYTENSOR_FLAGS", "")
        os.environ["PYTENSOR_FLAGS"] = ",".join(
            f for f in (flags, f"base_compiledir={cache_dir}") if f
        )
    try:
        pytensor = importlib.import_module("pytensor")
    except ImportError:
        return None
    pytensor.config.floatX = "float32"
    return pytensor


def _workload(pytensor: Any, name: str) -> tuple[Any, list[tuple[Any, Any]]]:
    """``(loss, updates)`` for ``name``, as in the anchor."""
    pt = importlib.import_module("pytensor.tensor")
    rng = np.random.default_rng(0)

    def shared(a: Any, name: str) -> Any:
        return pytensor.shared(np.asarray(a, dtype="float32"), name=name)

    def dense(i: int, o: int, name: str) -> tuple[Any, Any]:
        b = 1 / i**0.5
        return shared(rng.uniform(-b, b, (i, o)), name + ".w"), shared(np.zeros(o), name + ".b")

    if name == "xor":
        w1, b1 = dense(2, 8, "l1")
        w2, b2 = dense(8, 1, "l2")
        x = shared([[0, 0], [0, 1], [1, 0], [1, 1]], "x")
        y = shared([[0], [1], [1], [0]], "y")
        pred = pt.sigmoid(pt.maximum(x @ w1 + b1, 0) @ w2 + b2)
        loss = pt.mean((pred - y) ** 2)
        params = [w1, b1, w2, b2]
        ups: list[tuple[Any, Any]] = []
        for p, g in zip(params, pytensor.grad(loss, params), strict=True):
            v = shared(np.zeros(p.get_value().shape), p.name + ".v")
            nv = 0.9 * v + g
            ups += [(v, nv), (p, p - 0.5 * nv)]
        return loss, ups
    if name == "mlp":
        layers = [dense(784, 128, "l1"), dense(128, 64, "l2"), dense(64, 10, "l3")]
        x = shared(rng.normal(size=(64, 784)), "x")
        y = pytensor.shared(rng.integers(0, 10, 64), name="y")
        h = x
        for i, (w, b) in enumerate(layers):
            h = h @ w + b
            if i < 2:
                h = pt.maximum(h, 0)
        logp = h - pt.logsumexp(h, axis=1, keepdims=True)
        loss = -pt.mean(logp[pt.arange(64), y])
        params = [p for layer in layers for p in layer]
        lr, b1_, b2_, eps = 1e-3, 0.9, 0.999, 1e-8
        t = pytensor.shared(np.float32(0), name="t")
        nt = t + 1
        ups = [(t, nt)]
        for p, g in zip(params, pytensor.grad(loss, params), strict=True):
            m = shared(np.zeros(p.get_value().shape), p.name + ".m")
            v = shared(np.zeros(p.get_value().shape), p.name + ".v")
            nm = b1_ * m + (1 - b1_) * g
            nv = b2_ * v + (1 - b2_) * g * g
            update = p - lr * (nm / (1 - b1_**nt)) / (pt.sqrt(nv / (1 - b2_**nt)) + eps)
            ups += [(m, nm), (v, nv), (p, update)]
        return loss, ups
    raise ValueError(f"unknown workload {name!r}: PyTensor runs {', '.join(WORKLOADS)} only")


def build(name: str, cache_dir: str | None = None) -> tuple[Callable[[], Any], int]:
    """``(step, timed_steps)`` for workload ``name``, compiled by PyTensor's C backend."""
    pytensor = load_pytensor(cache_dir)
    if pytensor is None:
        raise ImportError("PyTensor is not importable")
    if not pytensor.config.cxx:
        raise RuntimeError("PyTensor's C backend needs a C++ compiler (g++), and finds none")
    loss, updates = _workload(pytensor, name)
    mode = pytensor.compile.mode.Mode(linker="cvm", optimizer="fast_run")
    step: Callable[[], Any] = pytensor.function([], loss, updates=updates, mode=mode)
    return step, STEPS[name]
