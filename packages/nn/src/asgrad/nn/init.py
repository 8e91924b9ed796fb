"""Parameter initializers, as in PyTorch's ``torch.nn.init``, drawn from a seeded Generator.

Every initializer is a function ``init(shape, dtype="float32", rng=None, **options)``
returning a new array; layers take them (or a ``functools.partial`` of them) to
declare how their parameters start. ``rng`` is a ``numpy.random.Generator`` or an
int seed; the same seed gives the same values.

Fans follow asgrad's layouts: a 2-D weight is ``(in_features, out_features)`` (it
multiplies from the right, ``x @ w``), so ``fan_in = shape[0]`` and
``fan_out = shape[1]``; a convolution weight is ``(out, in/groups, kh, kw)``, so
``fan_in = shape[1] * kh * kw`` and ``fan_out = shape[0] * kh * kw``.

>>> w = xavier_uniform((4, 3), rng=0)
>>> w.shape, w.dtype
((4, 3), dtype('float32'))
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Literal

import numpy as np

from asgrad.tensor.errors import ArgumentError, ShapeError

Shape = Sequence[int]
RNG = np.random.Generator | int | None
Initializer = Callable[..., np.ndarray]
Nonlinearity = Literal[
    "linear", "conv1d", "conv2d", "conv3d", "sigmoid", "tanh", "relu", "leaky_relu", "selu"
]


def _rng(rng: RNG) -> np.random.Generator:
    return rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)


def calculate_fans(shape: Shape) -> tuple[int, int]:
    """``(fan_in, fan_out)`` of a weight of ``shape`` (see the module docstring)."""
    shape = tuple(shape)
    if len(shape) < 2:
        raise ShapeError(f"fans need a weight of rank >= 2, got shape {list(shape)}")
    if len(shape) == 2:
        return shape[0], shape[1]
    receptive = math.prod(shape[2:])
    return shape[1] * receptive, shape[0] * receptive


def calculate_gain(nonlinearity: Nonlinearity, param: float | None = None) -> float:
    """The recommended gain for a nonlinearity (PyTorch's ``calculate_gain``).

    >>> round(calculate_gain("relu"), 4)
    1.4142
    """
    if nonlinearity in ("linear", "conv1d", "conv2d", "conv3d", "sigmoid"):
        return 1.0
    if nonlinearity == "tanh":
        return 5.0 / 3
    if nonlinearity == "relu":
        return math.sqrt(2.0)
    if nonlinearity == "leaky_relu":
        slope = 0.01 if param is None else param
        return math.sqrt(2.0 / (1 + slope**2))
    if nonlinearity == "selu":
        return 3.0 / 4
    raise ArgumentError(f"unknown nonlinearity {nonlinearity!r}")


def zeros(shape: Shape, dtype: str = "float32", rng: RNG = None) -> np.ndarray:
    """All zeros."""
    return np.zeros(tuple(shape), dtype=dtype)


def ones(shape: Shape, dtype: str = "float32", rng: RNG = None) -> np.ndarray:
    """All ones."""
    return np.ones(tuple(shape), dtype=dtype)


def constant(
    shape: Shape, dtype: str = "float32", rng: RNG = None, *, value: float = 0.0
) -> np.ndarray:
    """Every element equal to ``value``."""
    return np.full(tuple(shape), value, dtype=dtype)


def uniform(
    shape: Shape, dtype: str = "float32", rng: RNG = None, *, low: float = 0.0, high: float = 1.0
) -> np.ndarray:
    """U(low, high)."""
    return _rng(rng).uniform(low, high, tuple(shape)).astype(dtype)


def normal(
    shape: Shape, dtype: str = "float32", rng: RNG = None, *, mean: float = 0.0, std: float = 1.0
) -> np.ndarray:
    """N(mean, std**2)."""
    return _rng(rng).normal(mean, std, tuple(shape)).astype(dtype)


def xavier_uniform(
    shape: Shape, dtype: str = "float32", rng: RNG = None, *, gain: float = 1.0
) -> np.ndarray:
    """U(-a, a), a = gain * sqrt(6 / (fan_in + fan_out)) (Glorot & Bengio, 2010)."""
    fan_in, fan_out = calculate_fans(shape)
    a = gain * math.sqrt(6.0 / (fan_in + fan_out))
    return uniform(shape, dtype, rng, low=-a, high=a)


def xavier_normal(
    shape: Shape, dtype: str = "float32", rng: RNG = None, *, gain: float = 1.0
) -> np.ndarray:
    """N(0, std**2), std = gain * sqrt(2 / (fan_in + fan_out)) (Glorot & Bengio, 2010)."""
    fan_in, fan_out = calculate_fans(shape)
    return normal(shape, dtype, rng, std=gain * math.sqrt(2.0 / (fan_in + fan_out)))


def _kaiming_std(shape: Shape, a: float, mode: str, nonlinearity: Nonlinearity) -> float:
    fan_in, fan_out = calculate_fans(shape)
    if mode not in ("fan_in", "fan_out"):
        raise ArgumentError(f"mode must be 'fan_in' or 'fan_out', got {mode!r}")
    fan = fan_in if mode == "fan_in" else fan_out
    return calculate_gain(nonlinearity, a) / math.sqrt(fan)


def kaiming_uniform(
    shape: Shape,
    dtype: str = "float32",
    rng: RNG = None,
    *,
    a: float = 0.0,
    mode: str = "fan_in",
    nonlinearity: Nonlinearity = "leaky_relu",
) -> np.ndarray:
    """U(-b, b), b = gain * sqrt(3 / fan) (He et al., 2015), as PyTorch's defaults."""
    bound = math.sqrt(3.0) * _kaiming_std(shape, a, mode, nonlinearity)
    return uniform(shape, dtype, rng, low=-bound, high=bound)


def kaiming_normal(
    shape: Shape,
    dtype: str = "float32",
    rng: RNG = None,
    *,
    a: float = 0.0,
    mode: str = "fan_in",
    nonlinearity: Nonlinearity = "leaky_relu",
) -> np.ndarray:
    """N(0, std**2), std = gain / sqrt(fan) (He et al., 2015)."""
    return normal(shape, dtype, rng, std=_kaiming_std(shape, a, mode, nonlinearity))


def fan_in_uniform(fan_in: int) -> Initializer:
    """U(-1/sqrt(fan_in), 1/sqrt(fan_in)): PyTorch's default for biases."""
    bound = 1.0 / math.sqrt(fan_in) if fan_in > 0 else 0.0

    def init(shape: Shape, dtype: str = "float32", rng: RNG = None) -> np.ndarray:
        return uniform(shape, dtype, rng, low=-bound, high=bound)

    return init


INITIALIZERS: dict[str, Initializer] = {
    "zeros": zeros,
    "ones": ones,
    "constant": constant,
    "uniform": uniform,
    "normal": normal,
    "xavier_uniform": xavier_uniform,
    "xavier_normal": xavier_normal,
    "kaiming_uniform": kaiming_uniform,
    "kaiming_normal": kaiming_normal,
}
