"""Every differentiable op has a gradient rule that passes a float64 gradient check.

The cases come from the op registry (``op.cases``), broadcasting cases included;
each is checked against central differences by the shipped ``check_op_case``.
"""

from __future__ import annotations

import numpy as np
import pytest

from asgrad.autograd import check_op_case, get_rule
from asgrad.tensor import OpCase, OpDef, all_ops


def _differentiable_ops() -> list[OpDef]:
    return [op for op in all_ops() if op.family != "leaf" and op.differentiable]


def _grad_cases() -> list[tuple[OpDef, OpCase]]:
    rng = np.random.default_rng(1)
    out: list[tuple[OpDef, OpCase]] = []
    for op in _differentiable_ops():
        assert op.cases is not None, f"op {op.name!r} has no test cases"
        out.extend((op, case) for case in op.cases(rng) if case.grad)
    return out


GRAD_CASES = _grad_cases()


def _case_id(item: tuple[OpDef, OpCase]) -> str:
    op, case = item
    return f"{op.name}[{case.label or case.attrs}]"


def test_every_differentiable_op_has_a_rule() -> None:
    missing = [
        op.name for op in _differentiable_ops() if op.primitive and get_rule(op.name) is None
    ]
    assert not missing, f"ops without a gradient rule: {missing}"


def test_every_differentiable_op_has_a_gradient_case() -> None:
    checked = {op.name for op, _ in GRAD_CASES}
    unchecked = [
        op.name
        for op in _differentiable_ops()
        if op.name not in checked and op.name != "cast"  # cast's cases change dtype
    ]
    assert not unchecked, f"ops whose cases never run a gradient check: {unchecked}"


def test_broadcasting_cases_are_checked() -> None:
    broadcasting = [
        (op.name, case.label)
        for op, case in GRAD_CASES
        if op.family == "elementwise"
        and len(case.inputs) >= 2
        and len({np.shape(a) for a in case.inputs}) > 1
    ]
    names = {name for name, _ in broadcasting}
    assert {"add", "sub", "mul", "div", "pow", "maximum", "minimum", "where"} <= names


@pytest.mark.parametrize(("op", "case"), GRAD_CASES, ids=[_case_id(c) for c in GRAD_CASES])
def test_gradient_matches_finite_differences(op: OpDef, case: OpCase) -> None:
    check_op_case(op, case)
