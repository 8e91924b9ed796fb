"""Threads of the compiled elementwise loops and row kernels.

Each rendered elementwise loop (`asgrad.tensor.cpu.jit.kernels.rendered_kernel`) and
row kernel (`asgrad.tensor.cpu.jit.render_rows.rows_kernel`) has a parallel form
beside its serial one (``numba.prange``, ``parallel=True``): the elementwise loop over
chunks of `CHUNK` elements, the row kernels over rows (``_rows``) or over the leading
axis (``_slabs``), each row reduced by one thread exactly as the serial kernel reduces
it. Both forms compute every element the same way, so their results are
bit-identical. A kernel takes its parallel form when its result has at least
`PARALLEL_MIN` elements and more than one kernel thread is set (`threads`), and
always where that is 1.

The kernel threads are ``ASGRAD_CPU_THREADS`` or `set_threads`'s count; else Numba's
(``numba.get_num_threads()``: ``NUMBA_NUM_THREADS``, by default the machine's cores)
where that is at least `AUTO_MIN_THREADS`, else 1. On the shared 2-core development
machine (load average about 7) the parallel form's best time over 2 threads was
1.3-2x the serial one's, but its median was 8-20 ms against 0.03-0.7 ms serial: a
kernel waits for its slowest thread, and on a loaded machine that one waits for a
time slice (``benchmarks/cpu_threads.py``). The matrix products keep BLAS's own
threads (they run between the kernels, never at the same time). Nothing here imports
Numba before a kernel asks.
"""

from __future__ import annotations

import os
from typing import Any

from asgrad.tensor.errors import ArgumentError

__all__ = ["AUTO_MIN_THREADS", "CHUNK", "ENV", "PARALLEL_MIN", "parallel", "set_threads", "threads"]

# Elements of a result from which a kernel runs over threads (PyTorch's grain size for
# its elementwise and norm kernels is 32768).
PARALLEL_MIN = 32768
# Elements one thread of the parallel elementwise loop takes at a time.
CHUNK = 16384
ENV = "ASGRAD_CPU_THREADS"
# Numba's thread count is the default only from this many threads up (below: serial,
# unless set): see the module's docstring.
AUTO_MIN_THREADS = 4

_override: list[int | None] = [None]
# Numba, once imported here: every large kernel call asks for it (`parallel`), and
# setting up its cache again each time took 19 us a call.
_imported: list[Any] = []


def _numba() -> Any:
    """Numba, imported after its cache is set up."""
    if not _imported:
        from asgrad.tensor.cpu.jit import prepare_numba

        prepare_numba()
        import numba

        _imported.append(numba)
    return _imported[0]


def _count(value: object, source: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ArgumentError(f"{source}: the kernel threads must be an integer >= 1, got {value!r}")
    most = int(_numba().config.NUMBA_NUM_THREADS)
    if value > most:
        raise ArgumentError(
            f"{source}: {value} kernel threads, but Numba started {most}"
            " (set NUMBA_NUM_THREADS before Numba is imported to allow more)"
        )
    return value


def set_threads(n: int | None) -> None:
    """Run the compiled elementwise and row kernels over ``n`` threads (1: serial
    everywhere); ``None`` goes back to the default (`threads`).

    Raises:
        ArgumentError: ``n`` is not an integer >= 1, or is more than the
            ``NUMBA_NUM_THREADS`` Numba started with.

    >>> from asgrad.tensor.cpu.jit.threads import set_threads, threads
    >>> set_threads(1)
    >>> threads()
    1
    >>> set_threads(None)
    """
    _override[0] = None if n is None else _count(n, "set_threads")


def threads() -> int:
    """The kernel threads: `set_threads`'s, else ``ASGRAD_CPU_THREADS``, else
    ``numba.get_num_threads()`` where it is at least `AUTO_MIN_THREADS`, else 1
    (imports Numba).

    >>> from asgrad.tensor.cpu.jit.threads import threads
    >>> threads() >= 1
    True
    """
    if _override[0] is not None:
        return _override[0]
    env = os.environ.get(ENV, "").strip()
    if env:
        try:
            value = int(env)
        except ValueError:
            value = -1
        return _count(value if value >= 1 else env, ENV)
    n = int(_numba().get_num_threads())
    return n if n >= AUTO_MIN_THREADS else 1


def parallel(size: int) -> bool:
    """Whether a kernel whose result has ``size`` elements runs its parallel form; if
    so, Numba's thread count (in the calling thread) is set to `threads`.

    >>> from asgrad.tensor.cpu.jit.threads import parallel
    >>> parallel(10)
    False
    """
    if size < PARALLEL_MIN:
        return False
    n = threads()
    if n < 2:
        return False
    numba = _numba()
    if numba.get_num_threads() != n:
        numba.set_num_threads(n)
    return True
