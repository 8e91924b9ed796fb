"""DCGAN: PyTorch's dcgan example, ported to asgrad, generating 8x8 handwritten digits.

    python -m asgrad.examples.dcgan [--steps 1500] [--batch-size 64] [--seed 0]
                                    [--nz 16] [--lr 2e-3] [--beta1 0.5]
                                    [--device cpu|gpu|auto] [--log metrics.jsonl]
                                    [--plot samples.png]

The same architecture as PyTorch's ``examples/dcgan/main.py`` scaled to 8x8 images
(scikit-learn's bundled digits, scaled to [-1, 1]): a generator of transposed
convolutions with batch norm and ReLU ending in Tanh, a discriminator of strided
convolutions with batch norm and LeakyReLU(0.2) ending in Sigmoid, DCGAN's
``weights_init`` through ``Module.apply``, binary cross-entropy, and two Adam
optimizers with ``betas=(beta1, 0.999)``.

What define-then-run changes from PyTorch's loop: each update is one compiled
program. The discriminator's step is built from ``netD(real)`` and
``netD(netG(noise).detach())`` in one graph (the batch norm of ``netD`` is called
twice and updates its running statistics in order, as PyTorch's two calls do); the
generator's step from ``netD(netG(noise))``, where both models' parameters, named
``main.0.weight`` etc. in each, meet in one graph. The generator's step is fed the
noise the discriminator's step used, so both see the same fakes, as in PyTorch (the
generator's running statistics see that batch twice, once per program).

Learning is measured by a Fréchet distance in pixel space between generated
digits and the held-out digits (means and covariances of the 64 pixels), before and
after training; ``--plot`` draws a grid of generated digits (needs matplotlib).
Ends with one JSON line of results.
"""

from __future__ import annotations

import argparse
import functools
import sys
from collections.abc import Sequence
from typing import Any

import numpy as np

from asgrad import nn
from asgrad.examples._common import Timer, check_plot, device, open_log, parser, progress, report
from asgrad.examples._threads import blas_threads
from asgrad.examples.cnn import load_digits_split
from asgrad.nn import init
from asgrad.tensor import Graph, Program, Tensor, evaluate

STEPS = 1500


def weights_init(m: nn.Module, rng: init.RNG = None) -> None:
    """DCGAN's initialisation: convolutions N(0, 0.02), batch norm scales N(1, 0.02).

    Use it as PyTorch's example does, ``net.apply(weights_init)``, or with a seeded
    generator, ``net.apply(functools.partial(weights_init, rng=rng))``.
    """
    if isinstance(m, nn.Conv2d | nn.ConvTranspose2d):
        init.normal_(m.weight, 0.0, 0.02, rng=rng)
    elif isinstance(m, nn.BatchNorm2d) and m.weight is not None and m.bias is not None:
        init.normal_(m.weight, 1.0, 0.02, rng=rng)
        init.zeros_(m.bias)


class Generator(nn.Module):
    """``(N, nz, 1, 1)`` noise to ``(N, 1, 8, 8)`` images in [-1, 1]."""

    def __init__(self, nz: int = 16, ngf: int = 32) -> None:
        super().__init__()
        self.main = nn.Sequential(
            nn.ConvTranspose2d(nz, ngf * 2, 2, 1, 0, bias=False),  # 2x2
            nn.BatchNorm2d(ngf * 2),
            nn.ReLU(True),
            nn.ConvTranspose2d(ngf * 2, ngf, 4, 2, 1, bias=False),  # 4x4
            nn.BatchNorm2d(ngf),
            nn.ReLU(True),
            nn.ConvTranspose2d(ngf, 1, 4, 2, 1, bias=False),  # 8x8
            nn.Tanh(),
        )

    def forward(self, x: Tensor) -> Tensor:
        out: Tensor = self.main(x)
        return out


class Discriminator(nn.Module):
    """``(N, 1, 8, 8)`` images to ``(N,)`` probabilities of being real."""

    def __init__(self, ndf: int = 32) -> None:
        super().__init__()
        self.main = nn.Sequential(
            nn.Conv2d(1, ndf, 4, 2, 1, bias=False),  # 4x4
            nn.LeakyReLU(0.2, inplace=True),
            nn.Conv2d(ndf, ndf * 2, 4, 2, 1, bias=False),  # 2x2
            nn.BatchNorm2d(ndf * 2),
            nn.LeakyReLU(0.2, inplace=True),
            nn.Conv2d(ndf * 2, 1, 2, 1, 0, bias=False),  # 1x1
            nn.Sigmoid(),
        )

    def forward(self, x: Tensor) -> Tensor:
        out: Tensor = self.main(x).reshape(-1)  # PyTorch's .view(-1, 1).squeeze(1)
        return out


