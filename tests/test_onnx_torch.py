"""A model written by PyTorch's ONNX exporter loads, matches PyTorch and trains in asgrad.

PyTorch's side (the exported file, its outputs and gradients) runs in ``torch_reference``
(the root conftest): saved as fixtures, so these tests run without PyTorch too, and
against PyTorch itself where it is installed. The model is exported by the TorchScript
exporter (``dynamo=False``), which needs nothing beyond PyTorch, with a dynamic batch axis.
``tests/data/torch_cnn.onnx`` and its expected values (``torch_cnn.npz``), which
``test_onnx_torch_fixture.py`` checks, are written by ``python tests/test_onnx_torch.py``.
"""

from __future__ import annotations

import sys
import tempfile
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from asgrad import nn
from asgrad.autograd import grad, gradient_check
from asgrad.onnx import load
from asgrad.tensor import Tensor, evaluate

Reference = Callable[..., Any]  # the torch_reference fixture


def _torch_model(torch: Any, seed: int = 0) -> Any:
    torch.manual_seed(seed)
    return torch.nn.Sequential(
        torch.nn.Conv2d(1, 4, 3, padding=1),
        torch.nn.ReLU(),
        torch.nn.MaxPool2d(2),
        torch.nn.Flatten(),
        torch.nn.Linear(4 * 4 * 4, 16),
        torch.nn.Tanh(),
        torch.nn.Linear(16, 3),
    )


def _export(torch: Any, model: Any, path: Path, dtype: Any = None) -> Path:
    example = torch.zeros(2, 1, 8, 8, dtype=dtype or torch.float32)
    with warnings.catch_warnings():  # the TorchScript exporter's deprecation notices
        warnings.simplefilter("ignore")
        torch.onnx.export(
            model,
            (example,),
            str(path),
            dynamo=False,
            opset_version=17,
            input_names=["x"],
            output_names=["y"],
            dynamic_axes={"x": {0: "batch"}, "y": {0: "batch"}},
        )
    return path


def _onnx_bytes(torch: Any, model: Any, dtype: Any = None) -> np.ndarray:
    """The model as PyTorch's exporter writes it, as bytes (the fixture keeps arrays)."""
    with tempfile.TemporaryDirectory() as folder:
        path = _export(torch, model, Path(folder) / "model.onnx", dtype)
        return np.frombuffer(path.read_bytes(), np.uint8).copy()


def _write(data: np.ndarray, path: Path) -> Path:
    path.write_bytes(data.tobytes())
    return path


def _images(n: int, seed: int = 1) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((n, 1, 8, 8)).astype(np.float32)


def test_torch_model_loads_and_matches(tmp_path: Path, torch_reference: Reference) -> None:
    x = _images(6)  # exported at batch 2, loaded at the default size, run at 6

    def theirs(torch: Any, x: Any) -> Any:
        model = _torch_model(torch).eval()
        with torch.no_grad():
            return _onnx_bytes(torch, model), model(torch.from_numpy(x))

    onnx_file, want = torch_reference(theirs, x)
    loaded = load(_write(onnx_file, tmp_path / "torch.onnx"))
    assert len(loaded.parameters()) == 6
    (ours,) = evaluate([loaded.outputs["y"]], {"x": x})
    np.testing.assert_allclose(ours, want, rtol=1e-4, atol=1e-5)


def test_torch_model_gradients_match_torch(tmp_path: Path, torch_reference: Reference) -> None:
    x = _images(5)

    def theirs(torch: Any, x: Any) -> Any:
        model = _torch_model(torch).eval()
        onnx_file = _onnx_bytes(torch, model)
        out = model(torch.from_numpy(x))
        (out * out).sum().backward()
        params = {n: p.detach().clone() for n, p in model.named_parameters()}
        grads = {n: p.grad for n, p in model.named_parameters() if p.grad is not None}
        return onnx_file, params, grads

    onnx_file, torch_params, by_value = torch_reference(theirs, x)
    loaded = load(_write(onnx_file, tmp_path / "torch.onnx"), dims={"batch": 5})
    g = loaded.graph
    params = loaded.parameters()
    y = loaded.outputs["y"]
    grads = grad((y * y).sum(), [g.bind(v) for v in params])
    got = dict(zip([v.name for v in params], evaluate(grads, {"x": x}), strict=True))

    assert len(by_value) == len(got) == 6
    for variable in params:  # match by value: the exporter may rename initializers
        torch_name = next(
            n
            for n, p in torch_params.items()
            if p.shape == variable.shape and np.allclose(p, variable.value)
        )
        np.testing.assert_allclose(
            got[variable.name], by_value[torch_name], rtol=1e-4, atol=1e-5, err_msg=torch_name
        )


def test_torch_model_gradient_checks_in_float64(tmp_path: Path, torch_reference: Reference) -> None:
    onnx_file = torch_reference(
        lambda torch: _onnx_bytes(torch, _torch_model(torch).double().eval(), torch.float64)
    )
    loaded = load(_write(onnx_file, tmp_path / "torch64.onnx"), dims={"batch": 2})
    assert all(v.dtype == "float64" for v in loaded.parameters())

    def build(x: Tensor) -> Tensor:
        return loaded(x=x)["y"]

    # random inputs: no ReLU input or max-pool tie lies within eps of a kink
    x = _images(2, seed=7).astype(np.float64)
    gradient_check(build, [x], eps=1e-6, rtol=1e-4, atol=1e-6)


def test_torch_model_trains_in_asgrad(tmp_path: Path, torch_reference: Reference) -> None:
    onnx_file = torch_reference(lambda torch: _onnx_bytes(torch, _torch_model(torch).eval()))
    path = _write(onnx_file, tmp_path / "torch.onnx")
    loaded = load(path, dims={"batch": 16})
    initial = [v.value.copy() for v in loaded.parameters()]
    rng = np.random.default_rng(3)
    x = _images(16, seed=3)
    labels = rng.integers(0, 3, 16)
    g = loaded.graph
    loss = nn.cross_entropy(loaded.outputs["y"], g.input("labels", (16,), "int64"))
    step = nn.SGD(loaded.parameters(), lr=0.1, momentum=0.9).compile(loss)
    losses = [float(step(x=x, labels=labels)[0]) for _ in range(30)]
    assert losses[-1] < 0.25 * losses[0], losses
    # training changed asgrad's variables, not the file they came from
    assert path.read_bytes() == onnx_file.tobytes()
    assert all(
        not np.allclose(v.value, b) for v, b in zip(loaded.parameters(), initial, strict=True)
    )


def write_fixture(directory: Path) -> None:
    """The PyTorch-written CNN, its input, output and gradients of ``sum(y * y)``."""
    import torch

    model = _torch_model(torch, seed=11).eval()
    _export(torch, model, directory / "torch_cnn.onnx")
    x = _images(6, seed=12)
    out = model(torch.from_numpy(x))
    (out * out).sum().backward()
    grads = {f"grad:{n}": p.grad.numpy() for n, p in model.named_parameters()}
    np.savez(directory / "torch_cnn.npz", x=x, y=out.detach().numpy(), **grads)


if __name__ == "__main__":
    write_fixture(Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).parent / "data")
