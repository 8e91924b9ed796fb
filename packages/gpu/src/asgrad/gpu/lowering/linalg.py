"""The linalg family on the GPU: batched, broadcasting matmul through strided reads.

One tiled kernel (``kernels/linalg_matmul_tiled.wgsl``, generated per tile shape by
`._matmul_tiles`) reads its operands through `MatrixView` strides, so a
transposed operand costs no copy, and as vec4 where they are aligned. `select`
is the rule for the tile per product (large tiles while they fill the GPU, smaller ones
or split-K, summed by a column reduction, when they would not); where tuning is on
(`asgrad.gpu.lowering._matmul_tuning`) the device's fastest candidate for the
product's size bucket is used instead, measured once and cached on disk. A batch of
products sharing one B matrix runs as one taller product.
"""

from __future__ import annotations

import dataclasses
import math
import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from asgrad.gpu.device.array import GpuArray, Operand, contiguous_strides
from asgrad.gpu.device.buffers import GpuBuffer
from asgrad.gpu.errors import GpuUnsupportedError
from asgrad.gpu.lowering import _matmul_tiles as tiles
from asgrad.gpu.lowering import _matmul_tuning as tuning
from asgrad.gpu.lowering.common import Attrs, Lowering
from asgrad.gpu.lowering.elementwise import elementwise
from asgrad.gpu.lowering.reduction import reduce_axis
from asgrad.tensor import TensorType
from asgrad.tensor.ir.scalar import Expr, arg

__all__ = [
    "LOWERINGS",
    "MAX_EPILOGUE_OPERANDS",
    "WGSL_FILES",
    "Epilogue",
    "Gather",
    "MatrixView",
    "choose",
    "fill_splits",
    "matmul",
    "matmul_into",
    "select",
    "unsplit",
]

WGSL_FILES: tuple[str, ...] = (
    "linalg_matmul_tiled.wgsl",
    "prelude.wgsl",
    "reduction_cols_block.wgsl",
    "reduction_cols.wgsl",
)

MAX_BATCH_DIMS = 4

# Operands an epilogue may read besides the product: the storage bindings (8 per
# stage by WebGPU's default) less A, B and C.
MAX_EPILOGUE_OPERANDS = 5


@dataclass(frozen=True)
class Epilogue:
    """What `matmul_into` stores instead of the product: the scalar expression
    ``expr`` of ``arg(0)``, the product's element, and ``arg(k)``, the element of
    ``operands[k - 1]`` at the same output position (each operand broadcast to the
    output's shape through its strides, of any storage type); of the product's dtype
    (float16: the product rounded first, each op rounded as unfused), written into C
    or, given ``out`` (C-contiguous of C's shape), into ``out`` beside the product."""

    expr: Expr
    operands: Sequence[GpuArray | Operand]
    # where the expression's value goes, C then keeping the product itself (a product
    # other kernels read too); by default into C, instead of the product
    out: GpuArray | None = None


@dataclass(frozen=True)
class Gather:
    """Operands that `matmul_into` gathers through generated loads instead of reading
    through strides: a convolution's implicit GEMM (`asgrad.gpu.lowering.conv`).

    ``loads`` is the WGSL of ``load_a(base, m, k, kend)`` and ``load_b(base, k, n,
    kend)`` (`asgrad.gpu.lowering._matmul_tiles.source`), ``base`` being the batch
    element's offset that the views' batch strides give (their row and column strides
    are not read); ``layouts`` the axis along which each gather reads consecutive
    memory (A "k" or "m", B "n" or "k"), which orders the tile loaders; ``kind`` names
    the gathers in the tuning cache's buckets."""

    kind: str
    loads: str
    layouts: tuple[str, str]


