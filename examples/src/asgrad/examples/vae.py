"""VAE: PyTorch's variational autoencoder example, on handwritten digits.

    python -m asgrad.examples.vae [--epochs 10] [--batch-size 128] [--seed 0]
                                  [--device cpu|gpu|auto] [--data MNIST_DIR]
                                  [--plot curve.png] [--log metrics.jsonl]

The model, loss and optimizer of PyTorch's ``examples/vae/main.py``: an encoder
``D -> 400`` (ReLU) to the mean and log-variance of a 20-dimensional Gaussian, a
sample ``z = mu + eps * exp(logvar / 2)`` with ``eps = randn_like(std)`` drawn inside
the compiled graph (a fresh draw every step, from the graph's seed stream), a decoder
``20 -> 400 -> D`` with a sigmoid, the negative ELBO ``BCE(recon, x, sum) + KL(q(z|x) ||
N(0, I))`` and Adam at 1e-3. ``D`` is 64 on scikit-learn's bundled 8x8 digits (the
default: a disjoint 20% test split, as the CNN example's) and 784 on MNIST (``--data``).

After each epoch the test split's loss per image is measured (sampling too, as
PyTorch's ``test()`` does); at the end 64 images are decoded from ``z ~ N(0, I)``,
drawn by ``randn`` in a graph. Ends with one JSON line of results; ``--log`` writes
one record per epoch, ``--plot`` the train and test loss per epoch.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any

import numpy as np

from asgrad import nn
from asgrad.examples._common import (
    Timer,
    check_plot,
    device,
    launch,
    open_log,
    parser,
    plot,
    progress,
)
from asgrad.examples._common import report as print_report
from asgrad.examples.cnn import Split, load_digits_split, load_mnist_split
from asgrad.nn.data import DataLoader, TensorDataset
from asgrad.tensor import Graph, Tensor, compile, randn, randn_like, seed_stream

DIGITS_EPOCHS = 10
HIDDEN, LATENT = 400, 20


class VAE(nn.Module):
    """``fc1 -> (fc21, fc22)`` encoder, ``fc3 -> fc4`` decoder, as PyTorch's example."""

    def __init__(self, n_in: int, seed: int = 0, dtype: str = "float32") -> None:
        super().__init__()
        rng = np.random.default_rng(seed)
        self.n_in = n_in
        self.fc1 = nn.Linear(n_in, HIDDEN, rng=rng, dtype=dtype)
        self.fc21 = nn.Linear(HIDDEN, LATENT, rng=rng, dtype=dtype)
        self.fc22 = nn.Linear(HIDDEN, LATENT, rng=rng, dtype=dtype)
        self.fc3 = nn.Linear(LATENT, HIDDEN, rng=rng, dtype=dtype)
        self.fc4 = nn.Linear(HIDDEN, n_in, rng=rng, dtype=dtype)

    def encode(self, x: Tensor) -> tuple[Tensor, Tensor]:
        h1 = self.fc1(x).relu()
        return self.fc21(h1), self.fc22(h1)

    def reparameterize(self, mu: Tensor, logvar: Tensor) -> Tensor:
        std = (0.5 * logvar).exp()
        eps = randn_like(std)  # drawn in the graph, afresh every run
        return mu + eps * std

    def decode(self, z: Tensor) -> Tensor:
        out: Tensor = self.fc4(self.fc3(z).relu()).sigmoid()
        return out

    def forward(self, x: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        mu, logvar = self.encode(x.reshape(-1, self.n_in))
        z = self.reparameterize(mu, logvar)
        return self.decode(z), mu, logvar


def loss_function(recon_x: Tensor, x: Tensor, mu: Tensor, logvar: Tensor) -> Tensor:
    """Reconstruction BCE plus the KL divergence from N(0, I), summed over the batch."""
    bce = nn.binary_cross_entropy(recon_x, x, reduction="sum")
    kld = -0.5 * (1.0 + logvar - mu * mu - logvar.exp()).sum()
    return bce + kld


def _flat(x: np.ndarray) -> np.ndarray:
    return x.reshape(len(x), -1).astype(np.float32)


def train(
    split: Split | None = None,
    epochs: int = DIGITS_EPOCHS,
    batch_size: int = 128,
    lr: float = 1e-3,
    seed: int = 0,
    backend: str | None = None,
    quiet: bool = True,
    log: nn.MetricWriter | None = None,
) -> dict[str, Any]:
    """Train the VAE on ``split`` (default: the digits); the results as a dict.

    ``test_losses[0]`` is the untrained model's test loss per image, then one per epoch.
    """
    split = split if split is not None else load_digits_split(seed)
    x_train, x_test = _flat(split.x_train), _flat(split.x_test)
    n_in = x_train.shape[1]
    model = VAE(n_in, seed)
    g = Graph("vae-train")
    seed_stream(g, seed)  # the reparameterisation's noise: reproducible under --seed
    x = g.input("x", (batch_size, n_in))
    recon, mu, logvar = model(x)
    loss = loss_function(recon, x, mu, logvar)
    step = nn.Adam(model.parameters(), lr=lr).compile(loss, backend=backend)
    # The test loss: the same model traced into a second graph with its own stream.
    tg = Graph("vae-test")
    seed_stream(tg, seed + 1)
    tx = tg.input("x", (batch_size, n_in))
    test_loss = compile([loss_function(*_with_input(model(tx), tx))], tg.updates, backend=backend)

    def test() -> float:
        total = sum(
            float(test_loss(x=x_test[i : i + batch_size])[0])
            for i in range(0, len(x_test), batch_size)
        )
        return total / len(x_test)

    loader = DataLoader(TensorDataset(x_train), batch_size, shuffle=True, seed=seed)
    timer = Timer()
    train_losses: list[float] = []
    test_losses = [test()]
    for epoch in progress(range(epochs), total=epochs, quiet=quiet, desc=f"vae {split.name}"):
        total = 0.0
        launched = [launch(step, x=xb) for (xb,) in loader]  # queued; read after the epoch
        for batch_loss in launched:
            total += float(batch_loss)
        train_losses.append(total / len(x_train))
        test_losses.append(test())
        if log is not None:
            log.write(epoch=epoch + 1, train_loss=train_losses[-1], test_loss=test_losses[-1])
    samples = sample(model, 64, seed, backend)
    return {
        "dataset": split.name,
        "train_loss": round(train_losses[-1], 3),
        "test_loss": round(test_losses[-1], 3),
        "untrained_test_loss": round(test_losses[0], 3),
        "epochs": epochs,
        "batch_size": batch_size,
        "n_train": len(x_train),
        "n_test": len(x_test),
        "parameters": model.num_parameters(),
        "sample_mean": round(float(samples.mean()), 4),
        "seconds": round(timer.seconds, 2),
        "device": step.backend,
        "train_losses": [round(v, 3) for v in train_losses],
        "test_losses": [round(v, 3) for v in test_losses],
    }


def _with_input(out: tuple[Tensor, Tensor, Tensor], x: Tensor) -> tuple[Tensor, ...]:
    recon, mu, logvar = out
    return recon, x, mu, logvar


def sample(model: VAE, n: int = 64, seed: int = 0, backend: str | None = None) -> np.ndarray:
    """``n`` images decoded from ``z ~ N(0, I)`` (drawn by ``randn`` in the graph), (n, D)."""
    g = Graph("vae-sample")
    images = model.decode(randn(g, n, LATENT, seed=seed))
    return np.asarray(compile([images], backend=backend)()[0])


def make_parser() -> argparse.ArgumentParser:
    p = parser(
        "Train PyTorch's VAE example on handwritten digits (sklearn's 8x8 digits or MNIST).",
        module="asgrad.examples.vae",
    )
    p.add_argument(
        "--epochs", type=int, default=None, help=f"training epochs (default {DIGITS_EPOCHS})"
    )
    p.add_argument("--batch-size", type=int, default=128, help="batch size (default 128)")
    p.add_argument("--lr", type=float, default=1e-3, help="Adam learning rate (default 1e-3)")
    p.add_argument(
        "--data",
        metavar="DIR",
        default=None,
        help="a directory with MNIST's IDX files instead of the bundled 8x8 digits",
    )
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = make_parser().parse_args(argv)
    split = load_mnist_split(args.data) if args.data else load_digits_split(args.seed)
    epochs = args.epochs if args.epochs is not None else DIGITS_EPOCHS
    check_plot(args.plot)
    with open_log(args.log) as log:
        results = train(
            split,
            epochs,
            args.batch_size,
            args.lr,
            args.seed,
            device(args.device),
            args.quiet,
            log,
        )
    train_losses, test_losses = results.pop("train_losses"), results.pop("test_losses")
    if args.plot:
        x = range(1, len(train_losses) + 1)
        curves = {"train": (x, train_losses), "test": (x, test_losses[1:])}
        plot(args.plot, f"VAE on {split.name}", [("epoch", "loss per image (-ELBO)", curves)])
    print_report("vae", **results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
