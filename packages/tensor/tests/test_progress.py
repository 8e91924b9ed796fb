"""Progress of long compiles on stderr."""

from __future__ import annotations

import io
import time

import numpy as np
import pytest

from asgrad.tensor import Graph, compile
from asgrad.tensor.errors import ArgumentError
from asgrad.tensor.runtime import progress as progress_mod
from asgrad.tensor.runtime.progress import (
    Progress,
    current,
    progress_delay,
    progress_enabled,
    reporting,
)


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _spy_stages(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, int, int | None]]:
    """Each stage as it ends: (name, items done, total)."""
    seen: list[tuple[str, int, int | None]] = []
    stage = Progress.stage

    def spy(self: Progress, name: str, total: int | None = None) -> None:
        seen.append((self.name, self.done, self.total))
        stage(self, name, total)

    def close_spy(self: Progress) -> None:
        seen.append((self.name, self.done, self.total))
        close(self)

    close = Progress.close
    monkeypatch.setattr(Progress, "stage", spy)
    monkeypatch.setattr(Progress, "close", close_spy)
    return seen


def _program() -> tuple[object, dict[str, np.ndarray]]:
    g = Graph()
    x = g.input("x", (2, 3))
    prog = compile([(x * 2.0).exp().sum()])
    return prog, {"x": np.ones((2, 3), np.float32)}


def test_silent_before_the_delay_then_stage_counts_and_time() -> None:
    clock, out = FakeClock(), io.StringIO()
    p = Progress("asgrad: compiling", stream=out, delay=1.0, clock=clock, background=False)
    p.stage("scheduling")
    clock.now += 0.5
    p.stage("cpu: generating code for nodes", 1400)
    for _ in range(870):
        p.advance()
    p.bump("pipelines built", 23)
    assert out.getvalue() == ""  # still within the delay
    assert p.message() == (
        "asgrad: compiling: cpu: generating code for nodes 870/1,400, 23 pipelines built"
    )
    clock.now += 0.7
    p.stage("planning buffers")
    assert out.getvalue() == "\rasgrad: compiling: planning buffers, 23 pipelines built"
    clock.now += 1.3
    p.close()
    last = out.getvalue().split("\r")[-1]
    assert last.startswith("asgrad: compiling: done in 2.5 s, 23 pipelines built")
    assert last.endswith("\n")


def test_fast_compile_prints_nothing_with_the_default_delay(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("ASGRAD_PROGRESS", "1")
    monkeypatch.delenv("ASGRAD_PROGRESS_DELAY", raising=False)
    assert progress_delay() == progress_mod.DEFAULT_DELAY == 1.0
    prog, feeds = _program()
    prog(feeds)  # type: ignore[operator]
    assert capsys.readouterr().err == ""


def test_compile_and_first_run_report_stages(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("ASGRAD_PROGRESS", "1")
    monkeypatch.setenv("ASGRAD_PROGRESS_DELAY", "0")
    seen = _spy_stages(monkeypatch)
    prog, feeds = _program()
    err = capsys.readouterr().err
    assert "\rasgrad: compiling: scheduling a graph of 5 nodes" in err
    assert "asgrad: compiling: cpu: compiling " in err
    assert err.endswith("\n")
    assert "asgrad: compiling: done in " in err.split("\r")[-1]
    prog(feeds)  # type: ignore[operator]
    err = capsys.readouterr().err
    assert "asgrad: first run at shapes [2, 3]: CPU: inferring types" in err
    assert "asgrad: first run at shapes [2, 3]: done in " in err.split("\r")[-1]
    nodes = len(prog.schedule.nodes)  # type: ignore[attr-defined]
    assert ("CPU: generating code for nodes", nodes, nodes) in seen  # counted every node
    prog(feeds)  # type: ignore[operator]
    assert capsys.readouterr().err == ""  # a known shape compiles nothing


def test_off_by_default_when_stderr_is_not_a_terminal(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("ASGRAD_PROGRESS", raising=False)
    monkeypatch.setenv("ASGRAD_PROGRESS_DELAY", "0")

    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    assert progress_enabled(Tty())
    assert not progress_enabled(io.StringIO())
    prog, feeds = _program()
    prog(feeds)  # type: ignore[operator]
    assert capsys.readouterr().err == ""
    monkeypatch.setenv("ASGRAD_PROGRESS", "0")
    assert not progress_enabled(Tty())
    with reporting("nothing") as p:
        assert p is current()
        assert not isinstance(p, Progress)


def test_bad_settings_say_what_to_set(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ASGRAD_PROGRESS", "yes")
    with pytest.raises(ArgumentError, match="set it to 1"):
        progress_enabled()
    monkeypatch.setenv("ASGRAD_PROGRESS_DELAY", "soon")
    with pytest.raises(ArgumentError, match="seconds before progress shows"):
        progress_delay()


def test_a_long_stage_is_redrawn_by_the_background_thread() -> None:
    out = io.StringIO()
    p = Progress("asgrad: compiling", stream=out, delay=0.01)
    p.stage("scheduling a graph of 9 nodes")
    deadline = time.monotonic() + 10
    while "scheduling" not in out.getvalue() and time.monotonic() < deadline:
        time.sleep(0.01)
    p.close()
    drawn = out.getvalue().split("\r")
    assert "asgrad: compiling: scheduling a graph of 9 nodes" in drawn
    assert drawn[-1].startswith("asgrad: compiling: done in ")
