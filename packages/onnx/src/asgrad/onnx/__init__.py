"""asgrad.onnx: ONNX export and import, proven by ONNX Runtime.

`export` writes an asgrad graph's forward computation as an ONNX model (the
parameters as initializers, the batch axis kept dynamic); `load` reads an ONNX
model back as an asgrad graph whose initializers are trainable variables.

>>> import numpy as np, tempfile, os
>>> from asgrad.tensor import Graph, evaluate
>>> from asgrad.onnx import export, load
>>> g = Graph()
>>> x = g.input("x", (2, 3))
>>> w = g.parameter("w", (3, 1), init=np.full((3, 1), 0.5, np.float32))
>>> path = os.path.join(tempfile.mkdtemp(), "tiny.onnx")
>>> _ = export({"y": (x @ w).tanh()}, path)
>>> model = load(path)
>>> feed = np.ones((5, 3), np.float32)  # a batch of 5: the batch axis is dynamic
>>> evaluate(model.outputs["y"], {"x": feed})[0].shape
(5, 1)
"""

from asgrad.onnx.coverage import OpCoverage, coverage
from asgrad.onnx.errors import (
    OnnxConstantRequiredError,
    OnnxError,
    OnnxExportError,
    OnnxImportError,
    UnsupportedOnnxOpsError,
)
from asgrad.onnx.export import DEFAULT_OPSET, EXPORTERS, MIN_OPSET, export, to_model
from asgrad.onnx.load import IMPORTERS, OnnxModel, load

__version__ = "0.1.0"

__all__ = [
    "DEFAULT_OPSET",
    "EXPORTERS",
    "IMPORTERS",
    "MIN_OPSET",
    "OnnxConstantRequiredError",
    "OnnxError",
    "OnnxExportError",
    "OnnxImportError",
    "OnnxModel",
    "OpCoverage",
    "UnsupportedOnnxOpsError",
    "__version__",
    "coverage",
    "export",
    "load",
    "to_model",
]
