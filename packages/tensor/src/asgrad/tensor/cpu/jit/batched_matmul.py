"""Batched matrix products of many small matrices: the batch over threads, one BLAS thread each.

``np.matmul`` on stacked operands calls BLAS once per matrix, and OpenBLAS splits each
of those products over all its threads: an attention's ``q @ k^T`` of 256 matrices of
256x256x64 keeps 16 threads busy with products too small to share (about 150 GFLOP/s
at 16 threads on the device host, against about 1.4 TFLOP/s for the step's large 2-D
products; docs/performance.md, "Batched products over threads"). PyTorch's ``bmm`` runs
the batch in parallel instead, each matrix on one thread. `over_threads` does the same
with numpy's own OpenBLAS, two ways:

* `gemm_batch`: one call of OpenBLAS's ``cblas_?gemm_batch`` (0.3.30 on: numpy 2.3's
  wheels and later), which runs each matrix's product on one of BLAS's own threads,
  the interpreter lock released; for products above `BATCH_MIN_MNK` multiply-adds
  (below it 0.3.30-0.3.31 crash in numpy's builds) whose matrices numpy would hand to
  ``gemm`` (not ``syrk``, nor its loops for layouts BLAS cannot read);
* else `pool_products`: BLAS set to one thread for the call, the batch cut into one
  run of matrices per thread (`pieces`), and each thread of a small `Pool` calling
  ``np.matmul`` on its run (numpy releases the lock inside it).

Either way each matrix is one BLAS product on one thread: the bits of ``np.matmul`` with
BLAS on one thread, which are those of ``np.matmul`` itself where OpenBLAS rounds its
threaded products as its one-thread ones (numpy's wheels do; with the 2-core machine's
``OPENBLAS_CORETYPE=Haswell`` they do not). `batched_matmul` takes the route only where it
gave ``np.matmul``'s bits: its first call over threads for a product (shapes, strides,
dtype) computes both and compares, and a product whose bits differ stays ``np.matmul``
in the process. So which form runs never changes a result, and it is a measured choice
per product (`asgrad.tensor.cpu.jit.threads.Site`, keyed by the operands' shapes and
strides and the thread count, kept in ``routes.json``): ``np.matmul`` in the first step,
then timed calls of each form alternate, and the faster stays (a close race keeps the
threads). The settings are the compiled kernels' (`asgrad.tensor.cpu.jit.threads`):
``ASGRAD_CPU_THREADS=n`` (``n`` >= 2) or ``set_threads`` runs every eligible product
over the threads unmeasured (`pool_products` over ``n``; `gemm_batch` over BLAS's), 1
runs ``np.matmul``; ``ASGRAD_CPU_ROUTE=parallel`` or ``serial`` forces a form; below
four threads (``threads.MEASURE_MIN_THREADS``) an unset choice is ``np.matmul``, which
at two threads on the 2-core machine was about as fast (docs/performance.md).

A product takes `batched_matmul` (`fuse_batched_products`, the linalg family's fusion
on the compiled path) when both operands are stacks (a stack against a matrix is
already one tall product, `asgrad.tensor.cpu.specialize.matmul`) of float32 or float64
(`eligible`), and runs over threads only where its batch has at least as many matrices
as there are kernel threads (`asgrad.tensor.cpu.jit.threads.threads`) and one of the
two ways applies (`pool_products` needs BLAS's thread count, `BlasControl`, and the
pool free: another thread inside it runs ``np.matmul``); otherwise it is ``np.matmul``.
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


# The names numpy's and SciPy's OpenBLAS builds give OpenBLAS's functions (scipy-openblas
# wheels: a prefix and, for 64-bit integers, a suffix), most specific first.
_AFFIXES = (("scipy_", "64_"), ("scipy_", ""), ("", "64_"), ("", ""))


def _loaded_openblas() -> list[ctypes.CDLL]:
    """The OpenBLAS libraries this process has loaded (``/proc/self/maps``), numpy's
    own first (SciPy may have loaded another copy, left alone); none where the file
    cannot be read."""
    try:
        with open("/proc/self/maps") as maps:
            paths = {line.split()[-1] for line in maps if "openblas" in line.lower()}
    except OSError:
        return []
    libs = []
    for path in sorted(paths, key=lambda p: os.sep + "numpy" not in p):
        with contextlib.suppress(OSError):
            libs.append(ctypes.CDLL(path))
    return libs


class BlasControl:
    """numpy's OpenBLAS as this module uses it; each part None where it cannot be
    reached.

    Attributes:
        get: Its thread count: through threadpoolctl when installed
            (`asgrad.tensor.cpu.blas.blas_threads`), else the library's own function.
        set: Sets its thread count (the process's: OpenBLAS has no per-thread count).
        batch: ``cblas_sgemm_batch`` and ``cblas_dgemm_batch`` by dtype character
            (``"f"``, ``"d"``; OpenBLAS 0.3.30 on): a batch of products, each on one of
            BLAS's threads (`gemm_batch`).
        index: The C integer type of the library's sizes (64 bits in numpy's wheels).
    """

    def __init__(self) -> None:
        from asgrad.tensor.cpu.blas import blas_threads

        found = blas_threads()
        self.get: Callable[[], Any] | None = found.get
        self.set: Callable[[int], Any] | None = found.set
        self.batch: dict[str, Any] = {}
        self.index: Any = ctypes.c_int64
        for lib in _loaded_openblas():
            for prefix, suffix in _AFFIXES:
                getter = getattr(lib, f"{prefix}openblas_get_num_threads{suffix}", None)
                setter = getattr(lib, f"{prefix}openblas_set_num_threads{suffix}", None)
                if getter is None or setter is None:
                    continue
                getter.argtypes, getter.restype = [], ctypes.c_int
                setter.argtypes, setter.restype = [ctypes.c_int], None
                if self.set is None:
                    self.get, self.set = getter, setter
                self._find_batch(lib, prefix, suffix)
                return

    def _find_batch(self, lib: ctypes.CDLL, prefix: str, suffix: str) -> None:
        config = getattr(lib, f"{prefix}openblas_get_config{suffix}", None)
        if config is not None:
            config.argtypes, config.restype = [], ctypes.c_char_p
            wide = b"USE64BITINT" in (config() or b"")
            self.index = ctypes.c_int64 if wide else ctypes.c_int32
        elif suffix != "64_":
            self.index = ctypes.c_int32
        for char in "sd":
            fn = getattr(lib, f"{prefix}cblas_{char}gemm_batch{suffix}", None)
            if fn is None:
                continue
            # order, then pointers to the 13 per-group arrays, group count, group sizes.
            fn.argtypes = [ctypes.c_int, *[ctypes.c_void_p] * 13, self.index, ctypes.c_void_p]
            fn.restype = None
            self.batch["f" if char == "s" else "d"] = fn


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


# One measured choice per product (`Site`), keyed by the operands' shapes, strides and
# dtype; and whether its batch over threads gave np.matmul's bits (`_agrees`).
_sites: dict[Any, Any] = {}
_agrees: dict[Any, bool] = {}


def _key(a: np.ndarray, b: np.ndarray) -> Any:
    return (a.shape, a.strides, b.shape, b.strides, a.dtype.char)


def _site(key: Any) -> Any:
    site = _sites.get(key)
    if site is None:
        from asgrad.tensor.cpu.jit.threads import Site

        a_shape, a_strides, b_shape, b_strides, dtype = key
        site = _sites[key] = Site(
            f"batched_matmul {a_shape}{a_strides} {b_shape}{b_strides} {dtype}"
        )
    return site


# OpenBLAS runs a product of at most 100**3 multiply-adds (m * n * k) through its
# small-matrix kernels where they exist, and 0.3.30-0.3.31 crash doing that inside
# ``gemm_batch`` in DYNAMIC_ARCH builds (numpy's wheels; OpenMathLib/OpenBLAS#5980):
# smaller products take the pool.
BATCH_MIN_MNK = 100**3
_CBLAS_NO_TRANS, _CBLAS_TRANS, _CBLAS_ROW_MAJOR = 111, 112, 101


def _blas_layout(
    rows: int, cols: int, strides: tuple[int, ...], size: int
) -> tuple[int, int] | None:
    """A matrix's (transpose flag, leading dimension) as numpy's ``matmul`` passes it to
    BLAS (``is_blasable2d``: unit stride along one axis, the other at least that
    extent), else None (numpy multiplies it without BLAS)."""
    rs, cs = strides[-2], strides[-1]
    if cs == size and rs % size == 0 and rs // size >= cols:
        return _CBLAS_NO_TRANS, rs // size
    if rs == size and cs % size == 0 and cs // size >= rows:
        return _CBLAS_TRANS, cs // size
    return None


# Each operand's matrices' offsets from its first, by (batch, strides).
_offsets: dict[Any, np.ndarray] = {}


def _matrix_offsets(batch: tuple[int, ...], strides: tuple[int, ...]) -> np.ndarray:
    key = (batch, strides)
    found = _offsets.get(key)
    if found is None:
        found = np.zeros(batch, np.int64)
        for axis, (extent, stride) in enumerate(zip(batch, strides, strict=True)):
            shape = [1] * len(batch)
            shape[axis] = extent
            found = found + (np.arange(extent, dtype=np.int64) * stride).reshape(shape)
        found = _offsets[key] = found.reshape(-1)
    return found


def gemm_batch(a: np.ndarray, b: np.ndarray, out: np.ndarray) -> bool:
    """``out[...] = a @ b`` as one ``cblas_?gemm_batch`` call (each matrix's product on
    one of BLAS's threads, the interpreter lock released), or False, having done
    nothing, where it does not apply: no such function (`BlasControl.batch`), a matrix
    numpy would multiply without BLAS or with ``syrk`` (``a @ a^T``), a dimension of 1,
    a product of at most `BATCH_MIN_MNK` multiply-adds, or a result whose rows are not
    contiguous. ``a`` and ``b`` are stacks whose batch axes broadcast to ``out``'s."""
    fn = blas_control().batch.get(out.dtype.char)
    m, k, n = a.shape[-2], a.shape[-1], b.shape[-1]
    if fn is None or min(m, k, n) < 2 or m * k * n <= BATCH_MIN_MNK:
        return False
    if not (a.dtype == b.dtype == out.dtype):
        return False
    size = out.itemsize
    la = _blas_layout(m, k, a.strides, size)
    lb = _blas_layout(k, n, b.strides, size)
    lc = _blas_layout(m, n, out.strides, size)
    if la is None or lb is None or lc is None or lc[0] != _CBLAS_NO_TRANS:
        return False
    batch = out.shape[:-2]
    pointers = []
    for x in (a, b, out):
        x = np.broadcast_to(x, batch + x.shape[-2:])
        offsets = _matrix_offsets(batch, x.strides[:-2])
        pointers.append(offsets + np.int64(x.ctypes.data))
    if (
        la[0] != lb[0]
        and m == n
        and a.strides[-2:] == b.strides[-1:-3:-1]
        and bool(np.any(pointers[0] == pointers[1]))
    ):
        return False  # numpy multiplies a matrix by its own transpose with syrk
    ints = np.dtype(np.int64 if blas_control().index is ctypes.c_int64 else np.int32)
    sizes = np.array([m, n, k, la[1], lb[1], lc[1], math.prod(batch)], ints)
    flags = np.array([la[0], lb[0]], np.intc)
    scalars = np.array([1.0, 0.0], out.dtype)

    def at(array: np.ndarray, i: int = 0) -> int:
        return int(array.ctypes.data) + i * array.itemsize

    fn(
        _CBLAS_ROW_MAJOR,
        at(flags, 0), at(flags, 1),
        at(sizes, 0), at(sizes, 1), at(sizes, 2),
        at(scalars, 0), at(pointers[0]), at(sizes, 3),
        at(pointers[1]), at(sizes, 4),
        at(scalars, 1), at(pointers[2]), at(sizes, 5),
        1, at(sizes, 6),
    )  # fmt: skip
    return True


def over_threads(a: np.ndarray, b: np.ndarray, out: np.ndarray, n: int) -> bool:
    """``out[...] = a @ b`` with the batch over threads: `gemm_batch` (BLAS's own
    threads) where it applies, else `pool_products` over ``n`` threads; False, having
    done nothing, where neither can run it."""
    return gemm_batch(a, b, out) or pool_products(a, b, out, n)


def pool_products(a: np.ndarray, b: np.ndarray, out: np.ndarray, n: int) -> bool:
    """``out[...] = a @ b`` with the batch over ``n`` threads of the `Pool`, each
    calling ``np.matmul`` on a run of matrices (`pieces`) with BLAS set to one thread
    for the call; or False, having done nothing, where BLAS's threads cannot be set or
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
            (a, b, out, list(pieces(batch, total * i // n, total * (i + 1) // n))) for i in range(n)
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


def _checked(a: np.ndarray, b: np.ndarray, out: np.ndarray, n: int, key: Any) -> bool:
    """The first call over threads at ``key``: `over_threads` into ``out`` and
    ``np.matmul`` beside it; whether they agree bit for bit is kept (`_agrees`), and
    ``out`` holds ``np.matmul``'s result either way. False: nothing ran over threads."""
    expected = np.matmul(a, b)
    if not over_threads(a, b, out, n):
        out[...] = expected
        return False
    _agrees[key] = same = bool(np.array_equal(out, expected))
    if not same:
        out[...] = expected
    return True


def batched_matmul(a: np.ndarray, b: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """``np.matmul(a, b, out=out)`` for stacked float operands of one dtype, its batch
    over threads where that is measured (or set) to be faster and gives the same bits
    (see the module docstring)."""
    from asgrad.tensor.cpu.jit import threads

    if out is None:
        batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
        out = np.empty((*batch, a.shape[-2], b.shape[-1]), np.result_type(a, b))
    n = threads.threads()
    if math.prod(out.shape[:-2]) < n or n < 2:  # threads would idle: BLAS's own threads
        result: np.ndarray = np.matmul(a, b, out=out)
        return result
    if FORCE[0] is not None:
        if FORCE[0] != "parallel" or not over_threads(a, b, out, n):
            np.matmul(a, b, out=out)
        return out
    key = _key(a, b)
    site = _site(key)
    form = site.form(out.size)
    agrees = _agrees.get(key)
    if form & threads.PARALLEL and agrees is None:
        if _checked(a, b, out, n, key) and not _agrees[key]:
            # Different bits (an OpenBLAS whose one-thread products round differently
            # from its threaded ones): this product stays np.matmul in this process.
            threads.ROUTE.chosen[site.key(out.size, n)] = "serial"
        return out
    if not form & threads.PARALLEL or not agrees:
        start = time.perf_counter() if form & threads.TIMED else 0.0
        np.matmul(a, b, out=out)
        if form & threads.TIMED and not form & threads.PARALLEL:
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
