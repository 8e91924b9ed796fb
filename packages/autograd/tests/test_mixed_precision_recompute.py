"""A mixed-precision step's backward recomputes attention's softmax from the float16
scores (`asgrad.tensor.ir.remat.recompute_widened_softmax`) instead of keeping the
float32 probabilities and their float16 copy: fewer planned activation bytes, the same
gradients."""

from __future__ import annotations

import numpy as np

from asgrad.autograd import grad
from asgrad.tensor import Graph, Tensor, compile, make_schedule
from asgrad.tensor.api.precision import mixed_precision
from asgrad.tensor.cpu import CPUExecutable
from asgrad.tensor.ir.memory import forward_ids, last_uses, plan_memory
from asgrad.tensor.ir.passes import optimize
from asgrad.tensor.ir.schedule import Schedule

B, H, T, D = 2, 2, 16, 8


def _attention_step(g: Graph) -> tuple[list[Tensor], list[Tensor]]:
    q, k, v = (g.input(n, (B, H, T, D)) for n in "qkv")
    mask = g.constant(np.triu(np.full((T, T), -1e9, np.float32), 1))
    att = ((q @ k.swapaxes(-1, -2)) * (1.0 / np.sqrt(D)) + mask).softmax(-1)
    [loss], _ = mixed_precision([((att @ v) * (att @ v)).mean()])
    return [loss, *grad(loss, [q, k, v])], [q, k, v]


def _feeds() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    return {n: rng.standard_normal((B, H, T, D)).astype(np.float32) for n in "qkv"}


def test_the_backward_reads_a_recomputed_softmax_and_keeps_less() -> None:
    outs, _ = _attention_step(Graph())
    schedule = make_schedule(outs)
    softmaxes = [n for n in schedule.nodes if n.op == "softmax"]
    assert [n.meta.get("role") for n in softmaxes] == [None, "recompute"]
    forward = forward_ids(schedule.nodes, schedule.outputs)
    backward_reads = {i.id for n in schedule.nodes if n.id not in forward for i in n.inputs}
    assert softmaxes[0].id not in backward_reads
    kept_before = plan_memory(*optimize([t.node for t in outs])).activations
    assert schedule.memory().activations < kept_before


def test_the_recomputed_gradients_are_bit_identical() -> None:
    # the same step scheduled without the recomputation, run on the same path
    outs, _ = _attention_step(Graph())
    nodes, roots = optimize([t.node for t in outs])
    inputs = [n for n in nodes if n.op == "input"]
    kept = Schedule(nodes, roots, [], inputs, last_uses(nodes, roots), None)
    with np.errstate(all="ignore"):
        want = CPUExecutable(kept).run(_feeds())
        got = compile(outs)(_feeds())
    for a, b in zip(got, want, strict=True):
        np.testing.assert_array_equal(a, b)
