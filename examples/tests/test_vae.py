"""The VAE example: the ELBO improves, sampling happens in the graph, runs are seeded."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np

from asgrad.examples import vae
from asgrad.examples.cnn import load_digits_split
from asgrad.tensor import Graph, compile, seed_stream


def test_two_epochs_improve_the_test_elbo() -> None:
    results = vae.train(epochs=2, seed=0)
    untrained, *per_epoch = results["test_losses"]
    assert len(per_epoch) == 2
    # -ELBO per test image (nats): 45.2 untrained, 32.5 and 29.2 after epochs 1 and 2 here.
    assert per_epoch[-1] < 0.9 * untrained, results
    assert per_epoch[1] < per_epoch[0]
    assert results["train_losses"][1] < results["train_losses"][0]
    assert results["n_test"] == 360


def _loss_program(model: vae.VAE, seed: int) -> tuple[object, Graph]:
    g = Graph()
    seed_stream(g, seed)
    x = g.input("x", (16, 64))
    recon, mu, logvar = model(x)
    return compile([vae.loss_function(recon, x, mu, logvar), mu], g.updates), g


def test_the_reparameterisation_draws_fresh_seeded_noise() -> None:
    x = load_digits_split(0).x_train[:16].reshape(16, 64)
    model = vae.VAE(64, seed=0)
    program, _ = _loss_program(model, seed=5)
    first, second = program(x=x), program(x=x)  # type: ignore[operator]
    np.testing.assert_array_equal(first[1], second[1])  # the encoder is deterministic
    assert first[0] != second[0]  # the sample is not
    again, _ = _loss_program(model, seed=5)
    assert again(x=x)[0] == first[0]  # type: ignore[operator]  # same seed, same draw


def test_samples_are_decoded_from_randn_in_the_graph() -> None:
    model = vae.VAE(64, seed=0)
    a, b = vae.sample(model, 8, seed=1), vae.sample(model, 8, seed=2)
    assert a.shape == (8, 64)
    assert np.all((a > 0) & (a < 1))
    assert not np.array_equal(a, b)
    np.testing.assert_array_equal(a, vae.sample(model, 8, seed=1))


def test_command_line_prints_one_json_line() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "asgrad.examples.vae", "--epochs", "1", "--quiet"],
        capture_output=True,
        text=True,
        check=True,
    )
    line = json.loads(out.stdout.strip().splitlines()[-1])
    assert line["example"] == "vae"
    assert line["test_loss"] < line["untrained_test_loss"]
