"""Progress of long compiles on stderr, silent for fast ones.

Compiling a program ([`Program`][asgrad.tensor.Program]) and its first run
at new fed shapes (the CPU generating code, the GPU lowering nodes and building
pipelines) run inside `reporting`. A compile that is still running after a
delay (1 second) shows one updating line on stderr, for example::

    asgrad: compiling: GPU: lowering 870/1,400 nodes, 23 pipelines built

and, when it ends, the time it took. ``ASGRAD_PROGRESS=1`` turns it on, ``0`` off;
by default it is on when stderr is a terminal, so tests and CI logs stay clean.
``ASGRAD_PROGRESS_DELAY`` sets the delay in seconds; ``0`` reports every stage at
once, with no background thread (what the tests use).

Compiling code reports through `current`: ``stage(name, total)`` when a stage
starts, ``advance()`` per item (a counter increment), ``bump(what)`` for a side
count. While nothing reports, `current` is a do-nothing reporter.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TextIO

from asgrad.tensor.errors import ArgumentError

__all__ = ["NullProgress", "Progress", "current", "progress_delay", "progress_enabled", "reporting"]

DEFAULT_DELAY = 1.0  # seconds before a compile shows anything
REFRESH = 0.25  # seconds between redraws of the line


class NullProgress:
    """The reporter while progress is off or nothing is compiling: does nothing."""

    done = 0

    def stage(self, name: str, total: int | None = None) -> None:
        """Start a stage (ignored)."""

    def advance(self, n: int = 1) -> None:
        """Count items done (ignored)."""

    def bump(self, what: str, n: int = 1) -> None:
        """Count a side item (ignored)."""


class Progress(NullProgress):
    """One compile's progress line on ``stream``, shown once ``delay`` seconds passed.

    ``clock`` (seconds) can be injected. With ``delay > 0`` (and ``background``) a
    daemon thread redraws the line every `REFRESH` seconds after the delay, so
    a single long stage shows too; otherwise the line is drawn when a stage starts
    after the delay, and at the end.
    """

    def __init__(
        self,
        label: str,
        *,
        stream: TextIO | None = None,
        delay: float = DEFAULT_DELAY,
        clock: Callable[[], float] = time.monotonic,
        background: bool = True,
    ) -> None:
        self.label = label
        self.stream = stream if stream is not None else sys.stderr
        self.delay = delay
        self.clock = clock
        self.start = clock()
        self.name = "starting"
        self.total: int | None = None
        self.done = 0
        self.side: dict[str, int] = {}
        self.shown = 0  # the length of the line drawn last; 0 while silent
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        if delay > 0 and background:
            self._thread = threading.Thread(target=self._tick, name="asgrad-progress", daemon=True)
            self._thread.start()

    def stage(self, name: str, total: int | None = None) -> None:
        self.name, self.total, self.done = name, total, 0
        if self.clock() - self.start >= self.delay:
            self.draw()

    def advance(self, n: int = 1) -> None:
        self.done += n

    def bump(self, what: str, n: int = 1) -> None:
        self.side[what] = self.side.get(what, 0) + n

    def message(self) -> str:
        """The line: label, stage, how far, side counts."""
        text = f"{self.label}: {self.name}"
        if self.total is not None:
            text += f" {self.done:,}/{self.total:,}"
        elif self.done:
            text += f" {self.done:,}"
        side = ", ".join(f"{n:,} {what}" for what, n in self.side.items())
        return f"{text}, {side}" if side else text

    def draw(self, text: str | None = None, end: str = "") -> None:
        """Redraw the line (``\\r``, padded over the previous one)."""
        line = self.message() if text is None else text
        with self._lock:
            pad = " " * max(0, self.shown - len(line))
            try:
                self.stream.write(f"\r{line}{pad}{end}")
                self.stream.flush()
            except (OSError, ValueError):  # a closed or broken stderr: stay silent
                return
            self.shown = len(line) if not end else 0

    def close(self) -> None:
        """Stop redrawing; a line that was shown ends with the time taken."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        elapsed = self.clock() - self.start
        if self.shown or elapsed >= self.delay:
            side = "".join(f", {n:,} {what}" for what, n in self.side.items())
            self.draw(f"{self.label}: done in {elapsed:.1f} s{side}", end="\n")

    def _tick(self) -> None:
        if self._stop.wait(self.delay):
            return
        while True:
            self.draw()
            if self._stop.wait(REFRESH):
                return


_local = threading.local()
_NULL = NullProgress()


def current() -> NullProgress:
    """The reporter of the compile running on this thread (a do-nothing one if none)."""
    reporter: NullProgress = getattr(_local, "active", _NULL)
    return reporter


def progress_enabled(stream: TextIO | None = None) -> bool:
    """``ASGRAD_PROGRESS`` (``1``/``0``); unset: whether ``stream`` (stderr) is a terminal."""
    value = os.environ.get("ASGRAD_PROGRESS", "").strip()
    if value in ("0", "1"):
        return value == "1"
    if value:
        raise ArgumentError(f"ASGRAD_PROGRESS={value!r}: set it to 1 (show progress) or 0 (hide)")
    stream = stream if stream is not None else sys.stderr
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


def progress_delay() -> float:
    """``ASGRAD_PROGRESS_DELAY`` in seconds (default `DEFAULT_DELAY`)."""
    value = os.environ.get("ASGRAD_PROGRESS_DELAY", "").strip()
    if not value:
        return DEFAULT_DELAY
    try:
        delay = float(value)
    except ValueError:
        delay = -1.0
    if not delay >= 0:
        raise ArgumentError(
            f"ASGRAD_PROGRESS_DELAY={value!r}: give the seconds before progress shows (e.g. 1)"
        )
    return delay


@contextmanager
def reporting(label: str) -> Iterator[NullProgress]:
    """Report a compile as ``label``; inside another one, its stages join the outer line."""
    outer = current()
    if outer is not _NULL or not progress_enabled():
        yield outer
        return
    reporter = Progress(f"asgrad: {label}", delay=progress_delay())
    _local.active = reporter
    try:
        yield reporter
    finally:
        del _local.active
        reporter.close()
