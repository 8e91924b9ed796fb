"""The control family on the GPU: ``scan`` and its parts.

A scan keeps its carries on the device and records the body's kernels once per step
into the plan: the body's schedule (graph passes applied) is lowered with the plan's
own machinery, its elementwise chains fused as in any plan, its inputs bound to the
current carries, a strided view of each xs at the step, and the captured values.
Each step's carries are materialized (so that no fused expression grows from step to
step) and its ys copied into their slice of the packed result. The body's constants
are borrowed from the plan's buffers for its lifetime. ``scan_part`` copies a part out
of the packed result; ``scan_unpart`` writes one into zeros.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from asgrad.gpu.device.array import GpuArray, Operand, contiguous_strides, slice_view
from asgrad.gpu.device.source import numpy_dtype, to_storage, wgsl_type
from asgrad.gpu.errors import GpuUnsupportedError
from asgrad.gpu.lowering.common import Attrs, Lowering, zero
from asgrad.gpu.lowering.elementwise import elementwise
from asgrad.gpu.lowering.leaf import plan_owned, upload_constant
from asgrad.tensor import TensorType
from asgrad.tensor.loops.body import Body
from asgrad.tensor.ops.control import layout, step_order

__all__ = ["LOWERINGS", "WGSL_FILES"]

WGSL_FILES: tuple[str, ...] = ("elementwise.wgsl",)

Value = Any  # a GpuArray, an Operand or a deferred expression (asgrad.gpu.plan.fusion)


def _types(ins: list[GpuArray]) -> list[TensorType]:
    return [TensorType(a.shape, a.dtype.name) for a in ins]


def _parts(packed: GpuArray, parts: list[TensorType]) -> list[Operand]:
    views, start = [], 0
    for p in parts:
        views.append(Operand(packed, p.shape, contiguous_strides(p.shape), start))
        start += math.prod(p.shape)
    return views


def _write(value: Value, target: Operand) -> None:
    from asgrad.gpu.plan.fusion import materialize

    source = value if isinstance(value, Operand | GpuArray) else materialize(value)
    elementwise("x0", [source], out=target)


def _constant(device: Any, host: np.ndarray, dtype: Any, keep: list[GpuArray]) -> GpuArray:
    """``host`` on the device for the kernels being recorded.

    In a plan (a capture) the buffer is one no other value of the plan reuses
    (`plan_owned`);
    outside one, it is uploaded and kept in ``keep`` until the kernels have run.
    """
    if device.capture is None:
        value = upload_constant(device, host, dtype)
        keep.append(value)
        return value
    value = plan_owned(device, host.shape, dtype)
    if host.size:
        device.write(value.buffer, to_storage(host, value.storage_dtype))
    return value


def _scan(ins: list[GpuArray], attrs: Attrs, out: TensorType) -> GpuArray:
    from asgrad.gpu.plan import inlined_nodes, release_steps, shared_products, users_of
    from asgrad.gpu.plan.fusion import lower_node, materialize

    loop: Body = attrs["loop"]
    parts, steps = layout(_types(ins), attrs)
    device = ins[0].device
    packed = GpuArray.empty(out.shape, numpy_dtype(out.dtype), device)
    views = _parts(packed, parts)
    nc, nx = loop.n_carry, loop.n_x
    body = loop.at([a.dtype.name for a in ins])
    schedule = body.schedule()
    names = body.input_names()
    step_shapes = [a.shape[1:] for a in ins[nc : nc + nx]]
    shapes = [*(a.shape for a in ins[:nc]), *step_shapes, *(a.shape for a in ins[nc + nx :])]
    types = schedule.infer_types(dict(zip(names, shapes, strict=True)))
    users = users_of(schedule)
    inlined = inlined_nodes(schedule, users, types)
    shared = shared_products(schedule, users, inlined)
    released = release_steps(schedule)
    keep: list[GpuArray] = []
    constants = {
        n.id: _constant(device, np.asarray(n.attrs["value"]), numpy_dtype(n.dtype), keep)
        for n in schedule.nodes
        if n.op == "constant"
    }
    out_ids = {n.id for n in schedule.outputs}
    fixed: dict[str, Value] = dict(zip(names[nc + nx :], ins[nc + nx :], strict=True))
    carries: list[Value] = list(ins[:nc])
    ny = body.n_y
    for t in step_order(steps, bool(attrs["reverse"])):
        if attrs["save"]:
            for i, c in enumerate(carries):
                _write(c, slice_view(views[nc + ny + i], [t]))
        bound = dict(fixed)
        bound.update(zip(names[:nc], carries, strict=True))
        for j in range(nx):
            bound[names[nc + j]] = slice_view(Operand.of(ins[nc + j]), [t])
        values: dict[int, Value] = {}
        for k, node in enumerate(schedule.nodes):
            if node.op == "input":
                values[node.id] = bound[node.name]
            elif node.op == "constant":
                values[node.id] = constants[node.id]
            elif node.op == "parameter":
                raise GpuUnsupportedError(f"{body.describe()} reads a parameter directly")
            elif node.op == "size_ratio":  # a constant once shapes are known
                a, b = (types[n.id].shape for n in node.inputs)
                ratio = np.asarray(math.prod(a) / max(math.prod(b), 1))
                dtype = numpy_dtype(types[node.id].dtype)
                values[node.id] = _constant(device, ratio, dtype, keep)
            else:
                node_ins = [values[n.id] for n in node.inputs]
                with device.checks.lowering(node.op, node.location):  # faults name the body's op
                    in_shape = tuple(types[node.inputs[0].id].shape) if node.inputs else None
                    inline = node.id in inlined
                    values[node.id] = lower_node(
                        node, node_ins, types[node.id], inline, in_shape, node.id in shared
                    )
            for dead in released.get(k, []):
                if dead not in out_ids:
                    values.pop(dead, None)
        outs = [values[n.id] for n in schedule.outputs]
        carries = [materialize(v) if not isinstance(v, GpuArray) else v for v in outs[:nc]]
        for i in range(ny):
            _write(outs[nc + i], slice_view(views[nc + i], [t]))
    for i, c in enumerate(carries):
        _write(c, views[i])
    if keep:  # outside a plan: the kernels run before the constants go
        device.synchronize()
    return packed


def _part_attrs(attrs: Attrs) -> dict[str, Any]:
    return {k: v for k, v in attrs.items() if k != "part"}


def _scan_part(ins: list[GpuArray], attrs: Attrs, out: TensorType) -> GpuArray:
    parts, _ = layout(_types(ins[1:]), _part_attrs(attrs))
    view = _parts(ins[0], parts)[int(attrs["part"])]
    return elementwise("x0", [view], numpy_dtype(out.dtype), out.shape)


def _scan_unpart(ins: list[GpuArray], attrs: Attrs, out: TensorType) -> GpuArray:
    parts, _ = layout(_types(ins[1:]), _part_attrs(attrs))
    dtype = numpy_dtype(out.dtype)
    packed = GpuArray.empty(out.shape, dtype, ins[0].device)
    elementwise(zero(wgsl_type(dtype)), [], dtype, out.shape, out=packed)
    _write(ins[0], _parts(packed, parts)[int(attrs["part"])])
    return packed


LOWERINGS: dict[str, Lowering] = {
    "scan": _scan,
    "scan_part": _scan_part,
    "scan_unpart": _scan_unpart,
}
