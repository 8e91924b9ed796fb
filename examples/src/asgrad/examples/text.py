"""Text helpers for the character-level language model: corpus, vocabulary, baseline.

>>> vocab = CharVocab("hello world")
>>> vocab.decode(vocab.encode("low"))
'low'
>>> len(vocab)
8
"""

from __future__ import annotations

import math
from importlib import resources

import numpy as np

CORPUS = "jargon.txt"


def load_text(name: str = CORPUS) -> str:
    """A text bundled in ``asgrad/examples/data/`` (default: the Jargon File excerpt)."""
    return (
        resources.files("asgrad.examples")
        .joinpath("data")
        .joinpath(name)
        .read_text(encoding="utf-8")
    )


class CharVocab:
    """The sorted set of characters of a text; ids are positions in that list."""

    def __init__(self, text: str) -> None:
        self.chars = sorted(set(text))
        self.index = {c: i for i, c in enumerate(self.chars)}

    def __len__(self) -> int:
        return len(self.chars)

    def encode(self, text: str) -> np.ndarray:
        """Character ids (int64); a character outside the vocabulary raises ``KeyError``."""
        try:
            return np.fromiter((self.index[c] for c in text), dtype=np.int64, count=len(text))
        except KeyError as e:
            raise KeyError(f"character {e.args[0]!r} is not in the vocabulary") from None

    def decode(self, ids: np.ndarray | list[int]) -> str:
        return "".join(self.chars[int(i)] for i in ids)


def split_ids(ids: np.ndarray, val_fraction: float = 0.1) -> tuple[np.ndarray, np.ndarray]:
    """A contiguous split: the first ``1 - val_fraction`` for training, the rest held out.

    A contiguous tail (not random windows) keeps held-out text out of every training
    window: no character of the validation part is ever seen in training.
    """
    if not 0.0 < val_fraction < 1.0:
        raise ValueError(f"val_fraction must be in (0, 1), got {val_fraction}")
    cut = len(ids) - math.ceil(len(ids) * val_fraction)
    return ids[:cut], ids[cut:]


def unigram_loss(train_ids: np.ndarray, val_ids: np.ndarray, vocab_size: int) -> float:
    """Cross-entropy (nats per character) of ``val_ids`` under training character frequencies.

    The baseline a language model must beat: a model that ignores context and
    predicts every character with its frequency in the training text. A character
    that never occurs in training would make it infinite; then every count gets one
    pseudo-count (add-one smoothing) instead.
    """
    counts = np.bincount(train_ids, minlength=vocab_size).astype(np.float64)
    if np.any(counts[np.unique(val_ids)] == 0):
        counts += 1.0
    logp = np.log(counts / counts.sum())
    return float(-logp[val_ids].mean())


def random_windows(
    ids: np.ndarray, batch_size: int, length: int, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """``batch_size`` random windows: inputs ``(B, length)`` and next-character targets."""
    starts = rng.integers(0, len(ids) - length, size=batch_size)
    offsets = starts[:, None] + np.arange(length)
    return ids[offsets], ids[offsets + 1]


def tiled_windows(ids: np.ndarray, length: int) -> tuple[np.ndarray, np.ndarray]:
    """Non-overlapping windows covering ``ids`` (the ragged tail dropped), with targets.

    Every character but the first of each window is predicted from at least one
    character of context; used to measure a loss over a whole held-out text.
    """
    n = (len(ids) - 1) // length
    x = ids[: n * length].reshape(n, length)
    y = ids[1 : n * length + 1].reshape(n, length)
    return x, y


def sample_next(logits: np.ndarray, temperature: float, rng: np.random.Generator) -> int:
    """A token id drawn from ``softmax(logits / temperature)`` (the last position's)."""
    z = logits.astype(np.float64) / max(temperature, 1e-6)
    p = np.exp(z - z.max())
    return int(rng.choice(len(p), p=p / p.sum()))
