"""asgrad.tensor: the graph, the op registry, shape inference and the CPU backend.

>>> import numpy as np
>>> from asgrad.tensor import Graph, evaluate
>>> g = Graph()
>>> x = g.input("x", (2, 3))
>>> y = (x * 2.0).sum(axis=1)
>>> evaluate([y], {"x": np.ones((2, 3), np.float32)})[0].tolist()
[6.0, 6.0]
"""

from asgrad.tensor import ops as _ops  # noqa: F401  # registers the built-in ops
from asgrad.tensor.backends import get_backend, register_backend, resolve_backend_name
from asgrad.tensor.dtypes import DType, as_dtype
from asgrad.tensor.errors import (
    ArgumentError,
    ArgumentTypeError,
    AsgradError,
    BackendError,
    DTypeError,
    FeedError,
    GraphError,
    NameConflictError,
    NotDifferentiableError,
    NumericsError,
    OutOfRangeError,
    PrecisionWarning,
    ShapeError,
)
from asgrad.tensor.executor import Program, Schedule, compile, evaluate, make_schedule
from asgrad.tensor.functional import (
    concat,
    concatenate,
    matmul,
    maximum,
    minimum,
    one_hot,
    stack,
    stop_gradient,
    where,
)
from asgrad.tensor.graph import Graph, Node, Variable, VariableStore
from asgrad.tensor.loops import fori_loop, scan, while_loop
from asgrad.tensor.passes import optimize, topological_order
from asgrad.tensor.printing import dump, to_dot
from asgrad.tensor.registry import OpCase, OpDef, TensorType, all_ops, get_op, register_op
from asgrad.tensor.tensor import Tensor

__version__ = "0.1.0"

__all__ = [
    "ArgumentError",
    "ArgumentTypeError",
    "AsgradError",
    "BackendError",
    "DType",
    "DTypeError",
    "FeedError",
    "Graph",
    "GraphError",
    "NameConflictError",
    "Node",
    "NotDifferentiableError",
    "NumericsError",
    "OpCase",
    "OpDef",
    "OutOfRangeError",
    "PrecisionWarning",
    "Program",
    "Schedule",
    "ShapeError",
    "Tensor",
    "TensorType",
    "Variable",
    "VariableStore",
    "__version__",
    "all_ops",
    "as_dtype",
    "compile",
    "concat",
    "concatenate",
    "dump",
    "evaluate",
    "fori_loop",
    "get_backend",
    "get_op",
    "make_schedule",
    "matmul",
    "maximum",
    "minimum",
    "one_hot",
    "optimize",
    "register_backend",
    "register_op",
    "resolve_backend_name",
    "scan",
    "stack",
    "stop_gradient",
    "to_dot",
    "topological_order",
    "where",
    "while_loop",
]
