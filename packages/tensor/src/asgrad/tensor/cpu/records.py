"""The records a generated CPU function is made of: expressions and lines.

A line of the generated function is a `Line`: the node it computes, the
expression that computes it (a small tree of calls over the values it reads), how
its result may use memory (`Reuse`), and the same expression writing into a
buffer. The code generator decides everything about a line when it makes the
record; rendering it to source text is the last step and classifies nothing.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeAlias

from asgrad.tensor.ir.graph import Node
from asgrad.tensor.ir.registry import TensorType


class Hole(enum.Enum):
    """Where a line's buffers go in its ``into`` expression."""

    OUT = "out"  # the array the result is written into (or None)
    WORK = "work"  # the tuple of scratch arrays lent for the line


OUT, WORK = Hole.OUT, Hole.WORK


@dataclass(frozen=True, slots=True)
class Value:
    """The value of a node (by id): a variable of the function, or a constant."""

    id: int


@dataclass(frozen=True, slots=True)
class Call:
    """``fn(*args, **kwargs)``; ``fn`` is a name of the function's environment."""

    fn: str
    args: tuple[Expr, ...] = ()
    kwargs: tuple[tuple[str, Expr], ...] = ()


@dataclass(frozen=True, slots=True)
class Method:
    """``obj.name(*args)``: a method of an array (``reshape``, ``transpose``...)."""

    obj: Expr
    name: str
    args: tuple[Expr, ...] = ()


@dataclass(frozen=True, slots=True)
class Divide:
    """``(left / right)``."""

    left: Expr
    right: Expr


# An expression: a value, source text as is (a literal, a name), a hole, or a call.
Expr: TypeAlias = Value | str | Hole | Call | Method | Divide


def with_out(call: Call, *, work: bool = False) -> Call:
    """``call`` with ``out=`` (and ``work=``) keywords added."""
    extra: tuple[tuple[str, Expr], ...] = (("out", OUT),) + ((("work", WORK),) if work else ())
    return Call(call.fn, call.args, call.kwargs + extra)


def values(expr: Expr) -> Iterator[int]:
    """The ids of the values ``expr`` reads, in order of appearance."""
    if isinstance(expr, Value):
        yield expr.id
    elif isinstance(expr, Call):
        for a in expr.args:
            yield from values(a)
        for _, a in expr.kwargs:
            yield from values(a)
    elif isinstance(expr, Method):
        yield from values(expr.obj)
        for a in expr.args:
            yield from values(a)
    elif isinstance(expr, Divide):
        yield from values(expr.left)
        yield from values(expr.right)


def render(expr: Expr, name: Callable[[int], str], out: str = "None", work: str = "()") -> str:
    """Python source for ``expr``; ``name`` names a value, ``out``/``work`` fill the holes."""

    def go(e: Expr) -> str:
        if isinstance(e, Value):
            return name(e.id)
        if isinstance(e, str):
            return e
        if isinstance(e, Hole):
            return out if e is OUT else work
        if isinstance(e, Call):
            args = [go(a) for a in e.args] + [f"{k}={go(a)}" for k, a in e.kwargs]
            return f"{e.fn}({', '.join(args)})"
        if isinstance(e, Method):
            return f"{go(e.obj)}.{e.name}({', '.join(go(a) for a in e.args)})"
        return f"({go(e.left)} / {go(e.right)})"

    return go(expr)


class Reuse(enum.Enum):
    """How a line's result may use memory (see `asgrad.tensor.cpu.buffers`)."""

    IN_PLACE = "in place"
    """Elementwise: ``into`` may write into a dying input of the result's type (each
    element is read before it is written) or into a free scratch slot."""
    INTO_SLOT = "into slot"
    """``into`` may write into a free scratch slot, which no input aliases (a matrix
    product, a kernel taking ``out=``)."""
    FRESH = "fresh"
    """A new array that nothing else references; no ``into``."""
    ALIAS = "alias"
    """May be, or view, an input's memory: a view, or a kernel known no better."""


@dataclass(frozen=True, kw_only=True)
class Line:
    """One line of a generated function: ``v<position> = <call>``.

    Attributes:
        node: The node whose value the line computes.
        call: The expression computing it into fresh memory (or a view).
        reuse: How the result may use memory.
        into: For ``IN_PLACE`` and ``INTO_SLOT``: the same result written into
            the ``OUT`` hole (an array, or None for fresh memory) with ``work``
            scratch arrays in the ``WORK`` hole.
        work: How many scratch arrays of the result's type ``into`` is lent.
        flops: For a matrix product, its flops (it decides BLAS threads); else 0.
    """

    node: Node
    call: Expr
    reuse: Reuse = Reuse.ALIAS
    into: Expr | None = None
    work: int = 0
    flops: int = 0


@dataclass(frozen=True, slots=True)
class Ref:
    """What a node's value is at code generation: a runtime value (the value of node
    ``id``, which may be another node's when this one is an identity), or a constant."""

    id: int
    const: Any = None
    is_const: bool = False


def shaped(t: TensorType) -> bool:
    """Whether ``t`` has rank >= 1 and elements: only such results get buffers.

    A 0-d result may be a numpy scalar and an empty one needs no memory, so both
    are treated as possibly aliasing their inputs.
    """
    return bool(t.shape) and 0 not in t.shape


def line_readers(lines: Sequence[Line]) -> dict[int, list[int]]:
    """For each value id, the indexes of the lines reading it (each line once): what a
    fusion of lines asks before it folds a value into its only reader."""
    readers: dict[int, list[int]] = {}
    for k, line in enumerate(lines):
        for a in set(values(line.call)):
            readers.setdefault(a, []).append(k)
    return readers


def line_at(lines: Sequence[Line]) -> dict[int, int]:
    """Each line's index by the id of the node it computes."""
    return {line.node.id: k for k, line in enumerate(lines)}


def runtime_roots(refs: Mapping[int, Ref], roots: Iterable[int]) -> set[int]:
    """The value ids of the function's outputs ``roots`` that are runtime values (not
    constants): values a fusion must keep."""
    return {refs[r].id for r in roots if not refs[r].is_const}
