"""The GPU backend of ``asgrad.tensor``'s executor: ``backend="gpu"``.

A :class:`~asgrad.tensor.executor.Schedule` is compiled, once per set of fed shapes,
into a *plan*: every node lowered to WGSL kernel launches (:mod:`asgrad.gpu.lowering`)
whose dispatches are captured with their bind groups, over buffers that a plan-owned
pool reuses by liveness (an intermediate's buffer is free after its last use). Running
the plan uploads the feeds into their fixed buffers, replays the captured dispatches in
one compute pass (submitted in chunks), and reads every output back with one mapping.

Parameters live in a :class:`GpuVariableStore`: uploaded once, updated in place on the
device by the plan's update copies, and fetched back only when someone reads
``Variable.value``. A training step therefore moves the batch up and the loss down.
"""

from __future__ import annotations

import weakref
from collections.abc import Mapping
from typing import Any

import numpy as np

from asgrad.gpu.array import GpuArray, Operand
from asgrad.gpu.buffers import ScopedPool
from asgrad.gpu.copy import copy_into
from asgrad.gpu.device import Command, Device, get_device
from asgrad.gpu.errors import GpuError, GpuUnavailableError, GpuUnsupportedError
from asgrad.gpu.fusion import Deferred, Value, emit, materialize
from asgrad.gpu.lowering import lower
from asgrad.gpu.lowering.elementwise import EXPRESSION_OPS, expression
from asgrad.gpu.lowering.leaf import upload_constant
from asgrad.gpu.lowering.linalg import MatrixView, matmul
from asgrad.gpu.source import numpy_dtype, to_storage
from asgrad.gpu.variables import GpuVariableStore, variable_store
from asgrad.tensor import TensorType
from asgrad.tensor.backends import Executable, register_backend
from asgrad.tensor.graph import Node, Variable
from asgrad.tensor.schedule import Schedule

__all__ = ["GpuBackend", "GpuExecutable", "GpuVariableStore", "variable_store"]

# Ops a fused kernel can absorb: elementwise expressions, and broadcasts/transposes,
# which become strided reads of their input.
INLINE_OPS = EXPRESSION_OPS | {"broadcast_to", "broadcast_like", "transpose"}
# Ops whose result aliases their input's buffer.
VIEW_OPS = frozenset({"reshape", "reshape_like", "expand_dims", "squeeze", "sum_to_like"})


# An elementwise value read by up to this many elementwise users is recomputed in each.
MAX_RECOMPUTE = 4


def _passes_through(node: Node, types: Mapping[int, TensorType]) -> bool:
    """A view whose input broadcasts to its users exactly as its output would: the
    shapes agree once leading 1s are dropped (``sum_to_like`` to the same shape)."""
    if node.op not in VIEW_OPS:
        return False

    def core(shape: tuple[int, ...]) -> tuple[int, ...]:
        dims = list(shape)
        while dims and dims[0] == 1:
            dims.pop(0)
        return tuple(dims)

    return core(types[node.inputs[0].id].shape) == core(types[node.id].shape)


def _swaps_last_two(node: Node) -> bool:
    axes = tuple(node.attrs["axes"])
    n = len(axes)
    return n >= 2 and axes == (*range(n - 2), n - 1, n - 2)


def _wgsl(value: Value) -> str:
    if isinstance(value, Operand):
        return value.array.wgsl
    return value.wgsl


