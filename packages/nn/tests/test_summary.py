"""asgrad.nn.summary: layers, output shapes, parameter counts and memory."""

from __future__ import annotations

import io
import math
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from asgrad import nn
from asgrad.nn import init
from asgrad.nn.module import _CALL_HOOKS
from asgrad.tensor.errors import ArgumentError, ShapeError


def _cnn() -> nn.Sequential:
    return nn.Sequential(
        nn.Conv2d(1, 8, 3, padding=1, rng=0),
        nn.BatchNorm2d(8),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Flatten(),
        nn.Linear(8 * 14 * 14, 10, rng=1),
    )


def test_linear_counts_shapes_and_memory() -> None:
    out = io.StringIO()
    s = nn.summary(nn.Linear(3, 4), (2, 3), file=out)
    assert (s.total_params, s.trainable_params, s.non_trainable_params) == (16, 16, 0)
    assert s.param_bytes == 16 * 4
    assert s.input_bytes == 2 * 3 * 4
    assert s.activation_bytes == 2 * 4 * 4
    assert [(r.name, r.kind, r.output_shapes) for r in s.rows] == [("", "Linear", [(2, 4)])]
    printed = out.getvalue()
    assert printed.rstrip("\n") == str(s)
    assert "Linear" in printed
    assert "[2, 4]" in printed
    assert "Parameters: 16 (trainable 16, non-trainable 0)" in printed
    assert "Parameter memory: 64 B" in printed


def test_small_cnn_rows_and_activation_memory() -> None:
    s = nn.summary(_cnn(), (32, 1, 28, 28), verbose=False)
    assert s.total_params == (8 * 9 + 8) + 2 * 8 + (8 * 14 * 14 * 10 + 10)
    rows = {r.name: r for r in s.rows}
    assert rows[""].kind == "Sequential"
    assert rows[""].output_shapes == [(32, 10)]
    assert rows["0"].output_shapes == [(32, 8, 28, 28)]
    assert rows["0"].trainable == 80
    assert rows["3"].output_shapes == [(32, 8, 14, 14)]
    assert rows["4"].output_shapes == [(32, 1568)]
    leaf_shapes = [(32, 8, 28, 28)] * 3 + [(32, 8, 14, 14), (32, 1568), (32, 10)]
    assert s.activation_bytes == 4 * sum(math.prod(shape) for shape in leaf_shapes)
    assert s.buffer_bytes == sum(b.value.nbytes for _, b in _cnn().named_buffers())
    assert [r.depth for r in s.rows] == [0, 1, 1, 1, 1, 1, 1]


def test_transformer_block_nested_rows_and_depth() -> None:
    block = nn.TransformerBlock(64, 4, rng=0)
    s = nn.summary(block, (8, 16, 64), verbose=False)
    assert s.total_params == block.num_parameters() == 49_984
    names = [r.name for r in s.rows]
    assert "attn.in_proj" in names
    assert "ff.fc1" in names
    fc1 = next(r for r in s.rows if r.name == "ff.fc1")
    assert (fc1.kind, fc1.depth, fc1.output_shapes) == ("Linear", 2, [(8, 16, 256)])
    shallow = str(nn.summary(block, (8, 16, 64), depth=1, verbose=False))
    assert "attn: SelfAttention" in shallow
    assert "ff.fc1" not in shallow
    assert "Parameters: 49,984" in shallow  # hidden rows are still counted


def test_shared_and_frozen_parameters_counted_once() -> None:
    shared = nn.Linear(4, 4, rng=0)
    model = nn.Sequential(shared, nn.ReLU(), shared)
    model.frozen = nn.Parameter(np.ones((2, 3)), trainable=False)
    s = nn.summary(model, (5, 4), verbose=False)
    assert (s.trainable_params, s.non_trainable_params) == (20, 6)
    assert s.param_bytes == (20 + 6) * 4
    calls = [r.name for r in s.rows]
    assert calls == ["", "0", "1", "0"]  # the shared layer runs twice, named once


def test_multiple_inputs_dtypes_and_tuple_outputs() -> None:
    class Pair(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.emb = nn.Embedding(10, 3, rng=0)
            self.scale = nn.Parameter((3,), init.ones)

        def forward(self, tokens, x):  # type: ignore[no-untyped-def]
            e = self.emb(tokens)
            return e * self.scale, x + 1.0

    s = nn.summary(Pair(), [(2, 5), (4,)], ["int64", "float32"], verbose=False)
    assert s.rows[0].output_shapes == [(2, 5, 3), (4,)]
    assert s.input_bytes == 2 * 5 * 8 + 4 * 4
    assert s.total_params == 33
    assert s.activation_bytes == 2 * 5 * 3 * 4  # the embedding: the only leaf call


def test_no_hook_left_behind_and_errors_say_what_to_do() -> None:
    with pytest.raises(ShapeError):
        nn.summary(nn.Linear(3, 4), (2, 5), verbose=False)
    assert _CALL_HOOKS == []
    with pytest.raises(ArgumentError, match="one dtype per input"):
        nn.summary(nn.Linear(3, 4), [(2, 3)], ["float32", "float32"])
    with pytest.raises(ArgumentError, match="list of shapes"):
        nn.summary(nn.Linear(3, 4), "2x3")  # type: ignore[arg-type]


def test_counts_match_pytorch(torch_reference: Callable[..., Any]) -> None:
    shapes = [(2, 3), (32, 1, 28, 28), (8, 16, 64)]

    def run(torch: Any) -> list[Any]:
        tnn = torch.nn
        cnn = tnn.Sequential(
            tnn.Conv2d(1, 8, 3, padding=1),
            tnn.BatchNorm2d(8),
            tnn.ReLU(),
            tnn.MaxPool2d(2),
            tnn.Flatten(),
            tnn.Linear(8 * 14 * 14, 10),
        )
        block = tnn.TransformerEncoderLayer(64, 4, dim_feedforward=256, batch_first=True)
        counts_and_shapes = []
        for theirs, shape in zip([tnn.Linear(3, 4), cnn, block], shapes, strict=True):
            with torch.no_grad():
                expected = theirs.eval()(torch.zeros(shape)).shape
            counts_and_shapes.append((sum(p.numel() for p in theirs.parameters()), list(expected)))
        return counts_and_shapes

    ours = [nn.Linear(3, 4), _cnn(), nn.TransformerBlock(64, 4, rng=0)]
    for module, shape, (count, expected) in zip(ours, shapes, torch_reference(run), strict=True):
        s = nn.summary(module, shape, verbose=False)
        assert s.total_params == count
        assert s.rows[0].output_shapes == [tuple(expected)]


def test_summary_shows_the_planned_forward_and_step_peaks() -> None:
    from asgrad.tensor import Graph

    model = nn.Linear(16, 8, rng=0)
    g = Graph()
    x, y = g.input("x", (4, 16)), g.input("y", (4, 8))
    step = nn.SGD(model.parameters(), lr=0.1).compile(nn.mse_loss(model(x), y))
    out = io.StringIO()
    s = nn.summary(model, (4, 16), file=out, step=step)
    assert s.forward_memory is not None
    assert s.step_memory is not None
    # the input, the product and the biased result (4x8 floats each after the input)
    assert s.forward_memory.peak >= s.forward_memory.inputs + 2 * 4 * 8 * 4
    assert s.step_memory.parameters == (16 * 8 + 8) * 4
    printed = out.getvalue()
    assert "Planned forward peak" in printed
    assert "Planned step peak" in printed
    assert "parameters 544 B" in printed
