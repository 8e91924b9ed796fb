"""Batched matrix products of many small matrices: each matrix on one of BLAS's threads.

``np.matmul`` on stacked operands calls BLAS once per matrix, and OpenBLAS splits each
of those products over all its threads: an attention's ``q @ k^T`` of 256 matrices of
256x256x64 keeps 16 threads busy with products too small to share (about 150 GFLOP/s
at 16 threads on the device host, against about 1.4 TFLOP/s for the step's large 2-D
products). PyTorch's ``bmm`` runs the batch in parallel instead, each matrix on one
thread. `gemm_batch` does the same with numpy's own OpenBLAS: one call of its
``cblas_sgemm_batch`` (``cblas_dgemm_batch``; OpenBLAS 0.3.30 on, numpy 2.3's wheels and
later), which runs each matrix's product on one of BLAS's own threads, the interpreter
lock released. On the 16-core host it ran transformer_large's four attention products
in 2.6-4.1 ms against ``np.matmul``'s 10.1-12.9 ms (docs/performance.md, "Batched products
over threads"); a pool of Python threads each calling ``np.matmul`` with BLAS on one
thread, measured beside it, took 6.6-12.8 ms and lost to ``np.matmul`` at the small
transformer's sizes, so it is not used.

Each matrix is one BLAS product on one thread: the bits of ``np.matmul`` with BLAS on one
thread, which are ``np.matmul``'s own where OpenBLAS rounds its threaded products as its
one-thread ones (numpy's wheels as they come, checked on the 16-core host; with the
2-core machine's ``OPENBLAS_CORETYPE=Haswell`` they differ in the last bits).
`batched_matmul` takes the route only where it gave ``np.matmul``'s bits: its first call
over threads for a product (shapes, strides, dtype) computes both and compares, and a
product whose bits differ stays ``np.matmul`` in the process. So which form runs never
changes a result, and it is a measured choice per product
(`asgrad.tensor.cpu.jit.threads.Site`, keyed by the operands' shapes and strides and the
thread count, kept in ``routes.json``): ``np.matmul`` in the first step, then timed calls
of each form alternate, and the faster stays (a close race keeps the threads). The
settings are the compiled kernels' (`asgrad.tensor.cpu.jit.threads`):
``ASGRAD_CPU_THREADS=n`` (``n`` >= 2) or ``set_threads`` runs every eligible product's
batch over BLAS's threads unmeasured, 1 runs ``np.matmul``; ``ASGRAD_CPU_ROUTE=parallel``
or ``serial`` forces a form; below four threads (``threads.MEASURE_MIN_THREADS``) an
unset choice is ``np.matmul``, about as fast at two threads on the 2-core machine.

A product's line calls `batched_matmul` (`fuse_batched_products`, the linalg family's
fusion on the compiled path) when both operands are stacks (a stack against a matrix is
already one tall product, `asgrad.tensor.cpu.specialize.matmul`) of float32 or float64
matrices of more than `BATCH_MIN_MNK` multiply-adds each (`eligible`); it runs over
threads only where its batch has at least as many matrices as there are kernel threads
(`asgrad.tensor.cpu.jit.threads.threads`) and `gemm_batch` applies; otherwise it is
``np.matmul``.
"""

from __future__ import annotations

import contextlib
import ctypes
import math
import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from asgrad.tensor.cpu.records import Call, Line, Ref
from asgrad.tensor.cpu.specialize import Context
from asgrad.tensor.ir.registry import TensorType

__all__ = [
    "BATCH_MIN_MNK",
    "FORCE",
    "BlasBatch",
    "batched_matmul",
    "blas_batch",
    "eligible",
    "fuse_batched_products",
    "gemm_batch",
]

_FLOATS = ("float32", "float64")
# ``"parallel"`` or ``"serial"`` (``np.matmul``): every call's form, unmeasured and
# unchecked (tests, ``benchmarks/cpu_bmm.py``); None: as the module docstring says.
FORCE: list[str | None] = [None]
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


class BlasBatch:
    """numpy's OpenBLAS's batched products, where it has them.

    Attributes:
        fns: ``cblas_sgemm_batch`` and ``cblas_dgemm_batch`` by dtype character
            (``"f"``, ``"d"``): empty where numpy's BLAS is not an OpenBLAS with them.
        index: The C integer type of the library's sizes (64 bits in numpy's wheels).
    """

    def __init__(self) -> None:
        self.fns: dict[str, Any] = {}
        self.index: Any = ctypes.c_int64
        for lib in _loaded_openblas():
            for prefix, suffix in _AFFIXES:
                if getattr(lib, f"{prefix}openblas_get_num_threads{suffix}", None) is None:
                    continue
                self._find(lib, prefix, suffix)
                return

    def _find(self, lib: ctypes.CDLL, prefix: str, suffix: str) -> None:
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
            self.fns["f" if char == "s" else "d"] = fn


_batch: list[BlasBatch] = []


def blas_batch() -> BlasBatch:
    """The process's `BlasBatch` (made on first use: numpy is loaded by then)."""
    if not _batch:
        _batch.append(BlasBatch())
    return _batch[0]