class _Plan:
    """A schedule lowered for one set of fed shapes: captured dispatches + buffers."""

    def __init__(
        self,
        schedule: Schedule,
        feeds: Mapping[str, np.ndarray],
        device: Device,
        fuse: bool = True,
    ) -> None:
        self.device = device
        self.scope = ScopedPool(device.pool)
        self._closer = weakref.finalize(self, self.scope.close)
        store = variable_store(device)
        types = schedule.infer_types({name: v.shape for name, v in feeds.items()})
        self.inputs: dict[str, GpuArray] = {}
        self.keep: list[GpuArray] = []  # constants: alive as long as the plan
        self.variables: list[Variable] = []
        values: dict[int, Value] = {}
        freed_after: dict[int, list[int]] = {}
        for node_id, step in schedule.last_use.items():
            freed_after.setdefault(step, []).append(node_id)
        users: dict[int, list[Node]] = {}
        for node in schedule.nodes:
            for inp in node.inputs:
                users.setdefault(inp.id, []).append(node)
        kept = {n.id for n in schedule.outputs} | {n.id for _, n in schedule.updates}

        memo: dict[int, bool] = {}

        def fusable(node: Node) -> bool:
            """Whether ``node`` is inlined into its users rather than launched.

            Every user must be elementwise (it broadcasts the value, so any shape of it
            broadcasts to the user's), or a view or broadcast that is itself inlined;
            an elementwise value with several users is recomputed in each, which costs
            arithmetic, not a launch. A transpose read by a matmul becomes strides.
            """
            if node.id not in memo:
                memo[node.id] = fuse and _fusable(node)
            return memo[node.id]

        def _fusable(node: Node) -> bool:
            following = users.get(node.id, [])
            if node.id in kept or not following:
                return False
            if (
                node.op == "transpose"
                and _swaps_last_two(node)
                and len(following) == 1
                and following[0].op == "matmul"
            ):
                return True
            if node.op in EXPRESSION_OPS:
                allowed = len(following) <= MAX_RECOMPUTE
            elif node.op in INLINE_OPS or _passes_through(node, types):
                allowed = node.op != "transpose" or len(following) == 1
            else:
                return False
            return allowed and all(
                u.op in EXPRESSION_OPS
                or ((u.op in INLINE_OPS or _passes_through(u, types)) and fusable(u))
                for u in following
            )

        in_place = self._in_place_updates(schedule, users, fusable) if fuse else {}

        device.begin_capture(self.scope)
        try:
            for i, node in enumerate(schedule.nodes):
                out_type = types[node.id]
                value: Value
                if node.op == "input":
                    value = GpuArray.empty(out_type.shape, numpy_dtype(out_type.dtype), device)
                    self.inputs[node.name] = value
                elif node.op == "parameter":
                    var = node.attrs["variable"]
                    self.variables.append(var)
                    value = store.array(var)
                elif node.op == "constant":
                    # uploaded now, read at every replay: never a scope buffer that
                    # captured kernels might overwrite
                    host = np.asarray(node.attrs["value"])
                    value = upload_constant(device, host, numpy_dtype(out_type.dtype))
                    self.keep.append(value)
                else:
                    ins = [values[n.id] for n in node.inputs]
                    try:
                        target = in_place.get(node.id)
                        if target is not None:
                            value = self._lower_in_place(node, ins, out_type, target)
                        elif node.op == "size_ratio":  # a constant once shapes are known
                            a, b = (types[n.id].shape for n in node.inputs)
                            ratio = np.asarray(int(np.prod(a)) / max(int(np.prod(b)), 1))
                            value = upload_constant(device, ratio, numpy_dtype(out_type.dtype))
                            self.keep.append(value)
                        else:
                            value = self._lower(node, ins, out_type, fusable(node))
                    except GpuError as exc:
                        raise type(exc)(f"{node.op} (made at {node.location}): {exc}") from exc
                values[node.id] = value
                for dead in freed_after.get(i, []):
                    values.pop(dead, None)
            self.outputs = [materialize(values[n.id]) for n in schedule.outputs]
            self.updates: list[tuple[Variable, GpuArray]] = []
            for var, node in schedule.updates:
                target = store.array(var)
                new_value = materialize(values[node.id])
                if new_value.buffer is not target.buffer:
                    copy_into(new_value, target)
                self.updates.append((var, target))
        finally:
            self.commands: list[Command] = device.end_capture()

    @staticmethod
    def _lower(node: Node, ins: list[Value], out_type: TensorType, defer: bool) -> Value:
        if defer and node.op in VIEW_OPS:
            return ins[0]  # shapes differ by leading 1s only: broadcasting realigns them
        if node.op in EXPRESSION_OPS:
            expr = expression(node.op, node.attrs, [_wgsl(v) for v in ins], out_type.dtype)
            assert expr is not None
            if defer:
                return Deferred(expr, ins, out_type, node.attrs)
            return emit(expr, ins, out_type)
        if defer and node.op in ("broadcast_to", "broadcast_like"):
            return ins[0]  # the user broadcasts it
        if defer and node.op == "transpose":
            source = ins[0] if isinstance(ins[0], Operand) else materialize(ins[0])
            return Operand.of(source).permute(tuple(node.attrs["axes"]))
        if node.op == "matmul":
            a, b = (
                MatrixView(v.array, v.shape, v.strides, v.offset)
                if isinstance(v, Operand)
                else materialize(v)
                for v in ins
            )
            return matmul(a, b)
        return lower(node.op, [materialize(v) for v in ins], node.attrs, out_type)

    @staticmethod
    def _lower_in_place(
        node: Node, ins: list[Value], out_type: TensorType, target: GpuArray
    ) -> Value:
        """An update rule written straight into its variable's buffer."""
        expr = expression(node.op, node.attrs, [_wgsl(v) for v in ins], out_type.dtype)
        assert expr is not None
        try:
            return emit(expr, ins, out_type, target)
        except GpuUnsupportedError:  # the old value is read other than element-wise
            return emit(expr, ins, out_type)

    @staticmethod
    def _in_place_updates(
        schedule: Schedule, users: Mapping[int, list[Node]], fusable: Any
    ) -> dict[int, GpuArray]:
        """Update values that can be written into their variable's buffer directly.

        Safe when every other read of the variable's old value is launched before the
        update (a read fused into a later kernel counts at that kernel's position).
        """
        index = {n.id: i for i, n in enumerate(schedule.nodes)}

        def launched_at(node: Node) -> int:
            """Where the kernel that reads for ``node`` is launched (the last, if several)."""
            if fusable(node):
                return max(launched_at(user) for user in users[node.id])
            return index[node.id]

        out_ids = {n.id for n in schedule.outputs}
        params = {id(n.attrs["variable"]): n for n in schedule.nodes if n.op == "parameter"}
        store = variable_store()
        result: dict[int, GpuArray] = {}
        for var, node in schedule.updates:
            if node.op not in EXPRESSION_OPS or node.id in out_ids or node.id in result:
                continue
            if sum(1 for _, other in schedule.updates if other is node) > 1:
                continue
            param = params.get(id(var))
            readers: list[Node] = []
            frontier = [param] if param is not None else []
            while frontier:
                for user in users.get(frontier.pop().id, []):
                    readers.append(user)
                    if user.op in VIEW_OPS:
                        frontier.append(user)
            at = index[node.id]
            # a read fused into the update's own kernel reads each element before it
            # is overwritten, by the same thread
            if all(r is node or launched_at(r) <= at for r in readers):
                result[node.id] = store.array(var)
        return result

    def run(self, feeds: Mapping[str, np.ndarray]) -> list[np.ndarray]:
        device = self.device
        store = variable_store(device)
        for var in self.variables:
            store.sync(var)
        for name, arr in self.inputs.items():
            value = feeds[name]
            if value.size:
                device.write(arr.buffer, to_storage(np.asarray(value), arr.storage_dtype))
        device.replay(self.commands)
        for var, _ in self.updates:
            store.mark_updated(var)
        if not self.outputs:
            device.flush()
            return []
        raw = device.read_many([(a.buffer, a.nbytes) for a in self.outputs])
        results = []
        for data, arr in zip(raw, self.outputs, strict=True):
            host = np.frombuffer(data, arr.storage_dtype, count=arr.size).reshape(arr.shape)
            results.append(host.astype(arr.dtype))
        return results


class GpuExecutable:
    """A schedule compiled for the GPU; plans are cached by the fed shapes."""

    def __init__(self, schedule: Schedule, device: Device) -> None:
        self.schedule = schedule
        self.device = device
        self._plans: dict[tuple[Any, ...], _Plan] = {}

    def run(self, feeds: Mapping[str, np.ndarray]) -> list[np.ndarray]:
        """Run once on ``feeds``; returns the outputs and applies the updates."""
        key = tuple((name, v.shape, v.dtype.str) for name, v in sorted(feeds.items()))
        plan = self._plans.get(key)
        if plan is None:
            plan = self._plans[key] = _Plan(self.schedule, feeds, self.device)
        return plan.run(feeds)


class GpuBackend:
    """``backend="gpu"``: runs schedules with WGSL kernels through wgpu."""

    name = "gpu"

    def available(self) -> bool:
        """Whether an adapter can be opened."""
        try:
            get_device()
        except GpuUnavailableError:
            return False
        return True

    def compile(self, schedule: Schedule) -> Executable:
        """Compile ``schedule`` (raises :class:`GpuUnavailableError` without an adapter)."""
        return GpuExecutable(schedule, get_device())


register_backend("gpu", GpuBackend)
