"""Fused line groups of the optim family: Adam's ops of one parameter as one Numba kernel.

`fuse_adam` (the optim family's ``fuse`` in
`asgrad.tensor.cpu.lowering.FAMILY_LOWERINGS`) runs on the lines of
`generate_cpu_function` when the compiled path is on,
for graphs too large to compile whole (`asgrad.tensor.cpu.jit.step`). numpy runs
an op as several passes over memory (Adam's moment update is four, its parameter step
five); a fused kernel reads each input once and writes each result once.

Adam's update of one parameter is three ops: ``m' = adam_ema(m, g)``,
``v' = adam_ema(v, g, square)`` and ``p' = adam_update(p, m', v', ...)``. Where the two
moments are read by nothing but the update (and their variables' updates), the group
becomes one pass (`adam_step`): the moment
lines only allocate ``m'`` and ``v'`` (fresh arrays, as before), and the update's line
fills them and returns ``p'``. Values that the group's lines read stay live up to the
update's line, which the buffer plan sees as reading them. Groups smaller than
`FUSE_MIN_ELEMENTS` stay as they are (the kernel's call costs more than it
saves there).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from asgrad.tensor.cpu.records import Call, Line, Ref, Reuse, Value, line_at, line_readers
from asgrad.tensor.cpu.specialize import Context
from asgrad.tensor.ir.registry import TensorType

# A group is fused from this many elements of its result on.
FUSE_MIN_ELEMENTS = 1024


def fuse_adam(
    lines: Sequence[Line],
    refs: Mapping[int, Ref],
    types: Mapping[int, TensorType],
    env: dict[str, Any],
    context: Context,
) -> list[Line]:
    """``lines`` with each fusable Adam group as one kernel (see the module docstring)."""
    registered = context.registered
    readers = line_readers(lines)
    by_id = line_at(lines)
    out = list(lines)
    for k, line in enumerate(lines):
        node = line.node
        if node.op != "adam_update" or not (registered("adam_update") and registered("adam_ema")):
            continue
        t = types[node.id]
        if t.dtype not in ("float32", "float64") or math.prod(t.shape) < FUSE_MIN_ELEMENTS:
            continue
        m_ref, v_ref = refs[node.inputs[1].id], refs[node.inputs[2].id]
        if m_ref.is_const or v_ref.is_const or m_ref.id == v_ref.id:
            continue
        km, kv = by_id.get(m_ref.id), by_id.get(v_ref.id)
        if km is None or kv is None:
            continue
        m_node, v_node = lines[km].node, lines[kv].node
        if (
            m_node.op != "adam_ema"
            or v_node.op != "adam_ema"
            or m_node.attrs["square"]
            or not v_node.attrs["square"]
            or len(readers.get(m_ref.id, ())) != 1
            or len(readers.get(v_ref.id, ())) != 1
            or any(types[n.id] != t for n in (*m_node.inputs, *v_node.inputs, node.inputs[0]))
        ):
            continue
        ins = [refs[n.id] for n in (node.inputs[0], *m_node.inputs, *v_node.inputs)]
        scalars = [refs[n.id] for n in node.inputs[3:]]
        if any(r.is_const for r in ins) or any(r.is_const for r in scalars):
            continue
        p, m, g1, v, g2 = (Value(r.id) for r in ins)
        name = f"_fused{node.id}"
        env[name] = functools.partial(
            _adam_step,
            beta1=float(m_node.attrs["beta"]),
            beta2=float(v_node.attrs["beta"]),
            eps=float(node.attrs["eps"]),
        )
        env["_empty"] = np.empty
        for kk, n in ((km, m_node), (kv, v_node)):
            shape, dtype = repr(types[n.id].shape), repr(types[n.id].dtype)
            out[kk] = Line(node=n, call=Call("_empty", (shape, dtype)), reuse=Reuse.FRESH)
        args = (p, m, v, g1, g2, *(Value(r.id) for r in scalars[:2]), Value(m_ref.id))
        args += (Value(v_ref.id), *(Value(r.id) for r in scalars[2:]))
        out[k] = Line(node=node, call=Call(name, args), reuse=Reuse.FRESH)
    return out


def _adam_step(*args: Any, **kwargs: Any) -> np.ndarray:
    from asgrad.tensor.cpu.jit.kernels_optim import adam_step  # imports Numba

    return adam_step(*args, **kwargs)
