"""Embedding's padding_idx and max_norm against PyTorch's committed answers."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import asgrad.nn as nn
import asgrad.nn.functional as F
from asgrad.autograd import grad
from asgrad.tensor import Graph, evaluate
from asgrad.tensor.errors import ArgumentError

Reference = Callable[..., Any]  # the torch_reference fixture (PyTorch's answers)

IDS = np.array([[0, 2, 1, 2], [3, 1, 1, 0]])


def _run(torch_reference: Reference, **kwargs: object) -> tuple[np.ndarray, np.ndarray]:
    table = np.random.default_rng(0).standard_normal((4, 3)) * 2.0
    g = Graph()
    ids, w = g.input("ids", IDS.shape, "int64"), g.input("w", table.shape, "float64", free=())
    y = F.embedding(ids, w, **kwargs)  # type: ignore[arg-type]
    seed = np.cos(np.arange(y.size)).reshape(y.shape)
    got, dw = evaluate(
        [y, *grad((y * g.constant(seed, "float64")).sum(), [w])], {"ids": IDS, "w": table}
    )

    def run(torch: Any, table: np.ndarray, ids: np.ndarray, seed: np.ndarray) -> Any:
        wt = torch.tensor(table, requires_grad=True)
        want = torch.nn.functional.embedding(torch.tensor(ids), wt, **kwargs)
        (want * torch.tensor(seed)).sum().backward()
        return want, wt.grad

    want, want_dw = torch_reference(run, table, IDS, seed)
    np.testing.assert_allclose(got, want, rtol=1e-7)
    return dw, want_dw


def test_padding_idx_passes_no_gradient_to_its_row(torch_reference: Reference) -> None:
    mine, theirs = _run(torch_reference, padding_idx=1)
    np.testing.assert_allclose(mine, theirs, rtol=1e-12)
    assert not mine[1].any()
    mine, theirs = _run(torch_reference, padding_idx=-1)  # row 3
    np.testing.assert_allclose(mine, theirs, rtol=1e-12)


@pytest.mark.parametrize("norm_type", [2.0, 1.0])
def test_max_norm_scales_the_rows_looked_up_with_the_plain_gradient(
    norm_type: float, torch_reference: Reference
) -> None:
    mine, theirs = _run(torch_reference, max_norm=1.5, norm_type=norm_type)
    np.testing.assert_allclose(mine, theirs, rtol=1e-12)


def test_the_layer_zeroes_the_padding_row_and_matches_pytorch(torch_reference: Reference) -> None:
    layer = nn.Embedding(6, 4, padding_idx=2, rng=0)
    assert not layer.weight.value[2].any()
    ids = np.array([[2, 5, 1]])

    def run(torch: Any, weight: np.ndarray, ids: np.ndarray) -> Any:
        theirs = torch.nn.Embedding(6, 4, padding_idx=2)
        theirs.load_state_dict({"weight": torch.tensor(weight)})
        return theirs(torch.tensor(ids))

    (got,) = evaluate([layer(Graph().input("ids", ids.shape, "int64"))], {"ids": ids})
    np.testing.assert_allclose(got, torch_reference(run, layer.weight.value, ids))
    with pytest.raises(ArgumentError, match="scale_grad_by_freq"):
        F.embedding(Graph().input("i", (2,), "int64"), layer.weight.value, scale_grad_by_freq=True)  # type: ignore[arg-type]
