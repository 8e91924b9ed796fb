"""Layers and initializers given a zero, negative or non-integer size raise a typed error.

Before, ``Linear(0, 3)`` raised ``ZeroDivisionError`` from its initializer;
other layers raised ``ZeroDivisionError``, ``ValueError: math domain error`` or a bare
``TypeError``, or built silently with a zero-sized weight; initializers raised numpy's
errors for a negative size, a negative ``std`` or ``low > high``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from asgrad.nn import init
from asgrad.nn import layers as nnl
from asgrad.tensor import ArgumentError, ArgumentTypeError, AsgradError, DTypeError, Graph

ANY: Any = None  # rows pass deliberately wrong types

Row = tuple[str, Callable[[], object], type[AsgradError], tuple[str, ...]]

LAYERS: list[Row] = [
    ("Linear(0, 3)", lambda: nnl.Linear(0, 3), ArgumentError, ("Linear", "in_features", "got 0")),
    ("Linear(3, 0)", lambda: nnl.Linear(3, 0), ArgumentError, ("out_features", "positive")),
    ("Linear(-1, 3)", lambda: nnl.Linear(-1, 3), ArgumentError, ("in_features", "got -1")),
    ("Linear(2.5, 3)", lambda: nnl.Linear(2.5, 3), ArgumentTypeError, ("in_features", "2.5")),
    ("Linear('a', 3)", lambda: nnl.Linear(ANY or "a", 3), ArgumentTypeError, ("integer",)),
    ("Conv2d(0, 4, 3)", lambda: nnl.Conv2d(0, 4, 3), ArgumentError, ("Conv2d", "in_channels")),
    ("Conv2d(3, 0, 3)", lambda: nnl.Conv2d(3, 0, 3), ArgumentError, ("out_channels",)),
    ("Conv2d groups 0", lambda: nnl.Conv2d(3, 3, 3, groups=0), ArgumentError, ("groups",)),
    ("Conv2d kernel 2.5", lambda: nnl.Conv2d(3, 3, ANY or 2.5), ArgumentTypeError, ("kernel",)),
    ("Conv2d kernel (3,)", lambda: nnl.Conv2d(3, 3, ANY or (3,)), ArgumentTypeError, ("pair",)),
    ("ConvT(0, 4, 3)", lambda: nnl.ConvTranspose2d(0, 4, 3), ArgumentError, ("in_channels",)),
    ("Embedding(0, 4)", lambda: nnl.Embedding(0, 4), ArgumentError, ("num_embeddings",)),
    ("Embedding(4, 0)", lambda: nnl.Embedding(4, 0), ArgumentError, ("embedding_dim",)),
    ("MHA(0, 2)", lambda: nnl.SelfAttention(0, 2), ArgumentError, ("embed_dim",)),
    ("MHA(8, 0)", lambda: nnl.SelfAttention(8, 0), ArgumentError, ("num_heads", "got 0")),
    ("MHA(8, -2)", lambda: nnl.SelfAttention(8, -2), ArgumentError, ("num_heads",)),
    ("FeedForward(0)", lambda: nnl.FeedForward(0), ArgumentError, ("FeedForward", "dim")),
    ("FeedForward(4, 0)", lambda: nnl.FeedForward(4, 0), ArgumentError, ("hidden_dim",)),
    ("TransformerBlock(0, 1)", lambda: nnl.TransformerBlock(0, 1), ArgumentError, ("embed_dim",)),
    ("Sinusoidal(0)", lambda: nnl.SinusoidalPositionalEncoding(0), ArgumentError, ("dim",)),
    ("Sinusoidal max_len 0", lambda: nnl.SinusoidalPositionalEncoding(4, 0), ArgumentError, ()),
    ("Learned(0, 4)", lambda: nnl.LearnedPositionalEncoding(0, 4), ArgumentError, ("max_len",)),
    ("RoPE(0)", lambda: nnl.RoPE(0), ArgumentError, ("RoPE", "dim")),
    ("ALiBi(0)", lambda: nnl.ALiBi(0), ArgumentError, ("ALiBi", "num_heads")),
    ("ALiBi(-1)", lambda: nnl.ALiBi(-1), ArgumentError, ("num_heads",)),
    ("Dropout('a')", lambda: nnl.Dropout(ANY or "a"), ArgumentTypeError, ("Dropout", "number")),
]

INITIALIZERS: list[Row] = [
    ("kaiming (0, 3)", lambda: init.kaiming_uniform((0, 3)), ArgumentError, ("fan_in 0",)),
    ("kaiming fan_out 0", lambda: init.kaiming_normal((3, 0), mode="fan_out"), ArgumentError, ()),
    ("kaiming conv", lambda: init.kaiming_uniform((4, 0, 3, 3)), ArgumentError, ("[4, 0, 3, 3]",)),
    ("xavier (0, 0)", lambda: init.xavier_uniform((0, 0)), ArgumentError, ("xavier_uniform",)),
    ("xavier_normal (0, 3)", lambda: init.xavier_normal((0, 3)), ArgumentError, ("positive",)),
    ("fan_in_uniform(0)", lambda: init.fan_in_uniform(0), ArgumentError, ("fan_in",)),
    ("zeros (-1,)", lambda: init.zeros((-1,)), ArgumentError, ("negative",)),
    ("uniform (-1, 3)", lambda: init.uniform((-1, 3)), ArgumentError, ("negative",)),
    ("normal (2.5,)", lambda: init.normal((ANY or 2.5,)), ArgumentTypeError, ("ints",)),
    ("normal std -1", lambda: init.normal((3,), std=-1.0), ArgumentError, ("std",)),
    ("uniform low > high", lambda: init.uniform((3,), low=1.0, high=0.0), ArgumentError, ()),
    (
        "gain slope 'a'",
        lambda: init.calculate_gain("leaky_relu", ANY or "a"),
        ArgumentTypeError,
        (),
    ),
    ("zeros dtype", lambda: init.zeros((3,), dtype="foo"), DTypeError, ("foo",)),
]


@pytest.mark.parametrize(
    ("label", "call", "error", "parts"),
    LAYERS + INITIALIZERS,
    ids=[r[0] for r in LAYERS + INITIALIZERS],
)
def test_bad_sizes_raise_typed_errors_naming_the_argument(
    label: str, call: Callable[[], object], error: type[AsgradError], parts: tuple[str, ...]
) -> None:
    with pytest.raises(error) as info:
        call()
    for part in parts:
        assert part in str(info.value), (label, str(info.value))


def test_valid_sizes_still_build_and_run() -> None:
    assert nnl.Linear(np.int64(4), 2, rng=0)(Graph().input("x", (3, 4))).shape == (3, 2)
    assert nnl.Conv2d(3, 6, (3, 3), groups=3, rng=0).weight.shape == (6, 1, 3, 3)
    assert nnl.MaxPool2d([2, 2]).kernel_size == (2, 2)
    assert nnl.FeedForward(4, rng=0).hidden_dim == 16
    assert nnl.Dropout(0).p == 0.0
    assert init.zeros((0, 3)).shape == (0, 3)  # an empty array is still an array
    assert init.normal((2,), std=0.0, rng=0).tolist() == [0.0, 0.0]
    assert abs(init.fan_in_uniform(4)((1000,), rng=0)).max() <= 0.5
