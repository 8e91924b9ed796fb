"""A sum of slice gradients as one assembled array: the index family's fused line group.

`fuse_slice_sums` (the index family's ``fuse`` in
`asgrad.tensor.cpu.lowering.FAMILY_LOWERINGS`) runs on the lines of
`generate_cpu_function` when the compiled path is on. A value sliced into parts (the
query, key and value of one projection) gets its gradient as a sum of
``scatter_slice`` s: each part's gradient written into zeros of the whole shape, then
added up, a pass over the whole array per part and per sum. Where the slices are
disjoint along one axis and each scattered array and partial sum is read by nothing
else (and is no output), the sum becomes one line (`assemble`): each part copied into
its slice of one array, the rest (if any) zero. A part that is a reshaped copy of
another value read by nothing else (a transposed head layout) is copied from that
value straight into its slice, without the copy.

A 4-D part (attention's heads) is copied by `asgrad.tensor.cpu.jit.kernels_copy.copy_into`:
numpy's copy, or a parallel one where the measured thread choice takes it.

Adding a part to zeros returns the part, except that ``-0.0 + 0.0`` is ``+0.0``: the
assembled array keeps a part's negative zeros where the numpy path's sum has positive
ones (equal numbers; nothing else differs).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from asgrad.tensor.cpu.records import (
    Call,
    Line,
    Ref,
    Reuse,
    Value,
    line_at,
    line_readers,
    runtime_roots,
    with_out,
)
from asgrad.tensor.cpu.specialize import Context
from asgrad.tensor.ir.registry import TensorType

_RESHAPES = ("reshape", "reshape_like")


def assemble(
    *parts: np.ndarray,
    indices: Sequence[tuple[slice, ...]],
    covers: bool,
    shape: tuple[int, ...],
    dtype: str,
    out: np.ndarray | None = None,
) -> np.ndarray:
    """An array of ``shape`` (``out`` when given) with ``parts[i]`` at ``indices[i]``
    and zeros elsewhere (nowhere when ``covers``); a part shaped otherwise than its slice
    is the slice's elements in C order (the slice reshaped to it as a view).

    >>> import numpy as np
    >>> from asgrad.tensor.cpu.jit.fuse_slices import assemble
    >>> idx = [(slice(None), slice(0, 2)), (slice(None), slice(3, 4))]
    >>> parts = np.ones((2, 2)), np.full((2, 1), 5.0)
    >>> assemble(*parts, indices=idx, covers=False, shape=(2, 4), dtype="float64")
    array([[1., 1., 0., 5.],
           [1., 1., 0., 5.]])
    """
    if out is None:
        out = np.empty(shape, dtype)
    if not covers:
        out[...] = 0
    for part, index in zip(parts, indices, strict=True):
        target = out[index]
        if target.shape != part.shape:
            view = target.reshape(part.shape)  # a copy when the slice is no such view
            if not np.may_share_memory(view, out):
                np.copyto(target, part.reshape(target.shape))
                continue
            target = view
        if _threadable(target, part):  # attention's heads: maybe over threads
            from asgrad.tensor.cpu.jit.kernels_copy import copy_into

            copy_into(target, part)
            continue
        np.copyto(target, part)
    return out


def _threadable(target: np.ndarray, part: np.ndarray) -> bool:
    """Whether a part's copy may run over Numba's threads (`copy_into`): 4-D parts of
    the target's shape and dtype, large enough for threads (`PARALLEL_MIN`)."""
    from asgrad.tensor.cpu.jit.threads import PARALLEL_MIN

    return (
        target.ndim == 4
        and part.shape == target.shape
        and part.dtype == target.dtype
        and target.size >= PARALLEL_MIN
    )


def _ranges(index: Any, shape: tuple[int, ...]) -> list[tuple[int, int]] | None:
    """Per axis, the ``[start, stop)`` that a tuple of basic slices of step 1 selects."""
    if not isinstance(index, tuple) or len(index) > len(shape):
        return None
    out = []
    for d, n in enumerate(shape):
        s = index[d] if d < len(index) else slice(None)
        if not isinstance(s, slice):
            return None
        start, stop, step = s.indices(n)
        if step != 1 or stop <= start:
            return None
        out.append((start, stop))
    return out


