"""The errors of ``asgrad.onnx``: each says what cannot be exchanged and what to do."""

from __future__ import annotations

from collections.abc import Mapping

from asgrad.tensor.errors import AsgradError

__all__ = [
    "OnnxConstantRequiredError",
    "OnnxError",
    "OnnxExportError",
    "OnnxImportError",
    "UnsupportedOnnxOpsError",
]


class OnnxError(AsgradError):
    """Base class of the errors of ``asgrad.onnx``.

    >>> from asgrad.onnx import OnnxError
    >>> [c.__name__ for c in OnnxError.__bases__]
    ['AsgradError']
    """


class OnnxExportError(OnnxError):
    """A graph cannot be written as ONNX: an op without an ONNX form, a bad argument.

    ``op`` names the asgrad op (empty for an argument error) and ``location`` the
    source line that built it.

    >>> from asgrad.onnx import OnnxExportError
    >>> [c.__name__ for c in OnnxExportError.__bases__]
    ['OnnxError']
    """

    def __init__(self, message: str, *, op: str = "", location: str = "") -> None:
        super().__init__(message)
        self.op = op
        self.location = location


class OnnxImportError(OnnxError):
    """An ONNX model cannot become an asgrad graph (a bad file, an unsupported form).

    ``op_type`` and ``node`` name the ONNX op type and node that could not be built
    (empty for an error about the whole file).

    >>> import os, tempfile
    >>> from asgrad.onnx import OnnxImportError, load
    >>> path = os.path.join(tempfile.mkdtemp(), "bad.onnx")
    >>> with open(path, "wb") as f:
    ...     _ = f.write(b"not an ONNX model")
    >>> try:
    ...     load(path)
    ... except OnnxImportError as e:
    ...     print(type(e).__name__, "-", str(e).split(" (")[0])
    OnnxImportError - cannot read ONNX model ...
    """

    def __init__(self, message: str, *, op_type: str = "", node: str = "") -> None:
        super().__init__(message)
        self.op_type = op_type
        self.node = node

    def at_node(self, op_type: str, node: str) -> OnnxImportError:
        """This error, its message prefixed with the ONNX node it concerns."""
        if not self.op_type:
            self.op_type, self.node = op_type, node
            self.args = (f"ONNX node {node!r} ({op_type}): {self.args[0]}", *self.args[1:])
        return self


class OnnxConstantRequiredError(OnnxImportError):
    """A node needs a value at load time (axes, a shape, bounds) that the model
    computes from its inputs; ``inputs`` names the model inputs it comes from, whose
    values ``load(..., constants={name: array})`` takes.

    >>> from asgrad.onnx import OnnxConstantRequiredError
    >>> e = OnnxConstantRequiredError("Reshape needs its shape", inputs=("shape",))
    >>> e.inputs, isinstance(e, ImportError)
    (('shape',), False)
    """

    def __init__(self, message: str, *, inputs: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.inputs = inputs


class UnsupportedOnnxOpsError(OnnxImportError):
    """An ONNX model uses ops that `asgrad.onnx.load` cannot build.

    ``ops`` maps each unsupported ``domain:op_type`` (``op_type`` alone for the default
    domain) to how many nodes use it; all of them are listed at once.

    >>> from asgrad.onnx import UnsupportedOnnxOpsError
    >>> [c.__name__ for c in UnsupportedOnnxOpsError.__bases__]
    ['OnnxImportError']
    """

    def __init__(self, ops: Mapping[str, int], nodes: Mapping[str, str] | None = None) -> None:
        self.ops = dict(sorted(ops.items()))
        self.nodes = dict(nodes or {})  # op type -> the first node of that type
        listed = ", ".join(
            f"{name} x{count}"
            + (f" (first: node {self.nodes[name]!r})" if name in self.nodes else "")
            for name, count in self.ops.items()
        )
        first = next(iter(self.ops), "")
        super().__init__(
            f"the model uses {len(self.ops)} ONNX op type(s) that asgrad cannot import:"
            f" {listed}; see asgrad.onnx.IMPORTERS for the supported ones, or rewrite"
            " those nodes (e.g. export the model again with a lower opset)",
            op_type=first,
            node=self.nodes.get(first, ""),
        )
