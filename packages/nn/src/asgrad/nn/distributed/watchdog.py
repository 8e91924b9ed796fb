"""A watcher process per rank that names the rank which died without a word.

A rank that ends through ``os._exit``, a signal or a crash of the interpreter runs no
Python code on its way out, and the launcher (MPICH's Hydra, Open MPI) then kills the
other ranks with ``SIGKILL``, so no rank can say which one went first. Under a
launcher, [`init`][asgrad.nn.distributed.init] starts one small watcher per rank
(``python -I`` on this file: the standard library only, a few milliseconds) that holds
the read end of a pipe from its rank. When the pipe closes, the rank has ended:

* after ``ok`` (written by an ``atexit`` handler: the interpreter finished normally),
  the watcher leaves quietly;
* after ``told`` (written by [`abort`][asgrad.nn.distributed.abort], which printed the
  reason itself), it records the time of the death and says nothing;
* otherwise it records the time of the death in the job's folder, waits
  `SETTLE` seconds for the deaths the launcher causes, and if its rank's death was
  the first of the node it prints ``asgrad.nn.distributed: rank R of N (pid P on
  HOST) ended without finishing ...`` on stderr.

The job's folder is shared by the ranks of one node (rank 0 chooses its name), so on
several nodes each node's first death is named.

This module is run as a script; it imports nothing of asgrad.
"""

from __future__ import annotations

import os
import sys
import time

__all__ = ["CLEAN", "SETTLE", "TOLD", "watch"]

CLEAN = b"ok"
"""What a rank writes to its watcher when its interpreter ends normally."""

TOLD = b"told"
"""What a rank writes to its watcher when it reported its own failure (``abort``)."""

SETTLE = 0.3
"""Seconds a watcher waits after its rank's death for the other deaths on its node."""


def _earliest(folder: str) -> str | None:
    """The name of the earliest death recorded in ``folder`` (None if none)."""
    try:
        names = [n for n in os.listdir(folder) if n.startswith("death-")]
    except OSError:
        return None
    return min(names) if names else None


def watch(rank: int, size: int, pid: int, host: str, folder: str) -> None:
    """Wait for the rank's end on stdin; name it on stderr if it died first, unannounced."""
    data = b""
    while True:
        chunk = os.read(0, 64)
        if not chunk:
            break
        data += chunk
    if data.endswith(CLEAN):
        return
    # The time first (zero-padded, so names sort by it), then the rank to break ties.
    name = f"death-{time.time_ns():020d}-{rank:06d}"
    try:
        os.makedirs(folder, exist_ok=True)
        with open(os.path.join(folder, name), "w") as record:
            record.write(f"{rank} {pid}\n")
    except OSError:
        return
    if data.endswith(TOLD):
        return
    time.sleep(SETTLE)
    if _earliest(folder) != name:
        return
    sys.stderr.write(
        f"asgrad.nn.distributed: rank {rank} of {size} (pid {pid} on {host}) ended without"
        " finishing: no Python exception handler ran (os._exit, a signal such as SIGKILL"
        " or SIGSEGV, or the interpreter crashed); the other ranks stop when the launcher ends them"
        " or at their next collective's deadline\n"
    )
    sys.stderr.flush()


if __name__ == "__main__":
    watch(int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5])
