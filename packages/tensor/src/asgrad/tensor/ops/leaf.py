"""The leaf ops: inputs fed at run time, parameters (variables) and constants."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from asgrad.tensor.errors import GraphError
from asgrad.tensor.ir.registry import Attrs, OpDef, TensorType, register_op


def _no_infer(types: Sequence[TensorType], attrs: Attrs) -> TensorType:
    raise GraphError("leaf nodes are made by Graph.input, Graph.parameter and Graph.constant")


def _no_kernel(*arrays: np.ndarray) -> np.ndarray:
    raise GraphError("leaf nodes take their values from feeds, variables and constants")


for _name, _doc in (
    ("input", "a value fed at run time"),
    ("parameter", "a variable's value, persistent between runs"),
    ("constant", "a constant array"),
):
    register_op(
        OpDef(
            name=_name,
            family="leaf",
            infer=_no_infer,
            kernel=_no_kernel,
            arity=0,
            differentiable=False,
            tolerance=(0.0, 0.0),
            doc=_doc,
        )
    )
