"""Ops that expand into other ops when applied (``OpDef.expand``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest

from asgrad.tensor import Graph, OpDef, Tensor, TensorType, evaluate, get_op
from asgrad.tensor.errors import GraphError, ShapeError
from asgrad.tensor.ir import registry as registry_module


def _infer(types: Sequence[TensorType], attrs: Any) -> TensorType:
    if len(types[0].shape) != 1:
        raise ShapeError(f"needs a vector, got shape {types[0].shape}")
    return types[0]


def _register(expand: Any) -> OpDef:
    op = OpDef(
        name="twice_plus",
        family="elementwise",
        infer=_infer,
        kernel=lambda x, c: 2 * x + c,
        arity=1,
        expand=expand,
    )
    return registry_module.register_op(op)


@pytest.fixture
def scratch_registry(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(registry_module, "_REGISTRY", dict(registry_module._REGISTRY))


def test_an_expanding_op_builds_its_expansion_and_no_node_of_its_own(
    scratch_registry: None,
) -> None:
    op = _register(lambda x, c: x * 2.0 + c)
    assert not op.primitive
    assert get_op("add").primitive
    g = Graph()
    x = g.input("x", (3,))
    y = g.apply("twice_plus", (x,), {"c": 1.0})
    assert "twice_plus" not in {n.op for n in g.nodes}
    assert {"mul", "add"} <= {n.op for n in g.nodes}
    value = np.array([1.0, -2.0, 0.5], np.float32)
    (result,) = evaluate(y, {"x": value})
    np.testing.assert_allclose(result, op.kernel(value, 1.0))


def test_the_shape_rule_runs_first_and_names_the_line(scratch_registry: None) -> None:
    calls: list[Tensor] = []
    _register(lambda x, c: calls.append(x) or x)
    g = Graph()
    with pytest.raises(ShapeError, match=r"(?s)twice_plus: needs a vector.*test_expand\.py"):
        g.apply("twice_plus", (g.input("m", (2, 2)),), {"c": 1.0})
    assert calls == []


def test_an_expansion_of_the_wrong_type_is_an_error(scratch_registry: None) -> None:
    _register(lambda x, c: x.sum())
    g = Graph()
    with pytest.raises(GraphError, match=r"expansion built float32\[\].*rule says float32\[3\]"):
        g.apply("twice_plus", (g.input("x", (3,)),), {"c": 1.0})
