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


class BlasThreads:
    """Gets and sets the thread count of numpy's BLAS (through threadpoolctl, when
    installed); ``get``/``set`` are None when it cannot be reached."""

    def __init__(self) -> None:
        self.get: Callable[[], Any] | None = None
        self.set: Callable[[int], Any] | None = None
        try:
            from threadpoolctl import ThreadpoolController  # type: ignore[import-untyped]
        except ImportError:
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
