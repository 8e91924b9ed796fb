"""``StepLosses``: the examples' losses read every N launched steps, in step order."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from asgrad import nn
from asgrad.examples._common import StepLosses, launch
from asgrad.nn.metrics import MetricWriter
from asgrad.tensor import DeviceValue, Graph


def test_losses_are_read_in_batches_and_logged_in_order(tmp_path: Path) -> None:
    model = nn.Linear(2, 1, rng=0)
    g = Graph()
    x, y = g.input("x", (4, 2)), g.input("y", (4, 1))
    step = nn.SGD(model.parameters(), lr=0.1).compile(nn.mse_loss(model(x), y))
    feeds = {"x": np.ones((4, 2), np.float32), "y": np.zeros((4, 1), np.float32)}
    expected_model = nn.Linear(2, 1, rng=0)
    g2 = Graph()
    x2, y2 = g2.input("x", (4, 2)), g2.input("y", (4, 1))
    reference = nn.SGD(expected_model.parameters(), lr=0.1).compile(
        nn.mse_loss(expected_model(x2), y2)
    )
    expected = [float(reference(feeds)[0]) for _ in range(7)]
    with MetricWriter(tmp_path / "log.jsonl") as log:
        record = StepLosses(log, every=3)
        for i in range(7):
            loss = launch(step, **feeds)
            assert isinstance(loss, DeviceValue)
            record.add(loss, lr=0.1 * i)
            assert len(record.values) == 3 * ((i + 1) // 3)  # read every third step
            assert len(record) == i + 1
        assert record.flush() == expected
    lines = (tmp_path / "log.jsonl").read_text().splitlines()
    assert len(lines) == 7
    assert '"step": 7' in lines[-1]
    assert '"lr": 0.6' in lines[-1]
