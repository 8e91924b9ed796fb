"""An op's attribute schema: defaults filled once, types and checks enforced at build."""

from __future__ import annotations

import numpy as np
import pytest

from asgrad.tensor.errors import ArgumentError, ArgumentTypeError
from asgrad.tensor.ir.registry import REQUIRED, Attr, OpDef, TensorType


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
