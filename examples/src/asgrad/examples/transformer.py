"""Transformer: a causal character-level language model trained on the Jargon File.

    python -m asgrad.examples.transformer [--steps 800] [--seed 0] [--device cpu|gpu|auto]
                                          [--time-limit SECONDS] [--prompt TEXT]
                                          [--plot curve.png] [--log metrics.jsonl]
                                          [--export model.onnx]

Token embedding + learned positions, two pre-norm TransformerBlocks (multi-head
causal self-attention, GELU feed-forward), a final LayerNorm and a Linear head to
the vocabulary. Trained with AdamW and a warmup-cosine learning rate on the first
90% of the bundled text (``data/jargon.txt``, public domain); the last 10% is held
out. Reports the train and validation loss (nats per character) against the
unigram baseline (the validation text's cross-entropy under the training text's
character frequencies), prints a sample drawn from a prompt, and ends with one
JSON line of results. ``--log`` writes one record per step (``step``, ``loss`` of the
batch, ``lr``) to a .jsonl or .csv file; ``--plot`` draws the batch loss, its 20-step
mean, the final train and validation loss and the unigram baseline (needs matplotlib).
``--export`` writes the trained model (token ids to logits) as ONNX and checks it in
ONNX Runtime (needs asgrad-onnx).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any

import numpy as np

from asgrad import nn
from asgrad.examples._common import (
    Series,
    StepLosses,
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
from asgrad.examples.text import (
    CharVocab,
    load_text,
    random_windows,
    sample_next,
    split_ids,
    tiled_windows,
    unigram_loss,
)
from asgrad.nn import distributed as dist
from asgrad.tensor import Graph, Tensor, evaluate

STEPS = 800
PROMPT = "The hacker "


class CharTransformer(nn.Module):
    """Embedding + positions, ``num_layers`` causal pre-norm blocks, LayerNorm, Linear."""

    def __init__(
        self,
        vocab_size: int,
        dim: int = 64,
        num_heads: int = 4,
        num_layers: int = 2,
        context: int = 64,
        dropout: float = 0.0,
        seed: int = 0,
    ) -> None:
        super().__init__()
        rng = np.random.default_rng(seed)
        self.context = context
        self.embed = nn.Embedding(vocab_size, dim, std=0.02, rng=rng)
        self.pos = nn.LearnedPositionalEncoding(context, dim, std=0.02, rng=rng)
        self.blocks = nn.ModuleList(
            nn.TransformerBlock(dim, num_heads, 4 * dim, dropout, causal=True, rng=rng)
            for _ in range(num_layers)
        )
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, vocab_size, rng=rng)

    def forward(self, ids: Tensor) -> Tensor:
        """Logits ``(B, T, vocab)`` of the next character at every position of ``ids``."""
        x = self.pos(self.embed(ids))
        for block in self.blocks:
            x = block(x)
        logits: Tensor = self.head(self.norm(x))
        return logits


def mean_loss(
    model: CharTransformer,
    x: np.ndarray,
    y: np.ndarray,
    backend: str | None = None,
    batch_size: int = 128,
) -> float:
    """Mean cross-entropy (nats per character) of ``model`` on windows ``x`` -> ``y``."""
    model.eval()
    g = Graph("lm-eval")
    xs = g.input("x", (batch_size, x.shape[1]), "int64")
    ys = g.input("y", (batch_size, x.shape[1]), "int64")
    loss = nn.cross_entropy(model(xs), ys, reduction="sum", axis=-1)
    total = sum(
        float(
            evaluate(
                [loss], {"x": x[i : i + batch_size], "y": y[i : i + batch_size]}, backend=backend
            )[0]
        )
        for i in range(0, len(x), batch_size)
    )
    model.train()
    return total / y.size


def generate(
    model: CharTransformer,
    vocab: CharVocab,
    prompt: str = PROMPT,
    length: int = 200,
    temperature: float = 0.8,
    seed: int = 0,
    backend: str | None = None,
) -> str:
    """``prompt`` followed by ``length`` characters sampled at ``temperature``, from ``seed``.

    One graph of shape ``(1, context)`` serves every step: a shorter text is padded
    on the right, which a causal model cannot see, and the logits are read at the
    last real position; a longer one is cut to its last ``context`` characters.
    """
    model.eval()
    g = Graph("lm-generate")
    logits = model(g.input("ids", (1, model.context), "int64"))
    rng = np.random.default_rng(seed)
    ids = list(vocab.encode(prompt)) or [0]
    for _ in range(length):
        window = ids[-model.context :]
        feed = np.zeros((1, model.context), dtype=np.int64)
        feed[0, : len(window)] = window
        out = evaluate([logits], {"ids": feed}, backend=backend)[0][0, len(window) - 1]
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
    dim: int = 64,
    num_heads: int = 4,
    num_layers: int = 2,
    lr: float = 3e-3,
    time_limit: float | None = None,
    prompt: str = PROMPT,
    sample_length: int = 200,
    temperature: float = 0.8,
    threads: int | None = 1,
    log: nn.MetricWriter | None = None,
    export: str | None = None,
    distributed: bool = False,
) -> dict[str, Any]:
    """Train the language model on the bundled text; returns losses, baseline and sample.

    ``threads`` limits BLAS threads during the run (``None``: no limit). ``log``
    receives one record per step: ``step`` (from 1), the batch ``loss`` and its ``lr``.
    ``export``: an .onnx path to write the trained model to (checked in ONNX Runtime).
    ``distributed`` (under ``mpirun -n N``) trains data-parallel: each rank draws
    ``batch_size / N`` windows per step from its own random stream, the gradients are
    averaged, and the losses are reduced over the ranks (the sample comes from rank 0).
    """
    with blas_threads(threads):
        return _train(
            steps,
            seed,
            backend,
            quiet,
            batch_size,
            context,
            dim,
            num_heads,
            num_layers,
            lr,
            time_limit,
            prompt,
            sample_length,
            temperature,
            log,
            export,
            distributed,
        )


def _train(
    steps: int,
    seed: int,
    backend: str | None,
    quiet: bool,
    batch_size: int,
    context: int,
    dim: int,
    num_heads: int,
    num_layers: int,
    lr: float,
    time_limit: float | None,
    prompt: str,
    sample_length: int,
    temperature: float,
    log: nn.MetricWriter | None,
    export: str | None = None,
    distributed: bool = False,
) -> dict[str, Any]:
    rank, ranks = setup(distributed)
    local_batch = per_rank(batch_size, ranks)
    text = load_text()
    vocab = CharVocab(text)
    train_ids, val_ids = split_ids(vocab.encode(text), 0.1)
    baseline = unigram_loss(train_ids, val_ids, len(vocab))

    model = CharTransformer(len(vocab), dim, num_heads, num_layers, context, seed=seed)
    g = Graph("lm-train")
    x = g.input("x", (local_batch, context), "int64")
    y = g.input("y", (local_batch, context), "int64")
    loss = nn.cross_entropy(model(x), y, axis=-1)
    optimizer = nn.AdamW(model.parameters(), lr=lr, weight_decay=0.01, clip_grad_norm=1.0)
    if distributed:
        dist.broadcast_variables(model.parameters())
        step = dist.compile_step(optimizer, loss, backend=backend)
    else:
        step = optimizer.compile(loss, backend=backend)
    schedule = nn.WarmupCosine(optimizer, warmup_steps=max(1, steps // 10), total_steps=steps)

    rng = np.random.default_rng([seed, rank] if distributed else seed)
    timer = Timer()
    record = StepLosses(log)  # steps queue on the device; losses are read every 50
    bar = progress(range(steps), total=steps, quiet=quiet or rank != 0, desc="transformer")
    for _ in bar:
        xb, yb = random_windows(train_ids, local_batch, context, rng)
        lr_used = optimizer.lr
        record.add(launch(step, x=xb, y=yb), lr=lr_used)
        schedule.step()
        late = time_limit is not None and timer.seconds > time_limit
        if time_limit is not None and distributed:  # every rank stops at the same step
            late = bool(dist.all_reduce(late, "max"))
        if late:
            break
    losses = record.flush()
    train_seconds = timer.seconds
    if distributed:  # each step's loss over the whole global batch
        losses = dist.all_reduce(np.array(losses), "mean").tolist()

    x_val, y_val = tiled_windows(val_ids, context)
    x_tr, y_tr = tiled_windows(train_ids, context)
    pick = np.random.default_rng(seed + 1).choice(len(x_tr), size=len(x_val), replace=False)
    val_loss = sharded_loss(model, x_val, y_val, step.backend, distributed)
    train_loss = sharded_loss(model, x_tr[pick], y_tr[pick], step.backend, distributed)
    sample = ""
    exported = {}
    if rank == 0:
        sample = generate(model, vocab, prompt, sample_length, temperature, seed, step.backend)
        if export is not None:  # one file, written by rank 0
            exported = export_onnx(export, model, {"ids": x_val[:8]})
    return {
        "train_loss": round(train_loss, 4),
        "val_loss": round(val_loss, 4),
        "unigram_loss": round(baseline, 4),
        "improvement": round(baseline - val_loss, 4),
        "last_batch_loss": round(float(np.mean(losses[-20:])), 4),
        "steps": len(losses),
        "parameters": model.num_parameters(),
        "train_chars": len(train_ids),
        "val_chars": len(val_ids),
        "vocab": len(vocab),
        "seconds": round(timer.seconds, 2),
        "train_seconds": round(train_seconds, 2),
        "steps_per_s": round(len(losses) / train_seconds, 2),
        "device": step.backend,
        "ranks": ranks,
        "sample": sample,
        "losses": losses,
        **exported,
    }


def sharded_loss(
    model: CharTransformer, x: np.ndarray, y: np.ndarray, backend: str, distributed: bool
) -> float:
    """`mean_loss`; ``distributed``: each rank a shard of the windows, sums reduced."""
    if not distributed:
        return mean_loss(model, x, y, backend)
    rank, ranks = dist.rank(), dist.world_size()
    xs, ys = x[rank::ranks], y[rank::ranks]
    total = mean_loss(model, xs, ys, backend) * ys.size if len(ys) else 0.0
    summed, count = dist.all_reduce([total, ys.size]).tolist()
    return float(summed / count)


def make_parser() -> argparse.ArgumentParser:
    p = parser(
        "Train a character-level transformer language model.",
        steps=STEPS,
        module="asgrad.examples.transformer",
        distributed=True,
    )
    p.add_argument(
        "--time-limit",
        type=float,
        default=None,
        metavar="SECONDS",
        help="stop training after this many seconds (default: run every step)",
    )
    p.add_argument("--batch-size", type=int, default=32, help="windows per step (default 32)")
    p.add_argument(
        "--threads",
        type=int,
        default=1,
        help="BLAS threads (default 1, fastest for this small model; 0: no limit)",
    )
    p.add_argument("--prompt", default=PROMPT, help=f"start of the sample (default {PROMPT!r})")
    p.add_argument(
        "--temperature", type=float, default=0.8, help="sampling temperature (default 0.8)"
    )
    return p


def plot_curves(path: str, losses: list[float], results: dict[str, Any]) -> None:
    """The batch loss per step, its 20-step mean, the final losses and the baseline."""
    n = len(losses)
    steps = list(range(1, n + 1))
    window = min(20, n)
    mean = np.convolve(losses, np.ones(window) / window, mode="valid").tolist()
    curves: dict[str, Series] = {
        "batch": (steps, losses),
        f"batch, {window}-step mean": (steps[window - 1 :], mean),
        "train (end)": ([n], [results["train_loss"]]),
        "validation (end)": ([n], [results["val_loss"]]),
        "unigram baseline": ([1, n], [results["unigram_loss"]] * 2),
    }
    plot(path, "Character transformer", [("step", "loss (nats/char)", curves)])


def main(argv: Sequence[str] | None = None) -> int:
    args = make_parser().parse_args(argv)
    check_plot(args.plot)
    check_export(args.export)
    lead = setup(args.distributed)[0] == 0  # under --distributed, rank 0 logs and reports
    with open_log(args.log if lead else None) as log:
        results = train(
            args.steps,
            args.seed,
            device(args.device),
            args.quiet,
            batch_size=args.batch_size,
            time_limit=args.time_limit,
            prompt=args.prompt,
            temperature=args.temperature,
            threads=args.threads or None,
            log=log,
            export=args.export,
            distributed=args.distributed,
        )
    losses = results.pop("losses")
    if not lead:
        return 0
    if args.plot:
        plot_curves(args.plot, losses, results)
    print(
        f"train loss {results['train_loss']:.3f}, validation loss {results['val_loss']:.3f}"
        f" nats/char; unigram baseline {results['unigram_loss']:.3f}"
        f" ({results['improvement']:.3f} better)",
        file=sys.stderr,
    )
    print(f"--- sample (seed {args.seed}) ---\n{results['sample']}\n---", flush=True)
    report("transformer", **results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