class MatrixView:
    """A (batch..., rows, cols) view of a buffer given by element strides and an offset.

    ``transpose()`` swaps the last two axes without touching memory.
    """

    __slots__ = ("array", "offset", "shape", "strides")

    def __init__(
        self,
        array: GpuArray,
        shape: tuple[int, ...] | None = None,
        strides: tuple[int, ...] | None = None,
        offset: int = 0,
    ) -> None:
        self.array = array
        self.shape = array.shape if shape is None else shape
        self.strides = contiguous_strides(self.shape) if strides is None else strides
        self.offset = offset

    def transpose(self) -> MatrixView:
        """Swap the last two axes."""
        s, t = list(self.shape), list(self.strides)
        s[-1], s[-2] = s[-2], s[-1]
        t[-1], t[-2] = t[-2], t[-1]
        return MatrixView(self.array, tuple(s), tuple(t), self.offset)


def _as_view(x: GpuArray | MatrixView) -> MatrixView:
    return x if isinstance(x, MatrixView) else MatrixView(x)


def matmul(
    a: GpuArray | MatrixView,
    b: GpuArray | MatrixView,
    variant: str | None = None,
    splits: int | None = None,
) -> GpuArray:
    """``numpy.matmul`` semantics for float32 arrays, and for float16 ones accumulated
    in float32 and rounded once (batch dims broadcast).

    1-D operands follow numpy: a vector is promoted to a matrix and the added
    dimension removed from the result. ``variant`` (a tile name such as
    ``"128x64_8x4_k8"``, or "128", "64", "32") forces a tile (tests and benchmarks);
    by default it is chosen from the sizes (`choose`).
    """
    va, vb = _as_view(a), _as_view(b)
    squeeze: list[int] = []
    if len(va.shape) == 1:
        va = MatrixView(va.array, (1, va.shape[0]), (0, va.strides[0]), va.offset)
        squeeze.append(-2)
    if len(vb.shape) == 1:
        vb = MatrixView(vb.array, (vb.shape[0], 1), (vb.strides[0], 0), vb.offset)
        squeeze.append(-1)
    batch = tuple(np.broadcast_shapes(va.shape[:-2], vb.shape[:-2]))
    shape = (*batch, va.shape[-2], vb.shape[-1])
    out = GpuArray.empty(shape, va.array.dtype, va.array.device)
    matmul_into(va, vb, out, variant, splits)
    if squeeze:
        final = list(shape)
        for axis in sorted(squeeze):
            del final[axis if axis == -1 else len(final) - 2]
        out.shape = tuple(final)
    return out


def _batch_strides(view: MatrixView, batch: tuple[int, ...]) -> list[int]:
    """Strides of ``view`` over the broadcast ``batch`` dims (0 where broadcast)."""
    lead = len(batch) - (len(view.shape) - 2)
    strides = [0] * lead + list(view.strides[:-2])
    shape = [1] * lead + list(view.shape[:-2])
    return [0 if s == 1 else st for s, st in zip(shape, strides, strict=True)]


