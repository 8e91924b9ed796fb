"""An embedding's gradient on the GPU: the row scatter-add kernel, bit for bit numpy's
sequential ``np.add.at`` (the kernel itself: packages/gpu/tests/test_scatter_add_rows.py)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from asgrad.autograd import grad
from asgrad.gpu import Device
from asgrad.gpu.plan import build_plan
from asgrad.tensor import Graph, compile

pytestmark = pytest.mark.gpu


def test_an_embedding_gradient_launches_the_row_kernel(device: Device) -> None:
    rng = np.random.default_rng(7)
    g = Graph("embedding")
    table = g.input("table", (64, 128))
    ids = g.input("ids", (16, 64), "int32")
    loss = (table.gather(ids, axis=0) * g.input("w", (16, 64, 128))).sum()
    (d_table,) = grad(loss, [table])
    program = compile([d_table], backend="gpu")
    index = rng.integers(0, 64, (16, 64)).astype(np.int32)
    weight = rng.standard_normal((16, 64, 128)).astype(np.float32)
    feeds = {"table": rng.standard_normal((64, 128)).astype(np.float32), "ids": index, "w": weight}
    executable: Any = program.executable
    labels = [str(c[-1]) for c in build_plan(executable.schedule, feeds, device).commands]
    assert any(label.startswith("index_scatter_add_rows") for label in labels), labels
    (got,) = program(feeds)
    want = np.zeros((64, 128), np.float32)
    np.add.at(want, index.reshape(-1), weight.reshape(-1, 128))
    np.testing.assert_array_equal(np.asarray(got), want)