def full_like(x: Tensor, value: float) -> Tensor:
    """A constant of ``x``'s shape (the batch axis stays free): PyTorch's labels."""
    return (x * 0.0 + value).detach()


def frechet_distance(a: np.ndarray, b: np.ndarray) -> float:
    """Fréchet distance between Gaussians fitted to the rows of ``a`` and ``b``."""
    a, b = a.reshape(len(a), -1).astype(np.float64), b.reshape(len(b), -1).astype(np.float64)
    mu_a, mu_b = a.mean(0), b.mean(0)
    cov_a, cov_b = np.cov(a, rowvar=False), np.cov(b, rowvar=False)
    # trace(sqrtm(cov_a cov_b)): the square roots of the product's eigenvalues, which
    # are real and non-negative for two covariance matrices (up to rounding).
    eig = np.linalg.eigvals(cov_a @ cov_b).real.clip(min=0.0)
    return float(((mu_a - mu_b) ** 2).sum() + np.trace(cov_a + cov_b) - 2.0 * np.sqrt(eig).sum())


def sample(net_g: nn.Module, noise: np.ndarray, backend: str | None) -> np.ndarray:
    """Images of ``net_g`` (in eval mode, running statistics) for ``noise``."""
    net_g.eval()
    g = Graph("dcgan-sample")
    images = net_g(g.input("noise", noise.shape))
    out = evaluate([images], {"noise": noise}, backend=backend)[0]
    net_g.train()
    return out


def build_steps(
    net_g: nn.Module,
    net_d: nn.Module,
    opt_d: nn.Optimizer,
    opt_g: nn.Optimizer,
    batch_size: int,
    nz: int,
    dtype: str = "float32",
    backend: str | None = None,
) -> tuple[Program, Program]:
    """The discriminator's and the generator's compiled steps.

    ``step_d(real=..., noise=...)`` returns ``[errD, D(x), D(G(z))]``,
    ``step_g(noise=...)`` returns ``[errG, D(G(z))]`` (PyTorch's printed values).
    """
    # The discriminator's step: real batch labelled 1, fake batch (no gradient into
    # the generator: detach) labelled 0; netD's batch norm runs on each batch.
    gd = Graph("dcgan-d")
    real = gd.input("real", (batch_size, 1, 8, 8), dtype)
    noise_d = gd.input("noise", (batch_size, nz, 1, 1), dtype)
    out_real = net_d(real)
    out_fake = net_d(net_g(noise_d).detach())
    err_real = nn.binary_cross_entropy(out_real, full_like(out_real, 1.0))
    err_fake = nn.binary_cross_entropy(out_fake, full_like(out_fake, 0.0))
    step_d = opt_d.compile(err_real + err_fake, [out_real.mean(), out_fake.mean()], backend=backend)
    # The generator's step: fakes labelled real, through the discriminator.
    gg = Graph("dcgan-g")
    noise_g = gg.input("noise", (batch_size, nz, 1, 1), dtype)
    out_g = net_d(net_g(noise_g))
    step_g = opt_g.compile(
        nn.binary_cross_entropy(out_g, full_like(out_g, 1.0)), [out_g.mean()], backend=backend
    )
    return step_d, step_g


def train(
    steps: int = STEPS,
    batch_size: int = 64,
    nz: int = 16,
    lr: float = 2e-3,
    beta1: float = 0.5,
    seed: int = 0,
    backend: str | None = None,
    quiet: bool = True,
    log: nn.MetricWriter | None = None,
    threads: int | None = 1,
) -> dict[str, Any]:
    """Train the GAN on the digits' training split; returns losses and Fréchet distances."""
    with blas_threads(threads):
        return _train(steps, batch_size, nz, lr, beta1, seed, backend, quiet, log)


