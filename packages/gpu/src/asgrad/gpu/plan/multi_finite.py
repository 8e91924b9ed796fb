"""Checks of many tensors in one dispatch: ``sum(cast(x, int)) == 0`` for a boolean
elementwise ``x`` (``not all(isfinite(g))`` per gradient: GradScaler's found_inf).

Node by node each check is an elementwise kernel, a sum (one or two dispatches) and a
comparison. Its value is whether no element of ``x`` is true (a sum of zeros and ones
is zero exactly when every term is), so a plan computes it as one flag per check: a
fill sets every flag to true, and one kernel (per binding limit) evaluates each
``x``'s expression over its elements (rendered from the graph's scalar expressions,
as an elementwise kernel's) and clears its flag where an element is true. The checks
wait until a kernel that reads one is launched, so every gradient's check shares the
dispatch. A gradient the update batch sums from partial sums (a bias's column sum, a
weight's product whose K is split: `asgrad.gpu.plan.values.Summed`) is read the same
way, each element the sum of its partial sums (rounded once where it is float16), so
the check needs no reduction of its own either.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence, Set
from dataclasses import dataclass, field

import numpy as np

from asgrad.gpu.device import Device, fold_groups
from asgrad.gpu.device.array import GpuArray, Operand
from asgrad.gpu.device.source import kernel_text
from asgrad.gpu.lowering.elementwise import CHECKED, MAX_INPUTS, elementwise
from asgrad.gpu.lowering.scalar import WGSL, render_wgsl_lets, simplify
from asgrad.gpu.plan.fusion import fused_expression, materialize
from asgrad.gpu.plan.multi_sums import blocks_kernel, sum_lines
from asgrad.gpu.plan.values import Deferred, Summed, Value
from asgrad.tensor import TensorType
from asgrad.tensor.ir.graph import Node
from asgrad.tensor.ir.scalar import Expr, arg

__all__ = ["Checks", "check_conjunctions", "none_true_checks"]

_THREADS = 256


def none_true_checks(
    nodes: Sequence[Node], types: Mapping[int, TensorType], kept: Set[int] = frozenset()
) -> dict[int, tuple[Node, Node, Node]]:
    """The ``equal(sum(cast(x)), 0)`` nodes a plan computes as flags: ``x`` boolean,
    the cast to an integer and the sum over every axis each read only by the next
    (neither of them in ``kept``: an output, an update), the zero a constant. Equal
    node id -> its ``x``, the cast and the sum."""
    users: dict[int, int] = dict.fromkeys(kept, 1)  # another reader: the program's
    for n in nodes:
        for i in n.inputs:
            users[i.id] = users.get(i.id, 0) + 1
    found: dict[int, tuple[Node, Node, Node]] = {}
    for n in nodes:
        if n.op != "equal" or len(n.inputs) != 2 or tuple(types[n.id].shape) != ():
            continue
        total, zero = n.inputs
        if zero.op != "constant" or np.asarray(zero.attrs["value"]).any():
            continue
        if total.op != "sum" or users.get(total.id) != 1 or not total.inputs:
            continue
        cast = total.inputs[0]
        if cast.op != "cast" or users.get(cast.id) != 1 or not cast.inputs:
            continue
        if not types[cast.id].dtype.startswith(("int", "uint")):
            continue
        x = cast.inputs[0]
        if types[x.id].dtype != "bool":
            continue
        shape = tuple(types[x.id].shape)
        if math.prod(types[total.id].shape) != 1 or math.prod(shape) == 0:
            continue
        found[n.id] = (x, cast, total)
    return found


def check_conjunctions(nodes: Sequence[Node], checks: Set[int], inlined: Set[int]) -> set[int]:
    """The inlined ``bitwise_and`` nodes over checks alone (through other such nodes),
    none of them read by another: found_inf's ``&`` of every gradient's check. A plan
    computes each as one more flag, cleared with those of its checks (`Checks.all_of`),
    instead of a tree of kernels binding a few flags each."""
    over_checks: set[int] = set()
    for n in nodes:
        if (
            n.op == "bitwise_and"
            and n.id in inlined
            and all(i.id in checks or i.id in over_checks for i in n.inputs)
        ):
            over_checks.add(n.id)
    inner = {i.id for n in nodes if n.id in over_checks for i in n.inputs}
    return over_checks - inner


@dataclass
class _Job:
    flag: int
    tree: Expr
    leaves: list[GpuArray | Operand | Summed]  # a Summed: its partial sums, added up
    size: int
    groups: list[int] = field(default_factory=list)  # conjunctions' flags it clears too

    def bindings(self) -> set[tuple[int, str]]:
        """The buffers (and element types) the job reads."""
        return {_binding(leaf) for leaf in self.leaves}


def _binding(leaf: GpuArray | Operand | Summed) -> tuple[int, str]:
    if isinstance(leaf, Summed):
        return id(leaf.partials().arena.buffer), "f32"
    array = Operand.of(leaf).array
    return id(array.buffer), array.wgsl


@dataclass
class Checks:
    """A plan's checks (`none_true_checks`): those not launched yet and their flags.

    Each launch fills and computes a flags array of its own, so a value read from an
    earlier launch's flags stays what it was."""

    device: Device
    size: int  # flags an array holds: every check of the plan, then its conjunctions
    pending: list[_Job] = field(default_factory=list)
    flags: GpuArray | None = None  # the pending checks' flags
    groups: list[set[int]] = field(default_factory=list)  # pending conjunctions' flags

    @classmethod
    def of(
        cls, found: Mapping[int, object], device: Device, conjunctions: int = 0
    ) -> Checks | None:
        """The checks of ``found`` and room for ``conjunctions`` (`all_of`); None when
        there are none."""
        return cls(device, len(found) + conjunctions) if found else None

    def all_of(self, parts: Sequence[Value]) -> Operand | None:
        """One flag set when each of ``parts`` (the flags of pending checks) is: cleared
        by the same kernel as theirs. None, adding none, when a part is no pending
        check's flag (an earlier launch's)."""
        flags = self.flags
        if flags is None or len(self.pending) + len(self.groups) >= self.size:
            return None
        offsets: set[int] = set()
        for part in parts:
            if not isinstance(part, Operand) or part.array is not flags or part.shape != ():
                return None
            offsets.add(part.offset)
        if not offsets <= {job.flag for job in self.pending}:
            return None
        self.groups.append(offsets)
        return Operand(flags, (), (), self.size - len(self.groups))

    def add(self, x: Value) -> Operand:
        """Check ``x`` (its elements' expression): its flag, launched with the others by
        `launch`. The pending checks are launched first when ``x`` reads one's flag."""
        job = _job(x)
        if self.flags is not None and any(
            not isinstance(leaf, Summed) and Operand.of(leaf).array.buffer is self.flags.buffer
            for leaf in job.leaves
        ):
            self.launch()
        if self.flags is None:
            self.flags = GpuArray.empty((self.size,), np.bool_, self.device)
        job.flag = len(self.pending)
        self.pending.append(job)
        return Operand(self.flags, (), (), job.flag)

    def launch(self) -> None:
        """Launch the pending checks: the fill, then one kernel per binding limit."""
        flags = self.flags
        if not self.pending or flags is None:
            return
        jobs, self.pending, self.flags = self.pending, [], None
        groups, self.groups = self.groups, []
        for job in jobs:  # the sums they read launched first (column sums wait till now)
            job.bindings()
            # the conjunctions it belongs to: cleared with it
            job.groups = [
                self.size - 1 - g for g, members in enumerate(groups) if job.flag in members
            ]
        elementwise("1u", [], np.bool_, (self.size,), out=flags)
        group: list[_Job] = []
        bound: set[tuple[int, str]] = set()
        for job in jobs:
            mine = job.bindings()
            if group and len(bound | mine) > MAX_INPUTS:
                _dispatch(group, flags)
                group, bound = [], set()
            group.append(job)
            bound |= mine
        _dispatch(group, flags)


