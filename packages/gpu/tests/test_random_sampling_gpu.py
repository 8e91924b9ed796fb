"""rand / randn / bernoulli on the GPU against the CPU: the same draws for the same seeds.

Uniforms (and so bernoulli) are bit-identical; normals agree within 2e-6 (the GPU
computes Box-Muller's log and cos in float32, the CPU in float64 then rounds; 1.7e-6
was the largest difference over five seeds of a million draws each).
"""

from __future__ import annotations

import numpy as np
import pytest

from asgrad.gpu import Device
from asgrad.tensor import Graph, bernoulli, compile, rand_like, randn_like, seed_stream


@pytest.mark.gpu
@pytest.mark.parametrize("seed", [0, -3, 123456789, 2**31 - 1])
def test_samples_match_the_cpu(device: Device, seed: int) -> None:
    g = Graph()
    x = g.input("x", (300, 700))
    s = g.input("s", (), "int64")
    outs = [rand_like(x, s), randn_like(x, s), bernoulli(x, s)]
    feed = {"x": np.full((300, 700), 0.3, np.float32), "s": np.array(seed, np.int64)}
    cpu = compile(outs, backend="cpu")(**feed)
    gpu = compile(outs, backend="gpu")(**feed)
    np.testing.assert_array_equal(gpu[0], cpu[0])
    np.testing.assert_allclose(gpu[1], cpu[1], rtol=2e-6, atol=2e-6)
    np.testing.assert_array_equal(gpu[2], cpu[2])
    assert 0.29 < gpu[2].mean() < 0.31


@pytest.mark.gpu
def test_the_graph_stream_advances_the_same_way(device: Device) -> None:
    results = {}
    for backend in ("cpu", "gpu"):
        g = Graph()
        seed_stream(g, 99)
        x = g.input("x", (4, 33))
        program = compile([rand_like(x), randn_like(x)], g.updates, backend=backend)
        feed = np.zeros((4, 33), np.float32)
        results[backend] = [program(x=feed) for _ in range(3)]
        assert int(seed_stream(g).value) == 99 + 6
    for cpu, gpu in zip(results["cpu"], results["gpu"], strict=True):
        np.testing.assert_array_equal(gpu[0], cpu[0])
        np.testing.assert_allclose(gpu[1], cpu[1], rtol=2e-6, atol=2e-6)
    assert not np.array_equal(results["gpu"][0][0], results["gpu"][1][0])