def _train(
    steps: int,
    batch_size: int,
    nz: int,
    lr: float,
    beta1: float,
    seed: int,
    backend: str | None,
    quiet: bool,
    log: nn.MetricWriter | None,
) -> dict[str, Any]:
    split = load_digits_split(seed)
    real_images = split.x_train * 2.0 - 1.0  # [-1, 1], as Tanh's range
    held_out = split.x_test * 2.0 - 1.0
    init_fn = functools.partial(weights_init, rng=np.random.default_rng(seed))
    net_g, net_d = Generator(nz).apply(init_fn), Discriminator().apply(init_fn)
    opt_d = nn.Adam(net_d.parameters(), lr=lr, betas=(beta1, 0.999))
    opt_g = nn.Adam(net_g.parameters(), lr=lr, betas=(beta1, 0.999))

    step_d, step_g = build_steps(net_g, net_d, opt_d, opt_g, batch_size, nz, backend=backend)

    rng = np.random.default_rng(seed)
    fixed_noise = rng.standard_normal((len(held_out), nz, 1, 1)).astype(np.float32)
    fd_before = frechet_distance(sample(net_g, fixed_noise, step_g.backend), held_out)
    timer = Timer()
    losses_d: list[float] = []
    losses_g: list[float] = []
    launched: list[tuple[Any, Any]] = []  # steps queue on the device; read every 50

    def read_launched() -> None:
        for (err_d, d_x, d_g_z1), (err_g, d_g_z2) in launched:
            losses_d.append(float(err_d))
            losses_g.append(float(err_g))
            if log is not None:
                log.write(
                    step=len(losses_d),
                    loss_d=float(err_d),
                    loss_g=float(err_g),
                    d_x=float(d_x),
                    d_g_z1=float(d_g_z1),
                    d_g_z2=float(d_g_z2),
                )
        launched.clear()

    for _ in progress(range(steps), total=steps, quiet=quiet, desc="dcgan"):
        batch = real_images[rng.choice(len(real_images), batch_size, replace=False)]
        noise = rng.standard_normal((batch_size, nz, 1, 1)).astype(np.float32)
        launched.append((step_d.launch(real=batch, noise=noise), step_g.launch(noise=noise)))
        if len(launched) >= 50:
            read_launched()
    read_launched()
    images = sample(net_g, fixed_noise, step_g.backend)
    fd_after = frechet_distance(images, held_out)
    tail = max(1, steps // 10)
    return {
        "dataset": split.name,
        "steps": steps,
        "batch_size": batch_size,
        "frechet_before": round(fd_before, 3),
        "frechet_after": round(fd_after, 3),
        "frechet_train_vs_test": round(frechet_distance(real_images, held_out), 3),
        "loss_d": round(float(np.mean(losses_d[-tail:])), 4),
        "loss_g": round(float(np.mean(losses_g[-tail:])), 4),
        "parameters_g": net_g.num_parameters(),
        "parameters_d": net_d.num_parameters(),
        "seconds": round(timer.seconds, 2),
        "device": step_g.backend,
        "samples": images,
    }


def plot_samples(path: str, images: np.ndarray, rows: int = 8) -> None:
    """A ``rows`` x ``rows`` grid of generated digits, written to ``path``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(rows, rows, figsize=(rows, rows))
    for ax, image in zip(axes.flat, images, strict=False):
        ax.imshow((image[0] + 1.0) / 2.0, cmap="gray_r", vmin=0.0, vmax=1.0)
        ax.axis("off")
    fig.suptitle("DCGAN samples (8x8 digits)")
    fig.savefig(path, dpi=100)
    plt.close(fig)


def make_parser() -> argparse.ArgumentParser:
    p = parser(
        "Train PyTorch's DCGAN, scaled to 8x8, on scikit-learn's handwritten digits.",
        steps=STEPS,
        module="asgrad.examples.dcgan",
    )
    p.add_argument("--batch-size", type=int, default=64, help="batch size (default 64)")
    p.add_argument("--nz", type=int, default=16, help="size of the latent vector (default 16)")
    p.add_argument("--lr", type=float, default=2e-3, help="Adam learning rate (default 2e-3)")
    p.add_argument("--beta1", type=float, default=0.5, help="Adam's beta1 (default 0.5)")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = make_parser().parse_args(argv)
    check_plot(args.plot)
    with open_log(args.log) as log:
        results = train(
            args.steps,
            args.batch_size,
            args.nz,
            args.lr,
            args.beta1,
            args.seed,
            device(args.device),
            args.quiet,
            log,
        )
    images = results.pop("samples")
    if args.plot:
        plot_samples(args.plot, images)
    report("dcgan", **results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
