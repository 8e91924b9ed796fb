"""The compiled CPU path: Numba kernels that generated CPU functions call instead of numpy.

The numpy path (`asgrad.tensor.cpu.codegen`) is the reference; the compiled path
runs the same schedule with native kernels where an op's lowering has them
(`asgrad.tensor.cpu.lowering.resolve`: whole small steps, elementwise loops
rendered from the ops' scalar expressions, the structural families' kernels, fused
Adam groups) and the numpy kernels elsewhere, and must agree with the reference to
each op's registered tolerance.

It is on by default where Numba is installed (``pip install "asgrad-tensor[jit]"``; the
``asgrad`` meta package installs it). The switch, read when a function is generated:

* ``ASGRAD_CPU_JIT=0``: the numpy reference path only;
* ``ASGRAD_CPU_JIT=1``: the compiled path, and an error when Numba is missing;
* unset (or ``auto``): the compiled path where Numba imports;
* `set_enabled` overrides the environment in this process (``None`` goes back to it).

Compiled kernels are cached on disk (Numba's cache, under ``ASGRAD_CACHE_DIR`` or
``~/.cache/asgrad``), so a second process does not compile them again.
"""

from __future__ import annotations

import functools
import os
from pathlib import Path

from asgrad.tensor.errors import BackendError

__all__ = ["JitUnavailableError", "available", "cache_dir", "enabled", "set_enabled"]

_override: list[bool | None] = [None]


class JitUnavailableError(BackendError):
    """The compiled CPU path was required (``ASGRAD_CPU_JIT=1``) but Numba is missing."""


@functools.cache
def available() -> bool:
    """Whether Numba imports in this process."""
    prepare_numba()
    try:
        import numba  # noqa: F401  # probe only
    except ImportError:
        return False
    return True


def set_enabled(flag: bool | None) -> None:
    """Turn the compiled path on or off in this process (``None``: follow ``ASGRAD_CPU_JIT``).

    Programs compiled afterwards follow the new setting; functions already generated
    keep theirs.
    """
    _override[0] = flag


def enabled() -> bool:
    """Whether functions generated now use the compiled path.

    Raises:
        JitUnavailableError: The path is required (``ASGRAD_CPU_JIT=1`` or
            ``set_enabled(True)``) but Numba does not import.
    """
    flag = _override[0]
    if flag is None:
        setting = os.environ.get("ASGRAD_CPU_JIT", "auto").strip().lower()
        if setting in ("0", "off", "false", "no"):
            return False
        if setting not in ("1", "on", "true", "yes"):
            return available()
        flag = True
    if flag and not available():
        raise JitUnavailableError(
            "the compiled CPU path needs Numba, which does not import here: "
            'install it (pip install "asgrad-tensor[jit]") or set ASGRAD_CPU_JIT=0 '
            "to run the numpy reference path"
        )
    return flag


def prepare_numba() -> None:
    """Point Numba's on-disk cache at `cache_dir` (unless ``NUMBA_CACHE_DIR`` is
    set): the one place that does it, called before anything imports Numba here."""
    os.environ.setdefault("NUMBA_CACHE_DIR", str(cache_dir()))


def cache_dir() -> Path:
    """Where compiled kernels are cached (``ASGRAD_CACHE_DIR``, else ``~/.cache/asgrad``)."""
    root = os.environ.get("ASGRAD_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "asgrad"
    )
    return Path(root) / "numba"
