"""Transforms: callables from a numpy array to a numpy array.

Statistics-based transforms (`StandardScale`, `MinMaxScale`) are fitted on
the training data with ``fit`` and then applied unchanged to every split, so no
information leaks from the test set. Float inputs keep their dtype; integer inputs are
converted to float32.

Example:
    >>> import numpy as np
    >>> train = np.array([[0.0, 10.0], [2.0, 30.0]])
    >>> scale = StandardScale().fit(train)
    >>> scale(np.array([[1.0, 20.0]])).tolist()
    [[0.0, 0.0]]
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, Literal, Self

import numpy as np
from numpy.typing import ArrayLike, NDArray

from asgrad.nn.errors import DataError

__all__ = [
    "Clip",
    "Compose",
    "Flatten",
    "Log",
    "MinMaxScale",
    "Normalize",
    "OneHot",
    "RandomNoise",
    "StandardScale",
    "Transform",
]

Array = NDArray[Any]


def _as_float(x: ArrayLike) -> NDArray[np.floating[Any]]:
    a = np.asarray(x)
    return a if np.issubdtype(a.dtype, np.floating) else a.astype(np.float32)


class Transform:
    """Base class. Subclasses implement ``__call__``; fit-able ones override ``fit``."""

    def __call__(self, x: ArrayLike) -> Array:
        raise NotImplementedError

    def fit(self, x: ArrayLike) -> Self:
        """Learn statistics from training data; stateless transforms return ``self``."""
        return self

    def fit_transform(self, x: ArrayLike) -> Array:
        """``fit(x)`` then apply to ``x``."""
        return self.fit(x)(x)

    def __repr__(self) -> str:
        fields = ", ".join(f"{k}={v!r}" for k, v in vars(self).items() if not k.startswith("_"))
        return f"{type(self).__name__}({fields})"


class Compose(Transform):
    """Apply transforms in order; ``fit`` fits each on the output of the previous ones.

    Example:
        >>> import numpy as np
        >>> Compose([Clip(0, 1), Flatten()])(np.array([[2.0, -1.0]])).tolist()
        [1.0, 0.0]
    """

    def __init__(self, transforms: Iterable[Callable[[Array], Array]]) -> None:
        self.transforms = list(transforms)

    def __call__(self, x: ArrayLike) -> Array:
        out = np.asarray(x)
        for t in self.transforms:
            out = t(out)
        return out

    def fit(self, x: ArrayLike) -> Self:
        out = np.asarray(x)
        for t in self.transforms:
            if isinstance(t, Transform):
                t.fit(out)
            out = t(out)
        return self


class Normalize(Transform):
    """``(x - mean) / std`` with fixed, given statistics (broadcast over ``x``).

    Example:
        >>> import numpy as np
        >>> Normalize(mean=1.0, std=2.0)(np.array([3.0])).tolist()
        [1.0]
    """

    def __init__(self, mean: ArrayLike, std: ArrayLike) -> None:
        self.mean = np.asarray(mean, dtype=np.float64)
        self.std = np.asarray(std, dtype=np.float64)
        if np.any(self.std <= 0) or not np.all(np.isfinite(self.std)):
            raise DataError(f"Normalize: std must be positive and finite, got {self.std}")

    def __call__(self, x: ArrayLike) -> Array:
        a = _as_float(x)
        return ((a - self.mean) / self.std).astype(a.dtype, copy=False)


class StandardScale(Transform):
    """Zero mean, unit variance per feature, with statistics fitted on training data.

    Features with zero variance are only centred (their scale is set to 1).

    Example:
        >>> import numpy as np
        >>> s = StandardScale().fit(np.array([[1.0], [3.0]]))
        >>> s.mean_.tolist(), s.scale_.tolist()
        ([[2.0]], [[1.0]])
    """

    def __init__(self, axis: int | tuple[int, ...] = 0) -> None:
        self.axis = axis
        self.mean_: Array | None = None
        self.scale_: Array | None = None

    def fit(self, x: ArrayLike) -> Self:
        a = np.asarray(x, dtype=np.float64)
        if a.size == 0:
            raise DataError("StandardScale.fit: cannot fit on an empty array")
        self.mean_ = a.mean(axis=self.axis, keepdims=True)
        std = a.std(axis=self.axis, keepdims=True)
        self.scale_ = np.where(std > 0, std, 1.0)
        return self

    def _fitted(self) -> tuple[Array, Array]:
        if self.mean_ is None or self.scale_ is None:
            raise DataError("StandardScale: call fit(train_data) before transforming")
        return self.mean_, self.scale_

    def __call__(self, x: ArrayLike) -> Array:
        mean, scale = self._fitted()
        a = _as_float(x)
        return ((a - mean) / scale).astype(a.dtype, copy=False)

    def inverse(self, x: ArrayLike) -> Array:
        """Undo the scaling."""
        mean, scale = self._fitted()
        a = _as_float(x)
        return (a * scale + mean).astype(a.dtype, copy=False)


class MinMaxScale(Transform):
    """Map each feature's fitted ``[min, max]`` linearly onto ``feature_range``.

    Constant features map to the low end of the range.

    Example:
        >>> import numpy as np
        >>> x = np.array([[0.0], [5.0], [10.0]])
        >>> MinMaxScale((-1, 1)).fit_transform(x).ravel().tolist()
        [-1.0, 0.0, 1.0]
    """

    def __init__(
        self,
        feature_range: tuple[float, float] = (0.0, 1.0),
        axis: int | tuple[int, ...] = 0,
    ) -> None:
        low, high = feature_range
        if not low < high:
            raise DataError(f"MinMaxScale: feature_range {feature_range} needs low < high")
        self.feature_range = (float(low), float(high))
        self.axis = axis
        self.min_: Array | None = None
        self.span_: Array | None = None

    def fit(self, x: ArrayLike) -> Self:
        a = np.asarray(x, dtype=np.float64)
        if a.size == 0:
            raise DataError("MinMaxScale.fit: cannot fit on an empty array")
        self.min_ = a.min(axis=self.axis, keepdims=True)
        span = a.max(axis=self.axis, keepdims=True) - self.min_
        self.span_ = np.where(span > 0, span, 1.0)
        return self

    def __call__(self, x: ArrayLike) -> Array:
        if self.min_ is None or self.span_ is None:
            raise DataError("MinMaxScale: call fit(train_data) before transforming")
        low, high = self.feature_range
        a = _as_float(x)
        return ((a - self.min_) / self.span_ * (high - low) + low).astype(a.dtype, copy=False)


class OneHot(Transform):
    """Integer class labels to float32 one-hot vectors (adds a trailing axis).

    Example:
        >>> import numpy as np
        >>> OneHot(3)(np.array([2, 0])).tolist()
        [[0.0, 0.0, 1.0], [1.0, 0.0, 0.0]]
    """

    def __init__(self, num_classes: int, dtype: type[np.floating[Any]] = np.float32) -> None:
        if num_classes < 1:
            raise DataError(f"OneHot: num_classes must be >= 1, got {num_classes}")
        self.num_classes = num_classes
        self.dtype = dtype

    def __call__(self, x: ArrayLike) -> Array:
        labels = np.asarray(x)
        if not np.issubdtype(labels.dtype, np.integer):
            if not np.all(np.equal(np.mod(labels, 1), 0)):
                raise DataError(f"OneHot: labels must be integers, got dtype {labels.dtype}")
            labels = labels.astype(np.int64)
        if labels.size and (labels.min() < 0 or labels.max() >= self.num_classes):
            raise DataError(
                f"OneHot: labels must lie in [0, {self.num_classes}), got range "
                f"[{labels.min()}, {labels.max()}]"
            )
        out: Array = np.eye(self.num_classes, dtype=self.dtype)[labels]
        return out


class Flatten(Transform):
    """Flatten axes ``start_axis..`` into one (``start_axis=1`` keeps a batch axis).

    Example:
        >>> import numpy as np
        >>> Flatten(start_axis=1)(np.zeros((2, 3, 4))).shape
        (2, 12)
    """

    def __init__(self, start_axis: int = 0) -> None:
        self.start_axis = start_axis

    def __call__(self, x: ArrayLike) -> Array:
        a = np.asarray(x)
        if not 0 <= self.start_axis <= a.ndim:
            raise DataError(f"Flatten: start_axis={self.start_axis} invalid for shape {a.shape}")
        return a.reshape(*a.shape[: self.start_axis], -1)


class RandomNoise(Transform):
    """Add Gaussian noise ``N(0, std^2)`` (augmentation), reproducible from ``seed``.

    Example:
        >>> import numpy as np
        >>> x = np.zeros(3)
        >>> bool(np.all(RandomNoise(0.1, seed=0)(x) == RandomNoise(0.1, seed=0)(x)))
        True
    """

    def __init__(self, std: float, seed: int | None = None) -> None:
        if std < 0:
            raise DataError(f"RandomNoise: std must be >= 0, got {std}")
        self.std = std
        self.seed = seed
        self._rng = np.random.default_rng(seed)

    def __call__(self, x: ArrayLike) -> Array:
        a = _as_float(x)
        return (a + self._rng.normal(0.0, self.std, size=a.shape)).astype(a.dtype, copy=False)


class Clip(Transform):
    """Clamp values into ``[min, max]`` (either bound may be ``None``).

    Example:
        >>> import numpy as np
        >>> Clip(0, None)(np.array([-1, 2])).tolist()
        [0, 2]
    """

    def __init__(self, min: float | None = None, max: float | None = None) -> None:
        if min is None and max is None:
            raise DataError("Clip: give at least one of min and max")
        if min is not None and max is not None and min > max:
            raise DataError(f"Clip: min={min} is greater than max={max}")
        self.min = min
        self.max = max

    def __call__(self, x: ArrayLike) -> Array:
        out: Array = np.clip(np.asarray(x), self.min, self.max)
        return out


class Log(Transform):
    """Logarithm for heavy-tailed, non-negative features.

    ``mode="log1p"`` (the default) computes ``log(1 + x)``: exact near zero and needs
    ``x > -1``. ``mode="log"`` computes ``log(x + eps)``: needs ``x + eps > 0``.
    Out-of-domain input raises [`DataError`][asgrad.nn.DataError] rather than silently making NaNs.

    Example:
        >>> import numpy as np
        >>> Log()(np.array([0.0, np.e - 1])).tolist()
        [0.0, 1.0]
    """

    def __init__(self, mode: Literal["log1p", "log"] = "log1p", eps: float = 1e-8) -> None:
        if mode not in ("log1p", "log"):
            raise DataError(f"Log: mode must be 'log1p' or 'log', got {mode!r}")
        self.mode = mode
        self.eps = eps

    def __call__(self, x: ArrayLike) -> Array:
        a = _as_float(x)
        shifted = a + 1.0 if self.mode == "log1p" else a + self.eps
        if np.any(shifted <= 0):
            bound = "-1" if self.mode == "log1p" else f"-eps ({-self.eps})"
            raise DataError(
                f"Log(mode={self.mode!r}): inputs must be greater than {bound}; "
                f"the smallest input is {a.min()}"
            )
        out: Array = np.log1p(a) if self.mode == "log1p" else np.log(shifted)
        return out.astype(a.dtype, copy=False)
