"""Backend selection: ``"cpu"``, ``"gpu"`` or ``"auto"``, with an environment override.

A backend compiles a :class:`~asgrad.tensor.executor.Schedule` into something that
runs it. The CPU (numpy) backend is built in; ``asgrad.gpu`` registers ``"gpu"``
when it is imported.
"""

from __future__ import annotations

import importlib
import os
import warnings
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Protocol

import numpy as np

from asgrad.tensor.errors import BackendError

if TYPE_CHECKING:
    from asgrad.tensor.executor import Schedule

ENV_VAR = "ASGRAD_DEVICE"
BACKEND_NAMES = ("cpu", "gpu", "auto")


class Executable(Protocol):
    """A compiled schedule on one backend."""

    def run(self, feeds: Mapping[str, np.ndarray]) -> list[np.ndarray]:
        """Run once on ``feeds``; returns the outputs and applies the updates."""
        ...


class Backend(Protocol):
    """What a backend provides."""

    name: str

    def available(self) -> bool:
        """Whether the backend can run here (an adapter exists, say)."""
        ...

    def compile(self, schedule: Schedule) -> Executable:
        """Compile ``schedule`` for this backend."""
        ...


_BACKENDS: dict[str, Callable[[], Backend]] = {}
_warned_fallback = False


def register_backend(name: str, factory: Callable[[], Backend]) -> None:
    """Make ``factory()`` the backend called ``name``."""
    _BACKENDS[name] = factory


def resolve_backend_name(name: str | None = None) -> str:
    """``"cpu"`` or ``"gpu"`` for a requested backend.

    ``None`` means the ``ASGRAD_DEVICE`` environment variable, else ``"cpu"``.
    ``"auto"`` is the GPU when one is usable, else the CPU with one warning.
    """
    global _warned_fallback
    requested = name if name is not None else os.environ.get(ENV_VAR, "cpu")
    if requested not in BACKEND_NAMES:
        raise BackendError(f"unknown backend {requested!r}; use one of {', '.join(BACKEND_NAMES)}")
    if requested != "auto":
        return requested
    try:
        if get_backend("gpu").available():
            return "gpu"
        reason = "no GPU adapter was found"
    except BackendError as exc:
        reason = str(exc)
    if not _warned_fallback:
        warnings.warn(f"backend 'auto' runs on the CPU: {reason}", RuntimeWarning, stacklevel=2)
        _warned_fallback = True
    return "cpu"


def get_backend(name: str) -> Backend:
    """The backend called ``name`` (``"cpu"`` or ``"gpu"``)."""
    if name not in _BACKENDS and name == "gpu":
        try:
            importlib.import_module("asgrad.gpu")
        except ImportError as exc:
            raise BackendError(
                f"the GPU backend needs the asgrad-gpu distribution ({exc});"
                " install it with `pip install asgrad-gpu`"
            ) from exc
    try:
        return _BACKENDS[name]()
    except KeyError:
        raise BackendError(f"no backend called {name!r} is registered") from None
