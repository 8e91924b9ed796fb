"""Every op case, generated from the registry, at other sizes of its free axis.

A graph built once runs on batches of any size along its free axes, or refuses the
free axis when it is built. For each op case whose first input has a leading axis of
size ``B``, the inputs of that size on that axis are declared with the axis free, and
the graph is fed its declared size, ``1`` and ``B + 2`` rows (drawn from the case's).
The result must equal the op's numpy kernel on the same fed arrays, or both must
refuse those sizes. Only the ops listed in ``REFUSED_WHEN_BUILT``, which fit no size
but the declared one, may refuse the free axis when the graph is built
(``FreeAxisError``). A result of another shape or other values is the failure this
test exists for.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from asgrad.tensor import (
    AsgradError,
    FeedError,
    FreeAxisError,
    Graph,
    OutOfRangeError,
    Tensor,
    evaluate,
)
from asgrad.tensor.cpu import jit
from asgrad.tensor.ir.registry import OpCase, OpDef, all_ops


def _cases(axis: int) -> list[tuple[OpDef, OpCase]]:
    """The op cases whose first input has elements along ``axis``."""
    rng = np.random.default_rng(0)
    out = []
    for op in all_ops():
        if op.family in ("leaf", "control") or op.cases is None:
            continue
        for case in op.cases(rng):
            arrays = [np.asarray(a) for a in case.inputs]
            if arrays and arrays[0].ndim and arrays[0].shape[axis] > 0:
                out.append((op, case))
    return out


CASES = _cases(0)
LAST = _cases(-1)

# The ops that fit no size of the free axis but the declared one: they refuse it when
# built, by (case, axis).
REFUSED_WHEN_BUILT = {
    ("cross[{'axis': 0}]", 0): "three components",
    ("cross[{'axis': -1}]", -1): "three components",
    ("repeat_interleave[{'repeats': (1, 0, 3), 'axis': 0}]", 0): "one repeat count per element",
    # the gradient of a slice: its first input has the slice's extent, not a batch
    ("scatter_slice[{'index': (slice(1, 3, None),)}]", 0): "axis 0 of its input 0",
    ("scatter_slice[{'index': (slice(None, None, None), 2)}]", 0): "axis 0 of its input 0",
    ("scatter_slice[{'index': (slice(None, None, None), 2)}]", -1): "axis 0 of its input 0",
}

# Ops whose attributes fix the size of an axis: the graph refuses another size when it
# runs, naming the attribute, though numpy's kernel reads through it; by (op, axis).
TIED_BY_ATTRIBUTES = {
    ("layer_norm", -1): "does not end in normalized_shape",
    ("layer_norm_backward", -1): "does not end in normalized_shape",
}

# Sizes a graph refuses when it runs, by design, though numpy's kernel computes them:
# by (case, axis, size).
REFUSED_WHEN_RUN = {
    # PyTorch's rule: batch statistics of one value per channel are an error
    ("batch_norm[(N, C)]", 0, 1): "more than one value per channel",
    ("batch_norm_backward[(N, C)]", 0, 1): "more than one value per channel",
}


def _fed(
    arrays: list[np.ndarray], free: list[bool], axis: int, size: int, seed: int
) -> list[np.ndarray]:
    """The arrays with ``size`` elements along ``axis`` (the same ones for every free
    input)."""
    picks = np.random.default_rng(seed).integers(0, arrays[0].shape[axis], size)
    return [np.take(a, picks, axis) if f else a for a, f in zip(arrays, free, strict=True)]


def _check(op: OpDef, case: OpCase, backend: str, axis: int, dtype: str = "float64") -> None:
    """The case at other sizes of ``axis``, its floating inputs in ``dtype``; the
    kernel's answer is computed in float64 from the same (rounded) values."""
    arrays = [np.asarray(a) for a in case.inputs]
    arrays = [a.astype(dtype) if a.dtype.kind == "f" else a for a in arrays]
    rtol, atol = (1e-6, 1e-9) if dtype == "float64" else (max(op.tolerance[0], 1e-4), 1e-5)
    declared = arrays[0].shape[axis]
    # Inputs of the first one's rank and size on the axis share it (a bias or a
    # weight of that length does not).
    free = [a.ndim == arrays[0].ndim and a.shape[axis] == declared for a in arrays]
    g = Graph()
    xs = [
        g.input(f"x{i}", a.shape, a.dtype.name, free=(axis % a.ndim,) if f else ())
        for i, (a, f) in enumerate(zip(arrays, free, strict=True))
    ]
    key = _id((op, case))
    refused = REFUSED_WHEN_BUILT.get((key, axis))
    if refused is not None:
        with pytest.raises(FreeAxisError, match=refused):
            g.apply(op.name, xs, dict(case.attrs))
        return
    out = g.apply(op.name, xs, dict(case.attrs))
    for size in (declared, 1, declared + 2):
        fed = _fed(arrays, free, axis, size, seed=size)
        feeds = {f"x{i}": a for i, a in enumerate(fed)}
        try:
            wide = [a.astype("float64") if a.dtype.kind == "f" else a for a in fed]
            with warnings.catch_warnings(), np.errstate(all="ignore"):
                warnings.simplefilter("ignore")  # a variance of one value, a log of 0
                want = np.asarray(op.kernel(*wide, **case.attrs))
        except Exception:  # numpy refuses these sizes: so must the graph
            with pytest.raises(AsgradError):
                evaluate([out], feeds, backend=backend)
            continue
        if size != declared and (op.name, axis) in TIED_BY_ATTRIBUTES:
            with pytest.raises(FeedError, match=TIED_BY_ATTRIBUTES[op.name, axis]):
                evaluate([out], feeds, backend=backend)
            continue
        if (key, axis, size) in REFUSED_WHEN_RUN:
            with pytest.raises(AsgradError, match=REFUSED_WHEN_RUN[key, axis, size]):
                evaluate([out], feeds, backend=backend)
            continue
        if size == 1:  # numpy's kernels broadcast a size of 1 against a fixed one
            try:
                (got,) = _quiet_evaluate(out, feeds, backend)
            except (FeedError, OutOfRangeError):  # the graph refuses to, saying why
                continue
        else:
            (got,) = _quiet_evaluate(out, feeds, backend)
        assert got.shape == want.shape, f"{op.name} at {size}: {got.shape} != {want.shape}"
        np.testing.assert_allclose(got, want, rtol=rtol, atol=atol, err_msg=f"size {size}")


