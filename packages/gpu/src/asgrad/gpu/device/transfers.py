"""Counting host<->device traffic, so tests can prove what a training step moves."""

from __future__ import annotations

from dataclasses import dataclass, replace

__all__ = ["TransferCounter"]


@dataclass
class TransferCounter:
    """Host<->device transfers of tensor data since the last
    [`reset`][asgrad.gpu.TransferCounter.reset].

    ``uploads``/``readbacks`` count calls; ``*_bytes`` count payload bytes. Kernel
    parameter blocks (a few bytes of shapes and strides, cached by content) are
    counted apart in ``param_uploads`` since they are not tensor data.
    ``device_copies``/``device_copy_bytes`` count buffer-to-buffer copies on the device
    (a [`GpuArray`][asgrad.gpu.GpuArray] feed copied into a plan's input buffer, say):
    no host traffic, counted so that a test can tell them from uploads.

    >>> import numpy as np  # doctest: +REQUIRES_GPU
    >>> from asgrad.gpu import get_device, to_gpu
    >>> counter = get_device().counter
    >>> before = counter.snapshot()
    >>> _ = to_gpu(np.zeros(4, np.float32)).numpy()
    >>> moved = counter.snapshot() - before
    >>> moved.uploads, moved.upload_bytes, moved.readbacks, moved.readback_bytes
    (1, 16, 1, 16)
    """

    uploads: int = 0
    upload_bytes: int = 0
    readbacks: int = 0
    readback_bytes: int = 0
    param_uploads: int = 0
    device_copies: int = 0
    device_copy_bytes: int = 0
    dispatches: int = 0
    submits: int = 0

    def reset(self) -> None:
        """Set every count back to zero."""
        for name in self.__dataclass_fields__:
            setattr(self, name, 0)

    def snapshot(self) -> TransferCounter:
        """A copy of the counts as they are now."""
        return replace(self)

    def __sub__(self, other: TransferCounter) -> TransferCounter:
        return TransferCounter(
            **{
                name: getattr(self, name) - getattr(other, name)
                for name in self.__dataclass_fields__
            }
        )
