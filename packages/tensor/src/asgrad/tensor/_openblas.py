"""numpy's OpenBLAS threads told to stop spinning soon after a product (before numpy loads).

After each multi-threaded product OpenBLAS's idle threads keep polling for the next
one (calling ``sched_yield``) for ``2**28`` CPU cycles, about 0.1 s, before they sleep.
A training step runs a compiled elementwise or row kernel right after most products,
so where those kernels run over Numba's threads, each of their threads shares a core
with a polling BLAS thread, and the measured thread choice
(`asgrad.tensor.cpu.jit.threads`) then finds the parallel form no faster than the
serial one (docs/performance.md, "Threads and OpenBLAS's polling threads").
``OPENBLAS_THREAD_TIMEOUT=k`` makes them poll ``2**k`` cycles instead; OpenBLAS reads
it once, when numpy loads it.

`configure` sets ``OPENBLAS_THREAD_TIMEOUT`` to `TIMEOUT` (``2**16`` cycles, some tens
of microseconds: long enough for back-to-back products, short against a kernel)
when numpy is not loaded yet, the variable is unset, the compiled path is not switched
off (``ASGRAD_CPU_JIT=0``), and the kernels may measure a parallel form: at least
`MIN_THREADS` kernel threads (``ASGRAD_CPU_THREADS``, else ``NUMBA_NUM_THREADS``, else
the CPUs this process may use). Where numpy was imported first it changes nothing:
set the variable before importing numpy. Importing this module (``asgrad.tensor``
imports it first) calls it.
"""

from __future__ import annotations

import os
import sys

__all__ = ["MIN_THREADS", "TIMEOUT", "configure"]

TIMEOUT = "16"
# As `asgrad.tensor.cpu.jit.threads.MEASURE_MIN_THREADS`: below it every kernel is serial.
MIN_THREADS = 4


def _kernel_threads() -> int:
    for name in ("ASGRAD_CPU_THREADS", "NUMBA_NUM_THREADS"):
        value = os.environ.get(name, "").strip()
        if value:
            try:
                return int(value)
            except ValueError:
                return 1  # the compiled path reports the bad value itself
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def configure() -> bool:
    """Set ``OPENBLAS_THREAD_TIMEOUT`` as the module docstring says; whether it did.

    >>> from asgrad.tensor import _openblas
    >>> _openblas.configure()  # numpy is loaded by now
    False
    """
    if "numpy" in sys.modules or "OPENBLAS_THREAD_TIMEOUT" in os.environ:
        return False
    if os.environ.get("ASGRAD_CPU_JIT", "").strip().lower() in ("0", "off", "false", "no"):
        return False
    if _kernel_threads() < MIN_THREADS:
        return False
    os.environ["OPENBLAS_THREAD_TIMEOUT"] = TIMEOUT
    return True


configure()