def _job(x: Value) -> _Job:
    """The check of ``x``: its expression over leaves read at the element (contiguous)
    or once (one value); ``x`` launched when a leaf is read otherwise, or when the
    expression makes a check of its own (its kernel binds the check slots)."""
    if isinstance(x, Deferred) and x.array is None:
        fused = fused_expression(x.expr, x.inputs)
        shape = tuple(x.type.shape)
        if fused is not None and not _checking(fused[0]):
            tree, found = fused
            leaves = [
                v if isinstance(v, (GpuArray, Operand, Summed)) else materialize(v) for v in found
            ]
            if all(_readable(leaf, shape) for leaf in leaves):
                return _Job(-1, tree, leaves, math.prod(shape))
    whole = materialize(x)
    return _Job(-1, arg(0), [whole], whole.size)


def _checking(tree: Expr) -> bool:
    """Whether ``tree`` calls a checking function (`CHECKED`)."""
    stack, seen = [tree], set()
    while stack:
        e = stack.pop()
        if id(e) in seen:
            continue
        seen.add(id(e))
        if e.op == WGSL and CHECKED in str(e.value):
            return True
        stack.extend(e.args)
    return False


def _readable(leaf: GpuArray | Operand | Summed, shape: tuple[int, ...]) -> bool:
    """Whether ``leaf`` broadcast to ``shape`` is one value or contiguous over it (a
    sum of partial sums of ``shape``'s size: read at each element)."""
    if isinstance(leaf, Summed):
        return leaf.size == math.prod(shape)
    op = Operand.of(leaf)
    if math.prod(op.shape) == 1:
        return True
    if tuple(op.shape) != shape:
        return False
    expected = 1
    for size, stride in zip(reversed(op.shape), reversed(op.strides), strict=True):
        if size != 1 and stride != expected:
            return False
        expected *= size
    return True


