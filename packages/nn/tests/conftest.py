"""Fixtures shared by the tests of asgrad.nn."""

from __future__ import annotations

import os
import sys
import traceback
import warnings
from collections.abc import Callable

import pytest

Fork = Callable[[Callable[[int], None]], tuple[int, int]]


def _fork(body: Callable[[int], None]) -> tuple[int, int]:
    """Run ``body(write_fd)`` in a forked child; return its pid and the pipe's read end.

    The child exits 0 when ``body`` returns, 1 (traceback on stderr) when it raises.
    """
    read_fd, write_fd = os.pipe()
    with warnings.catch_warnings():  # forking a process with threads warns on 3.12+
        warnings.simplefilter("ignore", DeprecationWarning)
        pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        code = 1
        try:
            os.close(read_fd)
            body(write_fd)
            code = 0
        except BaseException:
            traceback.print_exc()
            sys.stderr.flush()
        finally:
            os._exit(code)
    os.close(write_fd)
    return pid, read_fd


@pytest.fixture
def fork() -> Fork:
    """Runs a function in a forked child (the checkpoint crash and concurrency tests)."""
    return _fork
