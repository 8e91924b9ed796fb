"""asgrad.nn.distributed under a real MPI launcher: exactness, faults and restarts.

Each test starts ``mpiexec -n N python <script>`` (MPICH from the ``mpich`` wheel of
the development environment; the scripts are in ``tests/mpi/``) with a time limit,
so a hang fails the test instead of the run.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

pytestmark = pytest.mark.slow

SCRIPTS = Path(__file__).resolve().parent / "mpi"


def mpiexec() -> str:
    """The MPI launcher next to this Python (the mpich wheel's), else on PATH."""
    beside = Path(sys.executable).parent / "mpiexec"
    found = str(beside) if beside.exists() else shutil.which("mpiexec")
    if found is None:
        pytest.fail("no mpiexec: the development environment installs mpi4py and mpich")
    return found


def launch(
    n: int,
    script: str,
    *args: str,
    limit: float = 300,
    options: tuple[str, ...] = (),
    **env: str,
) -> tuple[int, str]:
    """Run ``script`` on ``n`` ranks; return the exit status and the output (both streams).

    ``options`` go to mpiexec before ``-n``."""
    environ = {k: v for k, v in os.environ.items() if not k.startswith(("PMI_", "OMPI_", "PMIX"))}
    environ.update(OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1", **env)
    command = [mpiexec(), *options, "-n", str(n), sys.executable, str(SCRIPTS / script), *args]
    done = subprocess.run(
        command, env=environ, capture_output=True, text=True, timeout=limit, check=False
    )
    return done.returncode, done.stdout + done.stderr


@pytest.mark.parametrize("ranks", [1, 2, 4])
def test_n_ranks_step_like_one_process_with_n_times_the_batch(ranks: int) -> None:
    code, output = launch(ranks, "exactness.py")
    results = [line for line in output.splitlines() if line.startswith("RESULT")]
    assert code == 0, output
    # SGD and AdamW, with and without accumulation, every one within round-off
    assert len(results) == 4, output
    assert all(line.endswith(" ok") and f"ranks={ranks}" in line for line in results), output


def test_sync_batch_norm_on_two_ranks_is_batch_norm_on_the_global_batch() -> None:
    code, output = launch(2, "syncbn.py", limit=200)
    assert code == 0, output
    # forward rows, running statistics, gradients and evaluation, within round-off
    assert "RESULT ranks=2 syncbn " in output, output
    assert " ok" in output.split("RESULT ranks=2 syncbn ", 1)[1].splitlines()[0], output


@pytest.mark.parametrize(
    ("mode", "expected"),
    [
        ("raise", "rank 1 of 2: RuntimeError was not caught; aborting every rank"),
        ("hang", "did not complete within 5 s"),
        ("exit", "asgrad.nn.distributed: rank 1 of 2 (pid"),
    ],
)
def test_a_failing_rank_stops_every_rank(mode: str, expected: str) -> None:
    began = time.monotonic()
    code, output = launch(2, "faults.py", mode, limit=120, FAULT_TIMEOUT="5")
    took = time.monotonic() - began
    assert code != 0, output
    assert "finished: the fault was not noticed" not in output
    assert "rank 1 fails now" in output, output
    assert expected in output, output
    assert took < 100


def test_a_rank_that_dies_unannounced_is_named_when_the_launcher_leaves_the_others() -> None:
    # Hydra's -disable-auto-cleanup keeps rank 0 running: its collective's deadline ends it.
    code, output = launch(
        2, "faults.py", "exit", limit=120, options=("-disable-auto-cleanup",), FAULT_TIMEOUT="3"
    )
    assert code != 0, output
    assert "rank 1 of 2 (pid" in output, output
    assert "ended without finishing" in output, output
    assert "did not complete within 3 s; rank 1 of this node has ended" in output, output
    assert "rank 0 of 2: DistributedTimeoutError was not caught" in output, output


def test_ranks_that_start_from_different_parameters_are_stopped() -> None:
    code, output = launch(2, "faults.py", "unsynced", limit=120)
    assert code != 0, output
    assert "the ranks start from different parameter values" in output, output
    assert "rank 1 fails now" not in output


def test_a_restart_from_the_last_checkpoint_continues_as_if_unbroken(tmp_path: Path) -> None:
    broken, unbroken = tmp_path / "broken", tmp_path / "unbroken"
    code, output = launch(2, "resume.py", str(broken), str(tmp_path / "a.npz"), "1", limit=120)
    assert code != 0, output
    assert "injected crash" in output, output
    assert not (tmp_path / "a.npz").exists()
    assert [p.name for p in broken.glob("ckpt-*")] == ["ckpt-000000004"]  # after epoch 0
    code, output = launch(2, "resume.py", str(broken), str(tmp_path / "a.npz"), limit=120)
    assert code == 0, output
    assert "resumed after epoch 0" in output, output
    code, output = launch(2, "resume.py", str(unbroken), str(tmp_path / "b.npz"), limit=120)
    assert code == 0, output
    assert "resumed" not in output, output
    a, b = np.load(tmp_path / "a.npz"), np.load(tmp_path / "b.npz")
    assert len(a.files) == 4
    for key in a.files:
        np.testing.assert_array_equal(a[key], b[key])
