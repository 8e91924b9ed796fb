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
from collections.abc import Collection, Iterator, Mapping, MutableMapping, Sequence
from dataclasses import dataclass

import numpy as np
import onnx
from numpy.typing import ArrayLike
from onnx import numpy_helper

from asgrad.onnx.builder import ONNX_TO_DTYPE
from asgrad.onnx.errors import OnnxImportError, UnsupportedOnnxOpsError
from asgrad.onnx.import_ml import DOMAIN_OPS
from asgrad.onnx.import_ops import IMPORTERS, ImportContext, Static, Value
from asgrad.tensor import AsgradError, Graph, Tensor, Variable

__all__ = ["IMPORTERS", "InputSpec", "OnnxModel", "load"]

_DEFAULT_DOMAINS = ("", "ai.onnx")
_FOREIGN = frozenset().union(*DOMAIN_OPS.values())  # imported from their domains only
# Initializers read as running statistics: loaded as variables that are not trained.
_STATISTICS = {"BatchNormalization": (3, 4)}
_FLOAT_TYPES = (onnx.TensorProto.FLOAT, onnx.TensorProto.DOUBLE)


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

    >>> from asgrad.onnx import load, to_model
    >>> from asgrad.tensor import Graph
    >>> x = Graph().input("x", (2, 3))
    >>> model = load(to_model({"y": x.tanh()}))
    >>> sorted(model.inputs), sorted(model.outputs)
    (['x'], ['y'])
    """

    def __init__(
        self,
        proto: onnx.ModelProto,
        dims: Mapping[str, int],
        constants: Mapping[str, ArrayLike] | None = None,
        trainable: bool | Collection[str] | None = None,
    ) -> None:
        self.proto = proto
        graph = proto.graph
        self.opset = next(
            (o.version for o in proto.opset_import if o.domain in _DEFAULT_DOMAINS), 1
        )
        _check_ops(graph)
        given = dict(constants or {})
        declared = {v.name for v in graph.input}
        unknown = sorted(set(given) - declared)
        if unknown:
            raise OnnxImportError(
                f"constants names {unknown}, which are not inputs of the model;"
                f" its inputs are {sorted(declared)}"
            )
        frozen = {
            node.input[i]
            for node in graph.node
            for i in _STATISTICS.get(node.op_type, ())
            if i < len(node.input)
        }
        floats = [i.name for i in graph.initializer if i.data_type in _FLOAT_TYPES]
        trained = _trained(trainable, floats, frozen)
        self.variables: dict[str, Variable] = {}
        self.constants: dict[str, np.ndarray] = {}
        for init in graph.initializer:
            try:  # external data outside the model's folder, dims beyond the data
                array = numpy_helper.to_array(init)
            except (OSError, onnx.onnx_cpp2py_export.checker.ValidationError, ValueError) as exc:
                raise OnnxImportError(
                    f"cannot read initializer {init.name!r} (dims {list(init.dims)}): {exc}"
                ) from None
            if array.dtype.kind == "f" and array.dtype.name in ONNX_TO_DTYPE.values():
                self.variables[init.name] = Variable(
                    init.name, np.array(array), trainable=init.name in trained
                )
            else:
                self.constants[init.name] = _supported_array(array, init.name, graph)
        for name, value in given.items():
            self.constants[name] = _supported_array(np.asarray(value), name, graph)
        taken = set(self.variables) | set(self.constants)
        self.input_specs = [_input_spec(v, dims, graph) for v in graph.input if v.name not in taken]
        self.output_names = [v.name for v in graph.output]
        self.graph = Graph(graph.name or "onnx")
        self.inputs: dict[str, Tensor] = {
            s.name: self.graph.input(s.name, s.shape, s.dtype, free=s.free)
            for s in self.input_specs
        }
        self.outputs: dict[str, Tensor] = self._trace(self.graph, self.inputs)

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
        return self._trace(next(iter(inputs.values())).graph, inputs)

    def _trace(self, graph: Graph, inputs: Mapping[str, Tensor]) -> dict[str, Tensor]:
        ctx = ImportContext(graph, self.opset, run_nodes)
        env: dict[str, Value] = {"": Static(np.zeros(0))}  # "" marks an omitted input
        env.update(inputs)
        for name, variable in self.variables.items():
            env[name] = graph.bind(variable)
        for name, array in self.constants.items():
            env[name] = Static(array)
        run_nodes(ctx, self.proto.graph.node, env)
        return {name: ctx.tensor(env[name]) for name in self.output_names}

    def __repr__(self) -> str:
        ins = ", ".join(f"{s.name}: {s.dtype}{list(s.shape)}" for s in self.input_specs)
        return f"<OnnxModel ({ins}) -> {self.output_names}, {len(self.variables)} variables>"


def load(
    path: str | os.PathLike[str] | onnx.ModelProto,
    *,
    dims: Mapping[str, int] | None = None,
    constants: Mapping[str, ArrayLike] | None = None,
    trainable: bool | Collection[str] | None = None,
) -> OnnxModel:
    """Read the ONNX model at ``path`` (or a ``ModelProto``) as an
    [`OnnxModel`][asgrad.onnx.OnnxModel].

    ``dims`` gives the declared size of each symbolic dimension (``{"batch": 32}``;
    default 1): asgrad infers every shape from declared sizes, and a free axis may
    be fed at any size.

    ``constants`` gives values to model inputs that must be known when the model is
    loaded (a ``Reshape``'s shape, a reduction's axes, ``Clip``'s bounds given as
    inputs): each named input becomes that constant and is no longer an input.

    ``trainable`` decides which floating-point initializers become trainable
    variables: ``None`` (the default) all but batch norm's running statistics,
    ``True`` all, ``False`` none, or a collection of initializer names (the others
    are loaded as variables that are not trained, an attention scale say).

    Raises [`UnsupportedOnnxOpsError`][asgrad.onnx.UnsupportedOnnxOpsError] listing every op type it
    cannot build, [`OnnxConstantRequiredError`][asgrad.onnx.OnnxConstantRequiredError] naming the
    inputs ``constants`` must give, and [`OnnxImportError`][asgrad.onnx.OnnxImportError] for a model
    it cannot read or a node it cannot build.

    >>> from asgrad.onnx import load, to_model
    >>> from asgrad.tensor import Graph, evaluate
    >>> x = Graph().input("x", (2, 3))
    >>> model = load(to_model({"y": x.tanh()}))  # a ModelProto; a path reads a file
    >>> evaluate(model.outputs["y"], {"x": [[0.0] * 3] * 2})[0].tolist()
    [[0.0, 0.0, 0.0], [0.0, 0.0, 0.0]]
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
    if isinstance(trainable, str):  # one name, not its letters
        trainable = (trainable,)
    unknown = (
        sorted(set(trainable) - {i.name for i in proto.graph.initializer})
        if isinstance(trainable, Collection)
        else []
    )
    if unknown:
        raise OnnxImportError(f"trainable names {unknown}, which are not initializers of the model")
    return OnnxModel(proto, dims or {}, constants, trainable)


