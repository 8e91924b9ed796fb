"""asgrad.tensor: the graph, the op registry, shape inference and the CPU backend.

>>> import numpy as np
>>> from asgrad.tensor import Graph, evaluate
>>> g = Graph()
>>> x = g.input("x", (2, 3))
>>> y = (x * 2.0).sum(axis=1)
>>> evaluate([y], {"x": np.ones((2, 3), np.float32)})[0].tolist()
[6.0, 6.0]
"""

import os

from asgrad.tensor import (
    _openblas,  # noqa: F401  # first: OpenBLAS's polling, before numpy loads
    linalg,
)
from asgrad.tensor import cpu as _cpu  # noqa: F401  # compiles loop bodies for the numpy scan
from asgrad.tensor import ops as _ops  # noqa: F401  # registers the built-in ops
from asgrad.tensor.api.functional import (
    cat,
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
from asgrad.tensor.api.functional_math import (
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
from asgrad.tensor.api.functional_random import (
    bernoulli,
    normal,
    rand,
    rand_like,
    randn,
    randn_like,
    seed_stream,
)
from asgrad.tensor.api.functional_reduce import (
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
from asgrad.tensor.api.functional_shape import (
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
from asgrad.tensor.api.tensor import Tensor, ValuesIndices
from asgrad.tensor.errors import (
    ArgumentError,
    ArgumentTypeError,
    AsgradError,
    BackendError,
    DTypeError,
    FeedError,
    FreeAxisError,
    GraphError,
    GraphFileError,
    IntegerArithmeticError,
    MemoryBudgetError,
    NameConflictError,
    NotDifferentiableError,
    NumericsError,
    OutOfRangeError,
    PrecisionWarning,
    ShapeError,
)
from asgrad.tensor.io import graph_file as _graph_file
from asgrad.tensor.io.printing import dump, to_dot
from asgrad.tensor.ir import graph as _graph
from asgrad.tensor.ir.dtypes import DType, as_dtype
from asgrad.tensor.ir.graph import Graph, Node, Variable, VariableStore
from asgrad.tensor.ir.memory import MemoryPlan
from asgrad.tensor.ir.passes import optimize, topological_order
from asgrad.tensor.ir.registry import OpCase, OpDef, TensorType, all_ops, get_op, register_op
from asgrad.tensor.loops import fori_loop, scan, while_loop
from asgrad.tensor.runtime.backends import get_backend, register_backend, resolve_backend_name
from asgrad.tensor.runtime.device_values import DeviceValue, read_all
from asgrad.tensor.runtime.executor import Program, Schedule, compile, evaluate, make_schedule


def _load_graph(path: str | os.PathLike[str]) -> Graph:
    return _graph_file.load_graph(path).graph


# The IR imports no API, file format or printer: graphs get them here, once.
_graph.install(
    _graph.Installed(
        wrap=Tensor,
        dump=dump,
        to_dot=to_dot,
        save=_graph_file.save_graph,
        load=_load_graph,
        notebook_html=_graph_file.notebook_html,
    )
)

__version__ = "0.1.0"

__all__ = [
    "ArgumentError",
    "ArgumentTypeError",
    "AsgradError",
    "BackendError",
    "DType",
    "DTypeError",
    "DeviceValue",
    "FeedError",
    "FreeAxisError",
    "Graph",
    "GraphError",
    "GraphFileError",
    "IntegerArithmeticError",
    "MemoryBudgetError",
    "MemoryPlan",
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
    "ValuesIndices",
    "Variable",
    "VariableStore",
    "__version__",
    "all_ops",
    # math ops; round, any and all stay in asgrad.tensor.api.functional_math
    # (as names here they would shadow Python's builtins on a star import)
    "amax",
    "amin",
    "arange",
    "argmin",
    "argsort",
    "as_dtype",
    "bernoulli",
    "bitwise_and",
    "bitwise_not",
    "bitwise_or",
    "bitwise_xor",
    "bmm",
    "cat",
    "ceil",
    "chunk",
    "compile",
    "concat",
    "concatenate",
    "cummax",
    "cummin",
    "cumprod",
    "cumsum",
    "dump",
    "einsum",
    "evaluate",
    "eye",
    "flip",
    "floor",
    "floor_divide",
    "fori_loop",
    "frac",
    "full",
    "full_like",
    "gather",
    "get_backend",
    "get_op",
    "index_select",
    "isclose",
    "isfinite",
    "isinf",
    "isnan",
    "left_shift",
    "linalg",
    "linspace",
    "logcumsumexp",
    "logical_and",
    "logical_not",
    "logical_or",
    "logical_xor",
    "logsumexp",
    "make_schedule",
    "masked_fill",
    "matmul",
    "maximum",
    "minimum",
    "movedim",
    "nan_to_num",
    "normal",
    "one_hot",
    "ones",
    "ones_like",
    "optimize",
    "outer",
    "pad",
    "prod",
    "rand",
    "rand_like",
    "randn",
    "randn_like",
    "read_all",
    "register_backend",
    "register_op",
    "remainder",
    "resolve_backend_name",
    "right_shift",
    "roll",
    "scan",
    "scatter",
    "scatter_add",
    "scatter_reduce",
    "seed_stream",
    "sort",
    "split",
    "stack",
    "std",
    "stop_gradient",
    "take_along_axis",
    "tile",
    "to_dot",
    "topk",
    "topological_order",
    "tril",
    "triu",
    "trunc",
    "unstack",
    "var",
    "where",
    "while_loop",
    "zeros",
    "zeros_like",
]
