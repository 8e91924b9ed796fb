"""What every example shares: its command line, progress bar, metrics log, plot and JSON line."""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any, TypeVar

from tqdm import tqdm

from asgrad.nn.metrics import MetricWriter
from asgrad.tensor import AsgradError, get_backend, resolve_backend_name

PLOT_EXTRA = "pip install 'asgrad-examples[plot]'"
"""How to install what ``--plot`` needs (matplotlib)."""

Series = tuple[Sequence[float], Sequence[float]]
"""A curve: x values and y values."""

T = TypeVar("T")


def parser(
    description: str,
    *,
    steps: int | None = None,
    epochs: int | None = None,
    module: str = "",
    distributed: bool = False,
) -> argparse.ArgumentParser:
    """The common flags: ``--seed``, ``--device`` and ``--steps`` or ``--epochs``.

    ``module`` (the example's ``__name__``) names the program in ``--help`` as it is
    run: ``python -m asgrad.examples.xor``. ``distributed``: the example also takes
    ``--distributed`` (data-parallel under ``mpirun``).
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
    if distributed:
        p.add_argument(
            "--distributed",
            action="store_true",
            help="data-parallel over MPI: run as `mpirun -n N python -m ...`; each rank"
            " takes 1/N of every batch (needs asgrad-nn[mpi])",
        )
    p.add_argument(
        "--plot",
        metavar="PNG",
        default=None,
        help=f"write the training curves to this PNG (needs matplotlib: {PLOT_EXTRA})",
    )
    p.add_argument(
        "--log",
        metavar="FILE",
        default=None,
        help="write each step's (or epoch's) metrics to this .jsonl or .csv file",
    )
    p.add_argument(
        "--export",
        metavar="ONNX",
        default=None,
        help="write the trained model to this .onnx file, checked by ONNX Runtime"
        " (needs asgrad-onnx: pip install 'asgrad-examples[onnx]')",
    )
    return p


def check_plot(path: str | None) -> None:
    """End the program (status 1, one line) if ``--plot`` was given without matplotlib.

    Called before training, so that a missing extra costs no training time.
    """
    if path is None:
        return
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise SystemExit(f"error: --plot needs matplotlib; install it with {PLOT_EXTRA}") from None


def open_log(path: str | None) -> contextlib.AbstractContextManager[MetricWriter | None]:
    """The ``--log`` file's [`MetricWriter`][asgrad.nn.MetricWriter] (``None`` without one)."""
    if path is None:
        return contextlib.nullcontext(None)
    try:
        return MetricWriter(path)
    except (AsgradError, OSError) as exc:
        raise SystemExit(f"error: --log {path}: {exc}") from None


def plot(
    path: str,
    title: str,
    panels: Sequence[tuple[str, str, Mapping[str, Series]]],
    *,
    log_y: Sequence[bool] = (),
) -> None:
    """Write ``panels`` side by side to the PNG ``path`` with matplotlib's Agg backend.

    Each panel is ``(x label, y label, {curve label: (xs, ys)})``; a curve of one point
    is drawn as a marker. ``log_y[i]`` puts panel ``i`` on a log scale.
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.ticker import MaxNLocator

    fig = Figure(figsize=(4.2 * len(panels), 3.4), dpi=100, layout="constrained")
    FigureCanvasAgg(fig)
    fig.suptitle(title)
    for i, (xlabel, ylabel, curves) in enumerate(panels):
        ax = fig.add_subplot(1, len(panels), i + 1)
        for label, (xs, ys) in curves.items():
            style = {"marker": "o", "linestyle": "none"} if len(xs) == 1 else {}
            ax.plot(list(xs), list(ys), label=label, **style)  # type: ignore[arg-type]
        ax.set_xlabel(xlabel)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_ylabel(ylabel)
        if i < len(log_y) and log_y[i]:
            ax.set_yscale("log")
        ax.grid(alpha=0.3)
        ax.legend()
    fig.savefig(path)


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


def launch(step: Any, **feeds: Any) -> Any:
    """Start one training step and return its loss without waiting for it.

    A compiled program's [`launch`][asgrad.tensor.Program.launch] returns the loss as a
    [`DeviceValue`][asgrad.tensor.DeviceValue]: on the GPU the next step is queued while this
    one runs, and ``float(loss)`` waits for it. A step without ``launch`` (a
    distributed step) runs at once and returns its loss as an array.
    """
    return getattr(step, "launch", step)(**feeds)[0]


class StepLosses:
    """Losses of launched steps, read every ``every`` steps instead of after each one.

    `add` keeps a step's loss and the other fields of its log record; every
    ``every`` steps, and at `flush`, the kept losses are read together,
    appended to `values` and written to ``log`` (``step``, ``loss``, fields).
    """

    def __init__(self, log: MetricWriter | None, every: int = 50) -> None:
        self.log = log
        self.every = every
        self.values: list[float] = []
        self._pending: list[tuple[Any, dict[str, Any]]] = []

    def __len__(self) -> int:
        """Steps added so far (read or not)."""
        return len(self.values) + len(self._pending)

    def add(self, loss: Any, **fields: Any) -> None:
        """Keep one step's loss; read the kept ones when ``every`` are waiting."""
        self._pending.append((loss, fields))
        if len(self._pending) >= self.every:
            self.flush()

    def flush(self) -> list[float]:
        """Read every kept loss (one wait for the device); returns `values`."""
        for loss, fields in self._pending:
            self.values.append(float(loss))
            if self.log is not None:
                self.log.write(step=len(self.values), loss=self.values[-1], **fields)
        self._pending.clear()
        return self.values


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
