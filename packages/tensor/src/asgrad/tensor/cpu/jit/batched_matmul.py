"""Batched matrix products of many small matrices: the batch over threads, one BLAS thread each.

``np.matmul`` on stacked operands calls BLAS once per matrix, and OpenBLAS splits each
of those products over all its threads: an attention's ``q @ k^T`` of 256 matrices of
256x256x64 keeps 16 threads busy with products too small to share (about 150 GFLOP/s
at 16 threads on the device host, against about 1.4 TFLOP/s for the step's large 2-D
products; docs/performance.md, "Batched products"). PyTorch's ``bmm`` runs the batch in
parallel instead, each matrix on one thread. `batched_matmul` does the same with
numpy's own BLAS: BLAS is set to one thread for the call, the batch is cut into one
contiguous run of matrices per thread (`pieces`), and each thread of a small pool
(`Pool`) calls ``np.matmul`` on its run, which releases the GIL while BLAS works.

Each matrix is still one BLAS call of the same operands, so the result is the bits
``np.matmul`` gives: OpenBLAS computes every element of a product on one thread, in the
same order, whatever its thread count (the tests check it against ``np.matmul``). Which
form runs therefore never changes a result, and it is a measured choice per product
(`asgrad.tensor.cpu.jit.threads.Site`, keyed by the operands' shapes and strides and the
thread count, kept in ``routes.json``): ``np.matmul`` in the first step, then timed calls
of each form alternate, and the faster stays (a close race keeps the threads). The
settings are the compiled kernels' (`asgrad.tensor.cpu.jit.threads`):
``ASGRAD_CPU_THREADS=n`` (``n`` >= 2) or ``set_threads`` runs every eligible product
over ``n`` threads unmeasured, 1 runs ``np.matmul``; ``ASGRAD_CPU_ROUTE=parallel`` or
``serial`` forces a form; below four threads (``threads.MEASURE_MIN_THREADS``) an
unset choice is ``np.matmul``, which at two threads was as fast or faster
(docs/performance.md).

A product takes the route (`fuse_batched_products`, the linalg family's fusion on the
compiled path) when both operands are stacks (a stack against a matrix is already one
tall product, `asgrad.tensor.cpu.specialize.matmul`) of float32 or float64, and at run
time only where its batch has at least as many matrices as threads, numpy's BLAS is
OpenBLAS whose thread count can be set (`blas_control`), and no other thread is inside
the pool; otherwise it is ``np.matmul``.
"""

from __future__ import annotations

import contextlib
import ctypes
import math
import os
import queue
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from asgrad.tensor.cpu.records import Call, Line, Ref
from asgrad.tensor.cpu.specialize import Context
from asgrad.tensor.ir.registry import TensorType

__all__ = [
    "BlasControl",
    "Pool",
    "batched_matmul",
    "blas_control",
    "eligible",
    "fuse_batched_products",
    "pieces",
]

_FLOATS = ("float32", "float64")
# ``"parallel"`` or ``"serial"`` (``np.matmul``): every call's form, unmeasured (tests,
# ``benchmarks/cpu_bmm.py``); None: as the module docstring says.
FORCE: list[str | None] = [None]
Index = tuple[int | slice, ...]


class BlasControl:
    """Gets and sets the thread count of numpy's OpenBLAS (``get``/``set``; both None
    where it cannot be reached): through threadpoolctl when installed
    (`asgrad.tensor.cpu.blas.blas_threads`), else the library's own functions, found
    among the loaded libraries (``/proc/self/maps``) by the names numpy's and SciPy's
    builds give them."""

    def __init__(self) -> None:
        from asgrad.tensor.cpu.blas import blas_threads

        found = blas_threads()
        self.get: Callable[[], Any] | None = found.get
        self.set: Callable[[int], Any] | None = found.set
        if self.set is None:
            self._from_library()

    def _from_library(self) -> None:
        with contextlib.suppress(OSError):
            with open("/proc/self/maps") as maps:
                paths = {line.split()[-1] for line in maps if "openblas" in line.lower()}
            # numpy's own copy first (SciPy may have loaded another, left alone).
            for path in sorted(paths, key=lambda p: os.sep + "numpy" not in p):
                lib = ctypes.CDLL(path)
                for prefix, suffix in (("scipy_", "64_"), ("scipy_", ""), ("", "64_"), ("", "")):
                    setter = getattr(lib, f"{prefix}openblas_set_num_threads{suffix}", None)
                    getter = getattr(lib, f"{prefix}openblas_get_num_threads{suffix}", None)
                    if setter is None or getter is None:
                        continue
                    setter.argtypes, setter.restype = [ctypes.c_int], None
                    getter.argtypes, getter.restype = [], ctypes.c_int
                    self.get, self.set = getter, setter
                    return


