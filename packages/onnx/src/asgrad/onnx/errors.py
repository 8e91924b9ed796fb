"""The errors of ``asgrad.onnx``: each says what cannot be exchanged and what to do."""

from __future__ import annotations

from collections.abc import Mapping

from asgrad.tensor.errors import AsgradError

__all__ = ["OnnxError", "OnnxExportError", "OnnxImportError", "UnsupportedOnnxOpsError"]


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

    >>> from asgrad.onnx import OnnxImportError
    >>> [c.__name__ for c in OnnxImportError.__bases__]
    ['OnnxError']
    """


class UnsupportedOnnxOpsError(OnnxImportError):
    """An ONNX model uses ops that `asgrad.onnx.load` cannot build.

    ``ops`` maps each unsupported ``domain:op_type`` (``op_type`` alone for the default
    domain) to how many nodes use it; all of them are listed at once.

    >>> from asgrad.onnx import UnsupportedOnnxOpsError
    >>> [c.__name__ for c in UnsupportedOnnxOpsError.__bases__]
    ['OnnxImportError']
    """

    def __init__(self, ops: Mapping[str, int]) -> None:
        self.ops = dict(sorted(ops.items()))
        listed = ", ".join(f"{name} x{count}" for name, count in self.ops.items())
        super().__init__(
            f"the model uses {len(self.ops)} ONNX op type(s) that asgrad cannot import:"
            f" {listed}; see asgrad.onnx.IMPORTERS for the supported ones, or rewrite"
            " those nodes (e.g. export the model again with a lower opset)"
        )
