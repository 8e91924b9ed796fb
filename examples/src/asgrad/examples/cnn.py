"""CNN: a small convolutional network classifies handwritten digits.

    python -m asgrad.examples.cnn [--epochs 15] [--batch-size 32] [--seed 0]
                                  [--device cpu|gpu|auto] [--data MNIST_DIR]
                                  [--plot curve.png] [--log metrics.jsonl]
                                  [--export model.onnx]

By default it trains on scikit-learn's bundled 8x8 digits (1,797 real scans, no
download) with a stratified 20% test split that is checked to be disjoint from the
training set. ``--data DIR`` trains on MNIST instead, read from the IDX files
(``train-images-idx3-ubyte`` etc., optionally ``.gz``) a user already has.

Conv 1-16 3x3 pad 1, ReLU, Conv 16-32 3x3 pad 1, ReLU, MaxPool 2, Flatten,
Dropout, Linear -> 10; cross-entropy; Adam. The training step (forward, backward,
update) is one compiled program; evaluation traces the same model, in eval mode,
into a second graph. ``--export`` writes the trained model (eval mode) as ONNX and
checks it in ONNX Runtime (needs asgrad-onnx). Ends with one JSON line of results.
``--log`` writes one record per epoch (``epoch``, ``train_loss``, ``test_accuracy``,
``lr``) to a .jsonl or .csv file; ``--plot`` draws the training loss and test
accuracy per epoch (needs matplotlib). With either, the test split is classified
after every epoch (about 0.1 s each on the digits), not only at the end.
"""

from __future__ import annotations

import argparse
import hashlib
import sys
from collections.abc import Sequence
from dataclasses import dataclass
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
    report,
)
from asgrad.examples._distributed import per_rank, setup
from asgrad.examples._onnx import check_export, export_onnx
from asgrad.examples._threads import blas_threads
from asgrad.examples.idx import load_mnist
from asgrad.nn import distributed as dist
from asgrad.nn.data import DataLoader, TensorDataset, train_test_split
from asgrad.nn.metrics import accuracy
from asgrad.tensor import Graph, evaluate

DIGITS_EPOCHS = 15
MNIST_EPOCHS = 2


@dataclass
class Split:
    """Images ``(N, 1, H, W)`` in [0, 1] and int64 labels, train and test, disjoint."""

    x_train: np.ndarray
    y_train: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray
    name: str

    @property
    def image_size(self) -> tuple[int, int]:
        return int(self.x_train.shape[2]), int(self.x_train.shape[3])


def _row_hashes(x: np.ndarray) -> set[bytes]:
    return {hashlib.sha1(row.tobytes()).digest() for row in x.reshape(len(x), -1)}


def check_disjoint(x_train: np.ndarray, x_test: np.ndarray) -> None:
    """Raise if any test image is pixel-for-pixel identical to a training image."""
    shared = _row_hashes(x_train) & _row_hashes(x_test)
    if shared:
        raise AssertionError(f"{len(shared)} test images also appear in the training set")


def load_digits_split(seed: int = 0, test_size: float = 0.2) -> Split:
    """scikit-learn's 8x8 digits, split by index into stratified, disjoint train and test.

    The split is drawn over row indices, so the two index sets are checked to share
    nothing, and the images themselves are checked to share nothing too (the digits
    data holds no duplicate images).
    """
    from sklearn.datasets import load_digits

    digits = load_digits()
    images = (digits.images / 16.0).astype(np.float32)[:, None]  # (1797, 1, 8, 8)
    labels = digits.target.astype(np.int64)
    index = np.arange(len(labels))
    train_idx, test_idx = train_test_split(index, test_size=test_size, seed=seed, stratify=labels)
    assert np.intersect1d(train_idx, test_idx).size == 0, "train and test indices overlap"
    assert train_idx.size + test_idx.size == len(labels)
    split = Split(
        images[train_idx], labels[train_idx], images[test_idx], labels[test_idx], "sklearn-digits"
    )
    check_disjoint(split.x_train, split.x_test)
    return split


def load_mnist_split(directory: str) -> Split:
    """MNIST from ``directory``: its own 60,000 / 10,000 split (different writers)."""
    x_train, y_train, x_test, y_test = load_mnist(directory)
    return Split(x_train, y_train, x_test, y_test, "mnist")


