"""Group, instance and RMS norm, normalize and the distances against PyTorch: values
and gradients of inputs and affine parameters in float64 (PyTorch's answers saved as fixtures)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import asgrad.nn as nn
import asgrad.nn.functional as F
from asgrad.autograd import grad
from asgrad.tensor import Graph, Tensor, evaluate
from asgrad.tensor.errors import ArgumentError

Reference = Callable[..., Any]  # the torch_reference fixture (PyTorch's saved answers)


def _check(
    torch_reference: Reference,
    ours: Callable[..., Tensor],
    theirs: Callable[..., Any],
    *arrays: np.ndarray,
) -> None:
    """``ours(*tensors)`` against ``theirs(torch.nn.functional, *tensors)``: the values and
    the gradients of every input."""
    g = Graph()
    ts = [g.input(f"a{i}", a.shape, "float64", free=()) for i, a in enumerate(arrays)]
    y = ours(*ts)
    w = np.sin(np.arange(int(np.prod(y.shape))) + 1.0).reshape(y.shape)
    grads = grad((y * g.constant(w, "float64")).sum(), ts)
    got = evaluate([y, *grads], {f"a{i}": a for i, a in enumerate(arrays)})

    def run(torch: Any, w: np.ndarray, *arrays: np.ndarray) -> Any:
        tt = [torch.tensor(a, requires_grad=True) for a in arrays]
        want = theirs(torch.nn.functional, *tt)
        (want * torch.tensor(w)).sum().backward()
        return want, [t.grad for t in tt]

    want, want_grads = torch_reference(run, w, *arrays)
    np.testing.assert_allclose(got[0], want, rtol=1e-9, atol=1e-12)
    for mine, theirs_grad in zip(got[1:], want_grads, strict=True):
        np.testing.assert_allclose(mine, theirs_grad, rtol=1e-7, atol=1e-10)


def _r(*shape: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed + sum(shape)).standard_normal(shape)


def test_group_norm_with_affine(torch_reference: Reference) -> None:
    _check(
        torch_reference,
        lambda x, w, b: F.group_norm(x, 3, w, b, 1e-4),
        lambda TF, x, w, b: TF.group_norm(x, 3, w, b, 1e-4),
        _r(2, 6, 4, 3),
        _r(6),
        _r(6, seed=1),
    )


def test_group_norm_without_affine_rank_3(torch_reference: Reference) -> None:
    _check(
        torch_reference,
        lambda x: F.group_norm(x, 2),
        lambda TF, x: TF.group_norm(x, 2),
        _r(3, 4, 5),
    )


def test_instance_norm(torch_reference: Reference) -> None:
    _check(
        torch_reference,
        lambda x, w, b: F.instance_norm(x, weight=w, bias=b),
        lambda TF, x, w, b: TF.instance_norm(x, weight=w, bias=b),
        _r(2, 3, 5, 4),
        _r(3),
        _r(3, seed=2),
    )


def test_rms_norm_default_eps_and_weight(torch_reference: Reference) -> None:
    _check(
        torch_reference,
        lambda x, w: F.rms_norm(x, (3, 4), w),
        lambda TF, x, w: TF.rms_norm(x, (3, 4), w),
        _r(2, 3, 4),
        _r(3, 4),
    )
    _check(
        torch_reference,
        lambda x: F.rms_norm(x, 5, eps=1e-3),
        lambda TF, x: TF.rms_norm(x, (5,), eps=1e-3),
        _r(4, 5),
    )


@pytest.mark.parametrize(("p", "dim"), [(2.0, 1), (1.0, 0), (3.0, -1), (float("inf"), 1)])
def test_normalize(p: float, dim: int, torch_reference: Reference) -> None:
    x = _r(3, 5)
    x[1] = 0.0  # a zero row: PyTorch's gradient there is finite, ours too
    if p == float("inf"):
        x[2] = [0.5, -3.0, 1.0, 2.0, 0.1]  # a single largest magnitude per row
        x[0] = [0.1, 0.2, 2.5, -0.3, 0.4]
    _check(
        torch_reference, lambda t: F.normalize(t, p, dim), lambda TF, t: TF.normalize(t, p, dim), x
    )


def test_cosine_similarity_broadcasts_first(torch_reference: Reference) -> None:
    _check(
        torch_reference,
        lambda a, b: F.cosine_similarity(a, b, dim=1),
        lambda TF, a, b: TF.cosine_similarity(a, b, dim=1),
        _r(4, 3, 2),
        _r(1, 3, 2),
    )
    _check(
        torch_reference,
        lambda a, b: F.cosine_similarity(a, b, dim=1),
        lambda TF, a, b: TF.cosine_similarity(a, b, dim=1),
        _r(4, 3),
        _r(4, 3, seed=3),
    )


@pytest.mark.parametrize(("p", "keepdim"), [(2.0, False), (1.0, True), (3.0, False)])
def test_pairwise_distance(p: float, keepdim: bool, torch_reference: Reference) -> None:
    _check(
        torch_reference,
        lambda a, b: F.pairwise_distance(a, b, p, keepdim=keepdim),
        lambda TF, a, b: TF.pairwise_distance(a, b, p, keepdim=keepdim),
        _r(5, 4),
        _r(5, 4, seed=4),
    )


def test_layers_match_pytorchs_modules_and_state_dicts(torch_reference: Reference) -> None:
    x = _r(2, 6, 5, 5).astype(np.float32)
    layers = [
        nn.GroupNorm(3, 6),
        nn.InstanceNorm2d(6, affine=True),
        nn.InstanceNorm2d(6),
        nn.RMSNorm((5, 5)),
    ]
    states = []
    for ours in layers:
        rng = np.random.default_rng(5)
        new = {
            k: rng.standard_normal(v.shape).astype(np.float32) for k, v in ours.state_dict().items()
        }
        ours.load_state_dict(new)
        states.append(new)

    def run(torch: Any, x: np.ndarray, states: list[dict[str, np.ndarray]]) -> Any:
        modules = [
            torch.nn.GroupNorm(3, 6),
            torch.nn.InstanceNorm2d(6, affine=True),
            torch.nn.InstanceNorm2d(6),
            torch.nn.RMSNorm((5, 5)),
        ]
        names, outs = [], []
        for theirs, new in zip(modules, states, strict=True):
            names.append(sorted(theirs.state_dict()))
            theirs.load_state_dict({k: torch.tensor(v) for k, v in new.items()})
            outs.append(theirs(torch.tensor(x)))
        return names, outs

    names, wants = torch_reference(run, x, states)
    for ours, state_names, want in zip(layers, names, wants, strict=True):
        assert sorted(ours.state_dict()) == list(state_names)
        (got,) = evaluate([ours(Graph().input("x", x.shape))], {"x": x})
        np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-5)


def test_distance_modules(torch_reference: Reference) -> None:
    a, b = _r(3, 4).astype(np.float32), _r(3, 4, seed=6).astype(np.float32)
    g = Graph()
    ta, tb = g.input("a", a.shape), g.input("b", b.shape)
    cos, dist = evaluate(
        [nn.CosineSimilarity(1)(ta, tb), nn.PairwiseDistance(1.0)(ta, tb)], {"a": a, "b": b}
    )

    def run(torch: Any, a: np.ndarray, b: np.ndarray) -> Any:
        ta, tb = torch.tensor(a), torch.tensor(b)
        TF = torch.nn.functional
        return TF.cosine_similarity(ta, tb), TF.pairwise_distance(ta, tb, 1.0)

    want_cos, want_dist = torch_reference(run, a, b)
    np.testing.assert_allclose(cos, want_cos, rtol=1e-5)
    np.testing.assert_allclose(dist, want_dist, rtol=1e-5)


def test_bad_arguments_are_typed_errors() -> None:
    with pytest.raises(ArgumentError, match="must divide"):
        nn.GroupNorm(4, 6)
    with pytest.raises(ArgumentError, match="track_running_stats"):
        nn.InstanceNorm2d(3, track_running_stats=True)
    x = Graph().input("x", (2, 6, 3))
    with pytest.raises(Exception, match=r"num_groups 4 must divide the 6 channels"):
        F.group_norm(x, 4)
    with pytest.raises(ArgumentError, match="'p' must be at least 1"):
        F.normalize(x, 0.5)
