"""``export``: an asgrad graph's forward computation as an ONNX model file.

Inputs become graph inputs (their free axes symbolic dimensions: ``batch`` for a
leading axis, ``<input>_dim<k>`` for another), parameters become initializers under
their names, constants ``Constant`` nodes, and every other node is written by its
exporter ([`EXPORTERS`][asgrad.onnx.EXPORTERS]). Each ONNX node's doc string names the asgrad op and
the source line that built it. The model passes ``onnx.checker`` before it is written.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

import numpy as np
import onnx
from onnx import helper, numpy_helper

from asgrad.onnx.builder import DTYPE_TO_ONNX, OnnxBuilder
from asgrad.onnx.errors import OnnxExportError
from asgrad.onnx.export_control import export_scan, export_scan_part
from asgrad.onnx.export_index import INDEX_EXPORTERS
from asgrad.onnx.export_math import MATH_EXPORTERS
from asgrad.onnx.export_nn import NN_EXPORTERS, NOT_EXPORTED
from asgrad.onnx.export_ops import BASIC_EXPORTERS, Exporter
from asgrad.tensor import Node, Tensor, topological_order

__all__ = ["ATTRIBUTES", "DEFAULT_OPSET", "EXPORTERS", "MIN_OPSET", "export", "to_model"]


def _scan(b: OnnxBuilder, node: Node, xs: list[str]) -> str:
    return export_scan(b, node, xs, _export_node)


EXPORTERS: dict[str, Exporter] = {
    **BASIC_EXPORTERS,
    **NN_EXPORTERS,
    **MATH_EXPORTERS,
    **INDEX_EXPORTERS,
    "scan": _scan,
    "scan_part": export_scan_part,
}
"""The asgrad ops [`export`][asgrad.onnx.export.export] can write, by name (leaves aside).

>>> from asgrad.onnx import EXPORTERS
>>> "matmul" in EXPORTERS
True
"""

# The attributes each exporter reads. A node with another attribute (an op that grew
# an option after its exporter was written) is refused rather than exported wrongly.
_REDUCE = frozenset({"axis", "keepdims"})
_CONV = frozenset({"stride", "padding", "dilation", "groups"})
_POOL = frozenset({"kernel_size", "stride", "padding"})
ATTRIBUTES: dict[str, frozenset[str]] = {
    **dict.fromkeys(
        ("sum", "mean", "max", "min", "argmax", "argmin", "prod", "logsumexp", "all", "any"),
        _REDUCE,
    ),
    **dict.fromkeys(("sort", "argsort"), frozenset({"axis", "descending", "stable"})),
    "cumsum": frozenset({"axis", "reverse"}),
    "round": frozenset({"decimals"}),
    "nan_to_num": frozenset({"nan", "posinf", "neginf"}),
    **dict.fromkeys(("take_along_axis", "scatter_add_along"), frozenset({"axis"})),
    "scatter_reduce": frozenset({"axis", "reduce", "include_self"}),
    "scan": frozenset({"loop", "length", "save", "reverse"}),
    "scan_part": frozenset({"loop", "length", "save", "reverse", "part"}),
    "var": _REDUCE | {"correction"},  # refused unless 0 (the exporter says so)
    **dict.fromkeys(("softmax", "log_softmax", "concat", "gather"), frozenset({"axis"})),
    **dict.fromkeys(("expand_dims", "squeeze"), frozenset({"axis"})),
    **dict.fromkeys(("reshape", "broadcast_to"), frozenset({"shape"})),
    **dict.fromkeys(("elu", "leaky_relu"), frozenset({"alpha"})),
    "adam_ema": frozenset({"beta", "square"}),
    "adam_update": frozenset({"eps"}),
    "adaptive_avg_pool2d": frozenset({"output_size"}),
    "avg_pool2d": _POOL | {"count_include_pad"},
    "max_pool2d": _POOL,
    "batch_norm": frozenset({"eps"}),
    "layer_norm": frozenset({"eps", "normalized_shape"}),
    "cast": frozenset({"dtype"}),
    "clamp": frozenset({"min", "max"}),
    "conv2d": _CONV,
    "conv_transpose2d": _CONV | {"output_padding"},
    "dropout": frozenset({"p"}),
    "gelu": frozenset({"approximate"}),
    "one_hot": frozenset({"depth", "dtype"}),
    "slice": frozenset({"index"}),
    "softplus": frozenset({"beta"}),
    "transpose": frozenset({"axes"}),
}
"""Attributes read by the exporters, by op (ops absent here take none)."""

MIN_OPSET = 17  # LayerNormalization
"""The oldest ONNX opset the exporter writes (17: the first with LayerNormalization).

>>> from asgrad.onnx import MIN_OPSET
>>> MIN_OPSET
17
"""
DEFAULT_OPSET = 17
"""The ONNX opset that ``asgrad.onnx.export(...)`` writes unless told otherwise.

