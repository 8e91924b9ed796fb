"""``MetricLogger`` (named scalars per step, with summaries) and ``MetricWriter`` (to a file)."""

from __future__ import annotations

import csv
import json
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Literal, TextIO

import numpy as np

from asgrad.nn.errors import MetricError, UnknownMetricError

__all__ = ["MetricLogger", "MetricWriter"]


class MetricLogger:
    """Record named scalars per step and summarise them.

    Example:
        >>> log = MetricLogger()
        >>> log.log(0, loss=1.0, acc=0.5)
        >>> log.log(1, loss=0.5)
        >>> log.latest("loss"), log.summary()["loss"]["min"]
        (0.5, 0.5)
    """

    def __init__(self) -> None:
        self.history: dict[str, list[tuple[int, float]]] = {}

    def log(self, step: int, **values: float) -> None:
        """Record each ``name=value`` at ``step``."""
        for name, value in values.items():
            v = float(value)
            self.history.setdefault(name, []).append((step, v))

    def values(self, name: str) -> list[float]:
        """All values logged under ``name``, in order."""
        return [v for _, v in self._series(name)]

    def steps(self, name: str) -> list[int]:
        """The steps at which ``name`` was logged, in order."""
        return [s for s, _ in self._series(name)]

    def latest(self, name: str) -> float:
        """The last value logged under ``name``."""
        return self._series(name)[-1][1]

    def _series(self, name: str) -> list[tuple[int, float]]:
        if name not in self.history:
            known = ", ".join(sorted(self.history)) or "none yet"
            raise UnknownMetricError(f"MetricLogger: no metric {name!r} (logged: {known})")
        return self.history[name]

    def summary(self) -> dict[str, dict[str, float]]:
        """Per name: ``last``, ``mean``, ``min``, ``max``, ``count`` (JSON-able)."""
        out: dict[str, dict[str, float]] = {}
        for name, series in self.history.items():
            v = np.array([x for _, x in series], dtype=np.float64)
            out[name] = {
                "last": float(v[-1]),
                "mean": float(v.mean()),
                "min": float(v.min()),
                "max": float(v.max()),
                "count": float(v.size),
            }
        return out

    def format(self, step: int | None = None) -> str:
        """One line with the latest value of every metric, e.g. for a progress bar."""
        parts = [f"{k}={s[-1][1]:.4g}" for k, s in sorted(self.history.items())]
        return (f"step {step}: " if step is not None else "") + " ".join(parts)

    def state_dict(self) -> dict[str, list[list[float]]]:
        """The whole history as JSON-able lists of ``[step, value]``."""
        return {k: [[s, v] for s, v in series] for k, series in self.history.items()}

    def load_state_dict(self, state: Mapping[str, Iterable[Iterable[float]]]) -> None:
        """Replace the history by what `state_dict` returned."""
        self.history = {k: [(int(s), float(v)) for s, v in series] for k, series in state.items()}


_FORMATS = {".csv": "csv", ".jsonl": "jsonl", ".ndjson": "jsonl", ".json": "jsonl"}


def _plain(name: str, value: object) -> object:
    """``value`` as JSON/CSV can hold it: a numpy scalar or size-1 array becomes a float."""
    if isinstance(value, np.generic | np.ndarray) and not isinstance(value, np.str_):
        array = np.asarray(value)
        if array.size != 1:
            raise MetricError(
                f"MetricWriter: {name!r} has shape {array.shape}; a record holds scalars"
                " (log a reduction such as .mean(), or one key per element)"
            )
        return float(array.reshape(()))
    if isinstance(value, bool | int | float | str) or value is None:
        return value
    raise MetricError(
        f"MetricWriter: {name!r} is a {type(value).__name__}; a record holds numbers"
        " (int, float, numpy scalars or size-1 arrays), strings, booleans or None"
    )


class MetricWriter:
    """Write one record (a row of named values) per call to a CSV or JSON-lines file.

    The format is ``format`` (``"csv"`` or ``"jsonl"``), else the suffix of ``path``:
    ``.csv`` is CSV; ``.jsonl``, ``.ndjson`` and ``.json`` are JSON lines. ``mode="w"``
    truncates the file, ``mode="a"`` appends to it. Every record is flushed as it is
    written, so ``tail -f`` or a plotting tool can read the file during a run. Numpy
    scalars and size-1 arrays are written as floats.

    CSV needs one fixed header: the first record's keys make it (when appending to a
    non-empty CSV file, the file's header line is read instead). A later record with a
    key the header lacks raises [`MetricError`][asgrad.nn.MetricError]; a key it leaves out is an
    empty cell. JSON lines have no header: each record has its own keys.

    Example:
        >>> import tempfile, pathlib
        >>> path = pathlib.Path(tempfile.mkdtemp()) / "metrics.jsonl"
        >>> with MetricWriter(path) as log:
        ...     log.write(step=0, loss=np.float32(0.5))
        ...     log.write({"step": 1, "loss": 0.25})
        >>> print(path.read_text(), end="")
        {"step": 0, "loss": 0.5}
        {"step": 1, "loss": 0.25}
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        format: Literal["csv", "jsonl"] | None = None,
        *,
        mode: Literal["w", "a"] = "w",
    ) -> None:
        self.path = Path(path)
        if format is None:
            found = _FORMATS.get(self.path.suffix.lower())
            if found is None:
                raise MetricError(
                    f"MetricWriter: cannot tell the format of {str(self.path)!r} from its suffix;"
                    " name it .csv or .jsonl, or pass format='csv' or format='jsonl'"
                )
            format = "csv" if found == "csv" else "jsonl"
        if format not in ("csv", "jsonl"):
            raise MetricError(f"MetricWriter: format {format!r}; use 'csv' or 'jsonl'")
        if mode not in ("w", "a"):
            raise MetricError(f"MetricWriter: mode {mode!r}; use 'w' (truncate) or 'a' (append)")
        self.format: Literal["csv", "jsonl"] = format
        self.fields: list[str] | None = None
        if format == "csv" and mode == "a" and self.path.is_file():
            with self.path.open(newline="", encoding="utf-8") as existing:
                header = next(csv.reader(existing), None)
            self.fields = header or None
        self._file: TextIO | None = self.path.open(mode, newline="", encoding="utf-8")

    def write(self, record: Mapping[str, object] | None = None, **values: object) -> None:
        """Write ``record`` updated with ``values`` as one line, and flush it."""
        if self._file is None:
            raise MetricError(f"MetricWriter: {str(self.path)!r} is closed; open a new writer")
        row = {k: _plain(k, v) for k, v in {**(record or {}), **values}.items()}
        if self.format == "jsonl":
            self._file.write(json.dumps(row) + "\n")
        else:
            writer = csv.writer(self._file)
            if self.fields is None:
                self.fields = list(row)
                writer.writerow(self.fields)
            new = [k for k in row if k not in self.fields]
            if new:
                raise MetricError(
                    f"MetricWriter: {new} are not in the CSV header {self.fields} (CSV needs a"
                    " fixed header, made by the first record); give every key in the first"
                    " record, or write JSON lines (.jsonl) instead"
                )
            writer.writerow(["" if row.get(k) is None else row[k] for k in self.fields])
        self._file.flush()

    def close(self) -> None:
        """Close the file (a second call does nothing)."""
        if self._file is not None:
            self._file.close()
            self._file = None

    def __enter__(self) -> MetricWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
