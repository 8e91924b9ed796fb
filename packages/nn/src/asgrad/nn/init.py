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
import operator
from collections.abc import Callable, Sequence
from typing import Literal

import numpy as np

from asgrad.tensor import Variable
from asgrad.tensor.errors import ArgumentError, ArgumentTypeError, ShapeError
from asgrad.tensor.ir.dtypes import as_dtype

Shape = Sequence[int]
RNG = np.random.Generator | int | None
Initializer = Callable[..., np.ndarray]
Nonlinearity = Literal[
    "linear", "conv1d", "conv2d", "conv3d", "sigmoid", "tanh", "relu", "leaky_relu", "selu"
]


def _rng(rng: RNG) -> np.random.Generator:
    return rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)


def _shape(shape: Shape) -> tuple[int, ...]:
    """``shape`` as a tuple of sizes >= 0; a float, a string or a negative size is an error."""
    try:
        dims = tuple(operator.index(d) for d in shape)
    except TypeError:
        raise ArgumentTypeError(f"a shape must be a sequence of ints, got {shape!r}") from None
    if any(d < 0 for d in dims):
        raise ArgumentError(f"shape {list(dims)} has a negative size")
    return dims


def _positive_fans(shape: Shape, name: str) -> tuple[int, int]:
    """The fans of ``shape``, which must have every size positive (the scale divides by them)."""
    dims = _shape(shape)
    fans = calculate_fans(dims)
    if 0 in dims:
        raise ArgumentError(
            f"{name}: shape {list(dims)} has a size of 0 (fan_in {fans[0]}, fan_out"
            f" {fans[1]}); a size must be positive for an initializer scaled by the fans"
        )
    return fans


def calculate_fans(shape: Shape) -> tuple[int, int]:
    """``(fan_in, fan_out)`` of a weight of ``shape`` (see the module docstring)."""
    shape = _shape(shape)
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
        if param is not None and not isinstance(param, int | float | np.number):
            raise ArgumentTypeError(f"the leaky_relu slope must be a number, got {param!r}")
        slope = 0.01 if param is None else float(param)
        return math.sqrt(2.0 / (1 + slope**2))
    if nonlinearity == "selu":
        return 3.0 / 4
    raise ArgumentError(f"unknown nonlinearity {nonlinearity!r}")


def zeros(shape: Shape, dtype: str = "float32", rng: RNG = None) -> np.ndarray:
    """All zeros."""
    return np.zeros(_shape(shape), dtype=as_dtype(dtype))


def ones(shape: Shape, dtype: str = "float32", rng: RNG = None) -> np.ndarray:
    """All ones."""
    return np.ones(_shape(shape), dtype=as_dtype(dtype))


def constant(
    shape: Shape, dtype: str = "float32", rng: RNG = None, *, value: float = 0.0
) -> np.ndarray:
    """Every element equal to ``value``."""
    return np.full(_shape(shape), value, dtype=as_dtype(dtype))


def uniform(
    shape: Shape, dtype: str = "float32", rng: RNG = None, *, low: float = 0.0, high: float = 1.0
) -> np.ndarray:
    """U(low, high)."""
    if not low <= high:
        raise ArgumentError(f"uniform: low ({low}) must not exceed high ({high})")
    return _rng(rng).uniform(low, high, _shape(shape)).astype(as_dtype(dtype))


def normal(
    shape: Shape, dtype: str = "float32", rng: RNG = None, *, mean: float = 0.0, std: float = 1.0
) -> np.ndarray:
    """N(mean, std**2)."""
    if not std >= 0:
        raise ArgumentError(f"normal: std must be >= 0, got {std}")
    return _rng(rng).normal(mean, std, _shape(shape)).astype(as_dtype(dtype))


def xavier_uniform(
    shape: Shape, dtype: str = "float32", rng: RNG = None, *, gain: float = 1.0
) -> np.ndarray:
    """U(-a, a), a = gain * sqrt(6 / (fan_in + fan_out)) (Glorot & Bengio, 2010)."""
    fan_in, fan_out = _positive_fans(shape, "xavier_uniform")
    a = gain * math.sqrt(6.0 / (fan_in + fan_out))
    return uniform(shape, dtype, rng, low=-a, high=a)


def xavier_normal(
    shape: Shape, dtype: str = "float32", rng: RNG = None, *, gain: float = 1.0
) -> np.ndarray:
    """N(0, std**2), std = gain * sqrt(2 / (fan_in + fan_out)) (Glorot & Bengio, 2010)."""
    fan_in, fan_out = _positive_fans(shape, "xavier_normal")
    return normal(shape, dtype, rng, std=gain * math.sqrt(2.0 / (fan_in + fan_out)))


