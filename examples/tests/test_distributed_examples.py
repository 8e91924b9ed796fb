"""``--distributed``: the CNN and the transformer under ``mpirun -n 2`` match one process."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from asgrad.examples._distributed import per_rank, setup


def mpiexec() -> str:
    beside = Path(sys.executable).parent / "mpiexec"
    found = str(beside) if beside.exists() else shutil.which("mpiexec")
    if found is None:
        pytest.fail("no mpiexec: the development environment installs mpi4py and mpich")
    return found


def run(ranks: int, module: str, *args: str) -> dict[str, Any]:
    """The example's JSON line, run on ``ranks`` ranks (1: plain, without mpiexec)."""
    environ = {k: v for k, v in os.environ.items() if not k.startswith(("PMI_", "OMPI_", "PMIX"))}
    environ.update(OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
    command = [sys.executable, "-m", f"asgrad.examples.{module}", "--quiet", *args]
    if ranks > 1:
        command = [mpiexec(), "-n", str(ranks), *command, "--distributed"]
    done = subprocess.run(
        command, env=environ, capture_output=True, text=True, timeout=400, check=False
    )
    assert done.returncode == 0, done.stdout + done.stderr
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    assert len(lines) == 1, done.stdout  # rank 0 alone reports
    result: dict[str, Any] = json.loads(lines[0])
    return result


@pytest.mark.slow
def test_cnn_on_two_ranks_reaches_the_accuracy_of_one_process() -> None:
    one = run(1, "cnn", "--epochs", "4")
    two = run(2, "cnn", "--epochs", "4")
    assert (one["ranks"], two["ranks"]) == (1, 2)
    assert one["test_accuracy"] > 0.9
    assert abs(one["test_accuracy"] - two["test_accuracy"]) <= 0.03, (one, two)
    assert abs(one["train_loss"] - two["train_loss"]) <= 0.05, (one, two)


@pytest.mark.slow
def test_transformer_on_two_ranks_learns_like_one_process() -> None:
    args = ("--steps", "60", "--batch-size", "8")
    one = run(1, "transformer", *args)
    two = run(2, "transformer", *args)
    assert two["ranks"] == 2
    assert two["steps"] == 60
    assert min(one["improvement"], two["improvement"]) > 0.05  # below the unigram baseline
    assert abs(one["val_loss"] - two["val_loss"]) <= 0.1, (one, two)


def test_without_the_flag_a_process_trains_alone() -> None:
    assert setup(False) == (0, 1)


def test_a_batch_that_does_not_divide_among_the_ranks_is_refused() -> None:
    assert per_rank(32, 4) == 8
    with pytest.raises(SystemExit, match="multiple of 3"):
        per_rank(32, 3)
