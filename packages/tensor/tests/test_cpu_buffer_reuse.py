"""The CPU backend's buffer reuse: the same values with it on and off, and its safety.

Generated functions write elementwise results into dying inputs (``out=`` the input)
and ufunc/matrix-product results into scratch slots kept across runs, unless
``ASGRAD_CPU_REUSE=0``. These tests compare bit for bit against reuse off (whole
training steps: ``tests/test_cpu_training_reuse.py``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pytest

from asgrad.tensor import Graph, Tensor, Variable, all_ops, compile
from asgrad.tensor.cpu import CPUExecutable
from asgrad.tensor.runtime.executor import Program


def _compiled(monkeypatch: pytest.MonkeyPatch, reuse: bool, build: Callable[[], Any]) -> Any:
    """``build()`` with reuse on or off (read when the function is generated: first run),
    on the numpy path (the compiled one would take over a body run more than twice)."""
    monkeypatch.setenv("ASGRAD_CPU_REUSE", "1" if reuse else "0")
    monkeypatch.setenv("ASGRAD_CPU_JIT", "0")
    return build()


def _source(program: Program) -> str:
    assert isinstance(program.executable, CPUExecutable)
    (fn,) = program.executable._fns.values()
    source: str = fn.source
    return source


def _same(a: Sequence[np.ndarray], b: Sequence[np.ndarray]) -> None:
    assert len(a) == len(b)
    for x, y in zip(a, b, strict=True):
        # Same dtype and shape (strict), NaN equals NaN, bit-identical otherwise.
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y), strict=True)


def _op_case_programs() -> list[tuple[str, Any]]:
    out = []
    for op in all_ops():
        if op.cases is None or op.family in ("leaf", "random"):
            continue
        for k, case in enumerate(op.cases(np.random.default_rng(0))):
            out.append((f"{op.name}-{k}", (op.name, case)))
    return out


def _op_program(name: str, case: Any) -> tuple[Program, dict[str, np.ndarray]] | None:
    g = Graph()
    feeds: dict[str, np.ndarray] = {}
    inputs: list[Tensor] = []
    for j, value in enumerate(case.inputs):
        array = np.asarray(value)
        if array.dtype == np.float64:
            array = array.astype(np.float32)
        feeds[f"i{j}"] = array
        t = g.input(f"i{j}", array.shape, str(array.dtype))
        if array.dtype == np.float32 and array.ndim:
            t = t * 1.0  # a fresh intermediate (bit-exact), so the op may reuse its memory
        inputs.append(t)
    try:
        y = g.apply(name, inputs, dict(case.attrs))
    except Exception:  # a case that needs float64 inputs: not this test's subject
        return None
    outputs = [y]
    if y.dtype == "float32" and y.shape:
        z = (y * 2.0 + 1.0) * y  # in-place chain after the op
        outputs += [z.exp() - z, (y - 0.5).sum()]
    return compile(outputs), feeds


_CASES = _op_case_programs()


@pytest.mark.parametrize(("label", "case"), _CASES, ids=[p[0] for p in _CASES])
def test_registered_op_cases_are_bit_identical_with_and_without_reuse(
    monkeypatch: pytest.MonkeyPatch, label: str, case: Any
) -> None:
    name, op_case = case
    results: list[Any] = []
    for reuse in (False, True):
        made = _compiled(monkeypatch, reuse, lambda: _op_program(name, op_case))
        if made is None:
            pytest.skip("the case does not build in float32")
        program, feeds = made
        try:
            first = [np.array(v, copy=True) for v in program(feeds)]
        except Exception as exc:  # same failure either way
            results.append(type(exc))
            continue
        second = program(feeds)  # scratch slots already written once
        _same(first, second)
        results.append(first)
    if isinstance(results[0], list) and isinstance(results[1], list):
        _same(results[0], results[1])
    else:
        assert results[0] == results[1]


# -- safety ----------------------------------------------------------------------------------
def test_outputs_and_updates_are_not_overwritten_by_the_next_run() -> None:
    g = Graph()
    x = g.input("x", (4, 5))
    v = Variable("v", np.ones((4, 5), np.float32))
    p = g.parameter("v", variable=v)
    h = (x * 2.0 + 1.0) * p  # intermediates in scratch slots
    out1 = h.exp()
    out2 = (h - 1.0).transpose() @ (h + 1.0)
    program = compile([out1, out2, h], {v: (h * 0.5 + p) * 0.5})
    rng = np.random.default_rng(0)
    feeds = [{"x": rng.standard_normal((4, 5)).astype(np.float32)} for _ in range(3)]
    results, values = [], []
    for f in feeds:
        results.append(program(f))
        values.append(v.value)
    kept = [[r.copy() for r in res] for res in results]
    kept_values = [a.copy() for a in values]
    program(feeds[0])
    for res, copy in zip(results, kept, strict=True):
        _same(res, copy)
    _same(values, kept_values)
    assert len({id(a) for res in results for a in res} | {id(a) for a in values}) == 12


def _line(source: str, pattern: str) -> str:
    return next(line.strip() for line in source.splitlines() if re.search(pattern, line))


def test_a_live_view_of_a_dying_value_prevents_writing_into_it() -> None:
    value = np.arange(36, dtype=np.float32).reshape(6, 6)
    yy = value * np.float32(2.0)
    for with_view in (True, False):
        g = Graph()
        x = g.input("x", (6, 6))
        y = x * 2.0  # a fresh intermediate
        t = y.transpose() if with_view else x  # made first: the product below reads t first
        z = y + 1.0  # y's last direct use
        program = compile([(t * z).sum()])
        got = program({"x": value})[0]
        np.testing.assert_array_equal(
            got, np.add.reduce((yy.T if with_view else value) * (yy + 1), None)
        )
        source = _source(program)
        y_name = _line(source, r"= k\d+\(v\d+, c\d+, out=_s").split(" = ")[0]
        add = _line(source, rf"= k\d+\({y_name}, c\d+")
        if with_view:
            assert ".transpose(" in source
            assert source.index(".transpose(") < source.index(add)  # the view is live
            assert f"out={y_name})" not in add  # so y is not written
        else:
            assert add.endswith(f"out={y_name})")


def test_an_elementwise_chain_is_computed_in_place() -> None:
    g = Graph()
    x = g.input("x", (32, 16))
    h = ((x * 2.0) + 1.0).exp()
    program = compile([h.sum(axis=1)])
    value = np.random.default_rng(0).standard_normal((32, 16)).astype(np.float32)
    got = program({"x": value})[0]
    np.testing.assert_array_equal(got, np.add.reduce(np.exp(value * np.float32(2) + 1), 1))
    source = _source(program)
    mul = _line(source, r"= k\d+\(v\d+, c\d+, out=_s\d+\)$")  # x * 2 into a scratch slot
    product = mul.split(" = ")[0]
    add = _line(source, rf"= k\d+\({product}, c\d+, out={product}\)$")  # + 1 in place
    total = add.split(" = ")[0]
    assert re.search(rf"= k\d+\({total}, out={total}\)$", source, re.M)  # exp in place


def test_reuse_can_be_turned_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ASGRAD_CPU_REUSE", "0")
    g = Graph()
    x = g.input("x", (8, 8))
    program = compile([(((x * 2.0) + 1.0).exp() @ x).sum()])
    program({"x": np.ones((8, 8), np.float32)})
    assert "out=" not in _source(program)
    assert "_scratch" not in _source(program)
