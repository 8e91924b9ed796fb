"""Elementwise values of variables alone, computed together: one dispatch.

Under ``precision="mixed"`` every weight a matrix product reads is cast to float16
(``cast(w, "float16")``): an elementwise node whose only inputs are variables. Node by
node, each is an elementwise kernel of its own, launched before its product. Such a
node reads nothing the step computes, so it can be computed as early as the step
starts: a plan (`variable_copies`) launches every one of them at the first one's
step, as the segments of one multi-tensor kernel (per binding limit), the way the
optimizer's update rules are launched (`asgrad.gpu.plan.multi_update`), and each
later node takes its array from there. Launching a read of a variable earlier is safe:
a variable is written only after every read of its old value (the plan checks it for
the updates written in place).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence, Set

from asgrad.gpu.device import Device
from asgrad.gpu.device.array import GpuArray
from asgrad.gpu.device.source import numpy_dtype, wgsl_type
from asgrad.gpu.device.variables import GpuVariableStore
from asgrad.gpu.lowering.elementwise import EXPRESSION_OPS
from asgrad.gpu.plan.multi_update import _dispatch, _Segment, _segment
from asgrad.gpu.plan.values import Value
from asgrad.tensor import TensorType
from asgrad.tensor.ir.graph import Node
from asgrad.tensor.ir.schedule import Schedule

__all__ = ["launch_variable_copies", "variable_copies"]


def variable_copies(
    schedule: Schedule,
    types: Mapping[int, TensorType],
    inlined: Set[int],
    taken: Set[int],
) -> list[Node]:
    """The launched elementwise nodes whose inputs are all variables (``parameter``
    nodes) and that hold a float value of more than one element, in schedule order;
    none of them an output, an update or in ``taken`` (launched by another kernel
    group). Empty when fewer than two: one kernel either way."""
    kept = {n.id for n in schedule.outputs} | {n.id for _, n in schedule.updates}
    found = [
        n
        for n in schedule.nodes
        if n.op in EXPRESSION_OPS
        and n.inputs
        and all(i.op == "parameter" for i in n.inputs)
        and n.id not in inlined
        and n.id not in kept
        and n.id not in taken
        and _float(types[n.id])
        and _size(types[n.id]) > 1
        and all(_size(types[i.id]) == _size(types[n.id]) for i in n.inputs)
    ]
    return found if len(found) > 1 else []


def launch_variable_copies(
    nodes: Sequence[Node],
    types: Mapping[int, TensorType],
    store: GpuVariableStore,
    device: Device,
) -> dict[int, GpuArray]:
    """Launch ``nodes`` (`variable_copies`) together: node id -> its array."""
    limit = int(device.limits.get("max-storage-buffers-per-shader-stage", 8))
    arrays: dict[int, GpuArray] = {}
    segments: list[_Segment] = []
    for node in nodes:
        t = types[node.id]
        out = GpuArray.empty(tuple(t.shape), numpy_dtype(t.dtype), device)
        values: dict[int, Value] = {i.id: store.array(i.attrs["variable"]) for i in node.inputs}
        segment = _segment([node], values, {node.id: out}, set())
        if segment is None or len(segment.buffers()) > limit:
            continue  # launched at its own step
        arrays[node.id] = out
        segments.append(segment)
    group: list[_Segment] = []
    bound: set[int] = set()
    for segment in segments:
        if group and len(bound | segment.buffers()) > limit:
            _dispatch(group, device, "multi_elementwise")
            group, bound = [], set()
        group.append(segment)
        bound |= segment.buffers()
    if group:
        _dispatch(group, device, "multi_elementwise")
    return arrays


def _float(t: TensorType) -> bool:
    try:
        return wgsl_type(numpy_dtype(t.dtype)) in ("f32", "f16")
    except Exception:  # a dtype the GPU cannot hold
        return False


def _size(t: TensorType) -> int:
    size = 1
    for d in t.shape:
        size *= int(d)
    return size
