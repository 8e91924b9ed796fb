"""A transpose read through a view that only added leading 1s (a reshape of
(3, 4, 2) to (1, 3, 4, 2)) is lowered as strides on the view's input.

Regression: the plan passed the reshape's input on unchanged (3 axes), and the
transpose's 4 axes indexed past them (IndexError while lowering).
"""

from __future__ import annotations

import numpy as np
import pytest

from asgrad.gpu import Device
from asgrad.tensor import Graph, evaluate

pytestmark = pytest.mark.gpu


def test_a_transpose_of_a_view_with_leading_ones(device: Device) -> None:
    x = np.arange(24, dtype=np.float32).reshape(3, 4, 2)
    g = Graph()
    t = g.input("x", x.shape, free=())
    y = t.reshape(1, 3, 4, 2).transpose(0, 2, 1, 3) + 1.0
    (got,) = evaluate([y], {"x": x}, backend="gpu")
    np.testing.assert_array_equal(got, x.reshape(1, 3, 4, 2).transpose(0, 2, 1, 3) + 1.0)
