"""Batched matrix products, strided copies and bias sums split over threads, on the
compiled path.

numpy runs a batched product (``[B, H, T, d] @ [B, H, d, T]``, attention's) as one
BLAS call per matrix, one after another, each over BLAS's threads: a matrix of
attention's size is too small to keep many threads busy, so the product runs far below
the machine's speed (transformer_large at 16 threads on the device host: 141 GFLOP/s
for its batched products against 1.33 TFLOP/s for its large ones, 2026-12-02). A copy
between transposed layouts (`asgrad.tensor.cpu.jit.fuse_slices.assemble`) and a sum
over leading axes (a bias gradient) run on one thread.

`split_matmul`, `split_copy` (and `split_reshape`, where a reshape copies) and
`split_add_reduce` cut such work into one share per
kernel thread (`asgrad.tensor.cpu.jit.threads.threads`): whole matrices along the
leading axes, or columns of a sum, and run the shares on a pool of Python threads at
once (numpy releases the interpreter lock inside ``matmul``, copies and reductions),
BLAS on one thread meanwhile (`asgrad.tensor.cpu.blas`: it is set back afterwards).
Every matrix of a product is computed by one BLAS call either way, so a split product
differs from numpy's by nothing but BLAS's own partition of a matrix between its
threads; a copy is exact, and each column of a split sum is added up by one thread in
numpy's order (the same bits).

Work below `MATMUL_MIN_FLOPS` (`COPY_MIN_ELEMENTS`, `SUM_MIN_ELEMENTS`), at one kernel
thread, or where BLAS's threads cannot be reached runs as numpy runs it (waking
threads costs tens of microseconds; BLAS's own threads would contend with each other).
`fuse_batched_products` (the linalg family's line group) makes the lines call them.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import Any

import numpy as np

from asgrad.tensor.cpu import blas
from asgrad.tensor.cpu.records import Call, Divide, Expr, Line, Method, Ref, Value, with_out
from asgrad.tensor.cpu.specialize import Context
from asgrad.tensor.ir.registry import TensorType

__all__ = [
    "COPY_MIN_ELEMENTS",
    "MATMUL_MIN_FLOPS",
    "SUM_MIN_ELEMENTS",
    "fuse_batched_products",
    "split_add_reduce",
    "split_copy",
    "split_matmul",
    "split_reshape",
]

# Products of fewer flops run as numpy runs them: attention's products of the 2-core
# machine's transformer (16.8 Mflop, 64 matrices of 64 x 32 x 64) took 0.19 ms split
# over 2 threads against 0.16 ms in numpy (2026-12-02).
MATMUL_MIN_FLOPS = 1 << 25
# Copies and sums of fewer elements run on one thread.
COPY_MIN_ELEMENTS = 1 << 20
SUM_MIN_ELEMENTS = 1 << 20

# ``np.add.reduce`` with its arguments by position (numpy's stubs have no overload
# taking ``out`` that may be None).
_add_reduce: Any = np.add.reduce

# The pool and its thread count.
_pool: list[tuple[ThreadPoolExecutor, int]] = []
_lock = threading.Lock()
# Held while a split runs.
_running = threading.Lock()


def _workers(n: int) -> ThreadPoolExecutor:
    """A pool of ``n`` threads (made again when the count changes)."""
    with _lock:
        if _pool and _pool[0][1] != n:
            _pool.pop()[0].shutdown(wait=False)
        if not _pool:
            _pool.append((ThreadPoolExecutor(n, thread_name_prefix="asgrad-split"), n))
        return _pool[0][0]


def _threads() -> int:
    from asgrad.tensor.cpu.jit.threads import threads

    return threads()


def _shares(shape: tuple[int, ...], n: int) -> list[tuple[Any, ...]]:
    """Indexes cutting the leading axes of ``shape`` into about ``n`` shares of whole
    matrices: ranges of the first axis, or of the second within each first index when
    the first has fewer than ``n``."""
    if shape[0] >= n or len(shape) < 2:
        k = min(n, shape[0])
        return [(slice(i * shape[0] // k, (i + 1) * shape[0] // k),) for i in range(k)]
    per = max(1, (n + shape[0] - 1) // shape[0])
    k = min(per, shape[1])
    return [
        (i, slice(j * shape[1] // k, (j + 1) * shape[1] // k))
        for i in range(shape[0])
        for j in range(k)
    ]


def _run(shares: list[tuple[Any, ...]], job: Callable[[tuple[Any, ...]], Any], n: int) -> None:
    """``job`` on every share, ``n`` at a time (this thread takes the first), with
    BLAS on one thread; on this thread alone while another thread's split runs (BLAS's
    thread count is the process's: two splits would set it back out of turn)."""
    if not _running.acquire(blocking=False):
        for share in shares:
            job(share)
        return
    control = blas.blas_threads()
    try:
        assert control.get is not None
        assert control.set is not None
        before = control.get()
        control.set(1)
        try:
            pool = _workers(n - 1)
            futures = [pool.submit(job, s) for s in shares[1:]]
            job(shares[0])
            for f in futures:
                f.result()
        finally:
            control.set(before)
    finally:
        _running.release()


