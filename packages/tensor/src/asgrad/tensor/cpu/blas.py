"""BLAS thread control for generated CPU functions (``ASGRAD_SERIAL_GEMM_FLOPS``).

Opt-in (``ASGRAD_SERIAL_GEMM_FLOPS=N``): a program whose largest matrix product is
below N flops runs with numpy's BLAS on one thread. On an oversubscribed machine a
descheduled BLAS worker stalls every multi-threaded product for a scheduler
quantum; one thread is then steadier. On an idle machine the configured thread
count is faster, so it is the default. Switching per product is not done: raising
the count wakes the pool, which costs more than a product of this size.
"""

from __future__ import annotations

import os
from collections.abc import Callable, MutableMapping
from typing import Any

# Read at import; the code generator reads this module attribute each time it runs.
SERIAL_GEMM_FLOPS = int(os.environ.get("ASGRAD_SERIAL_GEMM_FLOPS", "0"))
# OpenBLAS itself runs products below 2 * 65536 * 4 flops on one thread.
OPENBLAS_SERIAL_FLOPS = 1 << 19


# The thread-count functions of the OpenBLAS builds numpy ships (the scipy-openblas
# wheels' names first, then a plain OpenBLAS's).
_OPENBLAS_GET = (
    "scipy_openblas_get_num_threads64_",
    "scipy_openblas_get_num_threads",
    "openblas_get_num_threads64_",
    "openblas_get_num_threads",
)
_OPENBLAS_SET = (
    "scipy_openblas_set_num_threads64_",
    "scipy_openblas_set_num_threads",
    "openblas_set_num_threads64_",
    "openblas_set_num_threads",
)


def _loaded_openblas() -> list[str]:
    """The paths of the OpenBLAS libraries this process has loaded under numpy's
    folders (Linux: ``/proc/self/maps``), numpy's own first."""
    import numpy as np

    try:
        with open("/proc/self/maps") as f:
            paths = {line.split()[-1] for line in f if "openblas" in line.lower()}
    except OSError:
        return []
    numpy_dir = os.path.dirname(np.__file__)
    ours = [p for p in paths if p.startswith(numpy_dir)]  # numpy.libs sits beside numpy
    return sorted(ours) + sorted(paths - set(ours))


def _openblas_ctypes() -> tuple[Callable[[], Any], Callable[[int], Any]] | None:
    """numpy's OpenBLAS thread count getter and setter through ctypes (threadpoolctl
    not installed), or None."""
    import ctypes

    for path in _loaded_openblas():
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        get = next((getattr(lib, n) for n in _OPENBLAS_GET if hasattr(lib, n)), None)
        put = next((getattr(lib, n) for n in _OPENBLAS_SET if hasattr(lib, n)), None)
        if get is not None and put is not None:
            get.restype, get.argtypes = ctypes.c_int, []
            put.restype, put.argtypes = None, [ctypes.c_int]
            return get, put
    return None


class BlasThreads:
    """Gets and sets the thread count of numpy's BLAS (through threadpoolctl, when
    installed, else OpenBLAS's own functions through ctypes); ``get``/``set`` are None
    when it cannot be reached."""

    def __init__(self) -> None:
        self.get: Callable[[], Any] | None = None
        self.set: Callable[[int], Any] | None = None
        try:
            from threadpoolctl import ThreadpoolController  # type: ignore[import-untyped]
        except ImportError:
            found = _openblas_ctypes()
            if found is not None:
                self.get, self.set = found
            return
        try:
            blas = [c for c in ThreadpoolController().lib_controllers if c.user_api == "blas"]
        except Exception:  # an unusual BLAS build: leave its threads alone
            return
        # numpy's own BLAS (scipy may have loaded another copy, left alone).
        mine = [c for c in blas if os.sep + "numpy" in str(c.filepath)] or blas[:1]
        if mine:
            self.get = lambda: mine[0].num_threads
            self.set = mine[0].set_num_threads


_blas_threads: BlasThreads | None = None


def blas_threads() -> BlasThreads:
    """The process's `BlasThreads` (made on first use)."""
    global _blas_threads
    if _blas_threads is None:
        _blas_threads = BlasThreads()
    return _blas_threads


def serial_body(body: list[str], largest_flops: int, env: MutableMapping[str, Any]) -> list[str]:
    """``body`` (lines of the generated function) run with BLAS on one thread when
    its largest matrix product is below ``SERIAL_GEMM_FLOPS`` (and above OpenBLAS's
    own serial size), else ``body`` itself. Adds what it calls to ``env``."""
    control = blas_threads()
    if control.set is None or not OPENBLAS_SERIAL_FLOPS <= largest_flops < SERIAL_GEMM_FLOPS:
        return body
    env["_blas_set"], env["_blas_get"] = control.set, control.get
    return [
        "    _threads = _blas_get()",
        "    _blas_set(1)",
        "    try:",
        *("    " + line for line in body),
        "    finally:",
        "        _blas_set(_threads)",
    ]
