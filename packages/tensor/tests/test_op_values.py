"""Every registered op, every registry case: value, shape and dtype against numpy.

The references below are written independently of the kernels in
``asgrad.tensor.ops``; an op without a reference entry fails
:func:`test_every_op_has_a_reference`, so a new op must add one here.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from asgrad.tensor import Graph, OpCase, OpDef, all_ops, compile

Reference = Callable[..., np.ndarray]

_erf = np.vectorize(math.erf, otypes=[np.float64])


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return np.asarray(1.0 / (1.0 + np.exp(-x)))


def _gelu(x: np.ndarray, approximate: str = "none") -> np.ndarray:
    if approximate == "tanh":
        c = math.sqrt(2.0 / math.pi)
        return np.asarray(0.5 * x * (1.0 + np.tanh(c * (x + 0.044715 * x**3))))
    return np.asarray(x * 0.5 * (1.0 + _erf(x / math.sqrt(2.0))))


def _gelu_backward(g: np.ndarray, x: np.ndarray, approximate: str = "none") -> np.ndarray:
    if approximate == "tanh":
        c = math.sqrt(2.0 / math.pi)
        u = c * (x + 0.044715 * x**3)
        sech2 = 1.0 / np.cosh(u) ** 2
        return np.asarray(
            g * (0.5 * (1.0 + np.tanh(u)) + 0.5 * x * sech2 * c * (1.0 + 0.134145 * x**2))
        )
    phi = np.exp(-(x**2) / 2.0) / math.sqrt(2.0 * math.pi)
    return np.asarray(g * (0.5 * (1.0 + _erf(x / math.sqrt(2.0))) + x * phi))


def _adam_ema(m: np.ndarray, g: np.ndarray, beta: float, square: bool = False) -> np.ndarray:
    return np.asarray(beta * m + (1.0 - beta) * (g**2 if square else g))


def _adam_update(
    p: np.ndarray, m: np.ndarray, v: np.ndarray, lr: Any, bc2: Any, *decay: Any, eps: float = 1e-8
) -> np.ndarray:
    shrink = decay[0] if decay else 1.0
    return np.asarray(p * shrink - lr * m / (np.sqrt(v) / bc2 + eps))


def _softplus(x: np.ndarray, beta: float = 1.0) -> np.ndarray:
    # log(1 + e^z) = max(z, 0) + log1p(e^-|z|), stable for the large cases.
    z = beta * x
    return np.asarray((np.maximum(z, 0.0) + np.log1p(np.exp(-np.abs(z)))) / beta)


def _softmax(x: np.ndarray, axis: int) -> np.ndarray:
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return np.asarray(e / e.sum(axis=axis, keepdims=True))


def _log_softmax(x: np.ndarray, axis: int) -> np.ndarray:
    m = x.max(axis=axis, keepdims=True)
    return np.asarray(x - m - np.log(np.exp(x - m).sum(axis=axis, keepdims=True)))


def _var(x: np.ndarray, axis: tuple[int, ...], keepdims: bool = False) -> np.ndarray:
    mu = x.mean(axis=axis, keepdims=True)
    return np.asarray(((x - mu) ** 2).mean(axis=axis, keepdims=keepdims))


def _sum_to_like(g: np.ndarray, x: np.ndarray) -> np.ndarray:
    while g.ndim > x.ndim:
        g = g.sum(axis=0)
    for i, d in enumerate(x.shape):
        if d == 1 and g.shape[i] != 1:
            g = g.sum(axis=i, keepdims=True)
    return g


def _scatter_slice(g: np.ndarray, x: np.ndarray, index: tuple[Any, ...]) -> np.ndarray:
    out = np.zeros_like(x, dtype=g.dtype)
    out[index] = g
    return out


def _scatter_add(g: np.ndarray, idx: np.ndarray, x: np.ndarray, axis: int) -> np.ndarray:
    out = np.zeros(x.shape, dtype=g.dtype)
    lead: tuple[Any, ...] = (slice(None),) * axis
    for pos in np.ndindex(*idx.shape):
        at: tuple[Any, ...] = (*lead, int(idx[pos]))
        out[at] += g[(*lead, *pos)]
    return out


def _clamp(
    x: np.ndarray, min: float | None = None, max: float | None = None
) -> np.ndarray:  # the op's attribute names
    if min is not None:
        x = np.where(x < min, min, x)
    if max is not None:
        x = np.where(x > max, max, x)
    return x


def _argmax(x: np.ndarray, axis: int, keepdims: bool = False) -> np.ndarray:
    out = np.argmax(x, axis=axis)
    return np.expand_dims(out, axis) if keepdims else out


def _scan_parts(
    *ins: np.ndarray, loop: Any, save: bool, reverse: bool, **_: Any
) -> list[np.ndarray]:
    """The registry's scan cases written out: a tanh RNN step and a cumulative sum."""
    carry, xs = ins[0], ins[1]
    finals, ys, saved = carry, [None] * len(xs), [None] * len(xs)
    for t in range(len(xs) - 1, -1, -1) if reverse else range(len(xs)):
        saved[t] = finals
        if loop.name == "rnn":
            finals = np.tanh(finals @ ins[2] + xs[t])
            ys[t] = np.sin(finals) * 2.0
        else:
            finals = finals + xs[t]
            ys[t] = finals * finals
    parts = [finals, np.stack(ys)] + ([np.stack(saved)] if save else [])
    return parts