def build_model(image_size: tuple[int, int] = (8, 8), seed: int = 0) -> nn.Module:
    """Conv 1-16, ReLU, Conv 16-32, ReLU, MaxPool 2, Flatten, Dropout, Linear -> 10."""
    rng = np.random.default_rng(seed)
    h, w = image_size
    return nn.Sequential(
        nn.Conv2d(1, 16, 3, padding=1, rng=rng),
        nn.ReLU(),
        nn.Conv2d(16, 32, 3, padding=1, rng=rng),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Flatten(),
        nn.Dropout(0.25, seed=seed),
        nn.Linear(32 * (h // 2) * (w // 2), 10, rng=rng),
    )


def predict(
    model: nn.Module, x: np.ndarray, backend: str | None = None, batch_size: int = 1024
) -> np.ndarray:
    """Class predictions of ``model`` (in eval mode) for images ``x``."""
    model.eval()
    g = Graph("cnn-eval")
    logits = model(g.input("x", (batch_size, *x.shape[1:])))
    preds = [
        evaluate([logits], {"x": x[i : i + batch_size]}, backend=backend)[0].argmax(axis=1)
        for i in range(0, len(x), batch_size)
    ]
    model.train()
    return np.concatenate(preds)


def train(
    split: Split | None = None,
    epochs: int = DIGITS_EPOCHS,
    batch_size: int = 32,
    lr: float = 3e-3,
    seed: int = 0,
    backend: str | None = None,
    quiet: bool = True,
    threads: int | None = 1,
    log: nn.MetricWriter | None = None,
    per_epoch_accuracy: bool = False,
    export: str | None = None,
    distributed: bool = False,
) -> dict[str, Any]:
    """Train the CNN on ``split`` (default: the digits) and return the results.

    ``threads`` limits BLAS threads during the run (``None``: no limit). With
    ``per_epoch_accuracy`` (or a ``log``) the test split is classified after every
    epoch too (``epoch_accuracies``); ``log`` receives one record per epoch.
    ``export``: an .onnx path to write the trained model to (checked in ONNX Runtime).
    ``distributed`` (under ``mpirun -n N``) trains data-parallel: each rank takes
    ``batch_size / N`` of every batch from its shard, the gradients are averaged, and
    the loss and accuracy are reduced over the ranks.
    """
    with blas_threads(threads):
        return _train(
            split,
            epochs,
            batch_size,
            lr,
            seed,
            backend,
            quiet,
            log,
            per_epoch_accuracy,
            export,
            distributed,
        )


def _train(
    split: Split | None,
    epochs: int,
    batch_size: int,
    lr: float,
    seed: int,
    backend: str | None,
    quiet: bool,
    log: nn.MetricWriter | None,
    per_epoch_accuracy: bool,
    export: str | None = None,
    distributed: bool = False,
) -> dict[str, Any]:
    rank, ranks = setup(distributed)
    local_batch = per_rank(batch_size, ranks)
    split = split if split is not None else load_digits_split(seed)
    model = build_model(split.image_size, seed)
    g = Graph("cnn-train")
    x = g.input("x", (local_batch, *split.x_train.shape[1:]))
    y = g.input("y", (local_batch,), "int64")
    loss = nn.cross_entropy(model(x), y)
    optimizer = nn.Adam(model.parameters(), lr=lr)
    train_set = TensorDataset(split.x_train, split.y_train)
    if distributed:
        dist.broadcast_variables(model.parameters())
        step = dist.compile_step(optimizer, loss, backend=backend)
        sampler = dist.DistributedSampler(train_set, seed=seed)
        loader = DataLoader(train_set, local_batch, sampler=sampler)
    else:
        step = optimizer.compile(loss, backend=backend)
        loader = DataLoader(train_set, batch_size, shuffle=True, seed=seed)
    quiet = quiet or rank != 0
    # Cosine decay of the learning rate over every step of the run (no recompiling:
    # the compiled step reads the rate from a variable).
    schedule = nn.CosineAnnealingLR(optimizer, T_max=epochs * len(loader))
    timer = Timer()
    epoch_losses: list[float] = []
    epoch_accuracies: list[float] = []
    bar = progress(range(epochs), total=epochs, quiet=quiet, desc=f"cnn {split.name}")
    for epoch in bar:
        total, count = 0.0, 0
        lr_used = optimizer.lr
        launched = []  # the epoch's steps queue on the device; their losses are read after
        for xb, yb in loader:
            launched.append((launch(step, x=xb, y=yb), len(yb)))
            schedule.step()
            count += len(yb)
        for batch_loss, size in launched:
            total += float(batch_loss) * size
        if distributed:
            total, count = dist.all_reduce([total, count]).tolist()
        epoch_losses.append(total / count)
        if per_epoch_accuracy or log is not None:
            epoch_accuracies.append(test_accuracy(model, split, step.backend, distributed))
        if log is not None:
            log.write(
                epoch=epoch + 1,
                train_loss=epoch_losses[-1],
                test_accuracy=epoch_accuracies[-1],
                lr=lr_used,
            )
    train_seconds = timer.seconds
    test_acc = test_accuracy(model, split, step.backend, distributed)
    exported = {}
    if export is not None and rank == 0:  # one file, written by rank 0
        exported = export_onnx(export, model, {"x": split.x_test[:64]})
    return {
        "dataset": split.name,
        "test_accuracy": round(test_acc, 4),
        "train_loss": round(epoch_losses[-1], 4),
        "epochs": epochs,
        "batch_size": batch_size,
        "n_train": len(split.y_train),
        "n_test": len(split.y_test),
        "parameters": model.num_parameters(),
        "seconds": round(timer.seconds, 2),
        "train_seconds": round(train_seconds, 2),
        "device": step.backend,
        "ranks": ranks,
        "epoch_losses": [round(v, 4) for v in epoch_losses],
        "epoch_accuracies": [round(v, 4) for v in epoch_accuracies],
        **exported,
    }


def test_accuracy(model: nn.Module, split: Split, backend: str, distributed: bool) -> float:
    """Accuracy on the test split; ``distributed``: each rank classifies a shard, counts summed."""
    if not distributed:
        return accuracy(split.y_test, predict(model, split.x_test, backend))
    rank, ranks = dist.rank(), dist.world_size()
    x, y = split.x_test[rank::ranks], split.y_test[rank::ranks]
    correct = int(np.sum(predict(model, x, backend) == y)) if len(y) else 0
    hits, total = dist.all_reduce([correct, len(y)]).tolist()
    return float(hits / total)


def make_parser() -> argparse.ArgumentParser:
    p = parser(
        "Train a small CNN on handwritten digits (sklearn's 8x8 digits or MNIST).",
        module="asgrad.examples.cnn",
        distributed=True,
    )
    p.add_argument(
        "--epochs",
        type=int,
        default=None,
        help=f"training epochs (default {DIGITS_EPOCHS} on the digits, {MNIST_EPOCHS} on MNIST)",
    )
    p.add_argument("--batch-size", type=int, default=32, help="batch size (default 32)")
    p.add_argument("--lr", type=float, default=3e-3, help="Adam learning rate (default 3e-3)")
    p.add_argument(
        "--threads",
        type=int,
        default=1,
        help="BLAS threads (default 1, fastest for this small model; 0: no limit)",
    )
    p.add_argument(
        "--data",
        metavar="DIR",
        default=None,
        help="a directory with MNIST's IDX files (train-images-idx3-ubyte[.gz], ...)"
        " instead of the bundled 8x8 digits",
    )
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = make_parser().parse_args(argv)
    split = load_mnist_split(args.data) if args.data else load_digits_split(args.seed)
    epochs = args.epochs
    if epochs is None:
        epochs = MNIST_EPOCHS if args.data else DIGITS_EPOCHS
    check_plot(args.plot)
    check_export(args.export)
    lead = setup(args.distributed)[0] == 0  # under --distributed, rank 0 logs and reports
    with open_log(args.log if lead else None) as log:
        results = train(
            split,
            epochs,
            args.batch_size,
            args.lr,
            args.seed,
            device(args.device),
            args.quiet,
            args.threads or None,
            log=log,
            per_epoch_accuracy=args.plot is not None,
            export=args.export,
            distributed=args.distributed,
        )
    losses, accuracies = results.pop("epoch_losses"), results.pop("epoch_accuracies")
    if not lead:
        return 0
    if args.plot:
        x = range(1, len(losses) + 1)
        panels = [
            ("epoch", "cross-entropy loss", {"train": (x, losses)}),
            ("epoch", "accuracy", {"test": (x, accuracies)}),
        ]
        plot(args.plot, f"CNN on {split.name}", panels)
    report("cnn", **results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
