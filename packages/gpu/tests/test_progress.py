"""The first GPU run reports lowering and pipelines built, on the progress line of
long compiles."""

from __future__ import annotations

import numpy as np
import pytest

from asgrad.gpu import Device
from asgrad.tensor import Graph, compile
from asgrad.tensor.runtime.progress import Progress


def test_first_gpu_run_reports_nodes_lowered_and_pipelines_built(
    device: Device, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("ASGRAD_PROGRESS", "1")
    monkeypatch.setenv("ASGRAD_PROGRESS_DELAY", "0")
    ended: list[tuple[str, int, int | None]] = []
    close = Progress.close

    def spy(self: Progress) -> None:
        ended.append((self.name, self.done, self.total))
        close(self)

    monkeypatch.setattr(Progress, "close", spy)
    g = Graph()
    x = g.input("x", (3, 5))
    prog = compile([(x * 3.0).tanh().sum(axis=1)], backend="gpu")
    capsys.readouterr()
    before = len(device.pipelines._pipelines)
    out = prog({"x": np.ones((3, 5), np.float32)})
    built = len(device.pipelines._pipelines) - before
    np.testing.assert_allclose(out[0], np.full(3, 5 * np.tanh(3.0)), rtol=1e-5)
    err = capsys.readouterr().err
    nodes = len(prog.schedule.nodes)
    assert f"asgrad: first GPU run at shapes [3, 5]: GPU: lowering nodes 0/{nodes}" in err
    assert ended[-1] == ("GPU: lowering nodes", nodes, nodes)
    last = err.split("\r")[-1]
    assert last.startswith("asgrad: first GPU run at shapes [3, 5]: done in ")
    assert (f", {built} pipelines built" in last) == (built > 0)
