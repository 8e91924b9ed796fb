"""Write the PyTorch-exported ONNX fixtures that ``tests/test_onnx_torch_models.py`` checks.

Usage (needs PyTorch; asgrad does not depend on it):
    python scripts/make_torch_onnx_fixtures.py [OUT_DIR]     default: tests/data

Three small models, each exported by PyTorch's TorchScript exporter (opset 17, batch
axis dynamic) with its numbers: ``torch_transformer`` (a ``TransformerEncoderLayer``),
``torch_lstm`` (``nn.LSTM`` and a Linear head) and ``torch_interpolate`` (convolutions,
``F.interpolate`` nearest and bilinear, ``cumsum``). Each ``.npz`` holds two batches
``x``/``x_other`` (different batch sizes), PyTorch's outputs ``y``/``y_other`` and, for
the first, PyTorch's gradients of ``sum(y * y)``: ``grad:x`` for the input and
``grad:<name>`` for every parameter, under its state-dict name. The parameters are
perturbed from their initial values so that no two are equal: an exporter merges
equal initializers (LayerNorm's ones and zeros) into one.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F  # PyTorch's own convention
from torch import nn


class InterpolateNet(nn.Module):  # type: ignore[misc]  # torch is untyped here
    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(1, 4, 3, padding=1)
        self.conv2 = nn.Conv2d(4, 4, 3, padding=1)
        self.head = nn.Linear(4 * 12 * 12, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = F.relu(self.conv1(x))
        h = F.interpolate(h, scale_factor=2.0, mode="nearest")
        h = torch.cumsum(self.conv2(h), dim=3)
        h = F.interpolate(h, size=(12, 12), mode="bilinear", align_corners=False)
        return self.head(h.flatten(1))


class LstmNet(nn.Module):  # type: ignore[misc]  # torch is untyped here
    def __init__(self) -> None:
        super().__init__()
        self.lstm = nn.LSTM(4, 6, batch_first=True)
        self.head = nn.Linear(6, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out, _ = self.lstm(x)
        return self.head(out)


def _models() -> dict[str, tuple[Any, tuple[int, ...], tuple[int, ...]]]:
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(16, 2, dim_feedforward=32, dropout=0.0, batch_first=True)
    models = {
        "torch_transformer": (layer, (2, 5, 16), (3, 5, 16)),
        "torch_lstm": (LstmNet(), (2, 5, 4), (4, 5, 4)),
        "torch_interpolate": (InterpolateNet(), (2, 1, 6, 6), (5, 1, 6, 6)),
    }
    with torch.no_grad():  # no two parameters equal (exporters merge equal initializers)
        for model, _, _ in models.values():
            for p in model.parameters():
                p.add_(0.1 * torch.randn_like(p))
    return models


def _export(model: Any, x: np.ndarray, path: Path) -> None:
    """TorchScript's exporter; where it fails on this PyTorch (a traced
    ``TransformerEncoderLayer``), the dynamo exporter."""
    common = {"input_names": ["x"], "output_names": ["y"]}
    try:
        with torch.no_grad():
            torch.onnx.export(
                model,
                (torch.from_numpy(x),),
                str(path),
                dynamo=False,
                opset_version=17,
                dynamic_axes={"x": {0: "batch"}, "y": {0: "batch"}},
                **common,
            )
    except Exception as exc:  # any exporter failure: try the other one
        print(f"{path.stem}: TorchScript exporter failed ({type(exc).__name__}); dynamo")
        batch = torch.export.Dim("batch", min=1, max=64)
        torch.onnx.export(
            model,
            (torch.from_numpy(x),),
            str(path),
            dynamo=True,
            opset_version=18,
            dynamic_shapes=({0: batch},),
            external_data=False,
            **common,
        )


def write(directory: Path) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    torch.backends.mha.set_fastpath_enabled(False)  # the fused layer has no ONNX form
    rng = np.random.default_rng(0)
    for name, (model, shape, other) in _models().items():
        model.eval()
        x = rng.standard_normal(shape).astype(np.float32)
        x_other = rng.standard_normal(other).astype(np.float32)
        path = directory / f"{name}.onnx"
        _export(model, x, path)
        xt = torch.from_numpy(x).requires_grad_(True)
        y = model(xt)
        (y * y).sum().backward()
        grads = {f"grad:{k}": p.grad.numpy() for k, p in model.named_parameters()}
        with torch.no_grad():
            y_other = model(torch.from_numpy(x_other)).numpy()
        np.savez(
            directory / f"{name}.npz",
            x=x,
            y=y.detach().numpy(),
            x_other=x_other,
            y_other=y_other,
            **{"grad:x": xt.grad.numpy()},
            **grads,
        )
        print(name, path.stat().st_size, "bytes")


if __name__ == "__main__":
    write(Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).parent.parent / "tests/data")
