"""Class labels the losses accept.

A label outside ``[0, C)`` (``-1`` included) raises ``OutOfRangeError`` when the
graph runs, as PyTorch raises, instead of a silent loss of 0. A label equal to
``ignore_index`` is masked in the loss graph before any index op sees it, so any
``ignore_index`` works (PyTorch's -100, a class past the end, a class inside the range).
Values are checked against numpy and, where installed, PyTorch; gradients with
``gradient_check`` in float64.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

import numpy as np
import pytest

from asgrad import nn
from asgrad.autograd import gradient_check
from asgrad.tensor import ArgumentTypeError, Graph, OutOfRangeError, Tensor, evaluate
from asgrad.tensor.ir.passes import topological_order

RNG = np.random.default_rng(10)
N, C = 5, 4

LabelLoss = Callable[[Tensor, Tensor], Tensor]
LOSSES: dict[str, LabelLoss] = {
    "cross_entropy": lambda x, y: nn.cross_entropy(x, y),
    "cross_entropy smoothed": lambda x, y: nn.cross_entropy(x, y, label_smoothing=0.1),
    "cross_entropy sum": lambda x, y: nn.cross_entropy(x, y, reduction="sum"),
    "nll_loss": lambda x, y: nn.nll_loss(x.log_softmax(-1), y, reduction="none"),
    "nll_loss weighted": lambda x, y: nn.nll_loss(x, y, weight=np.arange(1.0, C + 1)),
    "multi_margin_loss": lambda x, y: nn.multi_margin_loss(x, y),
}
# -100 is ignored by default (PyTorch's ignore_index); None ignores no label
NO_IGNORE: dict[str, LabelLoss] = {
    "cross_entropy": lambda x, y: nn.cross_entropy(x, y, ignore_index=None),
    "cross_entropy smoothed": lambda x, y: nn.cross_entropy(
        x, y, label_smoothing=0.1, ignore_index=None
    ),
    "cross_entropy sum": lambda x, y: nn.cross_entropy(x, y, reduction="sum", ignore_index=None),
    "nll_loss": lambda x, y: nn.nll_loss(x.log_softmax(-1), y, reduction="none", ignore_index=None),
    "nll_loss weighted": lambda x, y: nn.nll_loss(
        x, y, weight=np.arange(1.0, C + 1), ignore_index=None
    ),
}


def _run(loss: LabelLoss, labels: np.ndarray, **kw: Any) -> np.ndarray:
    g = Graph()
    x = g.input("x", (N, C), "float64")
    y = g.input("y", labels.shape, str(labels.dtype))
    out: np.ndarray = evaluate(loss(x, y, **kw), {"x": RNG.standard_normal((N, C)), "y": labels})[0]
    return out


def log_softmax(x: np.ndarray) -> np.ndarray:
    m = x.max(axis=-1, keepdims=True)
    out: np.ndarray = x - m - np.log(np.exp(x - m).sum(axis=-1, keepdims=True))
    return out


@pytest.mark.parametrize("name", LOSSES)
@pytest.mark.parametrize("bad", [C, -1, 1000, -100])
@pytest.mark.parametrize("dtype", ["int32", "int64"])
def test_a_label_outside_the_classes_raises(name: str, bad: int, dtype: str) -> None:
    labels = np.array([0, 1, bad, 3, 2], dtype)
    loss = NO_IGNORE.get(name, LOSSES[name]) if bad == -100 else LOSSES[name]
    with pytest.raises(OutOfRangeError, match=rf"index {bad} .*\[0, {C - 1}\]"):
        _run(loss, labels)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_label_minus_100_is_ignored_by_default_as_pytorch(
    reduction: Literal["mean", "sum", "none"],
) -> None:
    labels = np.array([0, 1, -100, 3, 2])
    g = Graph()
    x, y = g.input("x", (N, C), "float64"), g.input("y", (N,), "int64")
    logits = RNG.standard_normal((N, C))
    got = evaluate(
        [nn.cross_entropy(x, y, reduction=reduction), nn.nll_loss(x, y, reduction=reduction)],
        {"x": logits, "y": labels},
    )
    keep = labels != -100
    ce = -np.take_along_axis(log_softmax(logits), np.where(keep, labels, 0)[:, None], 1)[:, 0]
    nll = -np.take_along_axis(logits, np.where(keep, labels, 0)[:, None], 1)[:, 0]
    for out, per in zip(got, (ce * keep, nll * keep), strict=True):
        want = {"none": per, "sum": per.sum(), "mean": per.sum() / keep.sum()}[reduction]
        np.testing.assert_allclose(out, want, rtol=1e-12)


def test_classes_default_to_axis_1_as_pytorch() -> None:
    logits = RNG.standard_normal((2, C, 3))
    labels = np.array([[0, 1, 2], [3, 1, 0]])
    g = Graph()
    x, y = g.input("x", (2, C, 3), "float64"), g.input("y", (2, 3), "int64")
    xt = x.transpose(0, 2, 1)
    got = evaluate(
        [nn.cross_entropy(x, y), nn.cross_entropy(xt, y, axis=-1), nn.CrossEntropyLoss()(x, y)],
        {"x": logits, "y": labels},
    )
    logp = log_softmax(logits.transpose(0, 2, 1))
    want = -np.take_along_axis(logp, labels[..., None], -1).mean()
    for out in got:
        np.testing.assert_allclose(out, want, rtol=1e-12)


@pytest.mark.parametrize("name", LOSSES)
def test_labels_in_range_still_work(name: str) -> None:
    out = _run(LOSSES[name], np.array([0, 1, C - 1, 3, 2]))
    assert np.all(np.isfinite(out))


def test_class_axis_1_labels_are_checked_too() -> None:
    g = Graph()
    x, y = g.input("x", (2, C, 3), "float64"), g.input("y", (2, 3), "int64")
    labels = np.array([[0, 1, 2], [3, C, 0]])
    with pytest.raises(OutOfRangeError, match=f"index {C} "):
        evaluate(nn.cross_entropy(x, y, axis=1), {"x": np.zeros((2, C, 3)), "y": labels})


def _ce_ref(logits: np.ndarray, labels: np.ndarray, ignore: int, smoothing: float) -> np.ndarray:
    keep = labels != ignore
    safe = np.where(keep, labels, 0)
    logp = log_softmax(logits)
    nll = -np.take_along_axis(logp, safe[:, None], axis=-1)[:, 0]
    loss = (1 - smoothing) * nll - smoothing / C * logp.sum(axis=-1)
    return np.asarray((loss * keep).sum() / keep.sum())


@pytest.mark.parametrize("ignore", [-100, -1, C, 7, 0, 2])
@pytest.mark.parametrize("smoothing", [0.0, 0.2])
def test_ignore_index_anywhere_masks_those_labels(
    ignore: int, smoothing: float, torch_reference: Callable[..., Any]
) -> None:
    labels = np.array([ignore, 1, 3, ignore, 2 if ignore != 2 else 1])
    logits = np.random.default_rng(101).standard_normal((N, C))  # PyTorch's answer is saved
    g = Graph()
    x, y = g.input("x", (N, C), "float64"), g.input("y", (N,), "int64")
    loss = nn.cross_entropy(x, y, ignore_index=ignore, label_smoothing=smoothing)
    got = evaluate(loss, {"x": logits, "y": labels})[0]
    np.testing.assert_allclose(got, _ce_ref(logits, labels, ignore, smoothing), rtol=1e-12)

    def run(torch: Any, logits: np.ndarray, labels: np.ndarray) -> Any:
        return torch.nn.functional.cross_entropy(
            torch.tensor(logits),
            torch.tensor(labels),
            ignore_index=ignore,
            label_smoothing=smoothing,
        )

    np.testing.assert_allclose(got, torch_reference(run, logits, labels), rtol=1e-12)


def test_ignore_index_never_reaches_an_index_op() -> None:
    g = Graph()
    x, y = g.input("x", (N, C), "float64"), g.input("y", (N,), "int64")
    loss = nn.nll_loss(x, y, ignore_index=-100, weight=np.ones(C))
    index_inputs = [
        Tensor(node.inputs[-1] if node.op == "gather" else node.inputs[0])
        for node in topological_order([loss.node])
        if node.op in ("one_hot", "gather")
    ]
    assert index_inputs
    labels = np.array([-100, 2, -100, 0, 3])
    for seen in evaluate(index_inputs, {"x": np.zeros((N, C)), "y": labels}):
        assert np.all((seen >= 0) & (seen < C)), seen


def test_ignore_index_does_not_excuse_other_bad_labels() -> None:
    with pytest.raises(OutOfRangeError, match="index -1 "):
        _run(nn.cross_entropy, np.array([-100, -1, 0, 1, 2]), ignore_index=-100)
    with pytest.raises(OutOfRangeError, match=f"index {C} "):
        _run(nn.nll_loss, np.array([-1, C, 0, 1, 2]), ignore_index=-1)


def test_ignore_index_must_be_an_int() -> None:
    g = Graph()
    x, y = g.input("x", (N, C)), g.input("y", (N,), "int64")
    for bad in (-1.5, "pad", True):
        with pytest.raises(ArgumentTypeError, match="ignore_index must be an int"):
            nn.cross_entropy(x, y, ignore_index=bad)  # type: ignore[arg-type]  # on purpose


@pytest.mark.parametrize("ignore", [-100, 0])
def test_gradients_with_ignored_labels(ignore: int) -> None:
    labels = np.array([ignore, 1, 3, ignore, 2])
    weight = np.array([0.5, 1.0, 2.0, 1.5])
    gradient_check(
        lambda x, y: nn.cross_entropy(
            x, y, weight=weight, ignore_index=ignore, label_smoothing=0.1
        ),
        [RNG.standard_normal((N, C)), labels],
        wrt=[0],
    )


def test_embedding_layer_refuses_negative_ids() -> None:
    emb = nn.Embedding(6, 2, rng=0)
    g = Graph()
    ids = g.input("ids", (3,), "int64")
    with pytest.raises(OutOfRangeError, match=r"index -1 .*\[0, 5\]"):
        evaluate(emb(ids), {"ids": np.array([0, -1, 5])})
    with pytest.raises(OutOfRangeError, match="index 6 "):
        evaluate(emb(ids), {"ids": np.array([0, 6, 5])})
