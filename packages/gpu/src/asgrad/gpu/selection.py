"""Backend selection: ``"cpu"``, ``"gpu"`` or ``"auto"``, with an environment override.

One rule for all of asgrad, owned by
[`asgrad.tensor.runtime.backends.resolve_backend_name`][asgrad.tensor.resolve_backend_name]:
an explicit name wins; with none, ``ASGRAD_DEVICE`` decides (default ``"cpu"``), so a
script that does not name a backend runs on the GPU with::

    ASGRAD_DEVICE=gpu python -m asgrad.examples.xor

``"gpu"`` without an adapter raises [`GpuUnavailableError`][asgrad.gpu.GpuUnavailableError];
``"auto"`` falls back to the CPU with one warning per process.
"""

from __future__ import annotations

from typing import Literal

from asgrad.tensor.runtime.backends import ENV_VAR, resolve_backend_name

__all__ = ["ENV_VAR", "ResolvedBackend", "gpu_available", "resolve_backend"]

ResolvedBackend = Literal["cpu", "gpu"]


def gpu_available() -> bool:
    """True when a wgpu adapter can be opened (the device is created and cached).

    >>> from asgrad.gpu import gpu_available  # doctest: +REQUIRES_GPU
    >>> gpu_available()
    True
    """
    from asgrad.gpu.device import get_device
    from asgrad.gpu.errors import GpuUnavailableError

    try:
        get_device()
    except GpuUnavailableError:
        return False
    return True


def resolve_backend(requested: str | None = None) -> ResolvedBackend:
    """``"cpu"`` or ``"gpu"`` for ``"cpu" | "gpu" | "auto"`` (None: the environment).

    Unlike the name resolution alone, ``"gpu"`` is checked here: it raises
    [`GpuUnavailableError`][asgrad.gpu.GpuUnavailableError] when no adapter can be opened.

    >>> resolve_backend("cpu")
    'cpu'
    """
    name = resolve_backend_name(requested)
    if name == "gpu":
        from asgrad.gpu.device import get_device

        get_device()
        return "gpu"
    return "cpu"
