"""``summary(model, input_shapes)``: layers, output shapes, parameter counts and memory.

The model is traced on a fresh [`Graph`][asgrad.tensor.Graph] whose inputs have the
given shapes: asgrad builds graphs symbolically, so nothing is computed and no value
is allocated. Each module call made while tracing is recorded (through
`asgrad.nn.module.call_hook`) with its dotted name, class and outputs.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, TextIO

import numpy as np

from asgrad.nn.module import Module, call_hook
from asgrad.tensor import Graph, MemoryPlan, Program, Tensor, make_schedule
from asgrad.tensor.errors import ArgumentError
from asgrad.tensor.ir.memory import format_bytes

__all__ = ["LayerRow", "ModelSummary", "summary"]

Shape = tuple[int, ...]


@dataclass
class LayerRow:
    """One module call: ``depth`` is its nesting (0 for the model itself)."""

    name: str  # the dotted name ("" for the model), as in named_modules()
    kind: str  # the class name
    depth: int
    output_shapes: list[Shape] = field(default_factory=list)
    output_bytes: int = 0
    trainable: int = 0  # scalars in this module's parameters (and its sub-modules')
    non_trainable: int = 0
    leaf: bool = True  # a module without sub-modules


@dataclass
class ModelSummary:
    """What `summary` found; ``str()`` is the printed table.

    Parameter counts count a parameter shared by several modules once.
    ``activation_bytes`` is the sum of the bytes of the outputs of every call of a
    leaf module (one without sub-modules) at the given input shapes; a container's
    output is its last layer's, so it is not counted again. Values made inside a
    layer (attention scores, for example), the inputs and gradients are not counted.

    ``forward_memory`` is the planned memory of running the traced forward pass
    ([`MemoryPlan`][asgrad.tensor.MemoryPlan]: every value, each freed at its last
    use); ``step_memory``, given a compiled training step, that step's (its
    ``memory()``: parameters, optimizer state, activations kept for the backward,
    temporaries).
    """

    rows: list[LayerRow]
    input_shapes: list[Shape]
    trainable_params: int
    non_trainable_params: int
    param_bytes: int
    buffer_bytes: int
    input_bytes: int
    activation_bytes: int
    depth: int
    forward_memory: MemoryPlan | None = None
    step_memory: MemoryPlan | None = None

    @property
    def total_params(self) -> int:
        """Every parameter scalar, trainable or not."""
        return self.trainable_params + self.non_trainable_params

    def __str__(self) -> str:
        shown = [r for r in self.rows if r.depth <= self.depth]
        table = [("Layer (type)", "Output shape", "Trainable", "Non-trainable")]
        for r in shown:
            label = f"{r.name}: {r.kind}" if r.name else r.kind
            shapes = ", ".join(str(list(s)) for s in r.output_shapes) or "-"
            table.append(
                ("  " * r.depth + label, shapes, f"{r.trainable:,}", f"{r.non_trainable:,}")
            )
        widths = [max(len(row[i]) for row in table) for i in range(4)]

        def line(row: tuple[str, ...]) -> str:
            cells = [row[0].ljust(widths[0]), row[1].ljust(widths[1])]
            cells += [row[i].rjust(widths[i]) for i in (2, 3)]
            return "  ".join(cells).rstrip()

        rule = "=" * len(line(table[0]))
        leaves = sum(1 for r in self.rows if r.leaf)
        out = [rule, line(table[0]), rule, *(line(row) for row in table[1:]), rule]
        out += [
            f"Parameters: {self.total_params:,} (trainable {self.trainable_params:,},"
            f" non-trainable {self.non_trainable_params:,})",
            f"Parameter memory: {_bytes(self.param_bytes)}",
            f"Buffer memory: {_bytes(self.buffer_bytes)}",
            f"Input memory: {_bytes(self.input_bytes)}",
            f"Activation memory: {_bytes(self.activation_bytes)}"
            f" (outputs of the {leaves} leaf-layer call(s) at these input shapes)",
        ]
        if self.forward_memory is not None:
            out.append(f"Planned forward peak: {_bytes(self.forward_memory.peak)}")
        if self.step_memory is not None:
            plan = self.step_memory
            out.append(
                f"Planned step peak: {_bytes(plan.peak)}:"
                f" parameters {format_bytes(plan.parameters)},"
                f" optimizer state {format_bytes(plan.state)}, inputs {format_bytes(plan.inputs)},"
                f" activations kept for the backward {format_bytes(plan.activations)},"
                f" temporaries {format_bytes(plan.temporaries)}"
            )
        out.append(rule)
        return "\n".join(out)


def summary(
    model: Module,
    input_shapes: Shape | Sequence[int] | Sequence[Sequence[int]],
    dtypes: str | Sequence[str] | None = None,
    *,
    depth: int = 3,
    file: TextIO | None = None,
    verbose: bool = True,
    step: Program | None = None,
) -> ModelSummary:
    """Trace ``model`` on inputs of ``input_shapes`` and print its layers and sizes.

    ``input_shapes`` is one shape (``(64, 3, 28, 28)``) or a list of shapes, one per
    positional input; ``dtypes`` one dtype for all inputs or one per input (default
    float32). Rows nested deeper than ``depth`` are hidden but still counted. The
    table goes to ``file`` (default stdout) unless ``verbose=False``; the returned
    `ModelSummary` holds the numbers. The planned peak of the forward pass is shown,
    and given ``step`` (a compiled training step, such as ``optimizer.compile(loss)``)
    the step's planned peak by category.

    >>> from asgrad import nn
    >>> s = summary(nn.Linear(3, 4), (2, 3), verbose=False)
    >>> s.total_params, s.rows[0].output_shapes
    (16, [(2, 4)])
    """
    shapes = _shapes(input_shapes)
    kinds = _dtypes(dtypes, len(shapes))
    graph = Graph("summary")
    inputs = [
        graph.input(f"input{i}", s, d, free=())
        for i, (s, d) in enumerate(zip(shapes, kinds, strict=True))
    ]
    names: dict[int, str] = {}
    for name, module in model.named_modules():
        names.setdefault(id(module), name)
    rows: list[LayerRow] = []
    stack: list[LayerRow] = []

    def record(module: Module, run: Callable[[], Any]) -> Any:
        row = LayerRow(names.get(id(module), "?"), type(module).__name__, len(stack))
        row.leaf = not module.children()
        row.trainable, row.non_trainable = _counts(module)
        rows.append(row)
        stack.append(row)
        try:
            outputs = run()
        finally:
            stack.pop()
        tensors = [t for t in _tensors(outputs) if t.graph is graph]
        row.output_shapes = [tuple(t.shape) for t in tensors]
        row.output_bytes = sum(_nbytes(t.shape, t.dtype) for t in tensors)
        return outputs

    with call_hook(record):
        outputs = [t for t in _tensors(model(*inputs)) if t.graph is graph]
    trainable, frozen = _counts(model)
    result = ModelSummary(
        rows=rows,
        input_shapes=shapes,
        trainable_params=trainable,
        non_trainable_params=frozen,
        param_bytes=sum(_nbytes(p.shape, p.dtype) for p in _unique(model.parameters())),
        buffer_bytes=sum(
            _nbytes(b.shape, b.dtype) for b in _unique(b for _, b in model.named_buffers())
        ),
        input_bytes=sum(_nbytes(t.shape, t.dtype) for t in inputs),
        activation_bytes=sum(r.output_bytes for r in rows if r.leaf),
        depth=depth,
        forward_memory=make_schedule(outputs).memory() if outputs else None,
        step_memory=step.memory() if step is not None else None,
    )
    if verbose:
        print(result, file=file if file is not None else sys.stdout)
    return result


def _shapes(given: Any) -> list[Shape]:
    try:
        items = list(given)
        if all(isinstance(d, int | np.integer) for d in items):
            return [tuple(int(d) for d in items)]
        return [tuple(int(d) for d in s) for s in items]
    except (TypeError, ValueError):
        raise ArgumentError(
            f"summary: input_shapes must be a shape like (64, 3, 28, 28) or a list of shapes,"
            f" one per model input; got {given!r}"
        ) from None


def _dtypes(given: str | Sequence[str] | None, n: int) -> list[str]:
    if given is None or isinstance(given, str):
        return [given or "float32"] * n
    kinds = list(given)
    if len(kinds) != n:
        raise ArgumentError(
            f"summary: {len(kinds)} dtypes for {n} input shapes; give one dtype per input,"
            " or one string for all"
        )
    return kinds


def _unique(items: Any) -> list[Any]:
    seen: dict[int, Any] = {}
    for item in items:
        seen.setdefault(id(item), item)
    return list(seen.values())


def _counts(module: Module) -> tuple[int, int]:
    """Trainable and non-trainable parameter scalars, each parameter once."""
    params = _unique(module.parameters())
    trainable = sum(int(np.prod(p.shape)) for p in params if p.trainable)
    frozen = sum(int(np.prod(p.shape)) for p in params if not p.trainable)
    return trainable, frozen


def _tensors(value: Any) -> Iterator[Tensor]:
    if isinstance(value, Tensor):
        yield value
    elif isinstance(value, list | tuple):
        for item in value:
            yield from _tensors(item)
    elif isinstance(value, dict):
        for item in value.values():
            yield from _tensors(item)


def _nbytes(shape: Shape, dtype: str) -> int:
    return int(np.prod(shape, dtype=np.int64)) * np.dtype(dtype).itemsize


def _bytes(n: int) -> str:
    for unit, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= size:
            return f"{n:,} B ({n / size:.2f} {unit})"
    return f"{n:,} B"