def _trained(
    trainable: bool | Collection[str] | None, floats: list[str], frozen: set[str]
) -> set[str]:
    if trainable is None:
        return set(floats) - frozen
    if isinstance(trainable, bool):
        return set(floats) if trainable else set()
    return set(trainable)


def _all_nodes(graph: onnx.GraphProto) -> Iterator[onnx.NodeProto]:
    """The nodes of ``graph`` and of the graphs its nodes hold (loop bodies, branches)."""
    for node in graph.node:
        yield node
        for a in node.attribute:
            if a.type == onnx.AttributeProto.GRAPH:
                yield from _all_nodes(a.g)
            for sub in a.graphs:
                yield from _all_nodes(sub)


def _check_ops(graph: onnx.GraphProto) -> None:
    unsupported: Counter[str] = Counter()
    first: dict[str, str] = {}
    for node in _all_nodes(graph):
        if node.domain in DOMAIN_OPS and node.op_type in DOMAIN_OPS[node.domain]:
            continue
        if node.domain not in _DEFAULT_DOMAINS:
            key = f"{node.domain}:{node.op_type}"
        elif node.op_type not in IMPORTERS or node.op_type in _FOREIGN:
            key = node.op_type
        else:
            continue
        unsupported[key] += 1
        first.setdefault(key, node.name or node.op_type)
    if unsupported:
        raise UnsupportedOnnxOpsError(unsupported, first)


def _reader(graph: onnx.GraphProto, name: str) -> tuple[str, str]:
    """The op type and name of the first node that reads the value ``name`` (the
    graph input itself when no node reads it)."""
    for node in _all_nodes(graph):
        if name in node.input:
            return node.op_type, node.name or node.op_type
    return "input", name


def _supported_array(array: np.ndarray, name: str, graph: onnx.GraphProto) -> np.ndarray:
    if array.dtype.name not in ONNX_TO_DTYPE.values():
        op_type, node = _reader(graph, name)
        raise OnnxImportError(
            f"{name!r} (read by node {node!r}) has dtype {array.dtype}; asgrad supports"
            f" {sorted(ONNX_TO_DTYPE.values())}",
            op_type=op_type,
            node=node,
        )
    return array


def _input_spec(
    info: onnx.ValueInfoProto, dims: Mapping[str, int], graph: onnx.GraphProto
) -> InputSpec:
    t = info.type.tensor_type
    if not info.type.HasField("tensor_type") or t.elem_type not in ONNX_TO_DTYPE:
        op_type, node = _reader(graph, info.name)
        kind = (
            onnx.helper.tensor_dtype_to_np_dtype(t.elem_type).name
            if info.type.HasField("tensor_type") and t.elem_type
            else info.type.WhichOneof("value")
        )
        raise OnnxImportError(
            f"input {info.name!r} (read by node {node!r}) is a {kind}, not a tensor of"
            f" {sorted(ONNX_TO_DTYPE.values())}",
            op_type=op_type,
            node=node,
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


def run_nodes(
    ctx: ImportContext, nodes: Sequence[onnx.NodeProto], env: MutableMapping[str, Value]
) -> None:
    """Build ``nodes`` in order into ``ctx.graph``, reading and writing values in
    ``env`` (a loop body's env reads through to the enclosing graph's)."""
    graph = ctx.graph
    ctx.env = env
    for node in nodes:
        args = [env[n] if n in env else _undefined(n, node) for n in node.input]
        first = len(graph.nodes)
        try:
            results = IMPORTERS[node.op_type](ctx, node, args)
        except OnnxImportError as exc:
            raise exc.at_node(node.op_type, node.name or node.op_type) from None
        except AsgradError as exc:  # an asgrad op refused the node's form
            raise OnnxImportError(f"asgrad cannot build it: {exc}").at_node(
                node.op_type, node.name or node.op_type
            ) from exc
        for made in graph.nodes[first:]:  # errors name the ONNX node, not this file
            made.location = f"ONNX node {node.name or node.op_type!r} ({node.op_type})"
        for out, value in zip(node.output, results, strict=False):
            if out:
                env[out] = value


def _undefined(name: str, node: onnx.NodeProto) -> Value:
    raise OnnxImportError(
        f"node {node.name or node.op_type!r} reads {name!r}, which no earlier node,"
        " input or initializer defines (are the nodes in topological order?)"
    )