def _kaiming_std(shape: Shape, a: float, mode: str, nonlinearity: Nonlinearity, name: str) -> float:
    fan_in, fan_out = _positive_fans(shape, name)
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
    bound = math.sqrt(3.0) * _kaiming_std(shape, a, mode, nonlinearity, "kaiming_uniform")
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
    return normal(
        shape, dtype, rng, std=_kaiming_std(shape, a, mode, nonlinearity, "kaiming_normal")
    )


def orthogonal(
    shape: Shape, dtype: str = "float32", rng: RNG = None, *, gain: float = 1.0
) -> np.ndarray:
    """A (semi-)orthogonal matrix times ``gain`` (Saxe et al., 2013), as PyTorch draws it:
    ``shape`` flattened to ``(shape[0], rest)``, the Q of a Gaussian matrix's QR with the
    signs of R's diagonal.

    >>> w = orthogonal((3, 5), "float64", rng=0)
    >>> bool(np.allclose(w @ w.T, np.eye(3)))
    True
    """
    dims = _shape(shape)
    if len(dims) < 2:
        raise ArgumentError(f"orthogonal: needs at least 2 axes, got shape {list(dims)}")
    rows, cols = dims[0], math.prod(dims[1:])
    flat = _rng(rng).standard_normal((rows, cols))
    if rows < cols:
        flat = flat.T
    q, r = np.linalg.qr(flat)
    q = q * np.sign(np.diag(r))
    if rows < cols:
        q = q.T
    return (gain * q).reshape(dims).astype(as_dtype(dtype))


def fan_in_uniform(fan_in: int) -> Initializer:
    """U(-1/sqrt(fan_in), 1/sqrt(fan_in)): PyTorch's default for biases."""
    try:
        n = 0 if isinstance(fan_in, bool) else operator.index(fan_in)
    except TypeError:
        n = 0
    if n < 1:
        raise ArgumentError(f"fan_in_uniform: fan_in must be a positive integer, got {fan_in!r}")
    bound = 1.0 / math.sqrt(n)

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
    "orthogonal": orthogonal,
}


# -- in place, as torch.nn.init's trailing-underscore functions ---------------------------
def _fill(var: Variable, init: Initializer, rng: RNG, **options: float) -> Variable:
    var.value = np.asarray(init(var.shape, var.dtype, rng, **options), dtype=var.dtype)
    return var


def zeros_(var: Variable) -> Variable:
    """Set ``var`` (a Parameter or buffer) to zeros in place, as ``torch.nn.init.zeros_``."""
    return _fill(var, zeros, None)


def ones_(var: Variable) -> Variable:
    """Set ``var`` to ones in place."""
    return _fill(var, ones, None)


def constant_(var: Variable, val: float) -> Variable:
    """Set every element of ``var`` to ``val`` in place."""
    return _fill(var, constant, None, value=val)


def normal_(var: Variable, mean: float = 0.0, std: float = 1.0, rng: RNG = None) -> Variable:
    """Draw ``var`` from N(mean, std**2) in place (``rng``: a Generator or seed).

    >>> from asgrad.nn import Parameter
    >>> p = normal_(Parameter((100,), zeros), 1.0, 0.02, rng=0)
    >>> bool(abs(p.value.mean() - 1.0) < 0.01)
    True
    """
    return _fill(var, normal, rng, mean=mean, std=std)


def uniform_(var: Variable, a: float = 0.0, b: float = 1.0, rng: RNG = None) -> Variable:
    """Draw ``var`` from U(a, b) in place."""
    return _fill(var, uniform, rng, low=a, high=b)


def xavier_uniform_(var: Variable, gain: float = 1.0, rng: RNG = None) -> Variable:
    """Xavier-uniform in place (fans in asgrad's layouts, see the module docstring)."""
    return _fill(var, xavier_uniform, rng, gain=gain)


def kaiming_uniform_(var: Variable, a: float = 0.0, rng: RNG = None) -> Variable:
    """Kaiming-uniform in place (fans in asgrad's layouts, see the module docstring)."""
    return _fill(var, kaiming_uniform, rng, a=a)


def xavier_normal_(var: Variable, gain: float = 1.0, rng: RNG = None) -> Variable:
    """Xavier-normal in place (fans in asgrad's layouts, see the module docstring)."""
    return _fill(var, xavier_normal, rng, gain=gain)


def kaiming_normal_(
    var: Variable,
    a: float = 0.0,
    mode: str = "fan_in",
    nonlinearity: Nonlinearity = "leaky_relu",
    rng: RNG = None,
) -> Variable:
    """Kaiming-normal in place, PyTorch's arguments (fans in asgrad's layouts)."""
    var.value = kaiming_normal(
        var.shape, var.dtype, rng, a=a, mode=mode, nonlinearity=nonlinearity
    ).astype(var.dtype)
    return var


def orthogonal_(var: Variable, gain: float = 1.0, rng: RNG = None) -> Variable:
    """A (semi-)orthogonal value in place, as ``torch.nn.init.orthogonal_``."""
    return _fill(var, orthogonal, rng, gain=gain)
