"""The XOR example meets its bar: MSE < 1e-3 within 1000 steps, all four points right."""

from __future__ import annotations

import json
import subprocess
import sys

from asgrad.examples import xor


def test_xor_reaches_target_loss_within_1000_steps() -> None:
    results = xor.train(steps=1000, seed=0)
    assert results["final_loss"] < 1e-3
    assert results["steps"] <= 1000
    assert results["correct"]


def test_xor_losses_decrease_for_other_seeds() -> None:
    for seed in (1, 2, 3):
        results = xor.train(steps=1000, seed=seed)
        assert results["final_loss"] < 1e-3, (seed, results["final_loss"])


def test_xor_command_ends_with_one_json_line() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "asgrad.examples.xor", "--quiet"],
        capture_output=True,
        text=True,
        check=True,
    )
    last = out.stdout.strip().splitlines()[-1]
    result = json.loads(last)
    assert result["example"] == "xor"
    assert result["final_loss"] < 1e-3
    assert {"steps", "seconds"} <= set(result)
