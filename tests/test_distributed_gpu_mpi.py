"""Two ranks on the GPU backend (lavapipe in CI) take the steps of one process.

Runs ``packages/nn/tests/mpi/exactness.py`` under ``mpiexec -n 2`` with
``ASGRAD_DEVICE=gpu``: each rank's gradient program reads its buckets back, MPI
reduces them, the update program writes them back; the reference is one process on
the GPU with the global batch. Each rank opens the adapter of its local rank, wrapped
around when the machine has fewer (lavapipe: one), and names it. One case per launch:
in one process, a later case can
fail with a spurious one_hot OutOfRangeError when the plan binds an input leaf late
and the scope hands it the buffer of an intermediate that earlier recorded kernels
write after the upload (a GPU-backend problem of input buffers taken from a plan's
free list, fixed by allocating input buffers fresh).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from asgrad.gpu import Device, adapters

pytestmark = [pytest.mark.gpu, pytest.mark.slow]

SCRIPT = Path(__file__).resolve().parent.parent / "packages/nn/tests/mpi/exactness.py"


@pytest.mark.parametrize("case", ["adamw:1", "sgd:2"])
def test_two_gpu_ranks_step_like_one_gpu_process(device: Device, case: str) -> None:
    del device  # the fixture fails (or skips) without an adapter
    beside = Path(sys.executable).parent / "mpiexec"
    launcher = str(beside) if beside.exists() else shutil.which("mpiexec")
    assert launcher is not None, "no mpiexec: the development environment installs mpich"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PMI_", "OMPI_", "PMIX"))}
    env.update(ASGRAD_DEVICE="gpu", OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
    done = subprocess.run(
        [launcher, "-n", "2", sys.executable, str(SCRIPT), case],
        env=env,
        capture_output=True,
        text=True,
        timeout=400,
        check=False,
    )
    output = done.stdout + done.stderr
    assert done.returncode == 0, output
    kind, accumulate = case.split(":")
    assert f"RESULT ranks=2 {kind} accumulate={accumulate} " in output, output
    assert "FAILED" not in output, output
    count = len(adapters())
    for rank in (0, 1):
        line = f"asgrad.gpu: rank {rank} of 2 (local {rank} of 2 on "
        assert line in output, output
        chosen = output.split(line, 1)[1].splitlines()[0]
        assert f"adapter {rank % count} of {count}, " in chosen, output
        wrapped = f"chosen by local rank {rank}, wrapped around" in chosen
        assert wrapped == (rank >= count), output
    if count == 1:  # the second rank shares the one adapter, and is told so
        assert "local rank 1 but 1 adapter(s)" in output, output
