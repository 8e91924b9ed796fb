"""PyTorch checkpoints: load a ``state_dict`` saved by PyTorch, and export one for it.

PyTorch and asgrad name a model's parameters alike (dotted paths of attribute
names), so a model written with the same attribute names takes PyTorch's weights
once the layouts are mapped:

- ``Linear.weight`` is ``(in, out)`` in asgrad, ``(out, in)`` in PyTorch: transposed
  (a ``Linear`` tied to an ``Embedding`` already holds PyTorch's layout);
- asgrad's ``SelfAttention`` keeps its input projection in a ``Linear`` named
  ``in_proj``: PyTorch's ``in_proj_weight`` / ``in_proj_bias`` (the PyTorch-style
  ``MultiheadAttention`` holds them under PyTorch's names already);
- convolutions (``Conv2d``, ``ConvTranspose2d``), batch norm (with
  ``num_batches_tracked``), layer norm and embeddings have PyTorch's layouts;
- ``Dropout``'s ``seed`` buffer is asgrad's own: not expected in, nor written to, a
  PyTorch state.

Files are read only through loaders that cannot run code: ``.safetensors`` files
(``safetensors.torch.save_file`` in PyTorch) with the safetensors package, and
``.pt`` / ``.pth`` / ``.bin`` files with ``torch.load(weights_only=True)`` when
PyTorch is installed; a pickle that needs anything but tensors is refused by it.
"""

from __future__ import annotations

import pickle
from collections.abc import Mapping
from os import PathLike
from pathlib import Path
from typing import Any

import numpy as np

from asgrad.nn.errors import StateMismatchError, UnsafeCheckpointError
from asgrad.nn.layers.attention import SelfAttention
from asgrad.nn.layers.dropout import Dropout
from asgrad.nn.layers.linear import Linear
from asgrad.nn.module import Module
from asgrad.tensor.errors import ArgumentError, ArgumentTypeError

__all__ = ["load_torch_state_dict", "read_torch_file", "torch_state_dict"]

TORCH_SUFFIXES = (".pt", ".pth", ".bin")

# One entry of the plan: the PyTorch name (None: asgrad's own) and whether to transpose.
Entry = tuple[str | None, bool]


def _plan(module: Module) -> dict[str, Entry]:
    """Every asgrad state name of ``module`` -> (its PyTorch name, transpose)."""
    plan: dict[str, Entry] = {n: (n, False) for n, _ in module.named_variables(False)}
    renames: dict[str, str] = {}
    for path, m in module.named_modules():
        prefix = f"{path}." if path else ""
        if isinstance(m, Linear) and f"{prefix}weight" in plan:
            plan[f"{prefix}weight"] = (f"{prefix}weight", not m.weight_transposed)
        elif isinstance(m, Dropout):
            plan[f"{prefix}seed"] = (None, False)
        if isinstance(m, SelfAttention) and isinstance(m.__dict__.get("in_proj"), Linear):
            renames[f"{prefix}in_proj.weight"] = f"{prefix}in_proj_weight"
            renames[f"{prefix}in_proj.bias"] = f"{prefix}in_proj_bias"
    for name, torch_name in renames.items():
        if name in plan:
            plan[name] = (torch_name, plan[name][1])
    return plan


def torch_state_dict(module: Module) -> dict[str, np.ndarray]:
    """``module``'s state in PyTorch's names and layouts (numpy copies).

    Save it for PyTorch with ``safetensors.numpy.save_file(state, "model.safetensors")``
    or ``torch.save({k: torch.from_numpy(v) for k, v in state.items()}, "model.pt")``.

    >>> from asgrad.nn import Linear, torch_state_dict
    >>> {name: array.shape for name, array in torch_state_dict(Linear(3, 2, rng=0)).items()}
    {'weight': (2, 3), 'bias': (2,)}
    """
    values = dict(module.named_variables(False))
    out: dict[str, np.ndarray] = {}
    for name, (torch_name, transpose) in _plan(module).items():
        if torch_name is not None:
            value = np.array(values[name].value)
            out[torch_name] = np.ascontiguousarray(value.T) if transpose else value
    return out


