"""Precision policies: the graph pass behind ``compile(..., precision="mixed")``.

``precision="float32"`` (the default) leaves the graph alone. ``precision="mixed"``
rebuilds the values a program computes with ``cast`` ops inserted, as PyTorch's
``torch.autocast(dtype=torch.float16)`` chooses them, op by op:

* **float16 ops** (`FLOAT16_OPS`: matrix products and convolutions) read float16:
  a float32 input (an activation, a weight, a fed batch) is cast to float16 first, and
  the op runs in float16 (the float16 meaning of a matrix product accumulates in
  float32 and rounds once);
* **float32 ops** (`FLOAT32_OPS`: exponentials and logarithms, powers, softmax and
  log-softmax, sums, means, variances and products, cumulative sums, layer and batch
  norm) read float32: a float16 input is cast to float32, and the op runs in
  float32. Losses are built of these (``cross_entropy`` through ``log_softmax``,
  every ``"mean"`` reduction), so they are computed in float32;
* **every other op** follows its inputs: it runs in float16 when a float input is a
  float16 value, with the float32 weights and constants it reads cast to float16
  (a bias added to a float16 product, a scale); when another float input is a float32
  value that is not a weight or a constant (a fed target, a float32 op's output), or a
  float32 constant holding a finite value float16 cannot (a mask's ``-1e9``), the
  float16 inputs are cast to float32 instead (PyTorch's type promotion). Ops whose
  float inputs are all float32 stay float32;
* an op that has no float16 form (its type rule refuses float16) or that runs a loop
  body stays in float32, its float16 inputs cast to float32.

Weights stay float32 variables (the *master weights*): a float16 op reads a cast of
the weight, so its gradient, the optimizer's state and update are float32. Each
output and variable update is cast back to the dtype it had, so a program's outputs
keep their dtypes. The casts are ordinary ``cast`` nodes, added to the graph of the
values: the graph viewer (``asgrad.viz.show(step)``) and ``graph.dump(outputs)`` of the
rebuilt outputs show them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import numpy as np

from asgrad.tensor.api.tensor import Tensor
from asgrad.tensor.errors import ArgumentError, AsgradError
from asgrad.tensor.ir.graph import Graph, Node
from asgrad.tensor.ir.passes import topological_order
from asgrad.tensor.ir.scopes import node_meta
from asgrad.tensor.ir.variables import Variable

__all__ = ["FLOAT16_OPS", "FLOAT32_OPS", "PRECISIONS", "mixed_precision", "with_precision"]

PRECISIONS = ("float32", "mixed")
"""The precisions ``compile`` takes: ``"float32"`` (the default) and ``"mixed"``."""

FLOAT16_OPS: frozenset[str] = frozenset({"matmul", "conv2d", "conv_transpose2d"})
"""Ops that run in float16 under ``precision="mixed"`` (their float32 inputs cast)."""

FLOAT32_OPS: frozenset[str] = frozenset(
    {
        "exp",
        "log",
        "pow",
        "softplus",
        "softmax",
        "log_softmax",
        "logcumsumexp",
        "cumsum",
        "cumprod",
        "sum",
        "mean",
        "var",
        "prod",
        "layer_norm",
        "batch_norm",
    }
)
"""Ops that run in float32 under ``precision="mixed"`` (their float16 inputs cast)."""

_LEAVES = frozenset({"input", "parameter", "constant"})
_FOLLOWERS = frozenset({"parameter", "constant"})  # cast to an activation's float16


def with_precision(
    outputs: Sequence[Tensor], updates: Mapping[Variable, Tensor], precision: str
) -> tuple[list[Tensor], dict[Variable, Tensor]]:
    """``outputs`` and ``updates`` under ``precision`` (unchanged for ``"float32"``).

    >>> from asgrad.tensor import Graph
    >>> x = Graph().input("x", (2, 2))
    >>> [y], _ = with_precision([x @ x], {}, "mixed")
    >>> y.dtype, y.node.inputs[0].op, y.node.inputs[0].dtype  # the product, cast back
    ('float32', 'matmul', 'float16')
    """
    if precision not in PRECISIONS:
        raise ArgumentError(
            f"precision must be one of {', '.join(map(repr, PRECISIONS))}, got {precision!r}"
        )
    if precision == "float32":
        return list(outputs), dict(updates)
    return mixed_precision(outputs, updates)


def mixed_precision(
    outputs: Sequence[Tensor], updates: Mapping[Variable, Tensor] | None = None
) -> tuple[list[Tensor], dict[Variable, Tensor]]:
    """``outputs`` and ``updates`` rebuilt with the mixed-precision casts (module docs).

    >>> from asgrad.tensor import Graph
    >>> g = Graph()
    >>> x, w = g.input("x", (4, 3)), g.input("w", (3, 2))
    >>> [loss], _ = mixed_precision([(x @ w).relu().mean()])
    >>> mean = loss.node
    >>> relu = mean.inputs[0].inputs[0]  # mean reads relu cast to float32
    >>> mean.op, mean.dtype, relu.op, relu.dtype, relu.inputs[0].op
    ('mean', 'float32', 'relu', 'float16', 'matmul')
    """
    updates = dict(updates or {})
    roots = [t.node for t in outputs] + [t.node for t in updates.values()]
    if not roots:
        return [], {}
    rebuilt: dict[int, Node] = {}
    casts: dict[tuple[int, str], Node] = {}

    def cast(node: Node, dtype: str) -> Node:
        if node.dtype == dtype:
            return node
        key = (node.id, dtype)
        if key not in casts:
            with node_meta(**{**node.meta, "precision": "mixed"}):
                casts[key] = node.graph.apply("cast", [Tensor(node)], {"dtype": dtype}).node
        return casts[key]

    for node in topological_order(roots):
        if node.op in _LEAVES or not node.inputs:
            rebuilt[node.id] = node
            continue
        inputs = [rebuilt[i.id] for i in node.inputs]
        rebuilt[node.id] = _rebuild(node, inputs, cast)
    new_outputs = [Tensor(cast(rebuilt[t.node.id], t.dtype)) for t in outputs]
    new_updates = {v: Tensor(cast(rebuilt[t.node.id], t.dtype)) for v, t in updates.items()}
    return new_outputs, new_updates


def _is_float(dtype: str) -> bool:
    return dtype in ("float16", "float32")


def _rebuild(node: Node, inputs: list[Node], cast: Callable[[Node, str], Node]) -> Node:
    floats = [n for n in inputs if _is_float(n.dtype)]
    if node.op in FLOAT16_OPS:
        target: str | None = "float16"
    elif node.op in FLOAT32_OPS or _has_body(node):
        target = "float32"
    elif any(n.dtype == "float16" for n in floats):
        activations = [
            n
            for n in floats
            if (n.op not in _FOLLOWERS and not _is_cast_of_leaf(n)) or _exceeds_float16(n)
        ]
        target = "float32" if any(n.dtype == "float32" for n in activations) else "float16"
    else:
        target = None  # no float16 input: as it was
    if target is None and all(a is b for a, b in zip(inputs, node.inputs, strict=True)):
        return node
    if target is not None:
        attempt = [cast(n, target) if _is_float(n.dtype) else n for n in inputs]
        built = _apply(node, attempt)
        if built is not None or target == "float32":
            if built is None:
                raise _cannot(node)
            return built
        # no float16 form: the op stays float32
        attempt = [cast(n, "float32") if _is_float(n.dtype) else n for n in inputs]
        built = _apply(node, attempt)
        if built is None:
            raise _cannot(node)
        return built
    built = _apply(node, inputs)
    if built is None:
        raise _cannot(node)
    return built


def _is_cast_of_leaf(node: Node) -> bool:
    return node.op == "cast" and node.inputs[0].op in _FOLLOWERS


# The largest finite float16.
_FLOAT16_MAX = float(np.finfo(np.float16).max)


def _exceeds_float16(node: Node) -> bool:
    """A float32 constant holding a finite value float16 cannot (a mask's -1e9): the op
    reading it promotes to float32, as for a float32 activation, rather than cast it to
    an infinity."""
    if node.op != "constant" or node.dtype != "float32":
        return False
    value = np.asarray(node.attrs["value"])
    finite = value[np.isfinite(value)]
    return bool(finite.size) and float(np.abs(finite).max()) > _FLOAT16_MAX


# Ops that run a loop body (traced for its inputs' dtypes): they stay float32.
_LOOP_OPS = frozenset({"scan", "scan_part", "scan_unpart"})


def _has_body(node: Node) -> bool:
    return node.op in _LOOP_OPS or any(isinstance(v, Graph) for v in node.attrs.values())


def _apply(node: Node, inputs: list[Node]) -> Node | None:
    """``node``'s op over ``inputs`` (its metadata kept), or None if its types refuse."""
    graph = node.graph
    try:
        with node_meta(**node.meta):
            out = graph.apply(node.op, [Tensor(n) for n in inputs], node.attrs)
    except AsgradError:
        return None
    if out.node.shape != node.shape:
        return None
    return out.node


def _cannot(node: Node) -> AsgradError:
    return ArgumentError(
        f"precision='mixed' cannot rebuild {node.op} ({node.name}) with float32 inputs;"
        " compile this graph with precision='float32'"
    )
