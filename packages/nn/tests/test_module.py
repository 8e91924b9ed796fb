"""Module registry: dotted names, buffers, state_dict round trips and load errors."""

from __future__ import annotations

import inspect

import numpy as np
import pytest

from asgrad.nn import (
    BatchNorm2d,
    Conv2d,
    Embedding,
    GlobalAvgPool2d,
    Linear,
    Module,
    ReLU,
    Sequential,
    TransformerBlock,
)
from asgrad.nn.errors import StateMismatchError
from asgrad.tensor import Graph, ShapeError, Tensor, evaluate


class TinyLM(Module):
    def __init__(self, seed: int) -> None:
        super().__init__()
        rng = np.random.default_rng(seed)
        self.embed = Embedding(11, 8, rng=rng)
        self.block = TransformerBlock(8, 2, causal=True, rng=rng)
        self.head = Linear(8, 11, rng=rng)

    def forward(self, ids: Tensor) -> Tensor:
        out: Tensor = self.head(self.block(self.embed(ids)))
        return out


def logits(model: Module, ids: np.ndarray) -> np.ndarray:
    g = Graph()
    return evaluate(model(g.input("ids", ids.shape, "int64")), {"ids": ids})[0]


def test_dotted_names_of_nested_layers() -> None:
    names = [n for n, _ in TinyLM(0).named_parameters()]
    assert names[:4] == ["embed.weight", "block.ln1.weight", "block.ln1.bias",
                         "block.attn.in_proj.weight"]  # fmt: skip
    assert "block.ff.fc2.bias" in names
    assert names[-1] == "head.bias"
    # Variables carry their dotted names too (graphs and checkpoints use them).
    assert all(p.name == n for n, p in TinyLM(0).named_parameters())


def test_buffers_are_state_but_not_parameters() -> None:
    model = Sequential(Conv2d(1, 2, 3, rng=0), BatchNorm2d(2), ReLU(), GlobalAvgPool2d())
    params = [n for n, _ in model.named_parameters()]
    buffers = [n for n, _ in model.named_buffers()]
    assert params == ["0.weight", "0.bias", "1.weight", "1.bias"]
    assert buffers == ["1.running_mean", "1.running_var", "1.num_batches_tracked"]
    assert set(model.state_dict()) == set(params) | set(buffers)
    assert not any(b.trainable for _, b in model.named_buffers())


def test_state_dict_round_trip_reproduces_outputs() -> None:
    ids = np.array([[1, 2, 3, 4], [5, 6, 7, 0]])
    a, b = TinyLM(0), TinyLM(1)
    assert not np.allclose(logits(a, ids), logits(b, ids))
    state = a.state_dict()
    b.load_state_dict(state)
    np.testing.assert_array_equal(logits(a, ids), logits(b, ids))
    state["head.bias"][:] = 123.0  # state_dict returns copies
    assert not (a.head.bias is not None and (a.head.bias.value == 123.0).any())


def test_load_state_dict_reports_every_problem_at_once() -> None:
    model = TinyLM(0)
    state = model.state_dict()
    del state["block.ln2.bias"]
    state["block.extra"] = np.zeros(3, np.float32)
    state["head.weight"] = np.zeros((8, 12), np.float32)
    with pytest.raises(StateMismatchError) as info:
        model.load_state_dict(state)
    message = str(info.value)
    assert "missing: block.ln2.bias" in message
    assert "unexpected: block.extra" in message
    assert "head.weight: expected float32[8, 11], got float32[8, 12]" in message


def test_load_state_dict_non_strict_and_dtype_mismatch() -> None:
    model = TinyLM(0)
    partial: dict[str, np.ndarray] = {"head.bias": np.ones(11, np.float32), "other": np.zeros(1)}
    model.load_state_dict(partial, strict=False)
    assert model.head.bias is not None
    np.testing.assert_array_equal(model.head.bias.value, 1.0)
    with pytest.raises(StateMismatchError, match=r"head\.bias: the model holds float32"):
        model.load_state_dict({"head.bias": np.full(11, 0.1, np.float64)}, strict=False)
    with pytest.raises(StateMismatchError, match=r"head\.bias: expected float32\[11\]"):
        model.load_state_dict({"head.bias": np.ones(12, np.float32)}, strict=False)


def test_initialize_redraws_parameters_reproducibly() -> None:
    a, b = TinyLM(0), TinyLM(1)
    a.initialize(7)
    b.initialize(7)
    for (name, pa), (_, pb) in zip(a.named_parameters(), b.named_parameters(), strict=True):
        np.testing.assert_array_equal(pa.value, pb.value, err_msg=name)
    assert a.num_parameters() == sum(v.size for v in a.state_dict().values()) - sum(
        v.value.size for _, v in a.named_buffers()
    )


def test_a_layer_error_names_the_callers_line_once() -> None:
    model = Sequential(Linear(3, 8), ReLU(), Linear(4, 1))
    x = Graph().input("x", (4, 3))
    line = inspect.currentframe().f_lineno + 2  # type: ignore[union-attr]  # CPython frames
    with pytest.raises(ShapeError, match=r"Linear\(4, 1\) got input of shape \[4, 8\]") as info:
        model(x)
    notes = info.value.__notes__
    assert len(notes) == 1
    assert f"test_module.py:{line}" in notes[0]
    assert "in Linear" in notes[0]
