"""glibc's malloc keeps freed memory for the next step once a CPU program is made."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from typing import Any

import numpy as np
import pytest

from asgrad.tensor import Graph, compile
from asgrad.tensor.cpu import malloc

# Frees 64 arrays of 4 MiB, then allocates and fills them again: the page faults of the
# second round (a fresh process, so nothing else has tuned malloc yet).
_ROUNDS = """
import resource, sys
import numpy as np
from asgrad.tensor.cpu import malloc
if sys.argv[1] == "configure":
    assert malloc.configure()
def faults():
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(2):
    before = faults()
    arrays = [np.ones(1 << 20, np.float32) for _ in range(64)]
    del arrays
print(faults() - before)
"""


def _second_round_faults(mode: str) -> int:
    env = {"PATH": "/usr/bin:/bin", "ASGRAD_CPU_JIT": "0"}
    result = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(_ROUNDS), mode],
        capture_output=True, text=True, check=True, env={**env, "PYTHONPATH": ":".join(sys.path)},
    )  # fmt: skip
    return int(result.stdout.split()[-1])


@pytest.mark.skipif(malloc._mallopt() is None, reason="glibc's mallopt: Linux with glibc")
def test_freed_arrays_come_back_without_page_faults() -> None:
    # 64 x 4 MiB is 65,536 pages: untuned, glibc gives them back and faults them in again.
    assert _second_round_faults("default") > 16_000
    assert _second_round_faults("configure") < 1_000


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, int]]:
    """The process's decision reset, and mallopt's calls recorded instead of made."""
    made: list[tuple[int, int]] = []

    def mallopt(param: int, value: int) -> int:
        made.append((param, value))
        return 1

    monkeypatch.setattr(malloc, "_done", [False])
    monkeypatch.setattr(malloc, "_mallopt", lambda: mallopt)
    for name in (*malloc._USER_SETTINGS, "GLIBC_TUNABLES", "ASGRAD_CPU_MALLOC"):
        monkeypatch.delenv(name, raising=False)
    return made


def _program() -> Any:
    x = Graph().input("x", (4,))
    return compile([x * 2.0], backend="cpu")


def test_first_cpu_program_sets_both_thresholds_once(calls: list[tuple[int, int]]) -> None:
    program = _program()
    assert calls == [(-3, malloc.MMAP_THRESHOLD), (-1, malloc.TRIM_THRESHOLD)]
    _program()
    assert len(calls) == 2  # once per process
    np.testing.assert_array_equal(program(x=np.arange(4, dtype=np.float32))[0], [0, 2, 4, 6])


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("ASGRAD_CPU_MALLOC", "0"),
        ("MALLOC_TRIM_THRESHOLD_", "1000000"),
        ("MALLOC_MMAP_THRESHOLD_", "1000000"),
        ("MALLOC_TOP_PAD_", "0"),
        ("GLIBC_TUNABLES", "glibc.malloc.trim_threshold=1000000"),
    ],
)
def test_malloc_left_alone_where_the_environment_says(
    calls: list[tuple[int, int]], monkeypatch: pytest.MonkeyPatch, name: str, value: str
) -> None:
    monkeypatch.setenv(name, value)
    _program()
    assert calls == []
    assert not malloc.configure()