def _quiet_evaluate(out: Tensor, feeds: dict[str, np.ndarray], backend: str) -> list[np.ndarray]:
    """The value, without numpy's warnings (a variance of one value, a log of 0), as the
    kernel's is computed."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return evaluate([out], feeds, backend=backend)


def _id(item: tuple[OpDef, OpCase]) -> str:
    op, case = item
    return f"{op.name}[{case.label or case.attrs}]"


@pytest.mark.parametrize("compiled", [False, True], ids=["numpy", "compiled"])
@pytest.mark.parametrize(("op", "case"), CASES, ids=[_id(c) for c in CASES])
def test_an_op_case_runs_at_other_sizes_of_its_free_axis_or_refuses_it(
    op: OpDef, case: OpCase, compiled: bool
) -> None:
    _on_cpu(op, case, compiled, 0)


@pytest.mark.parametrize("compiled", [False, True], ids=["numpy", "compiled"])
@pytest.mark.parametrize(("op", "case"), LAST, ids=[_id(c) for c in LAST])
def test_an_op_case_runs_at_other_sizes_of_its_last_axis_or_refuses_it(
    op: OpDef, case: OpCase, compiled: bool
) -> None:
    _on_cpu(op, case, compiled, -1)


def _on_cpu(op: OpDef, case: OpCase, compiled: bool, axis: int) -> None:
    if compiled and not jit.available():
        pytest.skip("Numba is not installed")
    jit.set_enabled(compiled)
    try:
        _check(op, case, "cpu", axis)
    finally:
        jit.set_enabled(None)


# GPU buffers hold int32: a case with a wider integer (a 64-bit seed) runs at no size.
def _on_gpu(cases: list[tuple[OpDef, OpCase]]) -> list[tuple[OpDef, OpCase]]:
    return [
        (op, case)
        for op, case in cases
        if not any(
            np.asarray(a).dtype.kind in "iu" and np.abs(np.asarray(a)).max(initial=0) >= 2**31
            for a in case.inputs
        )
    ]


GPU_CASES, GPU_LAST = _on_gpu(CASES), _on_gpu(LAST)


@pytest.mark.gpu
@pytest.mark.parametrize(("op", "case"), GPU_CASES, ids=[_id(c) for c in GPU_CASES])
def test_an_op_case_runs_at_other_sizes_of_its_free_axis_on_the_gpu(
    op: OpDef, case: OpCase
) -> None:
    _check(op, case, "gpu", 0, "float32")


@pytest.mark.gpu
@pytest.mark.parametrize(("op", "case"), GPU_LAST, ids=[_id(c) for c in GPU_LAST])
def test_an_op_case_runs_at_other_sizes_of_its_last_axis_on_the_gpu(
    op: OpDef, case: OpCase
) -> None:
    _check(op, case, "gpu", -1, "float32")
