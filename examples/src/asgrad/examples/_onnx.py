"""``--export model.onnx``: write a trained example model as ONNX, checked by ONNX Runtime."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from asgrad import nn
from asgrad.tensor import Graph, evaluate

ONNX_EXTRA = "pip install 'asgrad-examples[onnx]'"
"""How to install what ``--export`` needs (asgrad-onnx, ONNX Runtime)."""


def check_export(path: str | None) -> None:
    """End the program (status 1, one line) if ``--export`` was given without asgrad-onnx.

    Called before training, so that a missing extra costs no training time.
    """
    if path is None:
        return
    try:
        import onnxruntime  # noqa: F401

        import asgrad.onnx  # noqa: F401
    except ImportError:
        raise SystemExit(
            f"error: --export needs asgrad-onnx; install it with {ONNX_EXTRA}"
        ) from None


def export_onnx(
    path: str,
    model: nn.Module,
    sample: Mapping[str, np.ndarray],
    output: str = "logits",
) -> dict[str, Any]:
    """Trace ``model`` in eval mode (batch axis free), write it to ``path`` as ONNX, and
    run ONNX Runtime on ``sample``; returns the path and the largest difference from
    asgrad's own (CPU) output on the same batch."""
    import onnxruntime

    from asgrad.onnx import export

    model.eval()
    try:
        g = Graph("export")
        inputs = [g.input(name, a.shape, a.dtype.name) for name, a in sample.items()]
        out = model(*inputs)
        export({output: out}, path)
        (ours,) = evaluate([out], dict(sample), backend="cpu")
    finally:
        model.train()
    session = onnxruntime.InferenceSession(path, providers=["CPUExecutionProvider"])
    (theirs,) = session.run([output], dict(sample))
    diff = float(np.max(np.abs(np.asarray(theirs, np.float64) - ours))) if ours.size else 0.0
    return {"onnx": path, "onnx_max_abs_diff": diff}
