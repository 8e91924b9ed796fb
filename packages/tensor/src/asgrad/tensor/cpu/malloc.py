"""glibc's malloc told to keep freed memory for the next step (the first CPU program does it).

A training step on the CPU frees and allocates the same arrays every step: the
optimizer's new parameters and moments, a few copies, NumPy's temporaries on the numpy
path. glibc's malloc gives memory back to the system when the free space at the top of
its heap passes ``M_TRIM_THRESHOLD``, and serves an allocation above
``M_MMAP_THRESHOLD`` with a fresh mapping; both thresholds start small (128 KiB) and
grow only to the largest block freed so far. So a step that frees more than that at
once returns it, and the next step takes the same pages back one page fault at a time,
each page zero-filled by the kernel: transformer_large's step on the 2-core machine
took 65-2,298 minor page faults and 37 ms of system time a step (2026-12-03), none and
1.3 ms with the settings below.

`configure` sets ``M_MMAP_THRESHOLD`` to `MMAP_THRESHOLD` (32 MiB, the largest glibc
accepts: smaller arrays come from the heap and go back to it) and ``M_TRIM_THRESHOLD``
to `TRIM_THRESHOLD` (1 GiB: free space at the top of the heap is kept up to that), the
remedy PyTorch's CPU tuning guide reaches with a preloaded jemalloc or TCMalloc. The
cost: after a peak, up to 1 GiB of freed memory stays with the process instead of
going back to the system (arrays over 32 MiB are still mapped and unmapped each time).
It does so once per process, on Linux with glibc, unless the environment already
tunes malloc (``MALLOC_MMAP_THRESHOLD_``, ``MALLOC_TRIM_THRESHOLD_``,
``MALLOC_TOP_PAD_``, or ``glibc.malloc`` in ``GLIBC_TUNABLES``) or sets
``ASGRAD_CPU_MALLOC=0``. `asgrad.tensor.cpu.CPUExecutable` calls it when the first CPU
program is made.
"""

from __future__ import annotations

import ctypes
import os
import platform
from typing import Any

__all__ = ["MMAP_THRESHOLD", "TRIM_THRESHOLD", "configure"]

MMAP_THRESHOLD = 32 << 20
TRIM_THRESHOLD = 1 << 30
# mallopt's parameter numbers (malloc.h).
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3
_USER_SETTINGS = ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_", "MALLOC_TOP_PAD_")

# Whether `configure` has run in this process (it decides once).
_done: list[bool] = [False]


def _mallopt() -> Any:
    """glibc's ``mallopt``, or None off glibc."""
    if platform.system() != "Linux" or platform.libc_ver()[0] != "glibc":
        return None
    try:
        fn = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return None
    fn.argtypes, fn.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    return fn


def _wanted() -> bool:
    if os.environ.get("ASGRAD_CPU_MALLOC", "").strip().lower() in ("0", "off", "false", "no"):
        return False
    if any(name in os.environ for name in _USER_SETTINGS):
        return False
    return "glibc.malloc" not in os.environ.get("GLIBC_TUNABLES", "")


def configure() -> bool:
    """Set the thresholds as the module docstring says, the first time it is called in
    the process; whether glibc took them."""
    if _done[0]:
        return False
    _done[0] = True
    mallopt = _mallopt() if _wanted() else None
    if mallopt is None:
        return False
    return bool(mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD)) & bool(
        mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD)
    )
