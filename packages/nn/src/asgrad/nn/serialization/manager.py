"""``CheckpointManager``: numbered checkpoints in one folder, rotated, latest and best."""

from __future__ import annotations

import math
import re
import threading
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType
from typing import Any, Literal, SupportsFloat

import numpy as np

from asgrad.nn.errors import CheckpointError, CheckpointIOError, CheckpointNotFoundError
from asgrad.nn.serialization import atomic
from asgrad.nn.serialization.checkpoint import (
    META_FILE,
    CheckpointData,
    load_checkpoint,
    plan_checkpoint,
    read_meta,
)
from asgrad.nn.serialization.commit import commit_checkpoint, recover
from asgrad.nn.serialization.failures import translated
from asgrad.nn.serialization.locking import WriterLock
from asgrad.nn.serialization.state import PathLike, check_state

__all__ = ["CheckpointManager"]

# Listings (and reads) a load makes before it reports a checkpoint missing, while a
# concurrent writer's rotation may delete what it listed.
LOAD_ATTEMPTS = 5
_CKPT_NAME = re.compile(r"(?:\.old-)?ckpt-(\d+)")
_STEP_NAMES = r"ckpt-\d+"


class CheckpointManager:
    """Save numbered checkpoints into one folder, rotate old ones, find latest/best.

    ``keep_last`` newest checkpoints are kept (``None``: all); with ``keep_best`` the
    checkpoint with the best ``metrics[metric]`` (lowest for ``mode="min"``, highest
    for ``"max"``; the earliest on ties) is never deleted. "Latest" means the highest
    step. Only complete checkpoint folders are ever listed or loaded.

    The first call that writes (`save`, `rotate`, `cleanup`) takes
    the folder's writer lock and keeps it until `close` (or the end of a
    ``with`` block, or of the process): another writer of the folder, in this process
    or any other, gets [`CheckpointLockedError`][asgrad.nn.CheckpointLockedError]. Taking the
    lock first repairs what killed writers left (see `cleanup`). Any number of
    readers may `load` at the same time, without a lock.

    Example:
        >>> import tempfile, numpy as np
        >>> with tempfile.TemporaryDirectory() as tmp:
        ...     with CheckpointManager(tmp, keep_last=2, metric="val_loss") as mgr:
        ...         for step, loss in [(1, 0.5), (2, 0.9), (3, 0.8)]:
        ...             state = {"w": np.full(2, step)}
        ...             _ = mgr.save(step, state, metrics={"val_loss": loss})
        ...         mgr.steps(), mgr.load("best").step, mgr.load().step
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
        self._lock: WriterLock | None = None
        self._repaired: list[Path] = []
        self._mutex = threading.RLock()

    def __enter__(self) -> CheckpointManager:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        """Give up the writer lock (idempotent); a later write takes it again."""
        with self._mutex:
            if self._lock is not None:
                self._lock.release()
                self._lock = None

    def _writing(self) -> None:
        """Hold the writer lock; on taking it, repair what killed writers left."""
        if self._lock is not None and self._lock.held:
            return
        with translated("CheckpointManager: cannot write", self.directory):
            self.directory.mkdir(parents=True, exist_ok=True)
            lock = WriterLock.acquire(self.directory, "CheckpointManager")
            try:
                self._repaired += recover(self.directory, _STEP_NAMES)
            except BaseException:
                lock.release()
                raise
        self._lock = lock

    def path_for(self, step: int) -> Path:
        """The folder that checkpoint ``step`` lives in."""
        if step < 0:
            raise CheckpointError(f"CheckpointManager: step must be >= 0, got {step}")
        return self.directory / f"ckpt-{step:09d}"

    def _complete(self) -> dict[int, Path]:
        """Step -> folder of every complete checkpoint.

        A checkpoint whose replacement was interrupted between its two renames is
        found under ``.old-ckpt-<step>``.
        """
        found: dict[int, Path] = {}
        with translated("CheckpointManager: cannot list", self.directory, reading=True):
            if not self.directory.is_dir():
                return found
            for entry in sorted(self.directory.iterdir(), key=lambda p: p.name):
                match = _CKPT_NAME.fullmatch(entry.name)
                if match and (entry / META_FILE).is_file():
                    step = int(match.group(1))
                    if step not in found or not entry.name.startswith("."):
                        found[step] = entry
        return found

    def steps(self) -> list[int]:
        """Steps of all complete checkpoints, ascending."""
        return sorted(self._complete())

    def _folder(self, step: int) -> Path:
        folder = self._complete().get(step)
        if folder is None:
            raise CheckpointNotFoundError(
                f"no checkpoint for step {step} in {self.directory}", path=self.directory
            )
        return folder

    def latest(self) -> Path | None:
        """Folder of the checkpoint with the highest step, or None."""
        found = self._complete()
        return found[max(found)] if found else None

    def _best_step(self) -> int | None:
        best: tuple[float, int] | None = None
        sign = 1.0 if self.mode == "min" else -1.0
        for step, folder in sorted(self._complete().items()):
            try:
                value = read_meta(folder)["metrics"].get(self.metric)
            except CheckpointError:
                continue
            if not isinstance(value, int | float) or math.isnan(value):
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
        """Write checkpoint ``step`` atomically (replacing one of the same step), rotate.

        Raises [`CheckpointLockedError`][asgrad.nn.CheckpointLockedError] if another writer
        holds the folder, [`CheckpointIOError`][asgrad.nn.CheckpointIOError] if the disk
        refuses the write (the checkpoints already saved stay as they were).
        """
        target = self.path_for(step)
        plan = plan_checkpoint(
            model_state,
            step=step,
            epoch=epoch,
            optimizer_state=optimizer_state,
            scheduler_state=scheduler_state,
            rng=rng,
            metrics=metrics,
            extra=extra,
        )
        with self._mutex:
            self._writing()
            failed = "the checkpoints already saved are unchanged"
            with translated("CheckpointManager.save: cannot write", target, failed):
                commit_checkpoint(target, plan, overwrite=True)
            try:
                self.rotate()
            except CheckpointIOError as exc:
                raise CheckpointIOError(
                    f"CheckpointManager.save: checkpoint {step} was saved to {target}, but "
                    f"deleting old checkpoints failed: {exc}",
                    path=exc.path,
                    errno=exc.errno,
                ) from exc
        return target

    def rotate(self) -> list[int]:
        """Delete checkpoints beyond ``keep_last`` except the best; return steps."""
        if self.keep_last is None:
            return []
        with self._mutex:
            self._writing()
            steps = self.steps()
            keep = set(steps[-self.keep_last :])
            if self.keep_best:
                best = self._best_step()
                if best is not None:
                    keep.add(best)
            removed = [s for s in steps if s not in keep]
            with translated("CheckpointManager.rotate: cannot delete in", self.directory):
                for step in removed:
                    atomic.remove_tree(self._folder(step), self.path_for(step).name)
        return removed

    def cleanup(self) -> list[Path]:
        """Repair what killed writers left; return the leftovers handled.

        Temporary folders (``.tmp-ckpt-*``) and folders being deleted (``.trash-ckpt-*``)
        are deleted; a checkpoint whose replacement was interrupted (``.old-ckpt-*``)
        gets its name back. This runs by itself when the manager first takes the
        writer lock, and is never needed for correctness: loading ignores leftovers.
        """
        with self._mutex:
            self._writing()
            with translated("CheckpointManager.cleanup: cannot delete in", self.directory):
                repaired = self._repaired + recover(self.directory, _STEP_NAMES)
            self._repaired = []
        return repaired

    def load(
        self,
        which: Literal["latest", "best"] | int = "latest",
        expected: Mapping[str, Any] | None = None,
        strict: bool = True,
    ) -> CheckpointData:
        """Load the latest, the best, or a given step's checkpoint.

        With ``expected`` (e.g. ``model.state_dict()``) the model state is checked by
        `check_state` before it is returned. If a writer deletes the chosen
        checkpoint while it is read (rotation), the choice is made again.
        """
        if not (which in ("latest", "best") or isinstance(which, int)):
            raise CheckpointError(f"load: which must be 'latest', 'best' or a step, got {which!r}")
        attempt = 1
        while True:
            if which == "latest":
                folder = self.latest()
            elif which == "best":
                folder = self.best()
            else:
                folder = self._complete().get(int(which))
            if folder is None:
                if isinstance(which, str) and attempt < LOAD_ATTEMPTS:
                    # a writer rotating faster than this listing can delete every folder
                    # it listed before they are read: list again
                    attempt += 1
                    continue
                raise CheckpointNotFoundError(
                    f"no {which if isinstance(which, str) else f'step {which}'} "
                    "checkpoint in "
                    f"{self.directory} (complete steps: {self.steps() or 'none'})",
                    path=self.directory,
                )
            try:
                data = load_checkpoint(folder)
            except CheckpointNotFoundError:
                if attempt >= LOAD_ATTEMPTS:
                    raise
                attempt += 1
                continue
            break
        if expected is not None:
            check_state(expected, data.model_state, strict=strict)
        return data
