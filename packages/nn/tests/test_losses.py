"""Every loss against a hand-computed numpy reference, PyTorch (its answers saved as
fixtures) and ``gradient_check`` in float64, for each reduction; and the errors of bad
arguments."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pytest

from asgrad import nn
from asgrad.autograd import gradient_check
from asgrad.tensor import DTypeError, Graph, ShapeError, Tensor, evaluate

RNG = np.random.default_rng(0)
N, C, D = 4, 5, 3
REDUCTIONS = ["mean", "sum", "none"]


def np_reduce(loss: np.ndarray, reduction: str) -> np.ndarray:
    if reduction == "mean":
        return np.asarray(loss.mean())
    if reduction == "sum":
        return np.asarray(loss.sum())
    return loss


def log_softmax(x: np.ndarray, axis: int = -1) -> np.ndarray:
    m = x.max(axis=axis, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(axis=axis, keepdims=True))


def sigmoid(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


def softplus(x: np.ndarray) -> np.ndarray:
    return np.logaddexp(0.0, x)


def signs(*shape: int) -> np.ndarray:
    return RNG.choice([-1.0, 1.0], size=shape)


# -- the cases: inputs, the asgrad call, the numpy reference, the torch call -------------------
@dataclass
class Case:
    name: str
    inputs: list[np.ndarray]
    build: Callable[[list[Tensor], Any], Tensor]  # Any: the reduction's Literal
    reference: Callable[[list[np.ndarray], str], np.ndarray]
    torch_call: Callable[[Any, list[Any], str], Any] | None = None
    wrt: list[int] = field(default_factory=lambda: [0])


def elementwise(
    name: str,
    fn: Callable[..., Tensor],
    ref: Callable[[np.ndarray, np.ndarray], np.ndarray],
    torch_name: str,
    **kw: Any,
) -> Case:
    x, y = RNG.standard_normal((N, D)) * 2, RNG.standard_normal((N, D)) * 2
    return Case(
        name,
        [x, y],
        lambda t, r: fn(t[0], t[1], reduction=r, **kw),
        lambda a, r: np_reduce(ref(a[0], a[1]), r),
        lambda F, t, r: getattr(F, torch_name)(t[0], t[1], reduction=r, **kw),
        wrt=[0, 1],
    )


def smooth_l1_ref(beta: float) -> Callable[[np.ndarray, np.ndarray], np.ndarray]:
    def ref(x: np.ndarray, y: np.ndarray) -> np.ndarray:
        z = np.abs(x - y)
        return np.where(z < beta, 0.5 * z * z / beta, z - 0.5 * beta)

    return ref


def huber_ref(delta: float) -> Callable[[np.ndarray, np.ndarray], np.ndarray]:
    def ref(x: np.ndarray, y: np.ndarray) -> np.ndarray:
        z = np.abs(x - y)
        return np.where(z < delta, 0.5 * z * z, delta * (z - 0.5 * delta))

    return ref


def ce_index_ref(
    logits: np.ndarray,
    labels: np.ndarray,
    reduction: str,
    weight: np.ndarray | None = None,
    ignore_index: int | None = None,
    smoothing: float = 0.0,
) -> np.ndarray:
    logp = log_softmax(logits)
    w = np.ones(logits.shape[-1]) if weight is None else weight
    keep = np.ones(labels.shape) if ignore_index is None else (labels != ignore_index).astype(float)
    safe = np.where(labels == ignore_index, 0, labels) if ignore_index is not None else labels
    picked = np.take_along_axis(logp, safe[..., None], axis=-1)[..., 0]
    w_y = w[safe] * keep
    nll = -w_y * picked
    smooth = -(logp * w).sum(axis=-1) * keep
    loss = (1 - smoothing) * nll + smoothing / logits.shape[-1] * smooth
    if reduction == "mean":
        return np.asarray(loss.sum() / w_y.sum())
    return np_reduce(loss, reduction)


def ce_prob_ref(
    logits: np.ndarray,
    probs: np.ndarray,
    reduction: str,
    weight: np.ndarray | None = None,
    smoothing: float = 0.0,
) -> np.ndarray:
    n_classes = logits.shape[-1]
    p = probs * (1 - smoothing) + smoothing / n_classes
    w = np.ones(n_classes) if weight is None else weight
    return np_reduce(-(log_softmax(logits) * p * w).sum(axis=-1), reduction)


def bce_ref(p: np.ndarray, t: np.ndarray, w: np.ndarray | None = None) -> np.ndarray:
    with np.errstate(divide="ignore"):
        loss = -(t * np.maximum(np.log(p), -100) + (1 - t) * np.maximum(np.log(1 - p), -100))
    return loss if w is None else loss * w


def bce_logits_ref(x: np.ndarray, t: np.ndarray, pw: np.ndarray | None = None) -> np.ndarray:
    lw = 1.0 if pw is None else 1 + (pw - 1) * t
    return (1 - t) * x + lw * softplus(-x)


def focal_ref(x: np.ndarray, t: np.ndarray, alpha: float, gamma: float) -> np.ndarray:
    p = sigmoid(x)
    ce = bce_logits_ref(x, t)
    p_t = p * t + (1 - p) * (1 - t)
    loss = ce * (1 - p_t) ** gamma
    if alpha >= 0:
        loss = loss * (alpha * t + (1 - alpha) * (1 - t))
    return loss


def kl_ref(x: np.ndarray, t: np.ndarray, reduction: str, log_target: bool) -> np.ndarray:
    if log_target:
        loss = np.exp(t) * (t - x)
    else:
        with np.errstate(divide="ignore", invalid="ignore"):
            loss = np.where(t > 0, t * np.log(np.where(t > 0, t, 1.0)), 0.0) - t * x
    if reduction == "batchmean":
        return np.asarray(loss.sum() / x.shape[0])
    return np_reduce(loss, reduction)


def multi_margin_ref(
    x: np.ndarray, y: np.ndarray, p: int, margin: float, w: np.ndarray | None
) -> np.ndarray:
    out = np.zeros(x.shape[0])
    for i in range(x.shape[0]):
        for j in range(x.shape[1]):
            if j != y[i]:
                h = max(0.0, margin - x[i, y[i]] + x[i, j]) ** p
                out[i] += h * (1.0 if w is None else w[y[i]])
    return out / x.shape[1]


def cosine_ref(a: np.ndarray, b: np.ndarray, t: np.ndarray, margin: float) -> np.ndarray:
    cos = (a * b).sum(-1) / np.sqrt(((a * a).sum(-1) + 1e-12) * ((b * b).sum(-1) + 1e-12))
    return np.where(t == 1, 1 - cos, np.maximum(0.0, cos - margin))


def triplet_ref(
    a: np.ndarray, p: np.ndarray, n: np.ndarray, margin: float, norm: float, swap: bool
) -> np.ndarray:
    def dist(u: np.ndarray, v: np.ndarray) -> np.ndarray:
        return (np.abs(u - v + 1e-6) ** norm).sum(-1) ** (1 / norm)

    d_neg = dist(a, n)
    if swap:
        d_neg = np.minimum(d_neg, dist(p, n))
    return np.maximum(0.0, margin + dist(a, p) - d_neg)


def cases() -> list[Case]:
    out = [
        elementwise("mse", nn.mse_loss, lambda x, y: (x - y) ** 2, "mse_loss"),
        elementwise("l1", nn.l1_loss, lambda x, y: np.abs(x - y), "l1_loss"),
        elementwise("smooth_l1", nn.smooth_l1_loss, smooth_l1_ref(1.0), "smooth_l1_loss"),
        elementwise(
            "smooth_l1-beta", nn.smooth_l1_loss, smooth_l1_ref(2.5), "smooth_l1_loss", beta=2.5
        ),
        elementwise("huber", nn.huber_loss, huber_ref(1.0), "huber_loss"),
        elementwise("huber-delta", nn.huber_loss, huber_ref(0.7), "huber_loss", delta=0.7),
    ]
    logits = RNG.standard_normal((N, C)) * 2
    labels = RNG.integers(0, C, N)
    weight = RNG.uniform(0.5, 2.0, C)
    ignored = labels.copy()
    ignored[1] = -100
    probs = np.exp(log_softmax(RNG.standard_normal((N, C))))
    out += [
        Case(
            "cross_entropy",
            [logits, labels],
            lambda t, r: nn.cross_entropy(t[0], t[1], reduction=r),
            lambda a, r: ce_index_ref(a[0], a[1], r),
            lambda F, t, r: F.cross_entropy(t[0], t[1], reduction=r),
        ),
        Case(
            "cross_entropy-all-options",
            [logits, ignored],
            lambda t, r: nn.cross_entropy(
                t[0], t[1], weight=weight, ignore_index=-100, reduction=r, label_smoothing=0.2
            ),
            lambda a, r: ce_index_ref(a[0], a[1], r, weight, -100, 0.2),
            lambda F, t, r: F.cross_entropy(
                t[0],
                t[1],
                weight=F_tensor(weight),
                ignore_index=-100,
                reduction=r,
                label_smoothing=0.2,
            ),
        ),
        Case(
            "cross_entropy-smoothing",
            [logits, labels],
            lambda t, r: nn.cross_entropy(t[0], t[1], reduction=r, label_smoothing=0.1),
            lambda a, r: ce_index_ref(a[0], a[1], r, smoothing=0.1),
            lambda F, t, r: F.cross_entropy(t[0], t[1], reduction=r, label_smoothing=0.1),
        ),
        Case(
            "cross_entropy-probs",
            [logits, probs],
            lambda t, r: nn.cross_entropy(t[0], t[1], reduction=r),
            lambda a, r: ce_prob_ref(a[0], a[1], r),
            lambda F, t, r: F.cross_entropy(t[0], t[1], reduction=r),
            wrt=[0, 1],
        ),
        Case(
            "cross_entropy-probs-weight-smoothing",
            [logits, probs],
            lambda t, r: nn.cross_entropy(
                t[0], t[1], weight=weight, reduction=r, label_smoothing=0.3
            ),
            lambda a, r: ce_prob_ref(a[0], a[1], r, weight, 0.3),
            lambda F, t, r: F.cross_entropy(
                t[0], t[1], weight=F_tensor(weight), reduction=r, label_smoothing=0.3
            ),
            wrt=[0, 1],
        ),
        Case(
            "nll",
            [log_softmax(logits), labels],
            lambda t, r: nn.nll_loss(t[0], t[1], reduction=r),
            lambda a, r: ce_index_ref(a[0], a[1], r),
            lambda F, t, r: F.nll_loss(t[0], t[1], reduction=r),
        ),
        Case(
            "nll-weight-ignore",
            [log_softmax(logits), ignored],
            lambda t, r: nn.nll_loss(t[0], t[1], weight=weight, ignore_index=-100, reduction=r),
            lambda a, r: ce_index_ref(a[0], a[1], r, weight, -100),
            lambda F, t, r: F.nll_loss(
                t[0], t[1], weight=F_tensor(weight), ignore_index=-100, reduction=r
            ),
        ),
    ]
    p = RNG.uniform(0.05, 0.95, (N, D))
    t01 = RNG.uniform(0.0, 1.0, (N, D))
    hard = RNG.integers(0, 2, (N, D)).astype(float)
    w_el = RNG.uniform(0.5, 2.0, (N, D))
    x = RNG.standard_normal((N, D)) * 3
    pos_weight = RNG.uniform(0.5, 3.0, D)
    out += [
        Case(
            "bce",
            [p, t01],
            lambda t, r: nn.binary_cross_entropy(t[0], t[1], reduction=r),
            lambda a, r: np_reduce(bce_ref(a[0], a[1]), r),
            lambda F, t, r: F.binary_cross_entropy(t[0], t[1], reduction=r),
            wrt=[0, 1],
        ),
        Case(
            "bce-weight",
            [p, hard],
            lambda t, r: nn.binary_cross_entropy(t[0], t[1], weight=w_el, reduction=r),
            lambda a, r: np_reduce(bce_ref(a[0], a[1], w_el), r),
            lambda F, t, r: F.binary_cross_entropy(t[0], t[1], weight=F_tensor(w_el), reduction=r),
        ),
        Case(
            "bce_with_logits",
            [x, t01],
            lambda t, r: nn.binary_cross_entropy_with_logits(t[0], t[1], reduction=r),
            lambda a, r: np_reduce(bce_logits_ref(a[0], a[1]), r),
            lambda F, t, r: F.binary_cross_entropy_with_logits(t[0], t[1], reduction=r),
            wrt=[0, 1],
        ),
        Case(
            "bce_with_logits-pos_weight",
            [x, hard],
            lambda t, r: nn.binary_cross_entropy_with_logits(
                t[0], t[1], weight=w_el, reduction=r, pos_weight=pos_weight
            ),
            lambda a, r: np_reduce(bce_logits_ref(a[0], a[1], pos_weight) * w_el, r),
            lambda F, t, r: F.binary_cross_entropy_with_logits(
                t[0], t[1], weight=F_tensor(w_el), reduction=r, pos_weight=F_tensor(pos_weight)
            ),
        ),
        Case(
            "sigmoid_focal",
            [x, hard],
            lambda t, r: nn.sigmoid_focal_loss(t[0], t[1], reduction=r),
            lambda a, r: np_reduce(focal_ref(a[0], a[1], 0.25, 2.0), r),
        ),
        Case(
            "sigmoid_focal-gamma1.5-noalpha",
            [x, t01],
            lambda t, r: nn.sigmoid_focal_loss(t[0], t[1], alpha=-1, gamma=1.5, reduction=r),
            lambda a, r: np_reduce(focal_ref(a[0], a[1], -1, 1.5), r),
            wrt=[0, 1],
        ),
    ]
    target_p = np.exp(log_softmax(RNG.standard_normal((N, C))))
    target_p[0, 1] = 0.0  # a zero target contributes nothing
    logq = log_softmax(RNG.standard_normal((N, C)))
    out += [
        Case(
            f"kl_div-{'log' if lt else 'prob'}",
            [logq, np.log(target_p + 0.1) if lt else target_p],
            lambda t, r, lt=lt: nn.kl_div(t[0], t[1], reduction=r, log_target=lt),  # type: ignore[misc]
            lambda a, r, lt=lt: kl_ref(a[0], a[1], r, lt),  # type: ignore[misc]
            lambda F, t, r, lt=lt: F.kl_div(t[0], t[1], reduction=r, log_target=lt),  # type: ignore[misc]
            wrt=[0, 1] if lt else [0],
        )
        for lt in (False, True)
    ]
    s = signs(N, D)
    d1, d2 = RNG.standard_normal((N, D)), RNG.standard_normal((N, D))
    out += [
        Case(
            "hinge",
            [x, s],
            lambda t, r: nn.hinge_loss(t[0], t[1], reduction=r),
            lambda a, r: np_reduce(np.maximum(0.0, 1 - a[1] * a[0]), r),
        ),
        Case(
            "hinge-int-targets-margin",
            [x, s.astype(np.int64)],
            lambda t, r: nn.hinge_loss(t[0], t[1], margin=2.0, reduction=r),
            lambda a, r: np_reduce(np.maximum(0.0, 2 - a[1] * a[0]), r),
        ),
        Case(
            "squared_hinge",
            [x, s],
            lambda t, r: nn.squared_hinge_loss(t[0], t[1], reduction=r),
            lambda a, r: np_reduce(np.maximum(0.0, 1 - a[1] * a[0]) ** 2, r),
        ),
        Case(
            "hinge_embedding",
            [np.abs(x), s],
            lambda t, r: nn.hinge_embedding_loss(t[0], t[1], margin=2.0, reduction=r),
            lambda a, r: np_reduce(np.where(a[1] == 1, a[0], np.maximum(0.0, 2.0 - a[0])), r),
            lambda F, t, r: F.hinge_embedding_loss(t[0], t[1], margin=2.0, reduction=r),
        ),
        Case(
            "multi_margin",
            [logits, labels],
            lambda t, r: nn.multi_margin_loss(t[0], t[1], reduction=r),
            lambda a, r: np_reduce(multi_margin_ref(a[0], a[1], 1, 1.0, None), r),
            lambda F, t, r: F.multi_margin_loss(t[0], t[1], reduction=r),
        ),
        Case(
            "multi_margin-p2-weight",
            [logits, labels],
            lambda t, r: nn.multi_margin_loss(
                t[0], t[1], p=2, margin=0.5, weight=weight, reduction=r
            ),
            lambda a, r: np_reduce(multi_margin_ref(a[0], a[1], 2, 0.5, weight), r),
            lambda F, t, r: F.multi_margin_loss(
                t[0], t[1], p=2, margin=0.5, weight=F_tensor(weight), reduction=r
            ),
        ),
        Case(
            "cosine_embedding",
            [d1, d2, signs(N)],
            lambda t, r: nn.cosine_embedding_loss(t[0], t[1], t[2], margin=0.1, reduction=r),
            lambda a, r: np_reduce(cosine_ref(a[0], a[1], a[2], 0.1), r),
            lambda F, t, r: F.cosine_embedding_loss(t[0], t[1], t[2], margin=0.1, reduction=r),
            wrt=[0, 1],
        ),
        Case(
            "triplet_margin",
            [d1, d2, RNG.standard_normal((N, D))],
            lambda t, r: nn.triplet_margin_loss(t[0], t[1], t[2], margin=2.0, reduction=r),
            lambda a, r: np_reduce(triplet_ref(a[0], a[1], a[2], 2.0, 2.0, False), r),
            lambda F, t, r: F.triplet_margin_loss(t[0], t[1], t[2], margin=2.0, reduction=r),
            wrt=[0, 1, 2],
        ),
        Case(
            "triplet_margin-p1-swap",
            [d1, d2, RNG.standard_normal((N, D))],
            lambda t, r: nn.triplet_margin_loss(
                t[0], t[1], t[2], margin=3.0, p=1, swap=True, reduction=r
            ),
            lambda a, r: np_reduce(triplet_ref(a[0], a[1], a[2], 3.0, 1.0, True), r),
            lambda F, t, r: F.triplet_margin_loss(
                t[0], t[1], t[2], margin=3.0, p=1, swap=True, reduction=r
            ),
            wrt=[0, 1, 2],
        ),
        Case(
            "triplet_margin-p3",
            [d1, d2, RNG.standard_normal((N, D))],
            lambda t, r: nn.triplet_margin_loss(t[0], t[1], t[2], margin=2.0, p=3, reduction=r),
            lambda a, r: np_reduce(triplet_ref(a[0], a[1], a[2], 2.0, 3.0, False), r),
            lambda F, t, r: F.triplet_margin_loss(t[0], t[1], t[2], margin=2.0, p=3, reduction=r),
            wrt=[0, 1, 2],
        ),
        Case(
            "margin_ranking",
            [RNG.standard_normal(N), RNG.standard_normal(N), signs(N)],
            lambda t, r: nn.margin_ranking_loss(t[0], t[1], t[2], margin=0.3, reduction=r),
            lambda a, r: np_reduce(np.maximum(0.0, -a[2] * (a[0] - a[1]) + 0.3), r),
            lambda F, t, r: F.margin_ranking_loss(t[0], t[1], t[2], margin=0.3, reduction=r),
            wrt=[0, 1],
        ),
    ]
    return out


def F_tensor(a: np.ndarray) -> Any:  # noqa: N802  # reads as torch.tensor(a)
    import torch

    return torch.tensor(a)


CASES = cases()
Reference = Callable[..., Any]  # the torch_reference fixture (PyTorch's saved answers)


def dtype_of(a: np.ndarray) -> str:
    return "float64" if a.dtype.kind == "f" else "int64"


def run(case: Case, reduction: str) -> np.ndarray:
    g = Graph()
    tensors = [g.input(f"a{i}", a.shape, dtype_of(a)) for i, a in enumerate(case.inputs)]
    out = case.build(tensors, reduction)
    return evaluate(out, {f"a{i}": a for i, a in enumerate(case.inputs)})[0]


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_loss_matches_numpy_reference(case: Case, reduction: str) -> None:
    got = run(case, reduction)
    want = case.reference(case.inputs, reduction)
    assert got.shape == np.shape(want)
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)


@pytest.mark.filterwarnings("ignore:reduction. 'mean' divides the total loss:UserWarning")
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("case", [c for c in CASES if c.torch_call], ids=lambda c: c.name)
def test_loss_matches_pytorch(case: Case, reduction: str, torch_reference: Reference) -> None:
    torch_call = case.torch_call
    assert torch_call is not None

    def theirs(torch: Any, *inputs: np.ndarray) -> Any:
        return torch_call(torch.nn.functional, [torch.tensor(a) for a in inputs], reduction)

    want = torch_reference(theirs, *case.inputs)
    np.testing.assert_allclose(run(case, reduction), want, rtol=1e-10, atol=1e-12)


def test_sigmoid_focal_loss_matches_torchvision(torch_reference: Reference) -> None:
    for case in (c for c in CASES if c.name.startswith("sigmoid_focal")):
        for reduction in REDUCTIONS:
            kw = {"alpha": -1, "gamma": 1.5} if "gamma" in case.name else {}

            def theirs(torch: Any, *inputs: np.ndarray, r: str = reduction, k: Any = kw) -> Any:
                from torchvision.ops import sigmoid_focal_loss

                return sigmoid_focal_loss(*(torch.tensor(a) for a in inputs), reduction=r, **k)

            want = torch_reference(theirs, *case.inputs)
            np.testing.assert_allclose(run(case, reduction), want, rtol=1e-10)


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_loss_gradients_pass_gradient_check(case: Case, reduction: str) -> None:
    gradient_check(lambda *t: case.build(list(t), reduction), case.inputs, wrt=case.wrt)


# -- specifics -------------------------------------------------------------------------------------
def test_kl_div_batchmean_is_the_sum_over_the_batch_size(torch_reference: Reference) -> None:
    case = next(c for c in CASES if c.name == "kl_div-prob")
    got = run(case, "batchmean")
    np.testing.assert_allclose(
        got, kl_ref(case.inputs[0], case.inputs[1], "batchmean", False), rtol=1e-12
    )
    gradient_check(lambda a, b: nn.kl_div(a, b, reduction="batchmean"), case.inputs, wrt=[0])
    want = torch_reference(
        lambda torch, *inputs: torch.nn.functional.kl_div(
            *(torch.tensor(a) for a in inputs), reduction="batchmean"
        ),
        *case.inputs,
    )
    np.testing.assert_allclose(got, want, rtol=1e-12)


def test_cross_entropy_is_stable_for_huge_logits() -> None:
    g = Graph()
    x, y = g.input("x", (2, 3)), g.input("y", (2,), "int64")
    loss = nn.cross_entropy(x, y, reduction="none")
    logits = np.array([[1000.0, 0.0, -1000.0], [0.0, 3000.0, 0.0]], np.float32)
    got = evaluate(loss, {"x": logits, "y": np.array([0, 0])})[0]
    np.testing.assert_allclose(got, [0.0, 3000.0], rtol=1e-6)


def test_bce_with_logits_is_stable_and_bce_clamps_its_logs_at_minus_100() -> None:
    g = Graph()
    x, t = g.input("x", (3,), "float64"), g.input("t", (3,), "float64")
    feeds = {"x": np.array([-800.0, 0.0, 800.0]), "t": np.array([1.0, 0.5, 0.0])}
    logits_loss = evaluate(nn.binary_cross_entropy_with_logits(x, t, reduction="none"), feeds)[0]
    np.testing.assert_allclose(logits_loss, [800.0, np.log(2.0), 800.0])
    probs = {"x": np.array([0.0, 1.0, 0.5]), "t": np.array([1.0, 0.0, 1.0])}
    bce = evaluate(nn.binary_cross_entropy(x, t, reduction="none"), probs)[0]
    np.testing.assert_allclose(bce, [100.0, 100.0, np.log(2.0)])


def test_cross_entropy_class_axis_and_batch_size_can_change() -> None:
    g = Graph()
    logits = g.input("x", (2, C, 3), "float64")  # PyTorch's (N, C, d) layout
    labels = g.input("y", (2, 3), "int64")
    loss = nn.cross_entropy(logits, labels, axis=1)
    x = RNG.standard_normal((5, C, 3))  # a batch of 5, though built with 2
    y = RNG.integers(0, C, (5, 3))
    want = ce_index_ref(np.moveaxis(x, 1, -1), y, "mean")
    np.testing.assert_allclose(evaluate(loss, {"x": x, "y": y})[0], want, rtol=1e-12)


def test_all_targets_ignored_gives_nan_as_pytorch() -> None:
    g = Graph()
    x, y = g.input("x", (2, C), "float64"), g.input("y", (2,), "int64")
    loss = nn.cross_entropy(x, y, ignore_index=-1)
    with np.errstate(invalid="ignore"):
        value = evaluate(loss, {"x": np.zeros((2, C)), "y": np.array([-1, -1])})[0]
    assert np.isnan(value)


def test_losses_train_a_model() -> None:
    model = nn.Linear(D, C, dtype="float64", rng=0)
    g = Graph()
    x, y = g.input("x", (N, D), "float64"), g.input("y", (N,), "int64")
    step = nn.Adam(model.parameters(), lr=0.1).compile(
        nn.cross_entropy(model(x), y, label_smoothing=0.1)
    )
    xs, ys = RNG.standard_normal((N, D)), RNG.integers(0, C, N)
    losses = [float(step(x=xs, y=ys)[0]) for _ in range(50)]
    assert losses[-1] < 0.5 * losses[0]


# -- errors ---------------------------------------------------------------------------------
def test_shape_and_dtype_mistakes_raise_clear_errors() -> None:
    g = Graph()
    a, b = g.input("a", (N, D)), g.input("b", (N, 1))
    b64 = g.input("b64", (N, D), "float64")
    logits, wrong_labels = g.input("logits", (N, C)), g.input("labels", (N, 1), "int64")
    float_labels = g.input("fl", (N,))
    ints = g.input("ints", (N, D), "int64")
    with pytest.raises(ShapeError, match=r"mse_loss: input \[4, 3\] and target \[4, 1\]"):
        nn.mse_loss(a, b)
    with pytest.raises(DTypeError, match=r"cast the target with .cast\('float32'\)"):
        nn.l1_loss(a, b64)
    with pytest.raises(DTypeError, match="must be float32 or float64"):
        nn.mse_loss(ints, ints)
    with pytest.raises(ShapeError, match=r"needs integer targets of shape \[4\], got \[4, 1\]"):
        nn.cross_entropy(logits, wrong_labels)
    with pytest.raises(ShapeError, match="probability targets must have the logits' shape"):
        nn.cross_entropy(logits, float_labels)
    with pytest.raises(DTypeError, match="integer class labels"):
        nn.nll_loss(logits, float_labels)
    with pytest.raises(ShapeError, match="weight must have shape"):
        nn.cross_entropy(logits, g.input("y", (N,), "int64"), weight=np.ones(C + 1))
    with pytest.raises(ValueError, match="reduction must be one of"):
        nn.huber_loss(a, a, reduction="avg")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="batchmean"):
        nn.mse_loss(a, a, reduction="batchmean")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="ignore_index applies to integer labels"):
        nn.cross_entropy(logits, g.input("p", (N, C)), ignore_index=0)
    with pytest.raises(ValueError, match="label_smoothing"):
        nn.cross_entropy(logits, g.input("y2", (N,), "int64"), label_smoothing=1.5)
    with pytest.raises(DTypeError, match="bool"):
        nn.hinge_loss(a, a > 0.0)
    with pytest.raises(ShapeError, match="target must have shape"):
        nn.cosine_embedding_loss(a, a, g.input("s", (N, 1)))
    with pytest.raises(TypeError, match="must be a Tensor"):
        nn.mse_loss(a, np.zeros((N, D)))  # type: ignore[arg-type]