def load_torch_state_dict(
    module: Module,
    state: Mapping[str, Any] | str | PathLike[str],
    strict: bool = True,
    *,
    key: str | None = None,
) -> None:
    """Load a PyTorch ``state_dict`` (a mapping of tensors or arrays, or a file) into ``module``.

    ``state`` is what ``model.state_dict()`` returns in PyTorch (torch tensors or
    numpy arrays), or the path of a ``.safetensors`` / ``.pt`` file (see the module
    docstring: no file is unpickled beyond tensors). ``key`` picks the state out of
    a checkpoint dictionary (``torch.save({"model": model.state_dict(), ...})``).
    Names and layouts are mapped as the module docstring says; every missing,
    unexpected and mismatched entry is reported at once (PyTorch's names) in a
    [`StateMismatchError`][asgrad.nn.StateMismatchError], and nothing is loaded then.
    Values are cast losslessly as [`Module.load_state_dict`][asgrad.nn.Module.load_state_dict] does.

    >>> import numpy as np
    >>> from asgrad.nn import Linear, load_torch_state_dict
    >>> layer = Linear(3, 2, rng=0)
    >>> state = {"weight": np.ones((2, 3), np.float32), "bias": np.zeros(2, np.float32)}
    >>> load_torch_state_dict(layer, state)
    >>> float(layer.weight.value.sum())
    6.0
    """
    loaded = read_torch_file(state) if isinstance(state, str | PathLike) else state
    if not isinstance(loaded, Mapping):
        raise ArgumentTypeError(
            f"load_torch_state_dict: give a mapping of tensors or a file path, got"
            f" {type(loaded).__name__}"
        )
    if key is not None:
        if key not in loaded:
            raise StateMismatchError(f"no entry {key!r} in the state; it has: {_keys(loaded)}")
        loaded = loaded[key]
    arrays = {str(k): _as_array(str(k), v) for k, v in loaded.items()}
    values = dict(module.named_variables(False))
    plan = _plan(module)
    converted: dict[str, np.ndarray] = {}
    missing: list[str] = []
    used: set[str] = set()
    for name, (torch_name, transpose) in plan.items():
        if torch_name is None:  # asgrad's own buffer: keeps its value
            converted[name] = np.array(values[name].value)
        elif torch_name in arrays:
            used.add(torch_name)
            value = arrays[torch_name]
            converted[name] = value.T if transpose and value.ndim == 2 else value
        else:
            missing.append(torch_name)
    unexpected = sorted(set(arrays) - used)
    if strict and (missing or unexpected):
        parts = []
        if missing:
            parts.append("missing: " + ", ".join(sorted(set(missing))))
        if unexpected:
            parts.append("unexpected: " + ", ".join(unexpected))
        raise StateMismatchError(
            "the PyTorch state does not fit the model (" + " | ".join(parts) + "); the"
            " model's attributes must have PyTorch's names (asgrad.nn.torch_state lists the"
            " layouts it maps), or pass strict=False to load the entries that match"
        )
    module.load_state_dict(converted, strict=False)


def read_torch_file(path: str | PathLike[str]) -> dict[str, Any]:
    """The tensors of a ``.safetensors`` or ``.pt``/``.pth``/``.bin`` file, loaded safely."""
    p = Path(path)
    if not p.is_file():
        raise ArgumentError(f"no file {str(p)!r}")
    if p.suffix == ".safetensors":
        from safetensors.numpy import load_file

        return dict(load_file(str(p)))
    if p.suffix in TORCH_SUFFIXES:
        try:
            import torch
        except ImportError:
            raise ArgumentError(
                f"{p.name}: reading a PyTorch pickle needs PyTorch (pip install torch), which"
                " asgrad then runs with weights_only=True; or export the state from PyTorch"
                " as safetensors (safetensors.torch.save_file(model.state_dict(), path))"
            ) from None
        try:
            loaded = torch.load(str(p), map_location="cpu", weights_only=True)
        except pickle.UnpicklingError as exc:
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
            raise UnsafeCheckpointError(
                f"{p.name} holds more than tensors (PyTorch's safe loader refused it:"
                f" {first}); asgrad never unpickles code: in PyTorch, save"
                " model.state_dict() rather than the model, or export it as safetensors",
                path=p,
            ) from None
        if not isinstance(loaded, Mapping):
            raise StateMismatchError(
                f"{p.name} holds a {type(loaded).__name__}, not a state_dict; save"
                " model.state_dict() rather than the model"
            )
        return dict(loaded)
    raise ArgumentError(
        f"{p.name}: unknown checkpoint format {p.suffix!r}; give a .safetensors file or a"
        f" PyTorch {'/'.join(TORCH_SUFFIXES)} file"
    )


def _as_array(name: str, value: Any) -> np.ndarray:
    if hasattr(value, "detach") and hasattr(value, "numpy"):  # a torch.Tensor
        value = value.detach().cpu()
        if str(getattr(value, "dtype", "")) == "torch.bfloat16":
            value = value.float()  # exact: every bfloat16 is a float32
        return np.array(value.numpy())
    if isinstance(value, Mapping):
        raise StateMismatchError(
            f"entry {name!r} is a dictionary, not a tensor: this looks like a checkpoint"
            f" holding a state_dict; pass key={name!r} if that is the model's"
        )
    return np.asarray(value)


def _keys(state: Mapping[str, Any]) -> str:
    return ", ".join(sorted(str(k) for k in state)[:20])
