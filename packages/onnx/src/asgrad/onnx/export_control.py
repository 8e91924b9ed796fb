"""How asgrad's ``scan`` is written in ONNX: one ``Scan`` node with the loop body as
its ``body`` graph.

The body's inputs are the carries and one step of each scanned input; the values the
body captures from the enclosing graph (weights) are read from the enclosing ONNX
graph by name, as ONNX subgraphs may. ``reverse=True`` scans the inputs and stacks
the outputs in reverse, so that output ``t`` belongs to step ``t`` as in asgrad.
``scan_part`` picks the Scan node's output of its part. A scan without scanned
inputs (``length=`` alone) and the per-step carries kept for the gradient are not
exported.
"""

from __future__ import annotations

from collections.abc import Callable

from onnx import helper

from asgrad.onnx.builder import DTYPE_TO_ONNX, OnnxBuilder
from asgrad.onnx.errors import OnnxExportError
from asgrad.tensor import Node, topological_order

__all__ = ["export_scan", "export_scan_part"]

ExportNode = Callable[[OnnxBuilder, Node, list[str]], str]


def export_scan(b: OnnxBuilder, node: Node, xs: list[str], export_node: ExportNode) -> str:
    """Append the ``Scan`` node of ``node``; its output names are kept in ``b.parts``."""
    body = node.attrs["loop"]
    n_carry, n_x, n_y = body.n_carry, body.n_x, body.n_y
    if n_x == 0:
        raise OnnxExportError(
            "a scan without scanned inputs (length= alone) has no ONNX Scan form; scan over"
            " an index (e.g. arange) instead"
        )
    sub = b.nested()
    values: dict[int, str] = {}
    graph_inputs = []
    for i, inp in enumerate(body.inputs):
        if i >= n_carry + n_x:  # a capture: the enclosing graph's value, by name
            values[inp.id] = xs[i]
            continue
        name = sub.fresh(f"{inp.name}_in")
        values[inp.id] = name
        graph_inputs.append(helper.make_tensor_value_info(name, DTYPE_TO_ONNX[inp.dtype], None))
    for n in topological_order(body.outputs):
        if n.id in values:
            continue
        sub.node = n
        if n.op == "constant":
            values[n.id] = sub.const(n.attrs["value"], n.dtype, n.name)
        elif n.op in ("input", "parameter"):
            raise OnnxExportError(f"the loop body reads {n.op} {n.name!r}, which it does not own")
        else:
            values[n.id] = export_node(sub, n, [values[i.id] for i in n.inputs])
    sub.node = None
    graph_outputs = []
    for i, out in enumerate(body.outputs):
        name = sub.op("Identity", [values[out.id]], out=sub.fresh(f"{body.name}_out{i}"))
        graph_outputs.append(helper.make_tensor_value_info(name, DTYPE_TO_ONNX[out.dtype], None))
    graph = helper.make_graph(sub.nodes, b.fresh(f"{body.name}_body"), graph_inputs, graph_outputs)
    b.node = node
    reverse = bool(node.attrs.get("reverse", False))
    outputs = b.ops(
        "Scan",
        xs[: n_carry + n_x],
        n_carry + n_y,
        body=graph,
        num_scan_inputs=n_x,
        scan_input_directions=[int(reverse)] * n_x,
        scan_output_directions=[int(reverse)] * n_y,
    )
    b.parts[node.id] = outputs
    return outputs[0]


def export_scan_part(b: OnnxBuilder, node: Node, xs: list[str]) -> str:
    """The ``Scan`` output of this part: a final carry or a stacked per-step output."""
    scan = node.inputs[0]
    part = int(node.attrs["part"])
    if scan.op != "scan":
        raise OnnxExportError(
            f"scan_part reads a packed scan result made by {scan.op!r}, not by a scan of this"
            " graph; only the parts of a scan node have an ONNX form"
        )
    outputs = b.parts.get(scan.id, [])
    if part >= len(outputs):
        raise OnnxExportError(
            "the carries each step started from (kept for the gradient) have no ONNX form;"
            " export the forward graph"
        )
    return b.op("Identity", [outputs[part]])
