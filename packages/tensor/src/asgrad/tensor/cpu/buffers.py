"""Buffer reuse: where each generated line writes its result.

A static version of a caching allocator. Large intermediates are first-touch page
faults when freshly allocated (a fresh 2 MiB result costs more than the arithmetic
into it), so the generated function writes elementwise results into a dying input
(``out=`` the input) and the other out-capable results (matrix products, kernels
taking ``out=``) into scratch buffers kept with the function across runs, one set
per thread.

Each value references a set of *buffers*: the arrays known to be fresh that it may
alias. A value made by a line whose result is fresh (nothing else refers to its
memory) is a buffer of its own; a view (reshape, transpose, broadcast), or the
result of any kernel not known to be fresh, may alias every buffer of its inputs
(`Reuse`). Feeds, variables' values and constants
are no buffers: never written. A buffer is written only when no live value
references it. Values that are returned or stored in a variable (or may alias such
a value) never live in a scratch buffer.

``ASGRAD_CPU_REUSE=0`` turns reuse off (read when a function is generated).
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from asgrad.tensor.cpu.records import Line, Reuse
from asgrad.tensor.ir.registry import TensorType


def reuse_enabled() -> bool:
    """Whether generated CPU functions reuse buffers (``ASGRAD_CPU_REUSE=0`` turns it off)."""
    return os.environ.get("ASGRAD_CPU_REUSE", "1") != "0"


@dataclass(frozen=True)
class Placement:
    """Where one line writes.

    Attributes:
        into_value: The id of a dying input the result is written into, or None.
        into_slot: The scratch slot the result is written into, or None.
        work: The scratch slots lent to the line for its duration.
    """

    into_value: int | None = None
    into_slot: int | None = None
    work: tuple[int, ...] = ()

    @property
    def writes(self) -> bool:
        """Whether the line runs its ``into`` form (a target or scratch lent)."""
        return self.into_value is not None or self.into_slot is not None or bool(self.work)


@dataclass(frozen=True)
class BufferPlan:
    """Every line's `Placement`, the type of each scratch slot, and the bytes a run
    holds at its peak besides the feeds and the variables: the slots (held between
    runs) and the most fresh results alive at once."""

    placements: list[Placement]
    slots: list[TensorType]
    peak_bytes: int = 0


def _size_key(t: TensorType) -> tuple[str, int]:
    """Slots are shared by values of one dtype and size, whatever their shapes: a slot
    made for ``(64, 256)`` serves ``(256, 64)`` too, viewed in that shape."""
    return t.dtype, math.prod(t.shape)


def _nbytes(t: TensorType) -> int:
    return math.prod(t.shape) * np.dtype(t.dtype).itemsize


def no_reuse(lines: Sequence[Line]) -> BufferPlan:
    """Every line into fresh memory."""
    return BufferPlan([Placement()] * len(lines), [])


def plan_buffers(
    lines: Sequence[Line],
    reads: Sequence[Sequence[int]],
    types: Mapping[int, TensorType],
    last: Mapping[int, int],
    root_ids: set[int],
    slot_bytes: int | None = None,
) -> BufferPlan:
    """Where each line writes: ``out=`` a dying input, a scratch slot, or fresh memory.

    ``reads[i]`` are the runtime values line ``i`` reads, ``last`` the line of each
    value's last use (the roots' is ``len(lines)``), ``root_ids`` the values
    returned or stored. ``slot_bytes`` caps the scratch slots' bytes: slots are held
    between runs, so under a memory budget they may take only what the planned peak
    leaves of it (a line that finds no free slot then writes into fresh memory).
    """
    # Values that are returned or stored, or may alias one: never in scratch slots.
    escapes: set[int] = set(root_ids)
    for step in range(len(lines) - 1, -1, -1):
        if lines[step].node.id in escapes and lines[step].reuse is Reuse.ALIAS:
            escapes.update(reads[step])

    buffers: dict[int, frozenset[int]] = {}  # value -> buffers it may reference
    whole: dict[int, int] = {}  # value -> the buffer that it is, whole
    holders: dict[int, set[int]] = {}  # buffer -> live values referencing it
    slot_of: dict[int, int] = {}  # buffer -> its scratch slot
    free: dict[tuple[str, int], list[int]] = {}  # (dtype, bytes) -> free slots
    slots: list[TensorType] = []
    placements: list[Placement] = [Placement()] * len(lines)
    next_buffer = -1
    dying: dict[int, list[int]] = {}
    for value, step in last.items():
        dying.setdefault(step, []).append(value)

    held = [0]  # bytes of the slots made so far
    fresh: dict[int, int] = {}  # fresh buffer -> its bytes
    fresh_live = fresh_peak = 0

    def take(t: TensorType) -> int | None:
        pool = free.get(_size_key(t))
        if pool:
            return pool.pop()
        size = _nbytes(t)
        if slot_bytes is not None and held[0] + size > slot_bytes:
            return None
        held[0] += size
        slots.append(t)
        return len(slots) - 1

    for step, line in enumerate(lines):
        v, t = line.node.id, types[line.node.id]
        args = reads[step]
        buffer: int | None = None
        into_value: int | None = None
        into_slot: int | None = None
        if line.reuse is Reuse.IN_PLACE:  # into a dying input that is a whole fresh buffer
            for a in dict.fromkeys(args):
                b = whole.get(a)
                if (
                    b is not None
                    and types[a] == t
                    and last.get(a) == step
                    and holders[b] == {a}
                    and not (v in escapes and b in slot_of)
                ):
                    buffer, into_value = b, a
                    break
        if buffer is None and line.reuse in (Reuse.IN_PLACE, Reuse.INTO_SLOT) and v not in escapes:
            into_slot = take(t)
            if into_slot is not None:
                buffer, next_buffer = next_buffer, next_buffer - 1
                slot_of[buffer] = into_slot
        # Scratch lent for this line only: free slots, which no live value references.
        lent = [take(t) for _ in range(line.work)]
        work = tuple(k for k in lent if k is not None)
        if len(work) < line.work:  # the into form needs them all: the fresh form runs
            for k in (*work, *([] if into_slot is None else [into_slot])):
                free.setdefault(_size_key(t), []).append(k)
            if buffer is not None:
                slot_of.pop(buffer, None)
            work, buffer, into_value, into_slot = (), None, None, None
        for k in work:
            free.setdefault(_size_key(t), []).append(k)
        placements[step] = Placement(into_value, into_slot, work)
        if buffer is None and line.reuse is not Reuse.ALIAS:
            buffer, next_buffer = next_buffer, next_buffer - 1
            fresh[buffer] = _nbytes(t)
            fresh_live += fresh[buffer]
            fresh_peak = max(fresh_peak, fresh_live)
        if buffer is not None:
            buffers[v] = frozenset((buffer,))
            whole[v] = buffer
        else:
            buffers[v] = frozenset().union(*(buffers.get(a, frozenset()) for a in args))
        for b in buffers[v]:
            holders.setdefault(b, set()).add(v)
        for d in dying.get(step, []) + ([] if v in last else [v]):
            for b in buffers.get(d, frozenset()):
                holders[b].discard(d)
                if not holders[b] and b in slot_of:
                    free.setdefault(_size_key(slots[slot_of[b]]), []).append(slot_of[b])
                elif not holders[b] and b in fresh:
                    fresh_live -= fresh.pop(b)
    return BufferPlan(placements, slots, held[0] + fresh_peak)
