"""Gradient rules (vector-Jacobian products), one per differentiable op, in graph ops.

Each rule gets the incoming gradient ``g`` (shaped like the op's output), the op's
output, its inputs and attributes, and which inputs need a gradient; it returns one
gradient (or None) per input. Rules are written in graph ops, so gradients are
graphs too and can be differentiated again. Rules may return a gradient shaped like
the broadcast result; `asgrad.autograd.grad` sums it down to the operand's
shape at every node.

The rules of an op family live in the module of the same name as the family
(``OpDef.family``): `.elementwise`, `.reduction`, `.shape`,
`.index`, `.linalg`, `.conv`, `.pool`, `.norm`,
`.random`, `.control`. Each module collects its rules in its own ``RULES`` table with its
own ``@rule`` decorator; [`RULES`][asgrad.autograd.RULES] here is the one table
[`get_rule`][asgrad.autograd.get_rule] reads, merged from those.

The linear ops of conv and pool come in closed families, each member's gradient
another member (all registered ops with numpy kernels), so gradients of any order
stay fast; the composite norms' ``*_backward`` ops are differentiated through their
decomposition in graph ops.
"""

from __future__ import annotations

from collections.abc import Callable

from asgrad.autograd.rules import (
    control,
    conv,
    elementwise,
    index,
    linalg,
    norm,
    pool,
    random,
    reduction,
    shape,
)
from asgrad.autograd.rules.common import Attrs, Grads, Ins, Needs, Rule, merge, registrar

RULES: dict[str, Rule] = merge(
    elementwise.RULES,
    reduction.RULES,
    shape.RULES,
    index.RULES,
    linalg.RULES,
    conv.RULES,
    pool.RULES,
    norm.RULES,
    random.RULES,
    control.RULES,
)
"""Every gradient rule by op name: the family tables, and the rules added with
[`rule`][asgrad.autograd.rule].

>>> from asgrad.autograd import RULES
>>> "matmul" in RULES, "argmax" in RULES
(True, False)
"""

_register = registrar(RULES)


def rule(*ops: str) -> Callable[[Rule], Rule]:
    """Register the decorated function as the gradient rule of ``ops``.

    For ops registered outside asgrad; an op that already has a rule is a
    [`GraphError`][asgrad.tensor.GraphError].

    The example shows that refusal, which leaves the rules as they were:

    >>> from asgrad.autograd import rule
    >>> from asgrad.tensor import GraphError
    >>> try:
    ...     @rule("exp")
    ...     def my_exp_grad(node, grad, needs):
    ...         return (grad,)
    ... except GraphError as e:
    ...     print(e)
    op 'exp' already has a gradient rule
    """
    return _register(*ops)


def get_rule(op: str) -> Rule | None:
    """The gradient rule of ``op``, or None.

    >>> from asgrad.autograd import RULES, get_rule
    >>> get_rule("exp") is RULES["exp"], get_rule("argmax")
    (True, None)
    """
    return RULES.get(op)


__all__ = ["RULES", "Attrs", "Grads", "Ins", "Needs", "Rule", "get_rule", "rule"]
