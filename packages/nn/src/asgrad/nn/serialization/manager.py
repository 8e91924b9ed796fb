"""``CheckpointManager``: numbered checkpoints in one folder, rotated, latest and best."""

from __future__ import annotations

import math
import re
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal, SupportsFloat

import numpy as np

from asgrad.nn.errors import CheckpointError
from asgrad.nn.serialization import atomic
from asgrad.nn.serialization.checkpoint import (
    META_FILE,
    CheckpointData,
    load_checkpoint,
    read_meta,
    save_checkpoint,
)
from asgrad.nn.serialization.state import PathLike, check_state

__all__ = ["CheckpointManager"]

_CKPT_NAME = re.compile(r"^ckpt-(\d+)$")


class CheckpointManager:
    """Save numbered checkpoints into one folder, rotate old ones, find latest/best.

    ``keep_last`` newest checkpoints are kept (``None``: all); with ``keep_best`` the
    checkpoint with the best ``metrics[metric]`` (lowest for ``mode="min"``, highest
    for ``"max"``; the earliest on ties) is never deleted. "Latest" means the highest
    step. Only complete checkpoint folders are ever listed or loaded.

    One process writes to a folder at a time; any number may read it.

    Example:
        >>> import tempfile, numpy as np
        >>> with tempfile.TemporaryDirectory() as tmp:
        ...     mgr = CheckpointManager(tmp, keep_last=2, metric="val_loss")
        ...     for step, loss in [(1, 0.5), (2, 0.9), (3, 0.8)]:
        ...         state = {"w": np.full(2, step)}
        ...         _ = mgr.save(step, state, metrics={"val_loss": loss})
        ...     mgr.steps(), mgr.load("best").step, mgr.load().step
        ([1, 2, 3], 1, 3)
    """

    def __init__(
        self,
        directory: PathLike,
        keep_last: int | None = 3,
        keep_best: bool = True,
        metric: str = "val_loss",
        mode: Literal["min", "max"] = "min",
    ) -> None:
        if keep_last is not None and keep_last < 1:
            raise CheckpointError(
                f"CheckpointManager: keep_last must be >= 1 or None, got {keep_last}"
            )
        if mode not in ("min", "max"):
            raise CheckpointError(f"CheckpointManager: mode must be 'min' or 'max', got {mode!r}")
        self.directory = Path(directory)
        self.keep_last = keep_last
        self.keep_best = keep_best
        self.metric = metric
        self.mode = mode

    def path_for(self, step: int) -> Path:
        """The folder that checkpoint ``step`` lives in."""
        if step < 0:
            raise CheckpointError(f"CheckpointManager: step must be >= 0, got {step}")
        return self.directory / f"ckpt-{step:09d}"

    def steps(self) -> list[int]:
        """Steps of all complete checkpoints, ascending."""
        if not self.directory.is_dir():
            return []
        found = []
        for entry in self.directory.iterdir():
            match = _CKPT_NAME.match(entry.name)
            if match and (entry / META_FILE).is_file():
                found.append(int(match.group(1)))
        return sorted(found)

    def _folder(self, step: int) -> Path:
        for entry in self.directory.iterdir():
            match = _CKPT_NAME.match(entry.name)
            if match and int(match.group(1)) == step:
                return entry
        raise CheckpointError(f"no checkpoint for step {step} in {self.directory}")

    def latest(self) -> Path | None:
        """Folder of the checkpoint with the highest step, or None."""
        steps = self.steps()
        return self._folder(steps[-1]) if steps else None

    def _best_step(self) -> int | None:
        best: tuple[float, int] | None = None
        sign = 1.0 if self.mode == "min" else -1.0
        for step in self.steps():
            try:
                value = read_meta(self._folder(step))["metrics"].get(self.metric)
            except CheckpointError:
                continue
            if value is None or math.isnan(value):
                continue
            if best is None or sign * value < best[0]:
                best = (sign * value, step)
        return None if best is None else best[1]

    def best(self) -> Path | None:
        """Folder of the checkpoint with the best ``metric``, or None if none has it."""
        step = self._best_step()
        return None if step is None else self._folder(step)

    def save(
        self,
        step: int,
        model_state: Mapping[str, Any],
        optimizer_state: Mapping[str, Any] | None = None,
        scheduler_state: Mapping[str, Any] | None = None,
        rng: np.random.Generator | np.random.BitGenerator | None = None,
        metrics: Mapping[str, SupportsFloat] | None = None,
        extra: Mapping[str, Any] | None = None,
        *,
        epoch: int | None = None,
    ) -> Path:
        """Write checkpoint ``step`` (replacing one of the same step), then rotate."""
        self.cleanup()
        path = save_checkpoint(
            self.path_for(step),
            model_state,
            step=step,
            epoch=epoch,
            optimizer_state=optimizer_state,
            scheduler_state=scheduler_state,
            rng=rng,
            metrics=metrics,
            extra=extra,
            overwrite=True,
        )
        self.rotate()
        return path

    def rotate(self) -> list[int]:
        """Delete checkpoints beyond ``keep_last`` except the best; return steps."""
        if self.keep_last is None:
            return []
        steps = self.steps()
        keep = set(steps[-self.keep_last :])
        if self.keep_best:
            best = self._best_step()
            if best is not None:
                keep.add(best)
        removed = [s for s in steps if s not in keep]
        for step in removed:
            atomic.remove_tree(self._folder(step))
        return removed

    def cleanup(self) -> list[Path]:
        """Remove leftovers of interrupted saves and deletions; return what went."""
        if not self.directory.is_dir():
            return []
        stale = [
            p
            for p in self.directory.iterdir()
            if p.is_dir() and p.name.startswith((".tmp-ckpt-", ".trash-ckpt-"))
        ]
        for p in stale:
            shutil.rmtree(p, ignore_errors=True)
        return stale

    def load(
        self,
        which: Literal["latest", "best"] | int = "latest",
        expected: Mapping[str, Any] | None = None,
        strict: bool = True,
    ) -> CheckpointData:
        """Load the latest, the best, or a given step's checkpoint.

        With ``expected`` (e.g. ``model.state_dict()``) the model state is checked by
        :func:`check_state` before it is returned.
        """
        if which == "latest":
            folder = self.latest()
        elif which == "best":
            folder = self.best()
        elif isinstance(which, int):
            folder = self._folder(which) if which in self.steps() else None
        else:
            raise CheckpointError(f"load: which must be 'latest', 'best' or a step, got {which!r}")
        if folder is None:
            raise CheckpointError(
                f"no {which if isinstance(which, str) else f'step {which}'} "
                "checkpoint in "
                f"{self.directory} (complete steps: {self.steps() or 'none'})"
            )
        data = load_checkpoint(folder)
        if expected is not None:
            check_state(expected, data.model_state, strict=strict)
        return data
