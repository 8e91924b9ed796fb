"""asgrad.tensor: the graph, the op registry, shape inference and the CPU backend.

>>> import numpy as np
>>> from asgrad.tensor import Graph, evaluate
>>> g = Graph()
>>> x = g.input("x", (2, 3))
>>> y = (x * 2.0).sum(axis=1)
>>> evaluate([y], {"x": np.ones((2, 3), np.float32)})[0].tolist()
[6.0, 6.0]
"""

from asgrad.tensor import linalg
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
from asgrad.tensor.functional_shape import (
    arange,
    bmm,
    chunk,
    einsum,
    eye,
    flip,
    full,
    full_like,
    gather,
    index_select,
    linspace,
    masked_fill,
    movedim,
    ones,
    ones_like,
    outer,
    pad,
    roll,
    scatter,
    scatter_add,
    scatter_reduce,
    split,
    take_along_axis,
    tile,
    tril,
    triu,
    unstack,
    zeros,
    zeros_like,
)
from asgrad.tensor.graph import Graph, Node, Variable, VariableStore
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
    "arange",
    "as_dtype",
    "bmm",
    "chunk",
    "compile",
    "concat",
    "concatenate",
    "dump",
    "einsum",
    "evaluate",
    "eye",
    "flip",
    "full",
    "full_like",
    "gather",
    "get_backend",
    "get_op",
    "index_select",
    "linalg",
    "linspace",
    "make_schedule",
    "masked_fill",
    "matmul",
    "maximum",
    "minimum",
    "movedim",
    "one_hot",
    "ones",
    "ones_like",
    "optimize",
    "outer",
    "pad",
    "register_backend",
    "register_op",
    "resolve_backend_name",
    "roll",
    "scatter",
    "scatter_add",
    "scatter_reduce",
    "split",
    "stack",
    "stop_gradient",
    "take_along_axis",
    "tile",
    "to_dot",
    "topological_order",
    "tril",
    "triu",
    "unstack",
    "where",
    "zeros",
    "zeros_like",
]
