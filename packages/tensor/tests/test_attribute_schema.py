"""An op's attribute schema: defaults filled once, types and checks enforced at build."""

from __future__ import annotations

import inspect
import json
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from asgrad.tensor import Graph, GraphFileError, evaluate
from asgrad.tensor.cpu.lowering import FAMILY_LOWERINGS
from asgrad.tensor.errors import ArgumentError, ArgumentTypeError
from asgrad.tensor.io.graph_file import graph_from_dict, graph_to_dict
from asgrad.tensor.ir.registry import REQUIRED, Attr, OpDef, TensorType, all_ops

_EMPTY = inspect.Parameter.empty


def _identity(types: object, attrs: object) -> TensorType:
    return TensorType((2,), "float32")


def _op(*attrs: Attr) -> OpDef:
    return OpDef(
        name="probe",
        family="elementwise",
        infer=_identity,
        kernel=np.negative,
        arity=1,
        attrs=attrs,
    )


def _positive(value: float) -> str | None:
    return None if value > 0 else "must be positive"


def test_missing_attributes_take_their_default() -> None:
    op = _op(Attr(name="alpha", kind=float, default=0.01), Attr(name="mode", kind=str, default="a"))
    assert op.normalize_attrs({}) == {"alpha": 0.01, "mode": "a"}
    assert op.normalize_attrs({"mode": "b"}) == {"alpha": 0.01, "mode": "b"}


def test_an_int_given_for_a_float_attribute_is_stored_as_a_float() -> None:
    value = _op(Attr(name="alpha", kind=float, default=0.0)).normalize_attrs({"alpha": 2})
    assert value == {"alpha": 2.0}
    assert isinstance(value["alpha"], float)


def test_a_bool_is_not_an_int() -> None:
    with pytest.raises(ArgumentTypeError, match="'axis' must be int, got bool"):
        _op(Attr(name="axis", kind=int, default=0)).normalize_attrs({"axis": True})


def test_an_unknown_attribute_names_the_ones_the_op_takes() -> None:
    with pytest.raises(ArgumentError, match="unknown attribute 'alpah'; it takes: alpha"):
        _op(Attr(name="alpha", kind=float, default=0.0)).normalize_attrs({"alpah": 1.0})


def test_a_required_attribute_must_be_given() -> None:
    with pytest.raises(ArgumentError, match="'shape' is required"):
        _op(Attr(name="shape", kind=tuple, default=REQUIRED)).normalize_attrs({})


def test_the_check_refuses_a_value_and_says_why() -> None:
    op = _op(Attr(name="beta", kind=float, default=1.0, check=_positive))
    with pytest.raises(ArgumentError, match=r"'beta' must be positive, got -1\.0"):
        op.normalize_attrs({"beta": -1.0})


def test_optional_accepts_none() -> None:
    op = _op(Attr(name="min", kind=float, default=None, optional=True))
    assert op.normalize_attrs({}) == {"min": None}
    assert op.normalize_attrs({"min": None}) == {"min": None}


def test_an_op_without_a_schema_passes_its_attributes_through() -> None:
    op = OpDef(name="probe", family="elementwise", infer=_identity, kernel=np.negative, arity=1)
    assert op.normalize_attrs({"anything": 3}) == {"anything": 3}


# -- every registered op ---------------------------------------------------------------------
SCHEMA_OPS = [op for op in all_ops() if op.attrs is not None]


def test_every_registered_op_declares_an_attribute_schema() -> None:
    missing = [op.name for op in all_ops() if op.attrs is None]
    assert missing == []


@pytest.mark.parametrize("op", [op for op in SCHEMA_OPS if op.cases], ids=lambda op: op.name)
def test_the_registry_cases_of_an_op_fit_its_schema(op: OpDef) -> None:
    assert op.cases is not None
    names = {a.name for a in op.attrs or ()}
    for case in op.cases(np.random.default_rng(0)):
        assert set(case.attrs) == names  # completed: a kernel is given every attribute
        assert op.normalize_attrs(case.attrs) == dict(case.attrs)


def _kernels(op: OpDef) -> list[Callable[..., Any]]:
    """The op's kernels that asgrad writes: numpy, into-a-buffer and compiled."""
    found = [op.kernel] + ([op.into.fn] if op.into is not None else [])
    family = FAMILY_LOWERINGS.get(op.family)
    if family is not None and op.name in family.compiled:
        found.append(family.compiled[op.name].load())
    return [fn for fn in found if fn.__module__.startswith("asgrad.")]  # not np.any as it is