# OpenBLAS runs a product of at most 100**3 multiply-adds (m * n * k) through its
# small-matrix kernels where they exist, and 0.3.30-0.3.34 crash doing that inside
# ``gemm_batch`` in DYNAMIC_ARCH builds (numpy's wheels; OpenMathLib/OpenBLAS#5980; numpy
# 2.5.2's 0.3.34 segfaulted on 64 x 64 x 64 products on the 16-core host, 2026-12-03):
# smaller products stay np.matmul (at the small transformer's 64 x 32 x 64 it was the
# fastest there was on the 16-core host).
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
    nothing, where it does not apply: no such function (`BlasBatch.fns`), a matrix
    numpy would multiply without BLAS or with ``syrk`` (``a @ a^T``), a dimension of 1,
    a product of at most `BATCH_MIN_MNK` multiply-adds, a result whose rows are not
    contiguous or that may overlap an operand. ``a`` and ``b`` are stacks whose batch
    axes broadcast to ``out``'s."""
    fn = blas_batch().fns.get(out.dtype.char)
    m, k, n = a.shape[-2], a.shape[-1], b.shape[-1]
    if fn is None or min(m, k, n) < 2 or m * k * n <= BATCH_MIN_MNK:
        return False
    if not (a.dtype == b.dtype == out.dtype):
        return False
    if np.may_share_memory(out, a) or np.may_share_memory(out, b):
        return False  # numpy copies an overlapping operand first
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
    ints = np.dtype(np.int64 if blas_batch().index is ctypes.c_int64 else np.int32)
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
        name = f"batched_matmul {a_shape}{a_strides} {b_shape}{b_strides} {dtype}"
        site = _sites[key] = Site(name)
    return site


def _checked(a: np.ndarray, b: np.ndarray, out: np.ndarray, key: Any) -> bool:
    """The first call over threads at ``key``: `gemm_batch` into ``out`` and
    ``np.matmul`` beside it, ``out`` holding ``np.matmul``'s result either way; whether
    the batch ran and gave the same bits is kept (`_agrees`) and returned."""
    expected = np.matmul(a, b)
    same = gemm_batch(a, b, out) and bool(np.array_equal(out, expected))
    if not same:
        out[...] = expected
    _agrees[key] = same
    return same


def batched_matmul(a: np.ndarray, b: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """``np.matmul(a, b, out=out)`` for stacked float operands of one dtype, its batch
    over threads where that is measured (or set) to be faster and gives the same bits
    (see the module docstring)."""
    from asgrad.tensor.cpu.jit import threads

    if out is None:
        batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
        out = np.empty((*batch, a.shape[-2], b.shape[-1]), np.result_type(a, b))
    n = threads.threads()
    # No gemm_batch in numpy's BLAS, or threads that would idle: BLAS's own threads.
    if out.dtype.char not in blas_batch().fns or n < 2 or math.prod(out.shape[:-2]) < n:
        np.matmul(a, b, out=out)
        return out
    if FORCE[0] is not None:
        if FORCE[0] != "parallel" or not gemm_batch(a, b, out):
            np.matmul(a, b, out=out)
        return out
    key = _key(a, b)
    site = _site(key)
    form = site.form(out.size)
    agrees = _agrees.get(key)
    if form & threads.PARALLEL and agrees is None:
        if not _checked(a, b, out, key):
            # Different bits (an OpenBLAS whose one-thread products round differently
            # from its threaded ones), or operands gemm_batch declines: this product
            # stays np.matmul in this process.
            threads.ROUTE.chosen[site.key(out.size, n)] = "serial"
        return out
    if not form & threads.PARALLEL or not agrees:
        start = time.perf_counter() if form & threads.TIMED else 0.0
        np.matmul(a, b, out=out)
        if form & threads.TIMED and not form & threads.PARALLEL:
            site.timed(out.size, form, time.perf_counter() - start)
        return out
    start = time.perf_counter()
    if not gemm_batch(a, b, out):
        np.matmul(a, b, out=out)
    elif form & threads.TIMED:
        site.timed(out.size, form, time.perf_counter() - start)
    return out


def eligible(ins: Sequence[TensorType], out: TensorType) -> bool:
    """Whether a matrix product at these types takes `batched_matmul`: a float32 or
    float64 result of at least two matrices, both operands stacks of its dtype, each
    matrix's product of more than `BATCH_MIN_MNK` multiply-adds (`gemm_batch`'s)."""
    if not (
        out.dtype in _FLOATS
        and len(ins) == 2
        and all(t.dtype == out.dtype and len(t.shape) >= 3 for t in ins)
    ):
        return False
    m, n, k = out.shape[-2], out.shape[-1], ins[0].shape[-1]
    return math.prod(out.shape[:-2]) >= 2 and min(m, n, k) >= 2 and m * n * k > BATCH_MIN_MNK


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
        out[k] = replace(
            line,
            call=_renamed(call, "_batched_matmul"),
            into=_renamed(line.into, "_batched_matmul"),
        )
    return out