def _splits(work: int, least: int, batches: int) -> int:
    """How many threads a piece of ``work`` split into ``batches`` runs over (1: not
    split)."""
    if work < least or batches < 2 or blas.blas_threads().set is None:
        return 1
    return min(_threads(), batches)


def split_matmul(a: np.ndarray, b: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """``np.matmul(a, b, out=out)``; a batched product of at least `MATMUL_MIN_FLOPS`
    is split over the kernel threads (see the module docstring).

    >>> import numpy as np
    >>> from asgrad.tensor.cpu.jit.split import split_matmul
    >>> a = np.ones((2, 3, 4, 5), np.float32)
    >>> split_matmul(a, np.ones((2, 3, 5, 2), np.float32)).shape
    (2, 3, 4, 2)
    """
    if a.ndim < 3 or b.ndim < 3:
        result: np.ndarray = np.matmul(a, b, out=out)
        return result
    batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    m, k, n_cols = a.shape[-2], a.shape[-1], b.shape[-1]
    flops = 2 * math.prod(batch) * m * k * n_cols
    n = _splits(flops, MATMUL_MIN_FLOPS, math.prod(batch[:2]))
    if n < 2:
        result = np.matmul(a, b, out=out)
        return result
    if out is None:
        out = np.empty((*batch, m, n_cols), np.result_type(a, b))
    a = np.broadcast_to(a, (*batch, m, k))
    b = np.broadcast_to(b, (*batch, k, n_cols))
    target = out

    def job(index: tuple[Any, ...]) -> None:
        np.matmul(a[index], b[index], out=target[index])

    _run(_shares(batch, n), job, n)
    return out


def split_copy(dst: np.ndarray, src: np.ndarray) -> None:
    """``np.copyto(dst, src)`` for arrays of one shape; a copy of at least
    `COPY_MIN_ELEMENTS` elements is split over the kernel threads along the leading
    axes.

    >>> import numpy as np
    >>> from asgrad.tensor.cpu.jit.split import split_copy
    >>> dst = np.zeros((2, 3))
    >>> split_copy(dst, np.ones((3, 2)).T)
    >>> float(dst.sum())
    6.0
    """
    n = 1 if dst.ndim < 2 else _splits(dst.size, COPY_MIN_ELEMENTS, math.prod(dst.shape[:2]))
    if n < 2 or dst.shape != src.shape:
        np.copyto(dst, src)
        return

    def job(index: tuple[Any, ...]) -> None:
        np.copyto(dst[index], src[index])

    _run(_shares(dst.shape, n), job, n)


def split_add_reduce(
    x: np.ndarray,
    axis: tuple[int, ...],
    dtype: Any = None,
    out: np.ndarray | None = None,
    keepdims: bool = False,
) -> Any:
    """``add_reduce`` (`asgrad.tensor.cpu.specialize.add_reduce`: ``np.add.reduce`` in C
    order); a sum of at least `SUM_MIN_ELEMENTS` over leading axes (a bias gradient)
    is split along the last axis over the kernel threads. Each column is summed by one
    thread in numpy's order, so the bits are numpy's.

    >>> import numpy as np
    >>> from asgrad.tensor.cpu.jit.split import split_add_reduce
    >>> split_add_reduce(np.ones((4, 3), np.float32), (0,)).tolist()
    [4.0, 4.0, 4.0]
    """
    if not x.flags.c_contiguous:
        x = np.ascontiguousarray(x)
    leading = axis == tuple(range(len(axis))) and len(axis) < x.ndim
    n = _splits(x.size, SUM_MIN_ELEMENTS, x.shape[-1] // 16) if leading and out is None else 1
    if n < 2 or dtype is not None:
        return _add_reduce(x, axis, dtype, out, keepdims)
    kept = x.shape[len(axis) :]
    result = np.empty(((1,) * len(axis) if keepdims else ()) + kept, x.dtype)
    cols = x.shape[-1]

    def job(index: tuple[Any, ...]) -> None:
        (block,) = index
        _add_reduce(x[..., block], axis, None, result[..., block], keepdims)

    _run([(slice(i * cols // n, (i + 1) * cols // n),) for i in range(n)], job, n)
    return result


def split_reshape(x: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """``x.reshape(shape)``: a view where numpy makes one, else the copy (a transposed
    layout made contiguous, attention's heads joined), split over the kernel threads
    as `split_copy`.

    >>> import numpy as np
    >>> from asgrad.tensor.cpu.jit.split import split_reshape
    >>> split_reshape(np.arange(6).reshape(2, 3).T, (6,)).tolist()
    [0, 3, 1, 4, 2, 5]
    """
    try:
        view: np.ndarray = np.reshape(x, shape, copy=False)
        return view
    except (ValueError, TypeError):  # a copy is needed (TypeError: numpy < 2.1)
        pass
    out = np.empty(shape, x.dtype)
    split_copy(out.reshape(x.shape), x)
    return out


def fuse_batched_products(
    lines: Sequence[Line],
    refs: Mapping[int, Ref],
    types: Mapping[int, TensorType],
    env: dict[str, Any],
    context: Context,
) -> list[Line]:
    """``lines`` with each batched product of at least `MATMUL_MIN_FLOPS` (both
    operands with batch axes: numpy's line ``_matmul(a, b)``) calling `split_matmul`,
    each sum of at least `SUM_MIN_ELEMENTS` calling `split_add_reduce`, and each
    reshape of at least `COPY_MIN_ELEMENTS` calling `split_reshape` (the linalg
    family's line group on the compiled path)."""
    out = list(lines)
    for k, line in enumerate(lines):
        node, call = line.node, line.call
        if node.op in ("sum", "sum_to_like") and node.inputs:
            size = math.prod(types[node.inputs[0].id].shape)
            if size >= SUM_MIN_ELEMENTS and context.registered(node.op):
                renamed = _renamed(call, "_add_reduce", "_split_add_reduce")
                if renamed != call:
                    env["_split_add_reduce"] = split_add_reduce
                    out[k] = replace(line, call=renamed)
            continue
        if (
            node.op == "reshape"
            and isinstance(call, Method)
            and call.name == "reshape"
            and isinstance(call.obj, Value)
            and math.prod(types[node.id].shape) >= COPY_MIN_ELEMENTS
            and context.registered("reshape")
        ):
            env["_split_reshape"] = split_reshape
            out[k] = replace(line, call=Call("_split_reshape", (call.obj, *call.args)))
            continue
        if node.op != "matmul" or line.flops < MATMUL_MIN_FLOPS or not context.registered("matmul"):
            continue
        if not isinstance(call, Call) or call.fn != "_matmul" or call.kwargs:
            continue
        if any(len(types[n.id].shape) < 3 for n in node.inputs):
            continue
        env["_split_matmul"] = split_matmul
        split = Call("_split_matmul", call.args)
        into = with_out(split) if line.into is not None else None
        out[k] = Line(
            node=node, call=split, reuse=line.reuse, into=into, work=line.work, flops=line.flops
        )
    return out


def _renamed(expr: Expr, old: str, new: str) -> Expr:
    """``expr`` with its calls of ``old`` calling ``new``."""
    if isinstance(expr, Call):
        args = tuple(_renamed(a, old, new) for a in expr.args)
        kwargs = tuple((k, _renamed(a, old, new)) for k, a in expr.kwargs)
        return Call(new if expr.fn == old else expr.fn, args, kwargs)
    if isinstance(expr, Method):
        return Method(_renamed(expr.obj, old, new), expr.name, expr.args)
    if isinstance(expr, Divide):
        return Divide(_renamed(expr.left, old, new), _renamed(expr.right, old, new))
    return expr