_control: list[BlasControl] = []


def blas_control() -> BlasControl:
    """The process's `BlasControl` (made on first use)."""
    if not _control:
        _control.append(BlasControl())
    return _control[0]


class Pool:
    """``n - 1`` worker threads and the caller: `run` calls ``fn(*args)`` once per
    argument tuple, the first on the calling thread, and returns when all have; a
    worker's exception is raised again in the caller. One `run` at a time (`busy`)."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.busy = threading.Lock()
        self._jobs: list[queue.SimpleQueue[Any]] = [queue.SimpleQueue() for _ in range(n - 1)]
        self._done: queue.SimpleQueue[BaseException | None] = queue.SimpleQueue()
        for jobs in self._jobs:
            threading.Thread(target=self._work, args=(jobs,), daemon=True).start()

    def _work(self, jobs: queue.SimpleQueue[Any]) -> None:
        while True:
            job = jobs.get()
            if job is None:
                return
            fn, args = job
            try:
                fn(*args)
            except BaseException as e:  # handed to the caller
                self._done.put(e)
            else:
                self._done.put(None)

    def run(self, fn: Callable[..., Any], calls: Sequence[tuple[Any, ...]]) -> None:
        """``fn(*args)`` for each of ``calls`` (at most `n`), in parallel."""
        for jobs, args in zip(self._jobs, calls[1:], strict=False):
            jobs.put((fn, args))
        error: BaseException | None = None
        try:
            fn(*calls[0])
        except BaseException as e:
            error = e
        for _ in calls[1:]:
            failed = self._done.get()
            error = error or failed
        if error is not None:
            raise error

    def close(self) -> None:
        """Stop the workers (after the jobs queued)."""
        for jobs in self._jobs:
            jobs.put(None)


_pools: dict[int, Pool] = {}
_pools_lock = threading.Lock()


def _pool(n: int) -> Pool:
    pool = _pools.get(n)
    if pool is None:
        with _pools_lock:
            pool = _pools.get(n)
            if pool is None:
                pool = _pools[n] = Pool(n)
    return pool


def _forget_pools() -> None:
    """A forked child has none of its parent's threads: it starts pools of its own."""
    _pools.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_pools)


def pieces(batch: tuple[int, ...], lo: int, hi: int) -> Iterator[Index]:
    """Indexes (integers and at most one slice, over the leading axes of ``batch``)
    that together select the matrices ``lo`` to ``hi`` of the C-order flattened batch:
    a run of matrices as few views as the batch's shape allows, none copied.

    >>> list(pieces((4, 8), 4, 20))
    [(0, slice(4, 8, None)), (slice(1, 2, None),), (2, slice(0, 4, None))]
    """
    if lo >= hi:
        return
    if len(batch) == 1:
        yield (slice(lo, hi),)
        return
    inner = math.prod(batch[1:])
    first, start = divmod(lo, inner)
    last, stop = divmod(hi, inner)
    if first == last:
        for rest in pieces(batch[1:], start, stop):
            yield (first, *rest)
        return
    if start:
        for rest in pieces(batch[1:], start, inner):
            yield (first, *rest)
        first += 1
    if last > first:
        yield (slice(first, last),)
    if stop:
        for rest in pieces(batch[1:], 0, stop):
            yield (last, *rest)


def _products(a: np.ndarray, b: np.ndarray, out: np.ndarray, at: Sequence[Index]) -> None:
    for index in at:
        np.matmul(a[index], b[index], out=out[index])


# One measured choice per product: keyed by the operands' shapes, strides and dtype.
_sites: dict[Any, Any] = {}


