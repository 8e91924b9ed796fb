"""Numerical gradient checking by float64 central differences."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from asgrad.autograd.grad import grad
from asgrad.tensor import Graph, OpCase, OpDef, Program, Tensor, compile
from asgrad.tensor.errors import AsgradError


class GradientCheckError(AsgradError, AssertionError):
    """An analytic gradient differs from its finite-difference estimate.

    >>> import numpy as np
    >>> from asgrad.autograd import GradientCheckError, gradient_check
    >>> issubclass(GradientCheckError, AssertionError)
    True
    """


@dataclass
class GradientCheckResult:
    """The worst disagreement found, per checked input.

    >>> import numpy as np
    >>> from asgrad.autograd import gradient_check
    >>> result = gradient_check(lambda x: x * x, [np.array([1.0, 2.0])])
    >>> sorted(result.max_abs_error), result.max_abs_error[0] < 1e-6
    ([0], True)
    """

    max_abs_error: dict[int, float]
    max_rel_error: dict[int, float]


def _dtype_name(a: np.ndarray) -> str:
    if a.dtype.kind == "f":
        return "float64"
    if a.dtype.kind == "b":
        return "bool"
    return "int64"


def gradient_check(
    build: Callable[..., Tensor],
    inputs: Sequence[np.ndarray],
    *,
    wrt: Sequence[int] | None = None,
    eps: float = 1e-6,
    rtol: float = 1e-5,
    atol: float = 1e-6,
    seed: int = 0,
) -> GradientCheckResult:
    """Check ``grad`` of ``build(*tensors)`` against central differences in float64.

    ``build`` receives one float64 tensor per floating input (integer and bool inputs
    keep their dtype) and returns a tensor of any shape; it is reduced to a scalar by
    a fixed random projection, so every output element is checked. Raises
    [`GradientCheckError`][asgrad.autograd.GradientCheckError] naming the input and element that
    disagree.

    >>> import numpy as np
    >>> _ = gradient_check(lambda x: x.tanh() * x, [np.linspace(-1, 1, 5)])
    """
    arrays = [np.asarray(a) for a in inputs]
    arrays = [a.astype(np.float64) if a.dtype.kind == "f" else a for a in arrays]
    g = Graph("gradient_check")
    # The check runs at these arrays' shapes only: no axis is free.
    tensors = [g.input(f"x{i}", a.shape, _dtype_name(a), free=()) for i, a in enumerate(arrays)]
    out = build(*tensors)
    if out.dtype != "float64":
        raise GradientCheckError(f"build must return float64, got {out.dtype}")
    projection = np.random.default_rng(seed).standard_normal(out.shape)
    proj = g.input("projection", out.shape, "float64", free=())
    loss = (out * proj).sum()
    chosen = (
        list(wrt) if wrt is not None else [i for i, a in enumerate(arrays) if a.dtype.kind == "f"]
    )
    grads = grad(loss, [tensors[i] for i in chosen])
    forward = compile([loss])
    analytic = compile(grads)

    def feeds(values: Sequence[np.ndarray]) -> dict[str, np.ndarray]:
        d = {f"x{i}": v for i, v in enumerate(values)}
        d["projection"] = projection
        return d

    got = analytic(feeds(arrays))
    result = GradientCheckResult({}, {})
    for i, analytic_grad in zip(chosen, got, strict=True):
        numeric = _numeric_grad(forward, arrays, i, eps, feeds)
        err = np.abs(analytic_grad - numeric)
        bound = atol + rtol * np.abs(numeric)
        result.max_abs_error[i] = float(err.max(initial=0.0))
        result.max_rel_error[i] = float((err / (np.abs(numeric) + 1e-12)).max(initial=0.0))
        if np.any(err > bound) or not np.all(np.isfinite(analytic_grad)):
            worst = np.unravel_index(int(np.argmax(err - bound)), err.shape) if err.size else ()
            raise GradientCheckError(
                f"gradient of input {i} (shape {list(arrays[i].shape)}) differs at"
                f" {tuple(int(k) for k in worst)}: analytic {analytic_grad[worst]!r},"
                f" numeric {numeric[worst]!r} (max abs error {result.max_abs_error[i]:.3g})"
            )
    return result


def _numeric_grad(
    forward: Program,
    arrays: list[np.ndarray],
    i: int,
    eps: float,
    feeds: Callable[[Sequence[np.ndarray]], dict[str, np.ndarray]],
) -> np.ndarray:
    base = arrays[i]
    numeric = np.zeros_like(base)
    flat = numeric.reshape(-1)
    for k in range(base.size):
        plus, minus = base.copy(), base.copy()
        plus.reshape(-1)[k] += eps
        minus.reshape(-1)[k] -= eps
        values = list(arrays)
        values[i] = plus
        f_plus = float(forward(feeds(values))[0])
        values[i] = minus
        f_minus = float(forward(feeds(values))[0])
        flat[k] = (f_plus - f_minus) / (2 * eps)
    return numeric


def check_op_case(op: OpDef, case: OpCase, **tolerances: Any) -> GradientCheckResult:
    """Run [`gradient_check`][asgrad.autograd.gradient_check] on one registry test case of
    ``op``.

    >>> import numpy as np
    >>> from asgrad.autograd import check_op_case
    >>> from asgrad.tensor import get_op
    >>> op = get_op("tanh")
    >>> case = op.cases(np.random.default_rng(0))[0]
    >>> result = check_op_case(op, case)
    >>> max(result.max_rel_error.values()) < 1e-4
    True
    """

    def build(*xs: Tensor) -> Tensor:
        out = xs[0].graph.apply(op.name, xs, dict(case.attrs))
        return out if out.dtype == "float64" else out.cast("float64")

    return gradient_check(build, case.inputs, wrt=case.wrt, **tolerances)
