"""Seeded dropout: a mask from a counter-based hash, reproducible by every backend.

Dropout draws its mask from a counter-based hash of ``(seed, element index)``,
not from a stateful generator: the mask is a pure function of the seed input,
reproducible by any backend (the WGSL twin computes the same 32-bit hash from
`dropout_key` and `dropout_threshold`), and a training program gets a
fresh mask each step by advancing the seed (a fed value, or a Variable the
program increments through its updates).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from asgrad.tensor.errors import DTypeError, ShapeError
from asgrad.tensor.ir.common import randn, require_float
from asgrad.tensor.ir.dtypes import is_int
from asgrad.tensor.ir.registry import Attr, Attrs, OpCase, OpDef, TensorType, register_op

__all__ = [
    "dropout_keep",
    "dropout_key",
    "dropout_threshold",
    "normal_from_seed",
    "pcg_hash",
    "sample_keys",
    "uniform_from_seed",
]


def pcg_hash(v: np.ndarray) -> np.ndarray:
    """The PCG-RXS-M-XS 32-bit hash (Jarzynski and Olano 2020) of uint32 values."""
    state = v * np.uint32(747796405) + np.uint32(2891336453)
    word = ((state >> ((state >> np.uint32(28)) + np.uint32(4))) ^ state) * np.uint32(277803737)
    out: np.ndarray = (word >> np.uint32(22)) ^ word
    return out


def dropout_key(seed: int) -> int:
    """The 32-bit key of a seed: pcg(lo ^ pcg(hi)) of its two's-complement int64 halves.

    For a seed in the int32 range, ``hi`` is 0 (seed >= 0) or 0xFFFFFFFF (seed < 0),
    so a backend holding the seed as an i32 computes the same key.
    """
    bits = int(seed) & 0xFFFF_FFFF_FFFF_FFFF
    lo, hi = np.array([bits & 0xFFFF_FFFF], np.uint32), np.array([bits >> 32], np.uint32)
    return int(pcg_hash(lo ^ pcg_hash(hi))[0])


def dropout_threshold(p: float) -> int:
    """An element is kept when its hash is >= floor(p * 2**32)."""
    return min(math.floor(p * 4294967296.0), 0xFFFF_FFFF)


def dropout_keep(shape: tuple[int, ...], seed: int, p: float) -> np.ndarray:
    """The keep mask: ``pcg(pcg(index) ^ key) >= threshold``, index in row-major order."""
    if p <= 0.0:
        return np.ones(shape, dtype=bool)
    if p >= 1.0:
        return np.zeros(shape, dtype=bool)
    index = np.arange(math.prod(shape), dtype=np.uint32)
    h = pcg_hash(pcg_hash(index) ^ np.uint32(dropout_key(seed)))
    return (h >= np.uint32(dropout_threshold(p))).reshape(shape)


def _infer_dropout(types: Sequence[TensorType], attrs: Attrs) -> TensorType:
    x, seed = types
    require_float(x)
    if not is_int(seed.dtype) or seed.shape != ():
        raise DTypeError(
            f"seed must be an int32/int64 scalar, got {seed}; feed one or hold it in a"
            " Variable that the training program advances"
        )
    p = float(attrs["p"])
    if not 0.0 <= p <= 1.0:
        raise ShapeError(f"dropout probability p must be in [0, 1], got {p}")
    return x


def _dropout(x: np.ndarray, seed: np.ndarray, *, p: float) -> np.ndarray:
    if p >= 1.0:
        return np.zeros_like(x)
    keep = dropout_keep(x.shape, int(seed), p)
    scale = x.dtype.type(1.0 / (1.0 - p))
    return np.where(keep, x * scale, np.zeros((), x.dtype))


def _dropout_cases(rng: np.random.Generator) -> list[OpCase]:
    seed = np.array(12345, dtype=np.int64)
    return [
        OpCase((randn(rng, 4, 6), seed), {"p": 0.5}, wrt=(0,), label="p=0.5"),
        OpCase((randn(rng, 2, 3, 5), np.array(-7, np.int64)), {"p": 0.2}, wrt=(0,), label="p=0.2"),
        OpCase((randn(rng, 3, 4), seed), {"p": 0.0}, wrt=(0,), label="p=0"),
        OpCase((randn(rng, 3, 4), seed), {"p": 1.0}, wrt=(0,), label="p=1"),
        OpCase(
            (randn(rng, 64, 65), np.array(2**40 + 3, np.int64)),
            {"p": 0.3},
            grad=False,
            label="large, 64-bit seed",
        ),
    ]


register_op(
    OpDef(
        name="dropout",
        family="random",
        infer=_infer_dropout,
        kernel=_dropout,
        arity=2,
        tolerance=(1e-6, 1e-7),
        cases=_dropout_cases,
        attrs=(Attr(name="p", kind=float, doc="the probability of zeroing an element"),),
        doc="zero elements with probability p by a hash of (seed, index); scale 1/(1-p)",
    )
)


# -- sampling: rand_like and randn_like ---------------------------------------------------------
# Uniform and normal draws use the same hash as dropout under keys salted apart from
# dropout's, so a sampler and a dropout given equal seeds draw unrelated numbers.
_UNIFORM_SALT = 0x52414E44  # "RAND"
_NORMAL_SALT = 0x4E4F524D  # "NORM"
_U24 = 1.0 / 16777216.0  # 2**-24: uniforms carry 24 bits, exact in float32


def sample_keys(seed: int) -> tuple[int, int]:
    """The two 32-bit keys of a sampler seed: ``k1 = pcg(dropout_key ^ "RAND")`` and
    ``k2 = pcg(k1 ^ "NORM")`` (``k2`` is the second uniform of a normal draw)."""
    k1 = pcg_hash(np.array([dropout_key(seed) ^ _UNIFORM_SALT], np.uint32))
    k2 = pcg_hash(k1 ^ np.uint32(_NORMAL_SALT))
    return int(k1[0]), int(k2[0])


def _hashes(n: int, key: int) -> np.ndarray:
    return pcg_hash(pcg_hash(np.arange(n, dtype=np.uint32)) ^ np.uint32(key))


def uniform_from_seed(
    shape: tuple[int, ...], seed: int, dtype: type[np.floating] = np.float64
) -> np.ndarray:
    """Element ``i`` (row-major) is ``(pcg(pcg(i) ^ k1) >> 8) * 2**-24``, in ``[0, 1)``.

    Exact in any float dtype of 24 or more mantissa bits (float32 and float64 alike).
    """
    k1, _ = sample_keys(seed)
    bits = _hashes(math.prod(shape), k1) >> np.uint32(8)
    out: np.ndarray = (bits.astype(dtype) * dtype(_U24)).reshape(shape)
    return out


def normal_from_seed(shape: tuple[int, ...], seed: int) -> np.ndarray:
    """Box-Muller in float64: ``sqrt(-2 ln u1) * cos(2 pi u2)``, both uniforms 24-bit.

    ``u1 = ((pcg(pcg(i) ^ k1) >> 8) + 1) * 2**-24`` lies in ``(0, 1]`` (no log of 0),
    ``u2`` is the same with ``k2``, in ``[0, 1)``; ``|z| <= sqrt(2 ln 2**24) < 5.8``.
    """
    k1, k2 = sample_keys(seed)
    n = math.prod(shape)
    u1 = ((_hashes(n, k1) >> np.uint32(8)).astype(np.float64) + 1.0) * _U24
    u2 = (_hashes(n, k2) >> np.uint32(8)).astype(np.float64) * _U24
    return (np.sqrt(-2.0 * np.log(u1)) * np.cos(2.0 * np.pi * u2)).reshape(shape)


def _infer_sample(types: Sequence[TensorType], attrs: Attrs) -> TensorType:
    like, seed = types
    require_float(like, "the tensor whose shape and dtype a sample takes")
    if not is_int(seed.dtype) or seed.shape != ():
        raise DTypeError(
            f"seed must be an int32/int64 scalar, got {seed}; feed one or hold it in a"
            " Variable that the training program advances"
        )
    return like


def _rand_like(like: np.ndarray, seed: np.ndarray) -> np.ndarray:
    if like.dtype == np.float32 or like.dtype == np.float64:
        return uniform_from_seed(like.shape, int(seed), like.dtype.type)
    return uniform_from_seed(like.shape, int(seed)).astype(like.dtype)  # float16: rounded


def _randn_like(like: np.ndarray, seed: np.ndarray) -> np.ndarray:
    return normal_from_seed(like.shape, int(seed)).astype(like.dtype)


def _sample_cases(rng: np.random.Generator) -> list[OpCase]:
    # Value cases only: a sample has no gradient (the op is not differentiable).
    cases = [
        ((4, 6), 12345, np.int64, "seed 12345"),
        ((2, 3, 5), -7, np.int64, "negative seed"),
        ((), 0, np.int32, "scalar, int32 seed"),
        ((0, 3), 1, np.int64, "empty"),
        ((64, 65), 2**30 + 5, np.int64, "large"),
    ]
    return [
        OpCase((np.zeros(shape), np.array(seed, dtype)), grad=False, label=label)
        for shape, seed, dtype, label in cases
    ]


for _name, _kernel, _tol, _doc in (
    ("rand_like", _rand_like, (0.0, 0.0), "uniform [0, 1) from a hash of (seed, index); x: shape"),
    (
        "randn_like",
        _randn_like,
        (2e-6, 2e-6),
        "standard normal (Box-Muller on two hashes of (seed, index)); x: shape",
    ),
):
    register_op(
        OpDef(
            name=_name,
            family="random",
            infer=_infer_sample,
            kernel=_kernel,
            arity=2,
            differentiable=False,
            tolerance=_tol,
            cases=_sample_cases,
            doc=_doc,
            shape_only_inputs=(0,),
            fresh_result=True,
            attrs=(),
        )
    )
