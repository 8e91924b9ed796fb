"""Destinations: a kernel's output written where its readers' views put it.

A value read only through a chain of views that strides cannot express (attention's
heads merged back: a transpose, then a reshape merging axes that are not adjacent)
is copied where it is read; a value scattered into its region of a sum of slices
(attention's dq, dk and dv into the gradient of the qkv they were sliced from) is
copied into that region. A kernel that writes its output through strides (the
attention kernels) can instead write it straight into the layout the chain ends in:
the chain's end is allocated first, the root's destination is the end seen back
through the chain (each view inverted: a slice of the sum, a reshape, the inverse
permutation), and the views the plan then lowers are strides of that array, so no
copy is launched (`asgrad.gpu.plan.fusion`'s ``_write_pieces`` finds the pieces in
place).

`find_destinations` finds the chains at plan time, from the types and users alone;
`Destinations.view` gives a root's destination as the plan lowers it, or None where
the chain needs no copy anyway (the root keeps its own contiguous array).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from asgrad.gpu.device import Device
from asgrad.gpu.device.array import GpuArray, Operand, contiguous_strides, slice_view
from asgrad.gpu.plan.fusion_groups import _shape_only
from asgrad.gpu.plan.values import _box, strided_reshape
from asgrad.tensor import TensorType
from asgrad.tensor.ir.graph import Node

__all__ = ["Chain", "Destinations", "find_destinations"]

Types = Mapping[int, TensorType]
Users = Mapping[int, list[Node]]

# Views a chain passes through: each one's value is strides of its input.
_RESHAPES = frozenset({"reshape", "reshape_like", "expand_dims", "squeeze"})

# A step of a chain, from the root on: ("transpose", in_shape, axes),
# ("reshape", in_shape, out_shape) or ("slice", in_shape, index).
Step = tuple[str, tuple[int, ...], Any]


@dataclass(frozen=True)
class Chain:
    """The views from a root to the value allocated for it (``end``, of ``shape``);
    ``scattered``: the chain ends in a sum of slices the root is one piece of."""

    end: int
    shape: tuple[int, ...]
    steps: tuple[Step, ...]
    scattered: bool
    dtype: str = "float32"  # the root's and the end's


@dataclass
class Destinations:
    """The chains of a plan's roots, and the arrays allocated for their ends (held
    until every root of an end has been given its view)."""

    chains: dict[int, Chain]
    device: Device
    arrays: dict[int, GpuArray] = field(default_factory=dict)
    waiting: dict[int, int] = field(default_factory=dict)  # end -> roots not yet given

    def __post_init__(self) -> None:
        for chain in self.chains.values():
            self.waiting[chain.end] = self.waiting.get(chain.end, 0) + 1

    def view(self, root: Node | None) -> Operand | None:
        """The view ``root``'s kernel writes it through (of the root's dtype), or None (a
        new array)."""
        chain = self.chains.get(root.id) if root is not None else None
        if chain is None:
            return None
        if not chain.scattered and _expressible(chain):
            return None  # its readers' views are strides of a contiguous array already
        end = self.arrays.get(chain.end)
        if end is None:
            dtype = np.dtype(chain.dtype)
            end = self.arrays[chain.end] = GpuArray.empty(chain.shape, dtype, self.device)
        self.waiting[chain.end] -= 1
        if self.waiting[chain.end] == 0:
            del self.arrays[chain.end]  # the views hold it from here on
        return _inverted(Operand.of(end), chain.steps)


def _expressible(chain: Chain) -> bool:
    """Whether the chain's views are strides of the root in a contiguous array of its own."""
    shape = chain.steps[0][1]
    op: Operand | None = Operand(None, shape, contiguous_strides(shape))  # type: ignore[arg-type]  # strides only: no array is read
    for kind, _, arg in chain.steps:
        if op is None:
            return False
        op = op.permute(arg) if kind == "transpose" else strided_reshape(op, tuple(arg))
    return op is not None


def _inverted(op: Operand | None, steps: Iterable[Step]) -> Operand | None:
    """The chain's end ``op`` seen back through ``steps``: the root's view of it."""
    for kind, in_shape, arg in reversed(list(steps)):
        if op is None:
            return None
        if kind == "slice":
            op = slice_view(op, arg)
        elif kind == "reshape":
            op = strided_reshape(op, in_shape)
        else:
            op = op.permute(tuple(int(a) for a in np.argsort(arg)))
    return op


