"""Node metadata: the module scope and the role (forward, gradient, optimizer) of a node.

Every node records, in ``node.meta``, the metadata in force when it was made: a
dict such as ``{"scope": "blocks.0.attn", "role": "gradient", "grad_of": "matmul_12"}``.
Modules open a scope named by their dotted path while they run (``asgrad.nn``),
``asgrad.autograd.grad`` marks the nodes it makes as ``role="gradient"`` and an
optimizer its update as ``role="optimizer"``; the viewer (``asgrad.viz``) and the
graph file read them. Metadata never changes what a graph computes.

>>> from asgrad.tensor import Graph
>>> g = Graph()
>>> x = g.input("x", (2,))
>>> with scope("encoder"), scope("attn"):
...     y = x * 2.0
>>> y.node.meta["scope"]
'encoder.attn'
>>> with node_meta(role="gradient"):
...     z = y + 1.0
>>> z.node.meta
{'role': 'gradient'}
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

__all__ = ["current_meta", "node_meta", "scope"]

# The metadata in force; each entry is a dict that is never mutated once pushed, so
# nodes share it instead of copying it.
_STACK: list[dict[str, Any]] = [{}]


def current_meta() -> dict[str, Any]:
    """The metadata a node made now records (shared: do not mutate it)."""
    return _STACK[-1]


@contextmanager
def node_meta(**meta: Any) -> Iterator[None]:
    """While active, nodes record ``meta`` (over the enclosing metadata); a value of
    None removes that key."""
    merged = {**_STACK[-1], **meta}
    for key, value in meta.items():
        if value is None:
            del merged[key]
    _STACK.append(merged)
    try:
        yield
    finally:
        _STACK.pop()


@contextmanager
def scope(name: str) -> Iterator[None]:
    """While active, nodes are in scope ``name`` inside the current scope (dotted)."""
    outer = _STACK[-1].get("scope", "")
    inner = f"{outer}.{name}" if outer and name else (outer or name)
    with node_meta(scope=inner or None):
        yield
