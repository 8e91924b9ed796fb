"""GPU softplus follows the CPU's threshold form: no overflow at 3e38."""

from __future__ import annotations

import numpy as np
import pytest

from asgrad.gpu import Device
from asgrad.tensor import Graph, evaluate, get_op

pytestmark = pytest.mark.gpu

VALUES = np.array([3e38, -3e38, 25.0, -25.0, 0.3, np.nan, -700.0, 10.0], np.float32)


@pytest.mark.parametrize("beta", [1.0, 2.0, -1.5, 0.25])
def test_softplus_matches_the_cpu_at_its_extremes(device: Device, beta: float) -> None:
    g = Graph()
    x = g.input("x", VALUES.shape)
    y = x.softplus(beta=beta)
    with np.errstate(all="ignore"):
        (cpu,) = evaluate([y], {"x": VALUES}, backend="cpu")
    (gpu,) = evaluate([y], {"x": VALUES}, backend="gpu")
    assert np.isfinite(gpu[[0, 1]]).all()
    rtol, atol = get_op("softplus").tolerance  # what every GPU twin of softplus must meet
    np.testing.assert_allclose(gpu, cpu, rtol=rtol, atol=atol, equal_nan=True)
