"""What every example shares: its command line, progress bar and final JSON line."""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Iterable, Iterator
from typing import Any, TypeVar

from tqdm import tqdm

from asgrad.tensor import AsgradError, get_backend, resolve_backend_name

T = TypeVar("T")


def parser(
    description: str, *, steps: int | None = None, epochs: int | None = None, module: str = ""
) -> argparse.ArgumentParser:
    """The common flags: ``--seed``, ``--device`` and ``--steps`` or ``--epochs``.

    ``module`` (the example's ``__name__``) names the program in ``--help`` as it is
    run: ``python -m asgrad.examples.xor``.
    """
    prog = f"python -m {module}" if module and module != "__main__" else None
    p = argparse.ArgumentParser(prog=prog, description=description)
    p.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    p.add_argument(
        "--device",
        choices=("cpu", "gpu", "auto"),
        default=None,
        help="backend: cpu, gpu or auto (default: $ASGRAD_DEVICE, else cpu)",
    )
    if steps is not None:
        p.add_argument("--steps", type=int, default=steps, help=f"training steps (default {steps})")
    if epochs is not None:
        p.add_argument(
            "--epochs", type=int, default=epochs, help=f"training epochs (default {epochs})"
        )
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    return p


def device(name: str | None) -> str:
    """The backend name an example runs on.

    A backend that cannot run here (``--device gpu`` without an adapter) ends the
    program with one line on stderr naming the flag to use instead, and status 1.
    """
    try:
        resolved = resolve_backend_name(name)
        usable = resolved == "cpu" or get_backend(resolved).available()
    except AsgradError as exc:
        raise SystemExit(f"error: --device {name}: {exc}") from None
    if not usable:
        raise SystemExit(
            f"error: --device {name or resolved}: no {resolved} adapter can be opened on this"
            " machine (python -m asgrad.gpu info says why); run with --device cpu"
        )
    return resolved


def progress(
    items: Iterable[T], *, total: int | None = None, quiet: bool = False, desc: str = ""
) -> Iterator[T]:
    """A tqdm progress bar on stderr (none with ``quiet``)."""
    return iter(tqdm(items, total=total, disable=quiet, desc=desc, file=sys.stderr, leave=False))


class Timer:
    """Seconds since construction."""

    def __init__(self) -> None:
        self.start = time.perf_counter()

    @property
    def seconds(self) -> float:
        return time.perf_counter() - self.start


def report(example: str, **results: Any) -> dict[str, Any]:
    """Print the example's one final JSON line of results and return it."""
    line = {"example": example, **results}
    print(json.dumps(line, default=float), flush=True)
    return line