def _scan_ref(*ins: np.ndarray, **attrs: Any) -> np.ndarray:
    return np.concatenate([p.reshape(-1) for p in _scan_parts(*ins, **attrs)])


def _scan_part_ref(packed: np.ndarray, *ins: np.ndarray, part: int, **attrs: Any) -> np.ndarray:
    shapes = [p.shape for p in _scan_parts(*ins, **attrs)]
    start = sum(int(np.prod(s)) for s in shapes[:part])
    return packed[start : start + int(np.prod(shapes[part]))].reshape(shapes[part])


def _scan_unpart_ref(value: np.ndarray, *ins: np.ndarray, part: int, **attrs: Any) -> np.ndarray:
    shapes = [p.shape for p in _scan_parts(*ins, **attrs)]
    pieces = [np.zeros(s) if i != part else value for i, s in enumerate(shapes)]
    return np.concatenate([p.reshape(-1) for p in pieces])


REFERENCES: dict[str, Reference] = {
    # elementwise, unary
    "neg": lambda x: -x,
    "stop_gradient": lambda x: x + 0,
    "exp": np.exp,
    "log": np.log,
    "sqrt": lambda x: x**0.5,
    "abs": lambda x: np.where(x < 0, -x, x),
    "sign": lambda x: (x > 0).astype(x.dtype) - (x < 0).astype(x.dtype),
    "sin": np.sin,
    "cos": np.cos,
    "tanh": lambda x: 1.0 - 2.0 / (np.exp(2.0 * np.clip(x, -300, 300)) + 1.0),
    "sigmoid": _sigmoid,
    "relu": lambda x: np.where(x > 0, x, 0.0),
    "leaky_relu": lambda x, alpha=0.01: np.where(x > 0, x, alpha * x),
    "gelu": _gelu,
    "gelu_backward": _gelu_backward,
    "erf": _erf,
    "silu": lambda x: x * _sigmoid(x),
    "elu": lambda x, alpha=1.0: np.where(x > 0, x, alpha * (np.exp(np.minimum(x, 0)) - 1.0)),
    "softplus": _softplus,
    "clamp": _clamp,
    "cast": lambda x, dtype: x.astype(dtype),
    # elementwise, binary
    "add": operator.add,
    "sub": operator.sub,
    "mul": operator.mul,
    "div": operator.truediv,
    "pow": lambda a, b: np.exp(b * np.log(a)),
    "maximum": lambda a, b: a * (a >= b) + b * (a < b),
    "minimum": lambda a, b: a * (a <= b) + b * (a > b),
    "equal": lambda a, b: a == b,
    "not_equal": lambda a, b: a != b,
    "less": operator.lt,
    "less_equal": operator.le,
    "greater": operator.gt,
    "greater_equal": operator.ge,
    "where": lambda c, a, b: c * a + (1 - c) * b,
    # reductions
    "sum": lambda x, axis, keepdims=False: x.sum(axis=axis, keepdims=keepdims),
    "mean": lambda x, axis, keepdims=False: (
        x.sum(axis=axis, keepdims=keepdims) / math.prod(x.shape[a] for a in axis)
    ),
    "max": lambda x, axis, keepdims=False: np.amax(x, axis=axis, keepdims=keepdims),
    "min": lambda x, axis, keepdims=False: -np.amax(-x, axis=axis, keepdims=keepdims),
    "var": _var,
    "argmax": _argmax,
    "softmax": _softmax,
    "log_softmax": _log_softmax,
    "size_ratio": lambda a, b: np.asarray(a.size / b.size),
    # linear algebra
    "matmul": lambda a, b: np.einsum("...ij,...jk->...ik", a, b),
    # shape and index
    "reshape": lambda x, shape: x.reshape(shape),
    "transpose": lambda x, axes: x.transpose(axes),
    "broadcast_to": lambda x, shape: x * np.ones(shape),
    "expand_dims": lambda x, axis: x.reshape(_inserted_shape(x.shape, axis)),
    "squeeze": lambda x, axis: x.reshape([d for i, d in enumerate(x.shape) if i not in axis]),
    "sum_to_like": _sum_to_like,
    "broadcast_like": lambda g, x: g * np.ones_like(x),
    "reshape_like": lambda g, x: g.reshape(x.shape),
    "slice": lambda x, index: x[index],
    "scatter_slice": _scatter_slice,
    "concat": lambda *xs, axis: np.concatenate(xs, axis=axis),
    "gather": lambda x, idx, axis: np.take(x, idx, axis=axis),
    "scatter_add": _scatter_add,
    # optimizer updates
    "adam_ema": _adam_ema,
    "adam_update": _adam_update,
    "one_hot": lambda idx, depth, dtype="float32": np.eye(depth, dtype=dtype)[idx],
    # control flow
    "scan": _scan_ref,
    "scan_part": _scan_part_ref,
    "scan_unpart": _scan_unpart_ref,
}


