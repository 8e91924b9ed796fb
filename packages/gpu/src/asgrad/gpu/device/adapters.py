"""Which adapter the process's device opens: the numbered list, an index, a rank's choice.

[`adapters`][asgrad.gpu.adapters] numbers the machine's adapters the way an index
chooses them: the adapters of one backend (the first of Vulkan, Metal, D3D12, OpenGL
that has any, or ``WGPU_BACKEND_TYPE``'s), GPUs (discrete, integrated, virtual)
before the others (a CPU rasterizer such as lavapipe), each group in wgpu's order.
With none chosen the device opens wgpu's high-performance adapter, as always.

An index comes from, first to last:

1. [`select_adapter(index)`][asgrad.gpu.select_adapter] (before the device opens);
2. the environment variable ``ASGRAD_GPU_DEVICE`` (`ADAPTER_VARIABLE`);
3. a rank's local index, which `asgrad.nn.distributed.init` gives with
   ``select_adapter(local_rank, automatic=True, label=...)``.

An index out of range is an error when asked for explicitly (1 and 2, as
``torch.cuda.set_device``); a rank's local index wraps around (``local_rank %
count``) with a warning naming the adapter it shares, as Horovod's scripts commonly
do, so two ranks on a machine with one adapter both run (slower) instead of failing.
"""

from __future__ import annotations

import os
import sys
import warnings
from dataclasses import dataclass
from typing import Any

from asgrad.gpu.errors import GpuUnavailableError

__all__ = ["ADAPTER_VARIABLE", "Selection", "adapters", "choose_adapter", "select_adapter"]

ADAPTER_VARIABLE = "ASGRAD_GPU_DEVICE"
"""Environment variable: the index (in [`adapters`][asgrad.gpu.adapters]) of the adapter to open.

>>> from asgrad.gpu import ADAPTER_VARIABLE
>>> ADAPTER_VARIABLE
'ASGRAD_GPU_DEVICE'
"""

_BACKEND_ORDER = ("Vulkan", "Metal", "D3D12", "OpenGL")
_GPU_TYPES = ("DiscreteGPU", "IntegratedGPU", "VirtualGPU")


@dataclass
class Selection:
    """An adapter index asked for before the device opens, and who asked."""

    index: int
    automatic: bool  # a rank's local index: wraps around with a warning
    label: str  # names the process in the log line ("" for none)


_selection: Selection | None = None


def select_adapter(index: int | None, *, automatic: bool = False, label: str = "") -> None:
    """Ask the device to open adapter ``index`` of [`adapters`][asgrad.gpu.adapters].

    Takes effect when the device opens (the first GPU compile or
    [`get_device`][asgrad.gpu.get_device]); after that it raises
    [`GpuUnavailableError`][asgrad.gpu.GpuUnavailableError]. ``automatic`` (a rank's
    local index) wraps an index out of range around with a warning instead of raising;
    with ``label`` the device prints which adapter it opened, on stderr.

    ``select_adapter(0)`` asks for the first adapter; ``None`` forgets a request:

    >>> from asgrad.gpu import select_adapter
    >>> select_adapter(None)  # wgpu's high-performance adapter, the default
    """
    global _selection
    from asgrad.gpu.device import opened

    if index is None:
        _selection = None
        return
    if opened():
        raise GpuUnavailableError(
            "select_adapter: the GPU device is open already; choose the adapter before the"
            " first GPU program is compiled (or set ASGRAD_GPU_DEVICE)"
        )
    if isinstance(index, bool) or index < 0:
        raise GpuUnavailableError(f"select_adapter: index must be an int >= 0, got {index!r}")
    _selection = Selection(index, automatic, label)


def adapters(wgpu: Any = None) -> list[Any]:
    """The adapters an index chooses from, in index order (wgpu ``GPUAdapter`` objects).

    >>> from asgrad.gpu import adapters  # doctest: +REQUIRES_GPU
    >>> len(adapters()) >= 1
    True
    """
    if wgpu is None:
        from asgrad.gpu.device import _import_wgpu, ensure_runtime_dir

        wgpu = _import_wgpu()
        ensure_runtime_dir()
    found = list(wgpu.gpu.enumerate_adapters_sync())
    wanted = os.environ.get("WGPU_BACKEND_TYPE", "")
    backends = [str(a.info.get("backend_type", "")) for a in found]
    order = [b for b in _BACKEND_ORDER if b.lower() == wanted.lower()] or list(_BACKEND_ORDER)
    backend = next((b for b in order if b in backends), None)
    if backend is None:
        return found
    same = [a for a, b in zip(found, backends, strict=True) if b == backend]
    gpus = [a for a in same if str(a.info.get("adapter_type", "")) in _GPU_TYPES]
    return gpus + [a for a in same if a not in gpus]


def _describe(adapter: Any) -> str:
    info = adapter.info
    return (
        f"{info.get('device', '')!r} ({info.get('backend_type', '')},"
        f" {info.get('adapter_type', '')})"
    )


def _explicit_index() -> tuple[int, str] | None:
    """The index asked for by `select_adapter` (not automatic) or the environment."""
    if _selection is not None and not _selection.automatic:
        return _selection.index, "select_adapter"
    raw = os.environ.get(ADAPTER_VARIABLE, "").strip()
    if not raw:
        return None
    try:
        index = int(raw)
    except ValueError:
        index = -1
    if index < 0:
        raise GpuUnavailableError(
            f"{ADAPTER_VARIABLE}={raw!r} is not an adapter index; set it to 0, 1, ..."
            " (asgrad.gpu.adapters() lists the adapters, in index order)"
        )
    return index, ADAPTER_VARIABLE


def choose_adapter(wgpu: Any) -> Any | None:
    """The adapter the selection asks for (None: no selection, wgpu's default).

    Called by the device as it opens; raises
    [`GpuUnavailableError`][asgrad.gpu.GpuUnavailableError] for an explicit index out of
    range, warns for a wrapped automatic one, and prints the log line of a labelled one.
    """
    explicit = _explicit_index()
    if explicit is None and _selection is None:
        return None
    listed = adapters(wgpu)
    if not listed:
        raise GpuUnavailableError("wgpu lists no adapter; use backend='cpu'")
    names = ", ".join(f"{i}: {_describe(a)}" for i, a in enumerate(listed))
    label = _selection.label if _selection is not None else ""
    if explicit is not None:
        index, source = explicit
        if index >= len(listed):
            raise GpuUnavailableError(
                f"{source} asks for adapter {index}, but this machine has {len(listed)}"
                f" ({names}); choose one of them"
            )
        how = f"by {source}"
    else:
        assert _selection is not None
        index = _selection.index % len(listed)
        how = "by local rank"
        if index != _selection.index:
            warnings.warn(
                f"{label or 'this process'}: local rank {_selection.index} but"
                f" {len(listed)} adapter(s) ({names}); sharing adapter {index} (the local"
                f" rank modulo {len(listed)}) with another rank, which is slower than one"
                f" adapter each. Start at most {len(listed)} rank(s) per node, or set"
                f" {ADAPTER_VARIABLE}",
                RuntimeWarning,
                stacklevel=2,
            )
            how = f"by local rank {_selection.index}, wrapped around"
    chosen = listed[index]
    if label:
        sys.stderr.write(
            f"asgrad.gpu: {label}: adapter {index} of {len(listed)}, {_describe(chosen)},"
            f" chosen {how}\n"
        )
        sys.stderr.flush()
    return chosen
