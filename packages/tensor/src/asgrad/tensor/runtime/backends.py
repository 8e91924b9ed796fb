"""Backend selection: a backend by name, ``"auto"``, or the ``ASGRAD_DEVICE`` variable.

A backend compiles a [`Schedule`][asgrad.tensor.Schedule] into an
`Executable` that runs it. The CPU (numpy) backend is built in; other
backends plug in without this package naming them: a distribution declares a
zero-argument factory returning a `Backend` in the entry point group
``asgrad.backends``, e.g. in its ``pyproject.toml``::

    [project.entry-points."asgrad.backends"]
    mybackend = "mypackage.backend:MyBackend"

The group is read once, on first need. [`register_backend`][asgrad.tensor.register_backend] adds a
factory directly (a plug-in imported before its entry point is installed, a test).
"""

from __future__ import annotations

import importlib.metadata
import os
import sys
import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import numpy as np

from asgrad.tensor.errors import BackendError

if TYPE_CHECKING:
    from asgrad.tensor.ir.schedule import Schedule
    from asgrad.tensor.runtime.device_values import DeviceValue

ENV_VAR = "ASGRAD_DEVICE"
"""The environment variable that picks the default backend: ``cpu``, ``gpu`` or ``auto``.

>>> from asgrad.tensor.runtime.backends import ENV_VAR
>>> ENV_VAR
'ASGRAD_DEVICE'
"""
BACKEND_ENTRY_POINT_GROUP = "asgrad.backends"
# The distributions that provide the known plug-in backends, for error messages.
_DISTRIBUTIONS = {"gpu": "asgrad-gpu"}


class Executable(Protocol):
    """A compiled schedule on one backend."""

    def run(self, feeds: Mapping[str, np.ndarray]) -> list[np.ndarray]:
        """Run once on ``feeds``; returns the outputs and applies the updates."""
        ...


class LaunchingExecutable(Executable, Protocol):
    """An executable that can also start a run without waiting for it.

    [`Program.launch`][asgrad.tensor.Program.launch] calls ``launch``
    where an executable has it, else ``run`` (the values are then ready at once).
    """

    def launch(self, feeds: Mapping[str, np.ndarray]) -> list[DeviceValue]:
        """Start one run on ``feeds``; the outputs are read when the caller asks."""
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


@runtime_checkable
class DataBackend(Backend, Protocol):
    """A backend whose device holds data between runs, fed to its programs as it is.

    What ``asgrad.nn.data.DataLoader(..., device=name)`` uses to keep a data set on the
    device and slice its batches there. Arrays `to_device` returns are the backend's
    device arrays: its programs take them as feeds with no copy through the host.
    """

    def to_device(self, array: np.ndarray) -> Any:
        """``array`` copied to the device (one upload); same shape and dtype."""
        ...

    def holds(self, nbytes: int) -> bool:
        """Whether one array of ``nbytes`` can live on the device."""
        ...

    def take(self, arrays: Sequence[Any], order: Any, start: int, stop: int) -> tuple[Any, ...]:
        """``a[order[start:stop]]`` (rows along axis 0) of each of ``arrays``, gathered on
        the device.

        ``arrays`` and ``order`` (int32 row numbers) are device arrays; nothing is
        uploaded.
        """
        ...


def _cpu_backend() -> Backend:
    from asgrad.tensor.cpu import CPUBackend

    return CPUBackend()


_BACKENDS: dict[str, Callable[[], Backend]] = {"cpu": _cpu_backend}
_ENTRY_POINTS: dict[str, importlib.metadata.EntryPoint] | None = None
_warned_fallback = False


def register_backend(name: str, factory: Callable[[], Backend]) -> None:
    """Make ``factory()`` the backend called ``name`` (over an entry point's).

    Registered under a throwaway name, then removed again (the registry has no public
    way to unregister, hence the private dict in the example's last line):

    >>> from asgrad.tensor import get_backend, register_backend
    >>> from asgrad.tensor.runtime import backends
    >>> register_backend("doc-example", lambda: get_backend("cpu"))
    >>> type(get_backend("doc-example")).__name__
    'CPUBackend'
    >>> del backends._BACKENDS["doc-example"]
    """
    _BACKENDS[name] = factory


def _entry_points() -> dict[str, importlib.metadata.EntryPoint]:
    """The ``asgrad.backends`` entry points by name, read once."""
    global _ENTRY_POINTS
    if _ENTRY_POINTS is None:
        found = importlib.metadata.entry_points(group=BACKEND_ENTRY_POINT_GROUP)
        _ENTRY_POINTS = {ep.name: ep for ep in found}
    return _ENTRY_POINTS


def backend_names() -> list[str]:
    """Every backend that can be asked for: the CPU, then the plug-ins, by name."""
    others = {*_BACKENDS, *_entry_points(), *_DISTRIBUTIONS} - {"cpu"}
    return ["cpu", *sorted(others)]


def resolve_backend_name(name: str | None = None) -> str:
    """The backend a request names (``"cpu"``, ``"gpu"``...).

    ``None`` means the ``ASGRAD_DEVICE`` environment variable, else ``"cpu"``.
    ``"auto"`` is the first plug-in backend (by name) that is usable, else the CPU
    with one warning.

    >>> from asgrad.tensor import resolve_backend_name
    >>> resolve_backend_name("cpu")
    'cpu'
    """
    global _warned_fallback
    requested = name if name is not None else os.environ.get(ENV_VAR, "cpu")
    names = backend_names()
    if requested not in (*names, "auto"):
        raise BackendError(f"unknown backend {requested!r}; use one of {', '.join(names)}, auto")
    if requested != "auto":
        return requested
    reasons = []
    for candidate in names[1:]:
        try:
            if get_backend(candidate).available():
                return candidate
            reasons.append(f"the {candidate} backend is not usable here")
        except BackendError as exc:
            reasons.append(str(exc))
    if not _warned_fallback:
        reason = "; ".join(reasons) or "no other backend is installed"
        warnings.warn(
            f"backend 'auto' runs on the CPU: {reason}",
            RuntimeWarning,
            stacklevel=_user_stacklevel(),
        )
        _warned_fallback = True
    return "cpu"


def _user_stacklevel() -> int:
    """The ``stacklevel`` that makes a warning raised by our caller point at the user's line.

    It counts the frames from that caller out to the first one outside asgrad's own
    packages (the user's code), as `asgrad.tensor.ir.graph.user_location` does.
    """
    from asgrad.tensor.ir.graph import INTERNAL_DIRS

    frame, level = sys._getframe(1), 1
    while frame.f_back is not None and any(d in frame.f_code.co_filename for d in INTERNAL_DIRS):
        frame, level = frame.f_back, level + 1
    return level


def get_backend(name: str) -> Backend:
    """The backend called ``name``: built in, registered, or an installed entry point.

    >>> from asgrad.tensor import get_backend
    >>> type(get_backend("cpu")).__name__
    'CPUBackend'
    """
    factory = _BACKENDS.get(name)
    if factory is None:
        entry_point = _entry_points().get(name)
        if entry_point is None:
            hint = ""
            if name in _DISTRIBUTIONS:
                dist = _DISTRIBUTIONS[name]
                hint = f"; it is in the {dist} distribution: `pip install {dist}`"
            raise BackendError(f"no backend called {name!r} is installed{hint}")
        try:
            factory = entry_point.load()
        except ImportError as exc:
            raise BackendError(
                f"the {name!r} backend ({entry_point.value}) failed to import: {exc}"
            ) from exc
        _BACKENDS[name] = factory
    return factory()
