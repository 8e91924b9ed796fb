"""An input scheduled after other nodes gets a buffer that no earlier command writes.

Inputs are uploaded before a plan's commands run; an input bound while the plan was
lowered in schedule order could get a pool buffer released by an earlier node (here
``x * 2``'s, once the transpose has read it), which that node's command then wrote
over the uploaded value (issue 13: einsum's expansion met it).
"""

from __future__ import annotations

import numpy as np
import pytest

from asgrad.tensor import Graph, evaluate

pytestmark = pytest.mark.gpu


def test_an_input_scheduled_late_keeps_its_uploaded_value(device: object) -> None:
    rng = np.random.default_rng(0)
    a = rng.standard_normal((1, 6, 5)).astype(np.float32)
    b = rng.standard_normal((1, 3)).astype(np.float32)
    g = Graph()
    x = g.input("x", a.shape, free=())
    y = g.input("y", b.shape, free=())
    out = (x * 2.0).reshape(2, 3, 5).transpose(0, 2, 1).reshape(1, 10, 3) + y
    (got,) = evaluate([out], {"x": a, "y": b}, backend="gpu")
    want = (a * 2.0).reshape(2, 3, 5).transpose(0, 2, 1).reshape(1, 10, 3) + b
    np.testing.assert_allclose(got, want, rtol=1e-6)
