"""benchmarks/paired.py: the worker's block protocol and the rounds' summary.

The worker runs for real in a subprocess (asgrad's xor step, no peer needed); the
orchestrator's summary is checked on given rates.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

BENCH = Path(__file__).resolve().parents[1] / "benchmarks"


def test_the_summary_pairs_each_rounds_blocks(benchmark_script: Callable[[str], Any]) -> None:
    got = benchmark_script("paired").summary([(3.0, 2.0), (1.0, 2.0), (4.0, 2.0), (2.0, 1.0)])
    assert got["rounds"] == 4
    assert got["ratios"] == [1.5, 0.5, 2.0, 2.0]
    assert got["median_ratio"] == 1.75
    assert (got["min_ratio"], got["max_ratio"]) == (0.5, 2.0)
    # the frameworks' own medians (2.5 and 2.0) give another figure than the pairs
    assert got["ratio_of_medians"] == pytest.approx(1.25)


def test_a_worker_says_ready_then_answers_each_block_with_its_rate() -> None:
    env = {**os.environ, "ASGRAD_CPU_JIT": "0"}  # the numpy path: no compiler in the test
    argv = [sys.executable, str(BENCH / "paired.py"), "--serve", "asgrad", "xor", "--threads", "1"]
    worker = subprocess.run(
        argv, input="block 7\nblock 0\nquit\n", capture_output=True, text=True, env=env, timeout=300
    )
    assert worker.returncode == 0, worker.stderr
    ready, first, second = worker.stdout.split("\n")[:3]
    word, steps, seconds = ready.split()
    assert word == "ready"
    assert int(steps) > 0
    assert float(seconds) > 0
    assert float(first) > 0
    assert float(second) > 0


def test_a_framework_that_cannot_run_stops_the_pairing_with_its_reason(
    benchmark_script: Callable[[str], Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    paired = benchmark_script("paired")
    answers = iter(["ready 10 1.0", "unavailable PyTorch is not importable"])
    monkeypatch.setattr(paired, "_spawn", lambda name, args: _Exited())
    monkeypatch.setattr(paired, "_ask", lambda worker, line=None: next(answers))
    with pytest.raises(SystemExit, match="torch cannot run xor here: PyTorch is not importable"):
        paired.main(["xor", "--rounds", "1"])


class _Exited:
    """A worker process that has ended."""

    def poll(self) -> int:
        return 0