def _tiling(ranges: list[list[tuple[int, int]]], shape: tuple[int, ...]) -> bool | None:
    """None unless the boxes are disjoint along one axis and whole along the others;
    then whether they cover the array."""
    split = [d for d in range(len(shape)) if any(r[d] != (0, shape[d]) for r in ranges)]
    if len(split) > 1:
        return None
    if not split:
        return None if len(ranges) > 1 else True
    d = split[0]
    spans = sorted(r[d] for r in ranges)
    if any(a[1] > b[0] for a, b in itertools.pairwise(spans)):
        return None
    return sum(b - a for a, b in spans) == shape[d]


def fuse_slice_sums(
    lines: Sequence[Line],
    refs: Mapping[int, Ref],
    types: Mapping[int, TensorType],
    env: dict[str, Any],
    context: Context,
) -> list[Line]:
    """``lines`` with each sum of disjoint slice gradients as one line (see the module
    docstring)."""
    if not all(context.registered(op) for op in ("scatter_slice", "add")):
        return list(lines)
    readers = line_readers(lines)
    roots = runtime_roots(refs, context.roots)
    at = line_at(lines)

    def private(node_id: int) -> bool:
        """Computed on its own line, read by one line, no root."""
        return (
            node_id in at
            and refs[node_id].id == node_id
            and len(readers.get(node_id, ())) == 1
            and node_id not in roots
        )

    # node id -> (part ids, indices, lines the parts came from)
    sums: dict[int, tuple[list[int], list[Any], list[int]]] = {}
    for line in lines:
        node = line.node
        t = types[node.id]
        if node.op == "scatter_slice" and t.shape and t.dtype in ("float32", "float64"):
            g = refs[node.inputs[0].id]
            if not g.is_const and types[g.id].dtype == t.dtype:
                sums[node.id] = ([g.id], [node.attrs["index"]], [at[node.id]])
        elif node.op == "add" and t.shape:
            ids = [refs[n.id] for n in node.inputs]
            if any(r.is_const or r.id not in sums or not private(r.id) for r in ids):
                continue
            if ids[0].id == ids[1].id or any(types[r.id] != t for r in ids):
                continue
            left, right = sums[ids[0].id], sums[ids[1].id]
            made = [*left[2], *right[2], at[node.id]]
            sums[node.id] = (left[0] + right[0], left[1] + right[1], made)
    out = list(lines)
    drop: set[int] = set()
    for node_id, (parts, indices, made) in sorted(sums.items(), key=lambda kv: -len(kv[1][2])):
        node = lines[at[node_id]].node
        if len(parts) < 2 or at[node_id] in drop or set(made) & drop:
            continue
        t = types[node_id]
        boxes = [_ranges(i, t.shape) for i in indices]
        if any(b is None for b in boxes):
            continue
        covers = _tiling([b for b in boxes if b is not None], t.shape)
        if covers is None:
            continue
        sources: list[int] = []
        for p in parts:  # a private reshaped copy: read its source instead
            made_by = lines[at[p]].node if p in at else None
            if made_by is not None and made_by.op in _RESHAPES and private(p):
                src = refs[made_by.inputs[0].id]
                if not src.is_const and math.prod(types[src.id].shape) == math.prod(types[p].shape):
                    sources.append(src.id)
                    drop.add(at[p])
                    continue
            sources.append(p)
        name = f"_assemble{node_id}"
        env["_assemble"] = assemble
        env[name] = tuple(tuple(i) for i in indices)
        keywords = {"indices": name, "covers": repr(covers), "shape": repr(t.shape)}
        keywords["dtype"] = repr(t.dtype)
        call = Call("_assemble", tuple(Value(s) for s in sources), tuple(keywords.items()))
        out[at[node_id]] = Line(node=node, call=call, reuse=Reuse.INTO_SLOT, into=with_out(call))
        drop.update(k for k in made if k != at[node_id])
    return [line for k, line in enumerate(out) if k not in drop]