def _dispatch(jobs: Sequence[_Job], flags: GpuArray) -> None:
    """One kernel: each job's elements, clearing its flag where one is true."""
    slots: dict[tuple[int, str], int] = {}
    buffers = [flags.buffer]
    types: list[str] = []
    for job in jobs:
        for leaf in job.leaves:
            array = leaf.partials().arena if isinstance(leaf, Summed) else Operand.of(leaf).array
            key = _binding(leaf)
            if key not in slots:
                slots[key] = len(buffers)
                buffers.append(array.buffer)
                types.append(array.wgsl)
    decls = [kernel_text("prelude"), ""]
    decls.append("@group(0) @binding(0) var<storage, read_write> b0: array<atomic<u32>>;")
    decls += [
        f"@group(0) @binding({k}) var<storage, read> b{k}: array<{t}>;"
        for k, t in enumerate(types, start=1)
    ]
    blocks: list[str] = []
    start = 0
    for job in jobs:
        groups = -(-job.size // _THREADS)
        loads: list[str] = []
        leaf_types: list[str] = []
        for k, leaf in enumerate(job.leaves):
            slot = slots[_binding(leaf)]
            if isinstance(leaf, Summed):
                loads += sum_lines(f"x{k}", leaf, f"b{slot}", "i", "            ")
                leaf_types.append(leaf.wgsl)
                continue
            op = Operand.of(leaf)
            at = f"{op.offset}u" if math.prod(op.shape) == 1 else f"{op.offset}u + i"
            loads.append(f"            let x{k} = b{slot}[{at}];")
            leaf_types.append(op.array.wgsl)
        names = [f"x{k}" for k in range(len(job.leaves))]
        lets, body = render_wgsl_lets(simplify(job.tree), names, leaf_types, "u32")
        blocks.append(
            "\n".join(
                [
                    f"    if (w < {start + groups}u) {{",
                    f"        let i = (w - {start}u) * {_THREADS}u + li;",
                    f"        if (i < {job.size}u) {{",
                    *loads,
                    *(f"            {s}" for s in lets),
                    f"            if (({body}) != 0u) {{",
                    *(
                        f"                atomicStore(&b0[{flag}u], 0u);"
                        for flag in (job.flag, *job.groups)
                    ),
                    "            }",
                    "        }",
                    "        return;",
                    "    }",
                ]
            )
        )
        start += groups
    source = blocks_kernel(decls, blocks)
    pipe = flags.device.pipeline(
        ("multi_none_true", f"{len(jobs)} checks", (source,)),
        lambda: source,
        ("write",) + ("read",) * len(types),
    )
    flags.device.dispatch(pipe, buffers, fold_groups(start, flags.device.max_groups))
