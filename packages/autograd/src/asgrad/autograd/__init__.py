"""asgrad.autograd: graph-to-graph differentiation and numerical gradient checks.

>>> import numpy as np
>>> from asgrad.tensor import Graph, evaluate
>>> from asgrad.autograd import grad
>>> g = Graph()
>>> x = g.input("x", (2,), "float64")
>>> (dx,) = grad(x.sin().sum(), [x])
>>> np.allclose(evaluate([dx], {"x": np.zeros(2)})[0], 1.0)
True
"""

from asgrad.autograd.check import (
    GradientCheckError,
    GradientCheckResult,
    check_op_case,
    gradient_check,
)
from asgrad.autograd.grad import grad
from asgrad.autograd.rules import RULES, Rule, get_rule, rule
from asgrad.autograd.rules.control import recompute_loop_steps

__version__ = "0.1.0"

__all__ = [
    "RULES",
    "GradientCheckError",
    "GradientCheckResult",
    "Rule",
    "__version__",
    "check_op_case",
    "get_rule",
    "grad",
    "gradient_check",
    "recompute_loop_steps",
    "rule",
]
