"""LSTM: a character-level language model trained on the Jargon File.

    python -m asgrad.examples.lstm [--steps 300] [--seed 0] [--device cpu|gpu|auto]
                                   [--time-limit SECONDS] [--prompt TEXT]
                                   [--plot curve.png] [--log metrics.jsonl]
                                   [--export model.onnx]

Like PyTorch's word-language-model example, at the character level: an embedding,
a stacked ``nn.LSTM`` (each layer one ``scan`` node, however long the window) and a
Linear head to the vocabulary, trained with Adam (gradient norm clipped) on windows
of the first 90% of the bundled text (``data/jargon.txt``); the last 10% is held
out. Reports the train and validation loss (nats per character) against the unigram
baseline, prints a sample drawn from a prompt, and ends with one JSON line of
results. ``--log`` and ``--plot`` as in the transformer example. ``--export`` writes
the trained model as ONNX (each LSTM layer an ONNX ``Scan``) and checks it in ONNX
Runtime, as the CNN example does.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any

import numpy as np

from asgrad import nn
from asgrad.examples._common import (
    StepLosses,
    Timer,
    check_plot,
    device,
    launch,
    open_log,
    parser,
    progress,
    report,
)
from asgrad.examples._onnx import check_export, export_onnx
from asgrad.examples._threads import blas_threads
from asgrad.examples.text import (
    CharVocab,
    load_text,
    random_windows,
    sample_next,
    split_ids,
    tiled_windows,
    unigram_loss,
)
from asgrad.examples.transformer import plot_curves
from asgrad.tensor import Graph, Tensor, evaluate

STEPS = 300
PROMPT = "The hacker "


class CharLSTM(nn.Module):
    """Embedding, ``num_layers`` LSTM layers (dropout between them), Linear head."""

    def __init__(
        self,
        vocab_size: int,
        dim: int = 32,
        hidden: int = 128,
        num_layers: int = 1,
        dropout: float = 0.0,
        seed: int = 0,
    ) -> None:
        super().__init__()
        rng = np.random.default_rng(seed)
        self.embed = nn.Embedding(vocab_size, dim, std=0.1, rng=rng)
        self.lstm = nn.LSTM(dim, hidden, num_layers, batch_first=True, dropout=dropout, rng=rng)
        self.head = nn.Linear(hidden, vocab_size, rng=rng)

    def forward(self, ids: Tensor) -> Tensor:
        """Logits ``(B, T, vocab)`` of the next character at every position of ``ids``."""
        out, _ = self.lstm(self.embed(ids))
        logits: Tensor = self.head(out)
        return logits


def mean_loss(
    model: CharLSTM, x: np.ndarray, y: np.ndarray, backend: str | None = None, batch: int = 256
) -> float:
    """Mean cross-entropy (nats per character) of ``model`` on windows ``x`` -> ``y``."""
    model.eval()
    g = Graph("lstm-eval")
    xs = g.input("x", (batch, x.shape[1]), "int64")
    ys = g.input("y", (batch, x.shape[1]), "int64")
    loss = nn.cross_entropy(model(xs), ys, reduction="sum", axis=-1)
    total = 0.0
    for i in range(0, len(x), batch):
        total += float(
            evaluate([loss], {"x": x[i : i + batch], "y": y[i : i + batch]}, backend=backend)[0]
        )
    model.train()
    return total / y.size


def generate(
    model: CharLSTM,
    vocab: CharVocab,
    prompt: str = PROMPT,
    length: int = 200,
    temperature: float = 0.8,
    seed: int = 0,
    backend: str | None = None,
    context: int = 64,
) -> str:
    """``prompt`` followed by ``length`` characters sampled at ``temperature``, from ``seed``;
    each step reads the last ``context`` characters (the window's length is free)."""
    model.eval()
    g = Graph("lstm-generate")
    logits = model(g.input("ids", (1, context), "int64", free=(1,)))
    rng = np.random.default_rng(seed)
    ids = list(vocab.encode(prompt)) or [0]
    for _ in range(length):
        window = np.asarray(ids[-context:], dtype=np.int64)[None, :]
        out = evaluate([logits], {"ids": window}, backend=backend)[0][0, -1]
        ids.append(sample_next(out, temperature, rng))
    model.train()
    return vocab.decode(ids)


def train(
    steps: int = STEPS,
    seed: int = 0,
    backend: str | None = None,
    quiet: bool = True,
    *,
    batch_size: int = 32,
    context: int = 64,
    hidden: int = 128,
    num_layers: int = 1,
    lr: float = 1e-2,
    time_limit: float | None = None,
    prompt: str = PROMPT,
    sample_length: int = 200,
    temperature: float = 0.8,
    threads: int | None = 1,
    log: nn.MetricWriter | None = None,
    export: str | None = None,
) -> dict[str, Any]:
    """Train the LSTM language model on the bundled text; returns losses, baseline, sample.

    ``export``: an .onnx path to write the trained model to (checked in ONNX Runtime).
    """
    with blas_threads(threads):
        text = load_text()
        vocab = CharVocab(text)
        train_ids, val_ids = split_ids(vocab.encode(text), 0.1)
        baseline = unigram_loss(train_ids, val_ids, len(vocab))
        model = CharLSTM(len(vocab), hidden=hidden, num_layers=num_layers, seed=seed)
        g = Graph("lstm-train")
        x = g.input("x", (batch_size, context), "int64")
        y = g.input("y", (batch_size, context), "int64")
        loss = nn.cross_entropy(model(x), y, axis=-1)
        optimizer = nn.Adam(model.parameters(), lr=lr, clip_grad_norm=1.0)
        step = optimizer.compile(loss, backend=backend)
        rng = np.random.default_rng(seed)
        timer = Timer()
        record = StepLosses(log)  # steps queue on the device; losses are read every 50
        for _ in progress(range(steps), total=steps, quiet=quiet, desc="lstm"):
            xb, yb = random_windows(train_ids, batch_size, context, rng)
            record.add(launch(step, x=xb, y=yb), lr=optimizer.lr)
            if time_limit is not None and timer.seconds > time_limit:
                break
        losses = record.flush()
        train_seconds = timer.seconds
        x_val, y_val = tiled_windows(val_ids, context)
        x_tr, y_tr = tiled_windows(train_ids, context)
        pick = np.random.default_rng(seed + 1).choice(len(x_tr), size=len(x_val), replace=False)
        val_loss = mean_loss(model, x_val, y_val, step.backend)
        train_loss = mean_loss(model, x_tr[pick], y_tr[pick], step.backend)
        sample = generate(
            model, vocab, prompt, sample_length, temperature, seed, step.backend, context
        )
        exported = {}
        if export is not None:
            exported = export_onnx(export, model, {"ids": x_val[:8]})
    return {
        "train_loss": round(train_loss, 4),
        "val_loss": round(val_loss, 4),
        "unigram_loss": round(baseline, 4),
        "improvement": round(baseline - val_loss, 4),
        "last_batch_loss": round(float(np.mean(losses[-20:])), 4),
        "steps": len(losses),
        "parameters": model.num_parameters(),
        "vocab": len(vocab),
        "seconds": round(timer.seconds, 2),
        "train_seconds": round(train_seconds, 2),
        "steps_per_s": round(len(losses) / train_seconds, 2),
        "device": step.backend,
        "sample": sample,
        **exported,
        "losses": losses,
    }


def make_parser() -> argparse.ArgumentParser:
    p = parser(
        "Train a character-level LSTM language model.", steps=STEPS, module="asgrad.examples.lstm"
    )
    p.add_argument(
        "--time-limit",
        type=float,
        default=None,
        metavar="SECONDS",
        help="stop training after this many seconds",
    )
    p.add_argument("--batch-size", type=int, default=32, help="windows per step (default 32)")
    p.add_argument("--hidden", type=int, default=128, help="LSTM hidden size (default 128)")
    p.add_argument("--layers", type=int, default=1, help="LSTM layers (default 1)")
    p.add_argument("--threads", type=int, default=1, help="BLAS threads (default 1; 0: no limit)")
    p.add_argument("--prompt", default=PROMPT, help=f"start of the sample (default {PROMPT!r})")
    p.add_argument(
        "--temperature", type=float, default=0.8, help="sampling temperature (default 0.8)"
    )
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = make_parser().parse_args(argv)
    check_plot(args.plot)
    check_export(args.export)
    with open_log(args.log) as log:
        results = train(
            args.steps,
            args.seed,
            device(args.device),
            args.quiet,
            batch_size=args.batch_size,
            hidden=args.hidden,
            num_layers=args.layers,
            time_limit=args.time_limit,
            prompt=args.prompt,
            temperature=args.temperature,
            threads=args.threads or None,
            log=log,
            export=args.export,
        )
    losses = results.pop("losses")
    if args.plot:
        plot_curves(args.plot, losses, results)
    print(
        f"train loss {results['train_loss']:.3f}, validation loss {results['val_loss']:.3f}"
        f" nats/char; unigram baseline {results['unigram_loss']:.3f}"
        f" ({results['improvement']:.3f} better)",
        file=sys.stderr,
    )
    print(f"--- sample (seed {args.seed}) ---\n{results['sample']}\n---", flush=True)
    report("lstm", **results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
