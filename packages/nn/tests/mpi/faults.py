"""Run under ``mpirun -n 2``: rank 1 fails after two steps; rank 0 must not hang.

``python faults.py MODE`` with MODE one of
  raise: rank 1 raises (the exception hook prints it and calls MPI_Abort);
  exit:  rank 1 leaves with os._exit(3), no MPI_Finalize (a crash);
  hang:  rank 1 stops calling collectives (sleeps); rank 0's all-reduce times out;
  unsynced: the ranks build different parameters and skip the broadcast.
"""

from __future__ import annotations

import os
import sys
import time

import numpy as np

from asgrad import nn
from asgrad.nn import distributed as dist
from asgrad.tensor import Graph


def main(mode: str) -> None:
    dist.init(timeout=120)  # starting may be slow on a loaded machine
    model = nn.Linear(3, 1, rng=dist.rank() if mode == "unsynced" else 0)
    if mode != "unsynced":
        dist.broadcast_variables(model.parameters())
    g = Graph()
    x, y = g.input("x", (4, 3)), g.input("y", (4, 1))
    step = dist.compile_step(nn.SGD(model.parameters(), lr=0.1), nn.mse_loss(model(x), y))
    xs, ys = np.ones((4, 3), np.float32), np.zeros((4, 1), np.float32)
    dist.barrier()
    dist.init(timeout=float(os.environ.get("FAULT_TIMEOUT", "5")))  # the deadline under test
    for i in range(1000):
        if i == 2 and dist.rank() == 1:
            print(f"rank 1 fails now ({mode})", flush=True)
            if mode == "raise":
                raise RuntimeError("injected failure on rank 1")
            if mode == "exit":
                os._exit(3)
            time.sleep(3600)
        step(x=xs, y=ys)
    print("rank", dist.rank(), "finished: the fault was not noticed", flush=True)


if __name__ == "__main__":
    main(sys.argv[1])
