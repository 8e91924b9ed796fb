"""A mixed-precision step's backward reads attention's probabilities in float16
(`asgrad.tensor.ir.saved_half`): the float16 copy the product reads, widened, not
float32 probabilities kept (nor recomputed) for the softmax's gradient."""

from __future__ import annotations

import numpy as np

from asgrad.autograd import grad
from asgrad.tensor import Graph, Tensor, compile, make_schedule
from asgrad.tensor.api.precision import mixed_precision
from asgrad.tensor.ir.memory import forward_ids, plan_memory
from asgrad.tensor.ir.passes import optimize

B, H, T, D = 2, 2, 16, 8


def _attention_step(g: Graph, precision: str = "mixed") -> list[Tensor]:
    q, k, v = (g.input(n, (B, H, T, D)) for n in "qkv")
    mask = g.constant(np.triu(np.full((T, T), -1e9, np.float32), 1))
    att = ((q @ k.swapaxes(-1, -2)) * (1.0 / np.sqrt(D)) + mask).softmax(-1)
    loss = ((att @ v) * (att @ v)).mean()
    if precision == "mixed":
        [loss], _ = mixed_precision([loss])
    return [loss, *grad(loss, [q, k, v])]


def _feeds() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    return {n: rng.standard_normal((B, H, T, D)).astype(np.float32) for n in "qkv"}


def test_the_backward_reads_the_float16_probabilities_and_keeps_no_more() -> None:
    outs = _attention_step(Graph())
    schedule = make_schedule(outs)
    (softmax,) = [n for n in schedule.nodes if n.op == "softmax"]  # none recomputed
    forward = forward_ids(schedule.nodes, schedule.outputs)
    backward = [n for n in schedule.nodes if n.id not in forward]
    assert not any(softmax in n.inputs for n in backward)
    (half,) = [n for n in schedule.nodes if n.op == "cast" and n.inputs[0] is softmax]
    assert half.dtype == "float16"
    widened = [n for n in schedule.nodes if n.op == "cast" and n.inputs[0] is half]
    assert [n.dtype for n in widened] == ["float32"]
    assert any(widened[0] in n.inputs for n in backward if n.op == "mul")
    kept_float32 = plan_memory(*optimize([t.node for t in outs])).activations
    assert schedule.memory().activations < kept_float32


def test_the_gradients_round_only_the_probabilities_the_product_reads() -> None:
    # the softmax's gradient p * (g - sum(g * p)) with p rounded to float16, in numpy
    got = compile(_attention_step(Graph()))(_feeds())
    f = _feeds()
    q, k, v = (f[n].astype(np.float16) for n in "qkv")
    mask = np.triu(np.full((T, T), -1e9, np.float32), 1)
    scale = np.float16(1.0 / np.sqrt(D))
    s = np.matmul(q.astype(np.float32), k.swapaxes(-1, -2).astype(np.float32))
    s = (s.astype(np.float16) * scale).astype(np.float32) + mask
    e = np.exp(s - s.max(-1, keepdims=True))
    p16 = (e / e.sum(-1, keepdims=True)).astype(np.float16)
    y = np.matmul(p16.astype(np.float32), v.astype(np.float32)).astype(np.float16)
    dy = 2.0 * y.astype(np.float32) * y.astype(np.float32).dtype.type(1.0 / y.size)
    dy16 = dy.astype(np.float16)
    dp = np.matmul(dy16.astype(np.float32), v.swapaxes(-1, -2).astype(np.float32))
    dp = dp.astype(np.float16).astype(np.float32)
    p = p16.astype(np.float32)
    ds = p * (dp - (dp * p).sum(-1, keepdims=True))
    dv = np.matmul(p16.swapaxes(-1, -2).astype(np.float32), dy16.astype(np.float32))
    np.testing.assert_allclose(
        got[3], dv.astype(np.float16).astype(np.float32), rtol=2e-3, atol=1e-6
    )
    want_q = np.matmul((ds.astype(np.float16) * scale).astype(np.float32), k.astype(np.float32))
    np.testing.assert_allclose(got[1], want_q, rtol=2e-2, atol=2e-5)
    # and within float16's rounding of the float32 step's gradients
    full = compile(_attention_step(Graph(), "float32"))(_feeds())
    for a, b in zip(got[1:], full[1:], strict=True):
        np.testing.assert_allclose(a, b, rtol=5e-2, atol=5e-4)