@pytest.mark.parametrize("op", SCHEMA_OPS, ids=lambda op: op.name)
def test_no_kernel_restates_an_attribute_default(op: OpDef) -> None:
    """A node holds every attribute, so a kernel parameter with a default restates one."""
    restated = []
    for fn in _kernels(op):
        params = inspect.signature(fn).parameters
        restated += [
            f"{fn.__module__}.{fn.__name__}({a.name})"
            for a in op.attrs or ()
            if a.name in params and params[a.name].default is not _EMPTY
        ]
    assert restated == []


# -- errors at build time --------------------------------------------------------------------
def test_a_wrong_attribute_type_names_the_op_and_the_line() -> None:
    x = Graph().input("x", (2, 3))
    line = inspect.currentframe().f_lineno + 2  # type: ignore[union-attr]  # a frame in CPython
    with pytest.raises(ArgumentTypeError) as info:
        x.graph.apply("cumsum", (x,), {"axis": 0, "reverse": "yes"})
    message = str(info.value)
    assert message.startswith("cumsum: attribute 'reverse' must be bool, got str 'yes'")
    assert f"test_attribute_schema.py:{line})" in message


def test_an_attribute_value_the_check_refuses_names_the_op() -> None:
    x = Graph().input("x", (2, 3))
    with pytest.raises(ArgumentError, match=r"^layer_norm: attribute 'eps' must be positive"):
        x.graph.apply("layer_norm", (x,), {"normalized_shape": (3,), "eps": -1.0})


def test_an_unknown_attribute_lists_what_the_op_takes() -> None:
    x = Graph().input("x", (2, 3))
    with pytest.raises(ArgumentError, match=r"softmax: unknown attribute 'axsi'; it takes: axis"):
        x.graph.apply("softmax", (x,), {"axis": 0, "axsi": 1})


def test_a_missing_required_attribute_is_an_error() -> None:
    x = Graph().input("x", (2, 3))
    with pytest.raises(ArgumentError, match=r"cumsum: attribute 'axis' is required"):
        x.graph.apply("cumsum", (x,), {})


def test_a_node_holds_every_attribute_of_its_op() -> None:
    x = Graph().input("x", (2, 3))
    assert x.cumsum(axis=0).node.attrs == {"axis": 0, "reverse": False}
    assert x.sum(axis=1).node.attrs == {"axis": (1,), "keepdims": False}


# -- graph files -----------------------------------------------------------------------------
def test_a_graph_file_missing_an_attribute_loads_with_its_default() -> None:
    g = Graph("old")
    x = g.input("x", (2, 3), free=())
    y = x.cumsum(axis=1)
    data = graph_to_dict(g, [y])
    (entry,) = [e for e in data["nodes"] if e["op"] == "cumsum"]
    del entry["attrs"]["reverse"]  # as a file written before the attribute existed
    loaded = graph_from_dict(json.loads(json.dumps(data)))
    assert loaded.outputs[0].node.attrs == {"axis": 1, "reverse": False}
    feeds = {"x": np.arange(6.0, dtype=np.float32).reshape(2, 3)}
    np.testing.assert_array_equal(evaluate(loaded.outputs, feeds)[0], evaluate([y], feeds)[0])


def test_a_graph_file_with_a_wrong_attribute_is_refused() -> None:
    g = Graph("bad")
    y = g.input("x", (2, 3), free=()).cumsum(axis=1)
    data = graph_to_dict(g, [y])
    (entry,) = [e for e in data["nodes"] if e["op"] == "cumsum"]
    entry["attrs"]["reverse"] = 1
    with pytest.raises(GraphFileError, match="attribute 'reverse' must be bool, got int 1"):
        graph_from_dict(data)


def test_numpy_numbers_and_lists_are_stored_as_python_values() -> None:
    op = _op(
        Attr(name="alpha", kind=float, default=0.0),
        Attr(name="axis", kind=int, default=0),
        Attr(name="shape", kind=tuple, default=()),
    )
    got = op.normalize_attrs({"alpha": np.float32(0.5), "axis": np.int64(2), "shape": [2, 3]})
    assert got == {"alpha": 0.5, "axis": 2, "shape": (2, 3)}
    assert [type(v) for v in got.values()] == [float, int, tuple]
