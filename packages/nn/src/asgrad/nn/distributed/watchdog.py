"""A watcher process per rank that names the rank which died without a word.

A rank that ends through ``os._exit``, a signal or a crash of the interpreter runs no
Python code on its way out, and the launcher (MPICH's Hydra, Open MPI) then kills the
other ranks with ``SIGKILL``, so no rank can say which one went first. Under a
launcher, [`init`][asgrad.nn.distributed.init] starts one small watcher per rank
(``python -I`` on this file: the standard library only, a few milliseconds) that holds
the read end of a pipe from its rank. When the pipe closes, the rank has ended:

* after ``ok`` (written by an ``atexit`` handler: the interpreter finished normally,
  and the rank recorded its exit in the job's folder), it leaves quietly;
* after ``told`` (written by [`abort`][asgrad.nn.distributed.abort], which printed the
  reason itself), it records the time of the death and says nothing;
* otherwise it records the time of the death in the job's folder, waits
  `SETTLE` seconds for the deaths the launcher causes, and if its rank's death was
  the first of the node it prints ``asgrad.nn.distributed: rank R of N (pid P on
  HOST) ended without finishing ...`` on stderr, naming the ranks that had exited
  before (a rank that exits, even normally, makes the launcher end the others).

The job's folder is shared by the ranks of one node (rank 0 chooses its name), so on
several nodes each node's first death is named. The last watcher to see every rank's
end recorded removes the folder (a rank still running keeps it, a few bytes a rank).

This module is run as a script; it imports nothing of asgrad.
"""

from __future__ import annotations

import os
import shutil
import sys
import time

__all__ = ["CLEAN", "SETTLE", "TOLD", "record", "watch"]

CLEAN = b"ok"
"""What a rank writes to its watcher when its interpreter ends normally."""

TOLD = b"told"
"""What a rank writes to its watcher when it reported its own failure (``abort``)."""

SETTLE = 0.3
"""Seconds a watcher waits after its rank's death for the other deaths on its node."""


def record(folder: str, kind: str, rank: int, pid: int) -> str:
    """Record a rank's ``kind`` of end (``exit`` or ``death``) now; the record's name
    ('' if it could not be written). Names sort by time (zero-padded), then rank."""
    name = f"{kind}-{time.time_ns():020d}-{rank:06d}"
    try:
        os.makedirs(folder, exist_ok=True)
        with open(os.path.join(folder, name), "w") as handle:
            handle.write(f"{rank} {pid}\n")
    except OSError:
        return ""
    return name


def _records(folder: str, kind: str) -> list[str]:
    try:
        return sorted(n for n in os.listdir(folder) if n.startswith(kind + "-"))
    except OSError:
        return []


def watch(rank: int, size: int, pid: int, host: str, folder: str) -> None:
    """Wait for the rank's end on stdin; name it on stderr if it died first, unannounced."""
    data = b""
    while True:
        chunk = os.read(0, 64)
        if not chunk:
            break
        data += chunk
    if not data.endswith(CLEAN):  # a clean exit was recorded by the rank itself
        name = record(folder, "death", rank, pid)
        if name and not data.endswith(TOLD):
            time.sleep(SETTLE)
            _report(rank, size, pid, host, folder, name)
    _remove_when_all_ended(folder, size)


def _remove_when_all_ended(folder: str, size: int) -> None:
    """Remove the folder once every rank's end is recorded (after any death's report)."""
    if len(_records(folder, "exit")) + len(_records(folder, "death")) < size:
        return
    if _records(folder, "death"):
        time.sleep(2 * SETTLE)  # the first death's watcher reads the records first
    shutil.rmtree(folder, ignore_errors=True)


def _report(rank: int, size: int, pid: int, host: str, folder: str, name: str) -> None:
    """Print the rank's death if it was the first of the node (``name`` is its record)."""
    deaths = _records(folder, "death")
    if not deaths or deaths[0] != name:
        return
    when = name.split("-")[1]
    exited = sorted(
        {int(n.split("-")[2]) for n in _records(folder, "exit") if n.split("-")[1] < when}
    )
    after = (
        f" after rank{'s' if len(exited) > 1 else ''} {', '.join(map(str, exited))} had exited"
        " (a rank that exits, even normally, makes the launcher end the others: see its"
        " output and exit status)"
        if exited
        else ""
    )
    sys.stderr.write(
        f"asgrad.nn.distributed: rank {rank} of {size} (pid {pid} on {host}) ended without"
        f" finishing{after}: no Python exception handler ran (os._exit, a signal such as"
        " SIGKILL or SIGSEGV, or the interpreter crashed); the other ranks stop when the"
        " launcher ends them or at their next collective's deadline\n"
    )
    sys.stderr.flush()


if __name__ == "__main__":
    watch(int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5])
