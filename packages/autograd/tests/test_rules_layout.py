"""The rules package mirrors the op families: each op's rule lives in ``rules/<family>.py``.

Pins the layout of ``asgrad.autograd.rules``: one module per family that has a
differentiable op (plus the shared ``common``), each family module's table holds
exactly the rules of its family's ops, and the one table is their merge.
"""

from __future__ import annotations

import importlib
import pkgutil
from types import ModuleType

import pytest

from asgrad.autograd import RULES, get_rule, rule
from asgrad.autograd import rules as rules_pkg
from asgrad.autograd.rules.common import Attrs, Grads, Ins, Needs, merge
from asgrad.tensor import OpDef, Tensor, all_ops
from asgrad.tensor.errors import GraphError


def _differentiable_ops() -> list[OpDef]:
    # Ops that expand into others have no rule: their gradient is their expansion's.
    return [op for op in all_ops() if op.family != "leaf" and op.differentiable and op.primitive]


def _families() -> set[str]:
    return {op.family for op in _differentiable_ops()}


def _family_module(family: str) -> ModuleType:
    return importlib.import_module(f"asgrad.autograd.rules.{family}")


@pytest.mark.parametrize("op", _differentiable_ops(), ids=lambda op: op.name)
def test_rule_is_defined_in_the_module_of_its_family(op: OpDef) -> None:
    fn = get_rule(op.name)
    assert fn is not None, f"op {op.name!r} has no gradient rule"
    assert fn.__module__ == f"asgrad.autograd.rules.{op.family}", (
        f"the rule of {op.name!r} (family {op.family!r}) is defined in {fn.__module__};"
        f" move it to asgrad/autograd/rules/{op.family}.py"
    )


@pytest.mark.parametrize("family", sorted(_families()))
def test_family_table_holds_exactly_its_family(family: str) -> None:
    expected = {op.name for op in _differentiable_ops() if op.family == family}
    assert set(_family_module(family).RULES) == expected


def test_the_table_is_the_merge_of_the_family_tables() -> None:
    merged = merge(*(_family_module(f).RULES for f in sorted(_families())))
    assert merged == RULES


def test_one_module_per_family_with_rules() -> None:
    modules = {m.name for m in pkgutil.iter_modules(rules_pkg.__path__)}
    assert modules == _families() | {"common"}


def _noop(g: Tensor, out: Tensor, ins: Ins, attrs: Attrs, needs: Needs) -> Grads:
    return (None,) * len(ins)


def test_a_second_rule_for_an_op_is_an_error() -> None:
    with pytest.raises(GraphError, match="'add' already has a gradient rule"):
        rule("add")(_noop)
    assert RULES["add"] is not _noop


def test_merging_two_rules_for_one_op_is_an_error() -> None:
    with pytest.raises(GraphError, match="'add' has two gradient rules"):
        merge({"add": _noop}, {"add": _noop})
