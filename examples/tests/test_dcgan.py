"""The DCGAN example (issue 20): two models in one graph, batch norm reused, Adam's betas."""

from __future__ import annotations

import json

import numpy as np
import pytest

from asgrad.examples import dcgan


def test_a_short_run_brings_the_samples_closer_to_held_out_digits() -> None:
    results = dcgan.train(steps=120, batch_size=32, seed=0)
    # Untrained, the generator's samples are far from the digits (a Fréchet distance
    # in pixel space of about 46); 120 steps cut it at least threefold (to about 15 here).
    assert results["frechet_after"] < results["frechet_before"] / 3, results
    assert np.isfinite(results["loss_d"])
    assert np.isfinite(results["loss_g"])
    samples = results["samples"]
    assert samples.shape == (360, 1, 8, 8)
    assert samples.min() >= -1.0
    assert samples.max() <= 1.0
    assert samples.std(axis=0).mean() > 0.05  # not one image repeated


def test_frechet_distance_is_zero_for_one_set_and_grows_with_a_shift() -> None:
    x = np.random.default_rng(0).normal(size=(500, 4))
    assert dcgan.frechet_distance(x, x) == pytest.approx(0.0, abs=1e-6)
    assert dcgan.frechet_distance(x, x + 1.0) == pytest.approx(4.0, rel=1e-6)


def test_weights_init_draws_dcgan_s_distributions() -> None:
    net = dcgan.Discriminator(ndf=64).apply(dcgan.weights_init)  # as PyTorch's, unseeded
    conv, bn = net.main[2], net.main[3]
    assert abs(float(conv.weight.value.std()) - 0.02) < 0.002
    assert abs(float(bn.weight.value.mean()) - 1.0) < 0.01
    assert not bn.bias.value.any()


def test_cli_prints_one_json_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert dcgan.main(["--steps", "2", "--batch-size", "16", "--quiet"]) == 0
    line = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert line["example"] == "dcgan"
    assert line["steps"] == 2
    assert "samples" not in line
