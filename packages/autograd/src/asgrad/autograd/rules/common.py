"""What every rule module shares: the rule type, the ``@rule`` decorator, ``apply``."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

from asgrad.tensor import Tensor
from asgrad.tensor.errors import GraphError

Grads = Sequence[Tensor | None]
Ins = tuple[Tensor, ...]
Attrs = Mapping[str, Any]
Needs = tuple[bool, ...]
Rule = Callable[[Tensor, Tensor, Ins, Attrs, Needs], Grads]
"""``rule(g, out, ins, attrs, needs)``: one gradient (or None) per input of the op.

>>> from asgrad.autograd import get_rule
>>> from asgrad.tensor import Graph
>>> x = Graph().input("x", (2,))
>>> y = x.exp()
>>> upstream = y  # the gradient flowing into y: any value of y's shape
>>> (dx,) = get_rule("exp")(upstream, y, (x,), {}, (True,))
>>> dx.shape
(2,)
"""


class RuleDecorator(Protocol):
    """``@rule("op", ...)``: registers the decorated function as the rule of the ops."""

    def __call__(self, *ops: str) -> Callable[[Rule], Rule]: ...


def registrar(table: dict[str, Rule]) -> RuleDecorator:
    """The ``@rule(*ops)`` decorator that adds a function to ``table``.

    The decorated function becomes the gradient rule of each of ``ops``; an op that
    already has a rule in ``table`` is a [`GraphError`][asgrad.tensor.GraphError].
    """

    def rule(*ops: str) -> Callable[[Rule], Rule]:
        """Register the decorated function as the gradient rule of ``ops``."""

        def register(fn: Rule) -> Rule:
            for op in ops:
                if op in table:
                    raise GraphError(f"op {op!r} already has a gradient rule")
                table[op] = fn
            return fn

        return register

    return rule


def merge(*tables: Mapping[str, Rule]) -> dict[str, Rule]:
    """One table holding every rule of ``tables``; an op in two of them is an error."""
    merged: dict[str, Rule] = {}
    for table in tables:
        for op, fn in table.items():
            if op in merged:
                raise GraphError(f"op {op!r} has two gradient rules")
            merged[op] = fn
    return merged


def apply(op: str, inputs: Ins, attrs: Attrs) -> Tensor:
    """``op`` applied to ``inputs`` in their graph: how rules emit backward ops."""
    return inputs[0].graph.apply(op, inputs, attrs)
