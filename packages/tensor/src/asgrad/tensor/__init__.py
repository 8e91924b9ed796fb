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
    IntegerArithmeticError,
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
from asgrad.tensor.functional_math import (
    bitwise_and,
    bitwise_not,
    bitwise_or,
    bitwise_xor,
    ceil,
    floor,
    floor_divide,
    frac,
    isclose,
    isfinite,
    isinf,
    isnan,
    left_shift,
    logical_and,
    logical_not,
    logical_or,
    logical_xor,
    nan_to_num,
    remainder,
    right_shift,
    trunc,
)
from asgrad.tensor.functional_reduce import (
    amax,
    amin,
    argmin,
    argsort,
    cummax,
    cummin,
    cumprod,
    cumsum,
    logcumsumexp,
    logsumexp,
    prod,
    sort,
    std,
    topk,
    var,
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
    "IntegerArithmeticError",
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
    # math ops (issue 13); round, any and all stay in asgrad.tensor.functional_math
    # (as names here they would shadow Python's builtins on a star import)
    "amax",
    "amin",
    "argmin",
    "argsort",
    "as_dtype",
    "bitwise_and",
    "bitwise_not",
    "bitwise_or",
    "bitwise_xor",
    "ceil",
    "compile",
    "concat",
    "concatenate",
    "cummax",
    "cummin",
    "cumprod",
    "cumsum",
    "dump",
    "evaluate",
    "floor",
    "floor_divide",
    "frac",
    "get_backend",
    "get_op",
    "isclose",
    "isfinite",
    "isinf",
    "isnan",
    "left_shift",
    "logcumsumexp",
    "logical_and",
    "logical_not",
    "logical_or",
    "logical_xor",
    "logsumexp",
    "make_schedule",
    "matmul",
    "maximum",
    "minimum",
    "nan_to_num",
    "one_hot",
    "optimize",
    "prod",
    "register_backend",
    "register_op",
    "remainder",
    "resolve_backend_name",
    "right_shift",
    "sort",
    "stack",
    "std",
    "stop_gradient",
    "to_dot",
    "topk",
    "topological_order",
    "trunc",
    "var",
    "where",
]