def matmul_into(
    a: MatrixView,
    b: MatrixView,
    into: GpuArray | Operand,
    variant: str | None = None,
    splits: int | None = None,
    epilogue: Epilogue | None = None,
    gather: Gather | None = None,
    sum_pieces: bool = True,
) -> GpuArray | None:
    """Record ``into = a @ b``; ``into`` is an array of the broadcast result shape, or a
    view of one of that shape (a strided destination: a permuted or sliced view of a
    larger array, written through its strides as the product is stored; K is then not
    split and no second output is written).

    ``variant`` names a tile (`asgrad.gpu.lowering._matmul_tiles.tile`) and
    ``splits`` the number of pieces K is cut into (split-K); by default both come from
    `choose` for the product's sizes (the tuned choice, or `select`'s). An `Epilogue`
    is stored instead of the product, e.g.
    ``Epilogue(maximum(arg(0) + arg(1), 0.0), [bias])`` (a bias of N elements broadcast
    over the rows, then a ReLU); it runs as each element is stored, so K is not split.
    A `Gather` replaces the strided reads of A and B by its loads. With
    ``sum_pieces=False`` a product whose K is split is not summed: the partial products
    are returned, shaped ``(splits, out.size)`` (their sum is ``out``; a multi-tensor
    update adds them up), and ``out`` is left unwritten; None when K is not split
    (``out`` holds the product).
    """
    store: Operand | None = None
    store_only = False  # an epilogue made only to store through the destination's strides
    if isinstance(into, Operand):
        if _plain(into):
            out = into.array
        else:
            store, out = into, into.array
            if epilogue is None:
                epilogue, store_only = Epilogue(arg(0), []), True
            elif epilogue.out is not None:
                raise GpuUnsupportedError(
                    "a matmul with a strided destination writes no second output"
                )
            if sum_pieces is False:
                raise GpuUnsupportedError("a strided destination takes the summed product")
    else:
        out = into
    device = out.device
    dtypes = {out.dtype, a.array.dtype, b.array.dtype}
    if len(dtypes) > 1 or not dtypes <= {np.dtype(np.float32), np.dtype(np.float16)}:
        raise GpuUnsupportedError(
            f"matmul on the GPU takes float32 or float16 operands of one dtype; got"
            f" {a.array.dtype} @ {b.array.dtype} into {out.dtype}"
        )
    elem = out.wgsl
    M, K = a.shape[-2], a.shape[-1]
    K2, N = b.shape[-2], b.shape[-1]
    if K != K2:
        raise GpuUnsupportedError(f"matmul: shapes {a.shape} and {b.shape} do not align")
    shape = tuple(into.shape)
    batch = shape[:-2]
    if len(batch) > MAX_BATCH_DIMS:
        raise GpuUnsupportedError(
            f"matmul on the GPU supports up to {MAX_BATCH_DIMS} batch dimensions, "
            f"got {len(batch)}; reshape first"
        )
    nbatch = math.prod(batch)
    if nbatch == 0 or M == 0 or N == 0:
        return None
    M, batch, a_bs, b_bs, nbatch = _folded(a, b, batch, device.max_groups)
    max_shared = device.limits.get("max-compute-workgroup-storage-size", 16384)
    a_st, b_st = (a.strides[-2], a.strides[-1]), (b.strides[-2], b.strides[-1])
    a_layout, b_layout = _layouts(a, b) if gather is None else gather.layouts
    extra: list[Operand] = []
    epi = tiles.IDENTITY
    if epilogue is not None:
        if len(epilogue.operands) > MAX_EPILOGUE_OPERANDS:
            raise GpuUnsupportedError(
                f"a matmul epilogue reads at most {MAX_EPILOGUE_OPERANDS} operands besides "
                f"the product; got {len(epilogue.operands)}"
            )
        extra = [Operand.of(x) for x in epilogue.operands]
        second = epilogue.out is not None
        if second and len(extra) > MAX_EPILOGUE_OPERANDS - 1:
            raise GpuUnsupportedError(
                f"a matmul epilogue that keeps the product reads at most "
                f"{MAX_EPILOGUE_OPERANDS - 1} operands besides it; got {len(extra)}"
            )
        epi, ep_meta = tiles.epilogue_source(epilogue.expr, extra, shape, second, elem, store)
        splits = 1  # the epilogue runs as the product is stored: no partial products
    vec_a = _vec4(a.offset, a_bs, a_st, (M, K), 1 if a_layout == "k" else 0)
    vec_b = _vec4(b.offset, b_bs, b_st, (K, N), 1 if b_layout == "n" else 0)
    if gather is not None:
        vec_a = vec_b = False
    if variant is None or splits is None:
        # a product stored through strides alone takes the tile tuned for it stored
        # plainly (its K is left whole all the same)
        problem = tuning.Problem(
            M, N, K, nbatch, (a_layout, b_layout), (vec_a, vec_b), epilogue is None or store_only,
            max_shared, device.max_groups, "matmul" if gather is None else gather.kind, elem,
        )  # fmt: skip
        chosen, chosen_splits = _choose(a, b, shape, problem, gather)
        variant = chosen if variant is None else variant
        splits = chosen_splits if splits is None else splits
    t = tiles.tile(variant)
    if t.copy_b:  # B read along K: copied to a contiguous K x N array first
        if b_layout == "k" and gather is None:
            b = MatrixView(elementwise("x0", [Operand(b.array, b.shape, b.strides, b.offset)],
                                       b.array.dtype, b.shape))  # fmt: skip
        plain = dataclasses.replace(t, copy_b=False).name
        return matmul_into(a, b, out, plain, splits, epilogue, gather, sum_pieces)
    if t.shared > max_shared:
        raise GpuUnsupportedError(
            f"matmul tile {variant!r} needs {t.shared} bytes of workgroup memory; this "
            f"device allows {max_shared}: choose a smaller tile or BK"
        )
    # K pieces of k_len (a multiple of BK), the last one possibly shorter
    steps = max(1, -(-K // t.bk))
    k_len = -(-steps // max(1, min(int(splits), steps))) * t.bk
    splits = max(1, -(-K // k_len))
    pad = MAX_BATCH_DIMS - len(batch)
    meta = struct.pack(
        "<4I4I4I4I4I4I",
        M, N, K, k_len,
        a.offset, *a_st, splits,
        b.offset, *b_st, nbatch,
        *([1] * pad + list(batch)), *([0] * pad + a_bs), *([0] * pad + b_bs),
    )  # fmt: skip
    binds: tuple[str, ...] = ("uniform", "read", "read", "write")
    if extra or store is not None:
        binds += ("uniform",) + ("read",) * len(extra)
    if epilogue is not None and epilogue.out is not None:
        binds += ("write",)
    loads = None if gather is None else gather.loads
    # split-K partial products stay float32 until their sum is rounded
    types = (elem, elem if splits == 1 else "f32")
    # rows of C (and its split slabs) in whole vec4, stored plainly (c_at is the index)
    vec_c = t.vstore and N % 4 == 0 and store is None
    pipe = device.pipeline(
        ("linalg_matmul", t.name, a_layout, b_layout, vec_a, vec_b, types, (epi,), loads, vec_c),
        lambda: tiles.source(t, a_layout, b_layout, vec_a, vec_b, epi, loads, types, vec_c),
        binds,
    )
    groups = (-(-N // t.bn), -(-M // t.bm), nbatch * splits)
    if max(groups) > device.max_groups:
        raise GpuUnsupportedError(f"matmul grid {groups} exceeds the device limit")
    target = out if splits == 1 else GpuArray.empty((splits, nbatch * M * N), np.float32, device)
    params = device.params(meta)
    buffers: tuple[GpuBuffer, ...] = (params, a.array.buffer, b.array.buffer, target.buffer)
    if extra or store is not None:
        buffers += (device.params(ep_meta), *(o.array.buffer for o in extra))
    if epilogue is not None and epilogue.out is not None:
        if epilogue.out.shape != out.shape or epilogue.out.dtype != out.dtype:
            raise GpuUnsupportedError(
                f"a matmul epilogue's output must be {out.dtype} of the product's shape "
                f"{out.shape}; got {epilogue.out.dtype} of shape {epilogue.out.shape}"
            )
        buffers += (epilogue.out.buffer,)
    device.dispatch(pipe, buffers, groups)
    if splits == 1:
        return None
    if not sum_pieces:
        return target
    reduce_axis("sum", target, 0, out=out.view((nbatch * M * N,)))  # one per piece of K
    return None


def _plain(view: Operand) -> bool:
    """Whether ``view`` is its whole array, C-contiguous (no strided store needed)."""
    return (
        view.offset == 0
        and tuple(view.shape) == tuple(view.array.shape)
        and tuple(view.strides) == contiguous_strides(view.shape)
    )


def _folded(
    a: MatrixView, b: MatrixView, batch: tuple[int, ...], max_groups: int
) -> tuple[int, tuple[int, ...], list[int], list[int], int]:
    """M, the batch, A's and B's batch strides and the batch size of the product as
    launched: one (batch * M) x N product where B is shared by every batch element and
    A's rows continue from one element to the next."""
    M, nbatch = a.shape[-2], math.prod(batch)
    a_bs, b_bs = _batch_strides(a, batch), _batch_strides(b, batch)
    tall = M * nbatch <= 32 * max_groups  # rows of the smallest tile fit the grid
    if nbatch > 1 and tall and not any(b_bs) and _folds(a, batch, a_bs):
        return M * nbatch, (), [], [], 1
    return M, batch, a_bs, b_bs, nbatch


def _layouts(a: MatrixView, b: MatrixView) -> tuple[str, str]:
    """The axis along which each operand is contiguous: A "k" or "m", B "n" or "k"."""
    return ("k" if a.strides[-1] == 1 else "m"), ("n" if b.strides[-1] == 1 else "k")


def unsplit(a: MatrixView, b: MatrixView) -> bool:
    """Whether ``a @ b`` runs without splitting K (so an epilogue costs it nothing) on
    the device holding ``a``: `choose`'s choice for the product alone."""
    batch = tuple(np.broadcast_shapes(a.shape[:-2], b.shape[:-2]))
    if len(batch) > MAX_BATCH_DIMS or math.prod(batch) == 0:
        return False
    _, splits = choose(a, b)
    return splits == 1


def choose(a: MatrixView, b: MatrixView, splittable: bool = True) -> tuple[str, int]:
    """The tile and the number of K pieces ``a @ b`` runs with by default on the device
    holding ``a``: the device's measured choice for the product's size bucket where
    tuning is on (`asgrad.gpu.lowering._matmul_tuning`; measured at the first product of
    the bucket, then read from the cache), else `select`'s. ``splittable=False``
    (an epilogue) leaves K whole.

    >>> import numpy as np  # doctest: +REQUIRES_GPU
    >>> from asgrad.gpu import to_gpu
    >>> a = MatrixView(to_gpu(np.ones((8, 16), np.float32)))
    >>> tile, splits = choose(a, a.transpose())
    >>> tiles.tile(tile).bm in (32, 64, 128), splits
    (True, 1)
    """
    device = a.array.device
    batch = tuple(np.broadcast_shapes(a.shape[:-2], b.shape[:-2]))
    M, _, a_bs, b_bs, nbatch = _folded(a, b, batch, device.max_groups)
    K, N = a.shape[-1], b.shape[-1]
    a_st, b_st = (a.strides[-2], a.strides[-1]), (b.strides[-2], b.strides[-1])
    a_layout, b_layout = _layouts(a, b)
    max_shared = device.limits.get("max-compute-workgroup-storage-size", 16384)
    problem = tuning.Problem(
        M, N, K, nbatch, (a_layout, b_layout),
        (
            _vec4(a.offset, a_bs, a_st, (M, K), 1 if a_layout == "k" else 0),
            _vec4(b.offset, b_bs, b_st, (K, N), 1 if b_layout == "n" else 0),
        ),
        splittable, max_shared, device.max_groups, "matmul", a.array.wgsl,
    )  # fmt: skip
    return _choose(a, b, (*batch, a.shape[-2], N), problem)


def _choose(
    a: MatrixView,
    b: MatrixView,
    shape: tuple[int, ...],
    problem: tuning.Problem,
    gather: Gather | None = None,
) -> tuple[str, int]:
    """`select`'s choice for ``problem`` or, where tuning is on, the tuned one (timed
    on a scratch output of ``shape``, which a plan being captured does not keep)."""
    default = select(
        problem.M, problem.N, problem.K, problem.nbatch, problem.max_shared, problem.layouts
    )
    if not problem.splittable:
        default = (default[0], 1)
    if not problem.fits(default):  # too many tiles for the grid: the widest that fit
        wide = [(name, 1) for name in (LARGE, LARGE_T) if problem.fits((name, 1))]
        default = wide[0] if wide else default
    scratch: list[GpuArray] = []

    def run(variant: str, splits: int) -> Callable[[], None]:
        def record() -> None:
            if not scratch:  # made while timing: from the device's own pool
                scratch.append(GpuArray.empty(shape, a.array.dtype, a.array.device))
            matmul_into(a, b, scratch[0], variant, splits, gather=gather)

        return record

    return tuning.choose(a.array.device, problem, default, run)


def _folds(a: MatrixView, batch: tuple[int, ...], a_bs: list[int]) -> bool:
    """Whether ``a``'s batch elements lie one after another along its row axis."""
    expected = a.shape[-2] * a.strides[-2]
    for size, stride in zip(reversed(batch), reversed(a_bs), strict=True):
        if size == 1:
            continue
        if stride != expected:
            return False
        expected *= size
    return True


def _vec4(
    offset: int, bstrides: list[int], st: tuple[int, int], dims: tuple[int, int], axis: int
) -> bool:
    """Whether an operand can be read as vec4 along its contiguous ``axis`` (0 or 1 of
    ``st``/``dims``): every other stride, the offset and that axis's length are
    multiples of 4."""
    others = [st[1 - axis], offset, dims[axis], *bstrides]
    return st[axis] == 1 and all(v % 4 == 0 for v in others)


# select()'s tile in place of LARGE for operands read as stored (A along K, B along N):
# 128 threads of 8x16 outputs, one buffer (8 KiB of workgroup memory), 43.7 TFLOP/s at
# 4096^3 on an H200 against LARGE's 40.2 (benchmarks/matmul_sweep.py --sizes 1024,4096
# --candidates all, 2026-12-02). FEW below is 64x64 with 128 threads of 8x4 outputs:
# 29.0 TFLOP/s at 1024^3 against 22.3 for 64x64_8x8_k8du in the same sweep.
LARGE_KN = "128x128_8x16_k8u"


# The tiles select() picks from, measured on an H200 (benchmarks/matmul_sweep.py):
# LARGE (double-buffered, unrolled) for row-major operands, LARGE_T (BK 16, unrolled)
# when an operand is read transposed, while they give LARGE_GROUPS workgroups; SHALLOW
# for K below SHALLOW_K and batches of narrow matrices (attention heads) where
# BATCH_TALL and BATCH_WIDE (below) do not fit the device or the product; FEW (128
# threads, 8x4 each) when 128x128 tiles would not fill the GPU; SPLIT_FEW for deep K
# with very few outputs; MEDIUM and SMALL for small matrices; TINY (16x16, 16 threads)
# for a split product whose output fills too little of a SMALL tile.
LARGE = "128x128_8x8_k8du"
LARGE_T = "128x128_8x8_k16u"
SHALLOW = "128x64_8x8_k8du"
FEW = "64x64_8x4_k16dpu"
SPLIT_FEW = "64x64_8x4_k16dpu"
MEDIUM = "64x64_8x8_k8"
SMALL = "32x32_4x4_k8"
TINY = "16x16_4x4_k16d"
# Batches of narrow products (attention heads, 256 x 64 or 64 x 256 outputs each, K
# 256) on an H200: BATCH_TALL 68 us for p^T @ dO and 80 for p @ v, BATCH_WIDE 69 for
# q^T @ dS, against 98-100 for SHALLOW and 85 for FEW (GPU time of 256 products,
# benchmarks/matmul_sweep.py --shapes, 2026-12-02); 20 KiB of workgroup memory each.
BATCH_TALL = "256x64_16x4_k16qsu"
BATCH_WIDE = "64x256_4x16_k16qsu"
LARGE_GROUPS = 128
SHALLOW_K = 256
# The least fraction of a tile's outputs inside the matrix for it to be chosen.
MIN_USE = 0.75
# Split-K when the large tile gives fewer than LARGE_GROUPS workgroups and K is at
# least DEEP times max(M, N): as many pieces as keep the workgroups within FILL_GROUPS
# (one more piece past it starts a second wave: X^T @ dY of 512 x 1536 x 8192 ran in
# 353 us in 5 pieces of LARGE_T, 240 workgroups, 430 in 4 and 395 in 12 on an H200;
# 512 x 2048 best in 4, 512 x 512 in 16), at most 2 * MAX_SPLITS and at least 2, each
# at least MIN_SPLIT_K long.
DEEP = 4
MIN_SPLIT_K = 256
MAX_SPLITS = 8
# A product whose 64x64 grid fills less than a quarter of LARGE_GROUPS (a transformer's
# weight gradient, K = batch * seq) splits K into pieces of at least THIN_PIECE_K; so
# does one too small for 64x64 tiles whose 32x32 grid is as sparse and whose K is at
# least DEEP * MIN_SPLIT_K (a convolution's weight gradient, K = batch * pixels): into
# as many pieces as bring the workgroups to FILL_GROUPS (`fill_splits`).
THIN_PIECE_K = 128
FILL_GROUPS = tuning.FILL_GROUPS


def fill_splits(groups: int, K: int, piece: int = THIN_PIECE_K) -> int:
    """The K pieces for a product whose tile gives ``groups`` workgroups: as many as
    bring them to `FILL_GROUPS`, each at least ``piece`` long (at least one)."""
    return max(1, min(-(-FILL_GROUPS // max(1, groups)), K // piece))


def select(
    M: int,
    N: int,
    K: int,
    nbatch: int,
    max_shared: int = 16384,
    layouts: tuple[str, str] = ("k", "n"),
) -> tuple[str, int]:
    """The tile and the number of K pieces for an (M, N, K) product over ``nbatch``
    with operands contiguous along ``layouts`` (A: "k" or "m", B: "n" or "k"), among
    tiles needing at most ``max_shared`` bytes of workgroup memory."""

    def grid(name: str) -> tuple[int, float]:
        t = tiles.tile(name)
        gm, gn = -(-M // t.bm), -(-N // t.bn)
        return gm * gn * nbatch, M * N / (gm * t.bm * gn * t.bn)

    def usable(name: str) -> bool:
        return grid(name)[1] >= MIN_USE and tiles.tile(name).shared <= max_shared

    large = LARGE if layouts == ("k", "n") else LARGE_T
    if layouts == ("k", "n") and tiles.tile(LARGE_KN).shared <= max_shared:
        large = LARGE_KN
    groups = grid(large)[0]
    if K < SHALLOW_K and usable(SHALLOW) and grid(SHALLOW)[0] >= LARGE_GROUPS:
        return SHALLOW, 1
    if usable(large) and groups >= LARGE_GROUPS:
        return large, 1
    if nbatch > 1:  # batches of matrices too narrow for 128x128 tiles
        for name in (BATCH_TALL, BATCH_WIDE, SHALLOW):
            if usable(name) and grid(name)[0] >= LARGE_GROUPS:
                return name, 1
    deep = max(DEEP * max(M, N), 2 * MIN_SPLIT_K)
    if nbatch == 1 and deep <= K:
        splits = min(MAX_SPLITS, K // MIN_SPLIT_K)
        if usable(large) and groups * splits >= LARGE_GROUPS:
            wave = min(2 * MAX_SPLITS, FILL_GROUPS // groups, K // MIN_SPLIT_K)
            return large, max(2, wave)
        if usable(SPLIT_FEW):
            return SPLIT_FEW, splits
    thin = grid(SPLIT_FEW)[0] < LARGE_GROUPS // 4
    if thin and K >= 2 * THIN_PIECE_K and usable(SPLIT_FEW):
        return SPLIT_FEW, fill_splits(grid(SPLIT_FEW)[0], K)
    if grid(SMALL)[0] < LARGE_GROUPS // 4 and K >= DEEP * MIN_SPLIT_K:
        # a few small tiles walking a long K (a convolution's weight gradient, batched
        # over its groups): TINY where the product fills too little of SMALL's tiles
        tiny = tiles.tile(TINY).shared <= max_shared and grid(TINY)[1] > grid(SMALL)[1]
        small = TINY if tiny and grid(SMALL)[1] < MIN_USE else SMALL
        return small, fill_splits(grid(small)[0], K)
    if usable(FEW) and grid(FEW)[0] >= LARGE_GROUPS // 2:
        return FEW, 1
    _, use = grid(MEDIUM)
    return (MEDIUM if use >= MIN_USE or M * N * nbatch >= 64 * 64 * 64 else SMALL), 1


def _matmul(ins: list[GpuArray], attrs: Attrs, out: TensorType) -> GpuArray:
    return matmul(ins[0], ins[1])


LOWERINGS: dict[str, Lowering] = {"matmul": _matmul}
