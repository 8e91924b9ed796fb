"""Ops built on constant index tables refuse another size on the axis they index.

Regression: ``pad``, ``unfold`` and per-element ``repeat_interleave`` gather with
indices computed for the declared size; fed a larger batch on that axis they read its
first rows only and returned a silently wrong result. Now the run raises a
``FeedError`` naming the line; the other axes stay free.
"""

from __future__ import annotations

import numpy as np
import pytest

from asgrad.tensor import FeedError, Graph, evaluate, pad

FED = np.arange(12, dtype=np.float32).reshape(4, 3)  # declared (2, 3), batch axis free


@pytest.mark.parametrize("backend", ["cpu", pytest.param("gpu", marks=pytest.mark.gpu)])
@pytest.mark.parametrize(
    "build",
    [
        lambda x: pad(x, ((1, 1), (0, 0)), mode="reflect"),
        lambda x: pad(x, ((0, 2), (0, 0)), mode="circular"),
        lambda x: x.unfold(0, 2, 1),
        lambda x: x.repeat_interleave([1, 2], 0),
        lambda x: x.expand_dims(2).broadcast_to(2, 3, 3).diagonal(0, 0, 1),
    ],
    ids=["pad reflect", "pad circular", "unfold", "repeat_interleave", "diagonal"],
)
def test_another_size_on_the_indexed_axis_is_an_error(build: object, backend: str) -> None:
    g = Graph()
    y = build(g.input("x", (2, 3)))  # type: ignore[operator]
    with pytest.raises(FeedError, match="test_free_axis_index_tables"):
        evaluate([y], {"x": FED}, backend=backend)
    (ok,) = evaluate([y], {"x": FED[:2]}, backend=backend)  # the declared size still runs
    assert ok.shape == y.shape


def test_indexing_another_axis_keeps_the_batch_free() -> None:
    g = Graph()
    x = g.input("x", (2, 3))
    (got,) = evaluate([pad(x, ((0, 0), (1, 1)), mode="reflect")], {"x": FED})
    np.testing.assert_array_equal(got, np.pad(FED, ((0, 0), (1, 1)), mode="reflect"))