def _inserted_shape(shape: tuple[int, ...], axis: tuple[int, ...]) -> list[int]:
    out = list(shape)
    for a in sorted(axis):
        out.insert(a, 1)
    return out


def _non_leaf_ops() -> list[OpDef]:
    return [op for op in all_ops() if op.family != "leaf"]


def _op_cases() -> list[tuple[OpDef, OpCase]]:
    rng = np.random.default_rng(0)
    out: list[tuple[OpDef, OpCase]] = []
    for op in _non_leaf_ops():
        # An op without cases or a reference fails the two coverage tests below, once,
        # rather than every one of its cases.
        if op.cases is not None and op.name in REFERENCES:
            out.extend((op, case) for case in op.cases(rng))
    return out


OP_CASES = _op_cases()


def _case_id(item: tuple[OpDef, OpCase]) -> str:
    op, case = item
    return f"{op.name}[{case.label or case.attrs}]"


def _as(dtype: str, a: np.ndarray) -> np.ndarray:
    return a.astype(dtype) if a.dtype.kind == "f" else a


def test_every_op_has_a_reference() -> None:
    # The nn ops (conv, pooling, norms, dropout) have loop references in test_nn_ops.py.
    missing = sorted(
        op.name
        for op in _non_leaf_ops()
        if op.name not in REFERENCES and op.family not in ("conv", "pool", "norm", "random")
    )
    assert not missing, f"add a numpy reference to REFERENCES for: {missing}"


def test_every_op_has_cases() -> None:
    empty = [op.name for op in _non_leaf_ops() if op.cases is None]
    assert not empty


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize(("op", "case"), OP_CASES, ids=[_case_id(c) for c in OP_CASES])
def test_op_value_matches_reference(op: OpDef, case: OpCase, dtype: str) -> None:
    arrays = [_as(dtype, np.asarray(a)) for a in case.inputs]
    g = Graph()
    xs = [g.input(f"x{i}", a.shape, a.dtype.name) for i, a in enumerate(arrays)]
    out = g.apply(op.name, xs, dict(case.attrs))
    (got,) = compile([out])({f"x{i}": a for i, a in enumerate(arrays)})

    # Inference agrees with what the kernel (and the CPU backend) produce.
    direct = np.asarray(op.kernel(*arrays, **case.attrs))
    assert got.shape == out.shape == direct.shape
    assert got.dtype.name == out.dtype == direct.dtype.name

    # The reference runs in float64 on the same (possibly rounded) inputs.
    ref_inputs = [a.astype(np.float64) if a.dtype.kind == "f" else a for a in arrays]
    expected = np.asarray(REFERENCES[op.name](*ref_inputs, **case.attrs))
    assert expected.shape == got.shape
    if got.dtype.kind in "biu":
        np.testing.assert_array_equal(got, expected.astype(got.dtype))
    elif dtype == "float64" and all(a.dtype != np.float32 for a in ref_inputs):
        np.testing.assert_allclose(got, expected, rtol=1e-9, atol=1e-12)
    else:
        rtol, atol = op.tolerance
        np.testing.assert_allclose(got, expected, rtol=max(rtol, 1e-6), atol=max(atol, 1e-6))
