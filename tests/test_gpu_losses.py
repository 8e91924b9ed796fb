"""The losses on the GPU where they differ from a plain formula.

binary_cross_entropy's clamp: the value and PyTorch's gradient of the CPU. The loss pins
its gradient with a value-only helper (``adam_ema`` at ``beta = 0``), so this checks that
helper on the GPU too. cross_entropy's labels: one out of range raises the GPU's
``OutOfRangeError`` at the readback (the index checks themselves are in
``packages/gpu/tests/test_numerics_index.py``)."""

from __future__ import annotations

import numpy as np
import pytest

from asgrad import nn
from asgrad.autograd import grad
from asgrad.gpu import Device
from asgrad.tensor import Graph, OutOfRangeError, evaluate


@pytest.mark.gpu
def test_bce_at_the_clamp_on_gpu_matches_cpu(device: Device) -> None:
    p = np.array([0.0, 1.0, 1e-20, 1e-9, 0.3, 0.999], np.float32)
    t = np.array([1.0, 0.0, 1.0, 0.2, 0.3, 1.0], np.float32)
    g = Graph()
    pt, tt = g.input("p", p.shape), g.input("t", t.shape)
    loss = nn.binary_cross_entropy(pt, tt, reduction="sum")
    outs = [loss, *grad(loss, [pt, tt])]
    cpu = evaluate(outs, {"p": p, "t": t}, backend="cpu")
    gpu = evaluate(outs, {"p": p, "t": t}, backend="gpu")
    assert cpu[0] == pytest.approx(200.0 + 46.0517 + 4.1447 + 0.6109 + 0.001, rel=1e-4)
    np.testing.assert_allclose(cpu[1][:3], [-1e12, 1e12, -1e12], rtol=1e-6)
    for c, d in zip(cpu, gpu, strict=True):
        np.testing.assert_allclose(d, c, rtol=1e-5, atol=1e-6)


@pytest.mark.gpu
def test_cross_entropy_with_a_label_out_of_range_raises(device: Device) -> None:
    g = Graph("loss")
    logits = g.input("logits", (4, 5))
    labels = g.input("labels", (4,), "int64")
    loss = nn.cross_entropy(logits, labels)
    feeds = {"logits": np.zeros((4, 5), np.float32), "labels": np.array([0, 5, 1, 2])}
    with pytest.raises(OutOfRangeError, match=r"0 <= index < 5"):
        evaluate([loss], feeds, backend="gpu")
    feeds["labels"] = np.array([0, 4, 1, 2])
    (good,) = evaluate([loss], feeds, backend="gpu")
    np.testing.assert_allclose(good, np.log(5.0), rtol=1e-6)