>>> from asgrad.onnx import DEFAULT_OPSET, MIN_OPSET
>>> DEFAULT_OPSET >= MIN_OPSET
True
"""
LEAVES = ("input", "parameter", "constant")

Outputs = Tensor | Sequence[Tensor] | Mapping[str, Tensor]


def export(
    outputs: Outputs,
    path: str | os.PathLike[str],
    *,
    inputs: Sequence[Tensor | str] | None = None,
    opset: int = DEFAULT_OPSET,
    name: str | None = None,
) -> onnx.ModelProto:
    """Write the computation of ``outputs`` to the ONNX file ``path``; returns the model.

    ``outputs`` is a tensor, a sequence of tensors (named ``output``, ``output_1``...)
    or a mapping of output names to tensors. ``inputs`` orders the graph's inputs (by
    tensor or name; default: every input the outputs read, in the order they were
    declared); an input the outputs need but ``inputs`` leaves out is an error.
    Parameters are stored as initializers under their names; a parameter listed in
    ``inputs`` becomes an input instead. ``opset`` is the ONNX opset (17 or newer).

    Raises [`OnnxExportError`][asgrad.onnx.OnnxExportError] for an op that has no ONNX form,
    naming it and the line that built it.

    >>> import numpy as np, tempfile, os
    >>> from asgrad.tensor import Graph
    >>> g = Graph()
    >>> x = g.input("x", (4, 3))
    >>> w = g.parameter("w", (3, 2), init=np.ones((3, 2), np.float32))
    >>> path = os.path.join(tempfile.mkdtemp(), "model.onnx")
    >>> model = export({"y": (x @ w).relu()}, path)
    >>> [i.name for i in model.graph.input], [i.name for i in model.graph.initializer]
    (['x'], ['w'])
    """
    model = to_model(outputs, inputs=inputs, opset=opset, name=name)
    onnx.save_model(model, os.fspath(path))
    return model


def to_model(
    outputs: Outputs,
    *,
    inputs: Sequence[Tensor | str] | None = None,
    opset: int = DEFAULT_OPSET,
    name: str | None = None,
    check: bool = True,
) -> onnx.ModelProto:
    """The ONNX model `export` writes, without writing it; ``check=False`` skips
    ``onnx.checker`` (and the outputs' inferred shapes).

    >>> from asgrad.onnx import to_model
    >>> from asgrad.tensor import Graph
    >>> x = Graph().input("x", (2, 3))
    >>> [node.op_type for node in to_model({"y": x.tanh()}).graph.node]
    ['Tanh', 'Identity']
    """
    named = _named_outputs(outputs)
    newest = onnx.defs.onnx_opset_version()
    if isinstance(opset, bool) or not MIN_OPSET <= opset <= newest:
        raise OnnxExportError(
            f"opset {opset!r} is not supported; give an int from {MIN_OPSET} to {newest}"
        )
    order = topological_order([t.node for t in named.values()])
    unmapped = sorted({n.dtype for n in order} - set(DTYPE_TO_ONNX))
    if unmapped:
        raise OnnxExportError(
            f"export: values of dtype {', '.join(unmapped)} have no ONNX mapping in asgrad"
            " yet; cast them to float32 before exporting"
        )
    graph = next(iter(named.values())).graph
    chosen = _graph_inputs(order, inputs)
    b = OnnxBuilder(opset)
    values: dict[int, str] = {}
    graph_inputs: list[onnx.ValueInfoProto] = []
    initializers: list[onnx.TensorProto] = []
    for node in order:  # leaves first: their names are the user's and must not move
        if node.op in ("input", "parameter"):
            b.reserve(node.name)
            values[node.id] = node.name
    for node in chosen:
        graph_inputs.append(_input_info(node))
    for node in order:
        if node.op == "parameter" and node not in chosen:
            value = np.asarray(node.attrs["variable"].value)
            initializers.append(numpy_helper.from_array(value, name=node.name))
        elif node.op == "constant":
            b.node = node
            values[node.id] = b.const(node.attrs["value"], node.dtype, f"{node.name}")
        elif node.op not in ("input", "parameter"):
            values[node.id] = _export_node(b, node, [values[i.id] for i in node.inputs])
    b.node = None
    graph_outputs = []
    for out_name, tensor in named.items():
        if tensor.node.op == "scan":  # the packed result: its parts are the values
            raise OnnxExportError(
                f"output {out_name!r} is a scan's packed result, which has no ONNX form;"
                " export the carries and per-step outputs that scan() returns"
                f"\n  (at {tensor.node.location})",
                op="scan",
                location=tensor.node.location,
            )
        b.reserve(out_name)
        b.op("Identity", [values[tensor.node.id]], out=out_name)
        graph_outputs.append(
            helper.make_tensor_value_info(out_name, DTYPE_TO_ONNX[tensor.dtype], None)
        )
    onnx_graph = helper.make_graph(
        b.nodes, name or graph.name, graph_inputs, graph_outputs, initializer=initializers
    )
    opsets = [helper.make_opsetid("", opset)]
    model = helper.make_model(
        onnx_graph,
        opset_imports=opsets,
        producer_name="asgrad",
        producer_version=_producer_version(),
        ir_version=helper.find_min_ir_version_for(opsets),
    )
    if check:
        model = _with_output_shapes(model)
        onnx.checker.check_model(model, full_check=True)
    return model


def _named_outputs(outputs: Outputs) -> dict[str, Tensor]:
    if isinstance(outputs, Tensor):
        named = {"output": outputs}
    elif isinstance(outputs, Mapping):
        named = dict(outputs)
    else:
        items = list(outputs)
        named = {("output" if i == 0 else f"output_{i}"): t for i, t in enumerate(items)}
    if not named:
        raise OnnxExportError("export: give at least one output tensor")
    for key, t in named.items():
        if not key:
            raise OnnxExportError(f"export: output names must be non-empty strings, got {key!r}")
        if not isinstance(t, Tensor):
            raise OnnxExportError(
                f"export: output {key!r} is a {type(t).__name__}, not an asgrad Tensor"
            )
    graphs = {id(t.graph) for t in named.values()}
    if len(graphs) > 1:
        raise OnnxExportError("export: every output must belong to one graph")
    return named


def _graph_inputs(order: list[Node], inputs: Sequence[Tensor | str] | None) -> list[Node]:
    needed = [n for n in order if n.op == "input"]
    if inputs is None:
        return sorted(needed, key=lambda n: n.id)
    by_name = {n.name: n for n in order if n.op in ("input", "parameter")}
    chosen: list[Node] = []
    for item in inputs:
        key = item.node.name if isinstance(item, Tensor) else item
        if key not in by_name:
            raise OnnxExportError(
                f"export: inputs names {key!r}, which the outputs do not read;"
                f" they read {sorted(by_name)}"
            )
        chosen.append(by_name[key])
    missing = [n.name for n in needed if n not in chosen]
    if missing:
        raise OnnxExportError(
            f"export: the outputs read the input(s) {missing}, which inputs= leaves out;"
            " list every input (or leave inputs= out)"
        )
    return chosen


def _input_info(node: Node) -> onnx.ValueInfoProto:
    free = node.attrs["free"] if node.op == "input" else ()
    dims: list[int | str] = [
        ("batch" if axis == 0 else f"{node.name}_dim{axis}") if axis in free else size
        for axis, size in enumerate(node.shape)
    ]
    return helper.make_tensor_value_info(node.name, DTYPE_TO_ONNX[node.dtype], dims)


def _export_node(b: OnnxBuilder, node: Node, inputs: list[str]) -> str:
    exporter = EXPORTERS.get(node.op)
    if exporter is None:
        reason = NOT_EXPORTED.get(node.op, "asgrad.onnx has no exporter for it yet")
        raise OnnxExportError(
            f"op {node.op!r} cannot be exported to ONNX ({reason})\n  (at {node.location})",
            op=node.op,
            location=node.location,
        )
    unknown = sorted(set(node.attrs) - ATTRIBUTES.get(node.op, frozenset()))
    if unknown:
        raise OnnxExportError(
            f"op {node.op!r} has attribute(s) {unknown} that its ONNX exporter does not"
            f" know; update asgrad-onnx or leave them at their defaults\n  (at {node.location})",
            op=node.op,
            location=node.location,
        )
    b.node = node
    try:
        return exporter(b, node, inputs)
    except OnnxExportError as exc:
        raise OnnxExportError(
            f"op {node.op!r} cannot be exported to ONNX: {exc}\n  (at {node.location})",
            op=node.op,
            location=node.location,
        ) from None


def _with_output_shapes(model: onnx.ModelProto) -> onnx.ModelProto:
    """``model`` with its outputs' shapes filled in by ONNX shape inference (symbolic
    dimensions where the batch flows through)."""
    inferred = onnx.shape_inference.infer_shapes(model)
    # An output may be an input itself (an op that expands into its input: flip over
    # no axes, einsum "ij"), whose shape is on the graph's input, not in value_info.
    known = {v.name: v for v in [*inferred.graph.input, *inferred.graph.value_info]}
    for out in model.graph.output:
        source = next(n.input[0] for n in model.graph.node if n.output[0] == out.name)
        info = known.get(source)
        if info is not None and info.type.tensor_type.HasField("shape"):
            out.type.tensor_type.shape.CopyFrom(info.type.tensor_type.shape)
    return model


def _producer_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("asgrad-onnx")
    except PackageNotFoundError:  # run from a source tree that is not installed
        return "unknown"
