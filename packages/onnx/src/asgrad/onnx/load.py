"""``load``: an ONNX model as asgrad variables and a graph that can be trained.

Each floating-point initializer becomes a trainable [`Variable`][asgrad.tensor.Variable]
(batch norm's running statistics are not trainable); integer initializers and
``Constant`` nodes stay constants. An input dimension without a fixed size (a
``dim_param`` such as ``batch``) becomes a free axis of the asgrad input. Shape
computations (``Shape``, ``Gather``, ``Concat``... on constants) are folded while the
graph is built, as asgrad shapes are static; an entry taken from a value's leading
axis stays ``-1`` in a ``Reshape``, so the batch stays dynamic.

The ops the model uses are checked before anything is built: every unsupported one
is reported at once, by name and count
([`UnsupportedOnnxOpsError`][asgrad.onnx.UnsupportedOnnxOpsError]).
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import onnx
from onnx import numpy_helper

from asgrad.onnx.builder import ONNX_TO_DTYPE
from asgrad.onnx.errors import OnnxImportError, UnsupportedOnnxOpsError
from asgrad.onnx.import_ops import IMPORTERS, ImportContext, Static, Value
from asgrad.tensor import Graph, Tensor, Variable

__all__ = ["IMPORTERS", "InputSpec", "OnnxModel", "load"]

_DEFAULT_DOMAINS = ("", "ai.onnx")
# Initializers read as running statistics: loaded as variables that are not trained.
_STATISTICS = {"BatchNormalization": (3, 4)}


@dataclass(frozen=True)
class InputSpec:
    """One input of the model: its declared shape (free axes at their declared size)."""

    name: str
    shape: tuple[int, ...]
    dtype: str
    free: tuple[int, ...]


class OnnxModel:
    """An ONNX model loaded as asgrad variables, traced into a graph.

    ``graph``, ``inputs`` and ``outputs`` are the graph built at load time;
    calling the model (``model(x=tensor)``) traces it again into the graph of the
    given tensors, sharing the same variables, as a [`asgrad.nn.Module`][asgrad.nn.Module] does.
    ``variables`` maps initializer names to variables;
    [`parameters`][asgrad.onnx.OnnxModel.parameters] lists the trainable ones, for an optimizer.
    """

    def __init__(self, proto: onnx.ModelProto, dims: Mapping[str, int]) -> None:
        self.proto = proto
        graph = proto.graph
        self.opset = next(
            (o.version for o in proto.opset_import if o.domain in _DEFAULT_DOMAINS), 1
        )
        _check_ops(graph)
        frozen = {
            node.input[i]
            for node in graph.node
            for i in _STATISTICS.get(node.op_type, ())
            if i < len(node.input)
        }
        self.variables: dict[str, Variable] = {}
        self.constants: dict[str, np.ndarray] = {}
        for init in graph.initializer:
            array = numpy_helper.to_array(init)
            if array.dtype.kind == "f":
                self.variables[init.name] = Variable(
                    init.name, np.array(array), trainable=init.name not in frozen
                )
            else:
                self.constants[init.name] = _supported_array(array, init.name)
        taken = set(self.variables) | set(self.constants)
        self.input_specs = [_input_spec(v, dims) for v in graph.input if v.name not in taken]
        self.output_names = [v.name for v in graph.output]
        self.graph = Graph(graph.name or "onnx")
        self.inputs: dict[str, Tensor] = {
            s.name: self.graph.input(s.name, s.shape, s.dtype, free=s.free)
            for s in self.input_specs
        }
        self.outputs: dict[str, Tensor] = self(**self.inputs)

    def parameters(self) -> list[Variable]:
        """The trainable variables (floating-point initializers), in file order."""
        return [v for v in self.variables.values() if v.trainable]

    def __call__(self, **inputs: Tensor) -> dict[str, Tensor]:
        """Trace the model into the graph of ``inputs`` (one tensor per model input)."""
        missing = [s.name for s in self.input_specs if s.name not in inputs]
        extra = sorted(set(inputs) - {s.name for s in self.input_specs})
        if missing or extra or not inputs:
            raise OnnxImportError(
                f"the model's inputs are {[s.name for s in self.input_specs]}; got"
                f" {sorted(inputs)} (missing {missing}, unknown {extra})"
            )
        graph = next(iter(inputs.values())).graph
        ctx = ImportContext(graph, self.opset)
        env: dict[str, Value] = {"": Static(np.zeros(0))}  # "" marks an omitted input
        env.update(inputs)
        for name, variable in self.variables.items():
            env[name] = graph.bind(variable)
        for name, array in self.constants.items():
            env[name] = Static(array)
        for node in self.proto.graph.node:
            args = [env[n] if n in env else _undefined(n, node) for n in node.input]
            first = len(graph.nodes)
            try:
                results = IMPORTERS[node.op_type](ctx, node, args)
            except OnnxImportError as exc:
                raise OnnxImportError(
                    f"ONNX node {node.name or node.op_type!r} ({node.op_type}): {exc}"
                ) from None
            for made in graph.nodes[first:]:  # errors name the ONNX node, not this file
                made.location = f"ONNX node {node.name or node.op_type!r} ({node.op_type})"
            for out, value in zip(node.output, results, strict=False):
                if out:
                    env[out] = value
        return {name: ctx.tensor(env[name]) for name in self.output_names}

    def __repr__(self) -> str:
        ins = ", ".join(f"{s.name}: {s.dtype}{list(s.shape)}" for s in self.input_specs)
        return f"<OnnxModel ({ins}) -> {self.output_names}, {len(self.variables)} variables>"


def load(
    path: str | os.PathLike[str] | onnx.ModelProto, *, dims: Mapping[str, int] | None = None
) -> OnnxModel:
    """Read the ONNX model at ``path`` (or a ``ModelProto``) as an
    [`OnnxModel`][asgrad.onnx.OnnxModel].

    ``dims`` gives the declared size of each symbolic dimension (``{"batch": 32}``;
    default 1): asgrad infers every shape from declared sizes, and a free axis may
    be fed at any size.

    Raises [`UnsupportedOnnxOpsError`][asgrad.onnx.UnsupportedOnnxOpsError] listing every op type it
    cannot build, and [`OnnxImportError`][asgrad.onnx.OnnxImportError] for a model it cannot read.
    """
    if isinstance(path, onnx.ModelProto):
        proto = path
    else:
        try:
            proto = onnx.load_model(os.fspath(path))
        except (OSError, onnx.onnx_cpp2py_export.checker.ValidationError, ValueError) as exc:
            raise OnnxImportError(f"cannot read ONNX model {os.fspath(path)!r}: {exc}") from None
        except Exception as exc:  # protobuf's DecodeError: not an ONNX file
            raise OnnxImportError(
                f"cannot read ONNX model {os.fspath(path)!r} ({type(exc).__name__}: {exc});"
                " is it an .onnx file?"
            ) from None
    return OnnxModel(proto, dims or {})


def _check_ops(graph: onnx.GraphProto) -> None:
    unsupported: Counter[str] = Counter()
    for node in graph.node:
        if node.domain not in _DEFAULT_DOMAINS:
            unsupported[f"{node.domain}:{node.op_type}"] += 1
        elif node.op_type not in IMPORTERS:
            unsupported[node.op_type] += 1
    if unsupported:
        raise UnsupportedOnnxOpsError(unsupported)


def _supported_array(array: np.ndarray, name: str) -> np.ndarray:
    if array.dtype.name not in ONNX_TO_DTYPE.values():
        raise OnnxImportError(
            f"initializer {name!r} has dtype {array.dtype}; asgrad supports"
            f" {sorted(ONNX_TO_DTYPE.values())}"
        )
    return array


def _input_spec(info: onnx.ValueInfoProto, dims: Mapping[str, int]) -> InputSpec:
    t = info.type.tensor_type
    if not info.type.HasField("tensor_type") or t.elem_type not in ONNX_TO_DTYPE:
        raise OnnxImportError(
            f"input {info.name!r} is not a tensor of {sorted(ONNX_TO_DTYPE.values())}"
        )
    if not t.HasField("shape"):
        raise OnnxImportError(f"input {info.name!r} has no shape; asgrad needs its rank")
    shape: list[int] = []
    free: list[int] = []
    for axis, d in enumerate(t.shape.dim):
        if d.HasField("dim_value"):
            shape.append(int(d.dim_value))
        else:
            free.append(axis)
            shape.append(int(dims.get(d.dim_param, 1)))
    return InputSpec(info.name, tuple(shape), ONNX_TO_DTYPE[t.elem_type], tuple(free))


def _undefined(name: str, node: onnx.NodeProto) -> Value:
    raise OnnxImportError(
        f"node {node.name or node.op_type!r} reads {name!r}, which no earlier node,"
        " input or initializer defines (are the nodes in topological order?)"
    )