def _site(a: np.ndarray, b: np.ndarray) -> Any:
    key = (a.shape, a.strides, b.shape, b.strides, a.dtype.char)
    site = _sites.get(key)
    if site is None:
        from asgrad.tensor.cpu.jit.threads import Site

        name = f"batched_matmul {a.shape}{a.strides} {b.shape}{b.strides} {a.dtype}"
        site = _sites[key] = Site(name)
    return site


def over_threads(a: np.ndarray, b: np.ndarray, out: np.ndarray, n: int) -> bool:
    """``out[...] = a @ b`` with the batch over ``n`` threads (BLAS on one thread for
    the call), or False, having done nothing, where BLAS's threads cannot be set or
    the pool is in use. ``a`` and ``b`` are stacks whose batch axes broadcast to
    ``out``'s."""
    control = blas_control()
    if control.set is None or control.get is None:
        return False
    pool = _pool(n)
    if not pool.busy.acquire(blocking=False):
        return False
    try:
        batch = out.shape[:-2]
        a = np.broadcast_to(a, batch + a.shape[-2:])
        b = np.broadcast_to(b, batch + b.shape[-2:])
        total = math.prod(batch)
        calls = [
            (a, b, out, list(pieces(batch, total * i // n, total * (i + 1) // n)))
            for i in range(n)
        ]
        before = int(control.get())
        if before != 1:
            control.set(1)
        try:
            pool.run(_products, calls)
        finally:
            if before != 1:
                control.set(before)
    finally:
        pool.busy.release()
    return True


def batched_matmul(a: np.ndarray, b: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """``np.matmul(a, b, out=out)`` for stacked float operands of one dtype, its batch
    over threads where that is measured (or set) to be faster (see the module
    docstring); the same bits either way."""
    from asgrad.tensor.cpu.jit import threads

    batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    if out is None:
        out = np.empty((*batch, a.shape[-2], b.shape[-1]), np.result_type(a, b))
    n = threads.threads()
    if math.prod(batch) < n or n < 2:  # threads would idle: BLAS's own threads
        result: np.ndarray = np.matmul(a, b, out=out)
        return result
    if FORCE[0] is not None:
        if FORCE[0] != "parallel" or not over_threads(a, b, out, n):
            np.matmul(a, b, out=out)
        return out
    site = _site(a, b)
    form = site.form(out.size)
    if not form & threads.PARALLEL:
        start = time.perf_counter() if form & threads.TIMED else 0.0
        np.matmul(a, b, out=out)
        if form & threads.TIMED:
            site.timed(out.size, form, time.perf_counter() - start)
        return out
    start = time.perf_counter()
    if not over_threads(a, b, out, n):
        np.matmul(a, b, out=out)
    elif form & threads.TIMED:
        site.timed(out.size, form, time.perf_counter() - start)
    return out


def eligible(ins: Sequence[TensorType], out: TensorType) -> bool:
    """Whether a matrix product at these types takes `batched_matmul`: a float32 or
    float64 result of at least two matrices, both operands stacks of its dtype."""
    return (
        out.dtype in _FLOATS
        and all(t.dtype == out.dtype and len(t.shape) >= 3 for t in ins)
        and math.prod(out.shape[:-2]) >= 2
        and 0 not in out.shape
    )


def _renamed(expr: Any, name: str) -> Any:
    return Call(name, expr.args, expr.kwargs) if isinstance(expr, Call) else expr


def fuse_batched_products(
    lines: Sequence[Line],
    refs: Mapping[int, Ref],
    types: Mapping[int, TensorType],
    env: dict[str, Any],
    context: Context,
) -> list[Line]:
    """``lines`` with each `eligible` product's ``np.matmul`` line calling
    `batched_matmul` instead (the linalg family's fusion on the compiled path)."""
    if not context.registered("matmul"):
        return list(lines)
    out = list(lines)
    for k, line in enumerate(lines):
        node, call = line.node, line.call
        if (
            node.op != "matmul"
            or not isinstance(call, Call)
            or call.fn != "_matmul"
            or not eligible([types[n.id] for n in node.inputs], types[node.id])
        ):
            continue
        env["_batched_matmul"] = batched_matmul
        out[k] = Line(
            node=node,
            call=_renamed(call, "_batched_matmul"),
            reuse=line.reuse,
            into=_renamed(line.into, "_batched_matmul"),
            work=line.work,
            flops=line.flops,
        )
    return out
