"""The LSTM example: it beats the unigram baseline on the CPU, follows the CPU's loss
trajectory on the GPU, and its command line ends with one JSON line."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from asgrad.examples import lstm
from asgrad.gpu import GpuUnavailableError, get_device
from asgrad.tensor import Graph


def test_short_run_beats_the_unigram_baseline() -> None:
    results = lstm.train(steps=50, seed=0, sample_length=10)
    assert results["steps"] == 50
    # the unigram baseline is about 3.24 nats per character
    assert results["val_loss"] < results["unigram_loss"] - 0.3
    assert results["sample"].startswith(lstm.PROMPT)


def test_the_model_is_one_scan_per_layer() -> None:
    model = lstm.CharLSTM(20, hidden=8, num_layers=2)
    g = Graph()
    logits = model(g.input("ids", (2, 300), "int64"))
    assert logits.shape == (2, 300, 20)
    assert sum(n.op == "scan" for n in g.nodes) == 2


def test_command_line_reports_json() -> None:
    run = subprocess.run(
        [sys.executable, "-m", "asgrad.examples.lstm", "--steps", "2", "--quiet", "--hidden", "16"],
        capture_output=True,
        text=True,
        check=True,
        timeout=300,
    )
    result = json.loads(run.stdout.strip().splitlines()[-1])
    assert result["example"] == "lstm"
    assert result["steps"] == 2


@pytest.mark.gpu
def test_trains_on_the_gpu_like_on_the_cpu() -> None:
    try:
        get_device()
    except GpuUnavailableError as exc:
        if os.environ.get("ASGRAD_REQUIRE_GPU", "") not in ("", "0"):
            pytest.fail(f"ASGRAD_REQUIRE_GPU=1 but no GPU adapter: {exc}")
        pytest.skip(f"no GPU adapter: {exc}")

    def run(backend: str) -> list[float]:
        result = lstm.train(10, 0, backend, batch_size=4, context=16, hidden=16, sample_length=1)
        assert result["device"] == backend
        losses: list[float] = result["losses"]
        return losses

    np.testing.assert_allclose(run("gpu"), run("cpu"), rtol=1e-3)