def find_destinations(
    roots: Iterable[Node],
    device: Device,
    users: Users,
    inlined: frozenset[int],
    types: Types,
    written: frozenset[int] = frozenset(),
    half: frozenset[int] = frozenset(),
) -> Destinations:
    """The chains of ``roots`` (float32 values whose kernels write through strides, and
    those of ``half`` that are float16):
    inlined views, each the only reader of the one before (or reshapes of it to one
    shape), ending where a reader is no view; or in a sum of scatter_slices (a tree of
    adds, none of them in ``written``: an update's value) whose pieces
    are all roots' chains and cover it.
    """
    chains: dict[int, Chain] = {}
    pieces: dict[int, list[tuple[int, Node]]] = {}  # sum -> (root, its scatter_slice)
    tops: dict[int, Node] = {}
    for root in roots:
        dtype = types[root.id].dtype
        if dtype != "float32" and not (dtype == "float16" and root.id in half):
            continue
        steps: list[Step] = []
        node = root
        while True:
            readers = [r for r in users.get(node.id, []) if not _shape_only(r, node)]
            if not _one_view(readers, node, inlined, types):
                break
            reader = readers[0]
            shape = tuple(types[node.id].shape)
            if reader.op == "transpose":
                steps.append(("transpose", shape, tuple(reader.attrs["axes"])))
            elif reader.op in _RESHAPES:
                steps.append(("reshape", shape, tuple(types[reader.id].shape)))
            elif reader.op == "scatter_slice":
                steps.append(("slice", shape, tuple(reader.attrs["index"])))
                top = _sum_of(reader, users, written)
                if top is not None and types[top.id].dtype == dtype:
                    tops[top.id] = top
                    pieces.setdefault(top.id, []).append((root.id, reader))
                    shape = tuple(types[top.id].shape)
                    chains[root.id] = Chain(top.id, shape, tuple(steps), True, dtype)
                break
            else:
                break
            node = reader
        if root.id not in chains and steps and steps[-1][0] != "slice":
            end = node
            if types[end.id].dtype == dtype:
                shape = tuple(types[end.id].shape)
                chains[root.id] = Chain(end.id, shape, tuple(steps), False, dtype)
    for top_id, found in pieces.items():
        shape = chains[found[0][0]].shape
        slices = {s.id: s for _, s in found}
        boxes = [_box(tuple(s.attrs["index"]), shape) for s in slices.values()]
        covered = sum(math.prod(b - a for a, b in box) for box in boxes if box is not None)
        leaves = {n.id for n in _leaves(tops[top_id], users)}
        if None in boxes or covered != math.prod(shape) or leaves != set(slices):
            for root_id, _ in found:  # other pieces, or zeros: the sum is written as before
                del chains[root_id]
    return Destinations(chains, device)


def _one_view(readers: list[Node], node: Node, inlined: frozenset[int], types: Types) -> bool:
    """Whether ``node``'s readers are one inlined view of it, or several inlined
    reshapes of it to one shape (a value the forward and a weight's gradient read)."""
    if not readers or any(r.id not in inlined or r.inputs[0] is not node for r in readers):
        return False
    if len(readers) == 1:
        return True
    shapes = {tuple(types[r.id].shape) for r in readers}
    return len(shapes) == 1 and all(r.op in _RESHAPES for r in readers)


def _sum_of(piece: Node, users: Users, written: frozenset[int]) -> Node | None:
    """The top of the tree of adds summing the scatter_slice ``piece``, or None."""
    node = piece
    while True:
        readers = users.get(node.id, [])
        if len(readers) != 1 or readers[0].op != "add":
            break
        node = readers[0]
    if node is piece or node.id in written:
        return None
    return node


def _leaves(top: Node, users: Users) -> list[Node]:
    """The values a tree of adds sums: its inputs, through the adds read only by it."""
    found: list[Node] = []
    frontier = list(top.inputs)
    while frontier:
        node = frontier.pop()
        if node.op == "add" and len(users.get(node.id, [])) == 1:
            frontier += node.inputs
        else:
            found.append(node)
    return found
