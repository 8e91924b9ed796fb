"""The VAE example: the ELBO improves, sampling happens in the graph, runs are seeded."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from asgrad import nn
from asgrad.examples import vae
from asgrad.examples.cnn import load_digits_split
from asgrad.tensor import Graph, compile, seed_stream
from asgrad.tensor.ops.random import normal_from_seed


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


# Over 30 s on 2 busy cores: a fresh interpreter trains a whole epoch, as a user would.
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


def test_losses_match_pytorchs_vae_given_the_same_noise(
    torch_reference: Callable[..., Any],
) -> None:
    # PyTorch's examples/vae model, from the same weights, with the noise asgrad draws
    # (seed s + k at step k: normal_from_seed), trained by torch.optim.Adam in float64.
    # PyTorch's side runs in torch_reference: saved as a fixture, live where installed.
    x = load_digits_split(0).x_train[:96].reshape(-1, 64).astype(np.float64)
    model = vae.VAE(64, seed=0, dtype="float64")
    names = ("fc1", "fc21", "fc22", "fc3", "fc4")
    weights = [
        (getattr(model, n).weight.value.copy(), getattr(model, n).bias.value.copy()) for n in names
    ]
    batches = [x[32 * (k % 3) : 32 * (k % 3 + 1)] for k in range(6)]
    noise = [normal_from_seed((32, 20), 11 + k) for k in range(6)]

    def theirs(torch: Any, weights: list[Any], batches: list[Any], noise: list[Any]) -> Any:
        tnn = torch.nn

        class TorchVAE(tnn.Module):  # type: ignore[misc]
            def __init__(self) -> None:
                super().__init__()
                self.fc1, self.fc21, self.fc22 = (
                    tnn.Linear(64, 400),
                    tnn.Linear(400, 20),
                    tnn.Linear(400, 20),
                )
                self.fc3, self.fc4 = tnn.Linear(20, 400), tnn.Linear(400, 64)

            def forward(self, x: Any, eps: Any) -> Any:
                h1 = torch.relu(self.fc1(x))
                mu, logvar = self.fc21(h1), self.fc22(h1)
                z = mu + eps * torch.exp(0.5 * logvar)
                return torch.sigmoid(self.fc4(torch.relu(self.fc3(z)))), mu, logvar

        ref = TorchVAE().double()
        with torch.no_grad():
            for name, (w, b) in zip(names, weights, strict=True):
                getattr(ref, name).weight.copy_(torch.tensor(w.T))
                getattr(ref, name).bias.copy_(torch.tensor(b))
        topt = torch.optim.Adam(ref.parameters(), lr=1e-3)
        losses = []
        for xb, eps in zip(batches, noise, strict=True):
            xb_t = torch.tensor(xb)
            r, m, lv = ref(xb_t, torch.tensor(eps))
            bce = tnn.functional.binary_cross_entropy(r, xb_t, reduction="sum")
            loss = bce - 0.5 * torch.sum(1 + lv - m.pow(2) - lv.exp())
            topt.zero_grad()
            loss.backward()
            topt.step()
            losses.append(float(loss.detach()))
        return losses

    want = torch_reference(theirs, weights, batches, noise)
    g = Graph()
    seed_stream(g, 11)
    xt = g.input("x", (32, 64), "float64")
    recon, mu, logvar = model(xt)
    step = nn.Adam(model.parameters()).compile(vae.loss_function(recon, xt, mu, logvar))
    for k, (xb, their_loss) in enumerate(zip(batches, want, strict=True)):
        got = float(step(x=xb)[0])
        assert got == pytest.approx(their_loss, rel=1e-9), k
