"""nn reaches every op through one front door: the functional API of ``asgrad.tensor``.

Layers and optimizers call :mod:`asgrad.tensor.api.nn_functional` (and
:mod:`asgrad.tensor.api.functional`), so each op's attributes are built in one place.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

import asgrad.nn
from asgrad.tensor import Graph, evaluate
from asgrad.tensor.api.functional import size_ratio
from asgrad.tensor.api.nn_functional import adam_ema, adam_update, batch_norm, batch_normalize
from asgrad.tensor.errors import ShapeError

NN_SRC = Path(asgrad.nn.__file__).resolve().parent


def test_nn_appends_no_op_by_name() -> None:
    calls = [
        f"{path.relative_to(NN_SRC)}:{n}: {line.strip()}"
        for path in sorted(NN_SRC.rglob("*.py"))
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if re.search(r"\.apply\(", line) and "# Module.apply" not in line
    ]
    assert calls == [], "call the functional API instead of Graph.apply:\n" + "\n".join(calls)


def test_adam_front_doors_match_the_arithmetic() -> None:
    rng = np.random.default_rng(0)
    mv, gv, pv, vv = (rng.standard_normal(5) for _ in range(4))
    vv = np.abs(vv)
    g = Graph()
    m, grad, p, v = (g.input(name, (5,), "float64") for name in ("m", "g", "p", "v"))
    step, bc2, decay = (g.constant(c, "float64") for c in (0.1, 0.7, 0.99))
    outs = [
        adam_ema(m, grad, 0.9),
        adam_ema(m, grad, 0.999, square=True),
        adam_update(p, m, v, step, bc2, eps=1e-8),
        adam_update(p, m, v, step, bc2, decay, eps=1e-8),
    ]
    assert outs[0].node.attrs == {"beta": 0.9}
    assert outs[1].node.attrs == {"beta": 0.999, "square": True}
    got = evaluate(outs, {"m": mv, "g": gv, "p": pv, "v": vv})
    np.testing.assert_allclose(got[0], 0.9 * mv + 0.1 * gv)
    np.testing.assert_allclose(got[1], 0.999 * mv + (1 - 0.999) * gv * gv)
    adam_step = 0.1 * mv / (np.sqrt(vv) / 0.7 + 1e-8)
    np.testing.assert_allclose(got[2], pv - adam_step)
    np.testing.assert_allclose(got[3], pv * 0.99 - adam_step)
    with pytest.raises(ShapeError, match=r"adam_ema: beta must be in \[0, 1\)"):
        adam_ema(m, grad, 1.5)


def test_batch_normalize_is_batch_norm_without_running_statistics() -> None:
    x = np.random.default_rng(1).standard_normal((6, 3, 2))
    g = Graph()
    t = g.input("x", x.shape, "float64")
    y = batch_normalize(t, eps=1e-5)
    assert y.node.op == "batch_norm"
    assert y.node.attrs == {"eps": 1e-5}
    ref = batch_norm(t, None, None, training=True, eps=1e-5).y
    got, want = evaluate([y, ref], {"x": x})
    np.testing.assert_array_equal(got, want)
    mean, var = x.mean(axis=(0, 2), keepdims=True), x.var(axis=(0, 2), keepdims=True)
    np.testing.assert_allclose(got, (x - mean) / np.sqrt(var + 1e-5))


def test_size_ratio_follows_the_fed_batch() -> None:
    g = Graph()
    x = g.input("x", (4, 3, 5))
    n = size_ratio(x, x.mean(axis=(0, 2)))
    assert n.shape == ()
    for batch in (4, 7):
        (got,) = evaluate([n], {"x": np.zeros((batch, 3, 5), np.float32)})
        assert float(got) == batch * 5
