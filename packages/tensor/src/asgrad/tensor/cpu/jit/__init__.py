"""The compiled CPU path: Numba kernels that generated CPU functions call instead of numpy.

The numpy path (`asgrad.tensor.cpu.codegen`) is the reference; the compiled path
runs the same schedule with native kernels where an op's lowering has them
(`asgrad.tensor.cpu.lowering.resolve`: whole small steps, elementwise loops
rendered from the ops' scalar expressions, the structural families' kernels, fused
Adam groups) and the numpy kernels elsewhere, and must agree with the reference to
each op's registered tolerance.

It is on by default where Numba is installed (``pip install "asgrad-tensor[jit]"``; the
``asgrad`` meta package installs it), tiered: a function starts on the numpy path and
switches to its compiled form after `TIER_UP_AT` steps (`asgrad.tensor.cpu.jit.tier`),
so a program's first results never wait for Numba. The switch (`mode`), read when a
function is generated:

* ``ASGRAD_CPU_JIT=0``: the numpy reference path only;
* ``ASGRAD_CPU_JIT=1``: the compiled path from the first call (which waits for
  Numba), and an error when Numba is missing;
* ``ASGRAD_CPU_JIT=lazy``: tiered, and an error when Numba is missing;
* unset (or ``auto``): tiered where Numba is installed, else the numpy path;
* `set_enabled` overrides the environment in this process (``None`` goes back to it).

Compiled kernels are cached on disk (Numba's cache, under ``ASGRAD_CACHE_DIR`` or
``~/.cache/asgrad``), so a second process does not compile them again.
"""

from __future__ import annotations

import functools
import importlib.util
import os
from pathlib import Path
from typing import Literal

from asgrad.tensor.errors import ArgumentError, BackendError

__all__ = [
    "TIER_UP_AT",
    "JitUnavailableError",
    "Mode",
    "available",
    "cache_dir",
    "enabled",
    "installed",
    "mode",
    "set_enabled",
]

Mode = Literal["off", "lazy", "on"]

# Steps a tiered function runs on the numpy path before its compiled form: the same
# count in every run, so results never depend on how fast Numba compiled (see
# `asgrad.tensor.cpu.jit.tier`). Compiling costs seconds (importing Numba alone
# about 1.6 s on the 2-core machine) and a small step saves tens of microseconds a
# call compiled: short runs (the xor example's 46 steps) finish before it matters.
TIER_UP_AT = 1000

_override: list[bool | str | None] = [None]


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


@functools.cache
def installed() -> bool:
    """Whether Numba is installed, found without importing it (importing takes seconds)."""
    return importlib.util.find_spec("numba") is not None


def set_enabled(flag: bool | Literal["lazy"] | None) -> None:
    """Set the compiled path in this process: True compiles from the first call,
    ``"lazy"`` tiers up after `TIER_UP_AT` steps, False runs numpy only, ``None``
    follows ``ASGRAD_CPU_JIT``.

    Programs compiled afterwards follow the new setting; functions already generated
    keep theirs.

    >>> from asgrad.tensor.cpu import jit
    >>> jit.set_enabled(False)
    >>> jit.mode()
    'off'
    >>> jit.set_enabled(None)
    """
    if flag not in (True, False, "lazy", None):
        raise ArgumentError(
            f"set_enabled takes True (compiled from the first call), 'lazy' (tiered),"
            f" False (numpy only) or None (ASGRAD_CPU_JIT decides); got {flag!r}"
        )
    _override[0] = flag


def mode() -> Mode:
    """How functions generated now run: ``"off"`` (numpy only), ``"lazy"`` (numpy, then
    compiled after `TIER_UP_AT` steps) or ``"on"`` (compiled from the first call).

    Deciding imports no Numba (``"lazy"`` where it is installed); ``"on"`` imports it.

    Raises:
        JitUnavailableError: The path is required (``ASGRAD_CPU_JIT=1`` or ``lazy``,
            ``set_enabled(True)`` or ``"lazy"``) but Numba is missing.
    """
    flag = _override[0]
    if flag is None:
        setting = os.environ.get("ASGRAD_CPU_JIT", "auto").strip().lower()
        if setting in ("0", "off", "false", "no"):
            return "off"
        if setting in ("1", "on", "true", "yes"):
            flag = True
        elif setting == "lazy":
            flag = "lazy"
        else:
            return "lazy" if installed() else "off"
    if flag is False:
        return "off"
    if not (available() if flag is True else installed()):
        raise JitUnavailableError(
            "the compiled CPU path needs Numba, which does not import here: "
            'install it (pip install "asgrad-tensor[jit]") or set ASGRAD_CPU_JIT=0 '
            "to run the numpy reference path"
        )
    return "on" if flag is True else "lazy"


def enabled() -> bool:
    """Whether functions generated now use the compiled path (from the first call, or
    after tiering up: `mode` is not ``"off"``).

    Raises:
        JitUnavailableError: As `mode`.
    """
    return mode() != "off"


def prepare_numba() -> None:
    """Point Numba's on-disk cache at `cache_dir` (unless ``NUMBA_CACHE_DIR`` is
    set), and let its OpenMP threads sleep between kernels (``OMP_WAIT_POLICY=PASSIVE``
    unless set): the one place that does it, called before anything imports Numba here.

    OpenMP's threads otherwise spin after each parallel kernel, on the cores that BLAS's
    own threads need for the matrix product that follows: with 16 threads of each on a
    16-core host, the transformer workload's step ran at 4.2 steps/s against 34.7 with
    passive waiting (``docs/performance.md``, "Kernel threads")."""
    os.environ.setdefault("NUMBA_CACHE_DIR", str(cache_dir()))
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")


def cache_dir() -> Path:
    """Where compiled kernels are cached (``ASGRAD_CACHE_DIR``, else ``~/.cache/asgrad``)."""
    root = os.environ.get("ASGRAD_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "asgrad"
    )
    return Path(root) / "numba"
