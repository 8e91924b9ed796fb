"""Device-side checks: faults that kernels meet, raised at the next readback.

A kernel cannot raise. A kernel that can meet a bad value (an index outside
``[0, n)`` given to gather, scatter-add or one-hot; an integer result the GPU's int32
storage cannot hold) writes a defined result for it instead (0 for a gathered row,
nothing added, an all-zero one-hot row, the wrapped integer) and records the fault in
its *slot* of one small device buffer (``kernels/checks.wgsl``): a count, the
smallest and the largest bad value, and a summary word that says some slot is set.
Each slot belongs to one `Check`: the kind of fault, the op and the user's
line that made the node, and what the valid range is.

Nothing is read back for the checks alone. A device is *armed* once it has run a
kernel that checks; the next readback (the outputs of a run, ``variable.value``,
``GpuArray.numpy()``) copies the summary word along with the data, in the same
submit and mapping. When it is set, the slots are read, cleared, and the first fault
raises: [`OutOfRangeError`][asgrad.tensor.OutOfRangeError] for an index,
[`GpuIntegerOverflowError`][asgrad.gpu.GpuIntegerOverflowError] for an integer. The values
computed with the faulty elements are discarded with it.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from asgrad.gpu.device.buffers import GpuBuffer
from asgrad.gpu.device.source import render
from asgrad.gpu.errors import GpuIntegerOverflowError
from asgrad.tensor.errors import AsgradError, IntegerArithmeticError, OutOfRangeError

if TYPE_CHECKING:
    from asgrad.gpu.device import Device

__all__ = ["Check", "DeviceChecks", "checks_source"]

KINDS = ("index", "overflow", "arithmetic")


def checks_source(binding: int) -> str:
    """The WGSL of ``kernels/checks.wgsl`` with its buffer at ``@binding(binding)``."""
    return render("checks", CHECK_BINDING=binding)


@dataclass(frozen=True)
class Check:
    """What one slot checks: a fault ``kind`` of ``op`` (made at ``where``)."""

    kind: str  # "index" | "overflow" | "arithmetic"
    op: str
    where: str
    detail: str  # what is valid, in words

    def error(self, count: int, lowest: int, highest: int) -> AsgradError:
        """The error for ``count`` faulty elements whose values span [lowest, highest]."""
        made = f" (made at {self.where})" if self.where else ""
        many = "1 element" if count == 1 else f"{count} elements"
        if self.kind == "index":
            seen = f"index {lowest}" if lowest == highest else f"indices from {lowest} to {highest}"
            return OutOfRangeError(
                f"{self.op}{made}: {seen} out of range on the GPU ({many}); {self.detail}. "
                "The run's results are discarded; fix the indices (a label to leave out "
                "belongs to the loss's ignore_index)"
            )
        if self.kind == "arithmetic":
            return IntegerArithmeticError(
                f"{self.op}{made}: {many} on the GPU; {self.detail}. The run's results are"
                " discarded"
            )
        return GpuIntegerOverflowError(
            f"{self.op}{made}: an integer result left the int32 range on the GPU ({many}); "
            f"{self.detail}. The run's results are discarded; compute it in float32 or on "
            "the CPU backend"
        )


class DeviceChecks:
    """The check slots of one device, their buffer, and whether a readback must look.

    `slot` gives a kernel its slot (one per distinct check, kept for the
    device's life; past `SLOTS` checks share a generic one). While a plan is
    lowered, `lowering` names the node that new checks belong to.
    """

    SLOTS = 1024  # 16 KiB of device memory

    def __init__(self, device: Device) -> None:
        self.device = device
        self.buffer: GpuBuffer = device.pool.acquire(self.SLOTS * 16)
        device.write(self.buffer, np.zeros(self.SLOTS * 4, np.uint32))
        self._full = [
            Check(k, "a GPU kernel", "", f"(more than {self.SLOTS} checks)") for k in KINDS
        ]
        self._checks: list[Check | None] = [None, *self._full]  # slot 0: the summary word
        self._slots: dict[Check, int] = {c: i + 1 for i, c in enumerate(self._full)}
        self._node = threading.local()
        self.armed = False  # a checking kernel ran since the last readback

    @contextmanager
    def lowering(self, op: str, where: str) -> Iterator[None]:
        """Checks created inside belong to node ``op`` made at ``where``."""
        previous = getattr(self._node, "value", None)
        self._node.value = (op, where)
        try:
            yield
        finally:
            self._node.value = previous

    def slot(self, kind: str, op: str, detail: str) -> int:
        """The slot of a ``kind`` check of ``op`` (or of the node being lowered)."""
        node = getattr(self._node, "value", None)
        op, where = node if node is not None else (op, "")
        check = Check(kind, op, where, detail)
        index = self._slots.get(check)
        if index is None:
            if len(self._checks) >= self.SLOTS:
                return self._slots[self._full[KINDS.index(kind)]]
            index = self._slots[check] = len(self._checks)
            self._checks.append(check)
        return index

    def flag_item(self) -> tuple[GpuBuffer, int] | None:
        """What a readback must also copy: the summary word, if armed (then disarms)."""
        if not self.armed:
            return None
        self.armed = False
        return (self.buffer, 4)

    def verify(self, summary: bytes) -> None:
        """Raise the first recorded fault if the summary word read back is set."""
        if not int.from_bytes(summary[:4], "little"):
            return
        used = len(self._checks)
        raw = self.device.read(self.buffer, used * 16)
        self.device.write(self.buffer, np.zeros(self.SLOTS * 4, np.uint32))
        words = np.frombuffer(raw, np.uint32).reshape(used, 4)
        errors = []
        for index in range(1, used):
            count, high, low_complement, _ = (int(w) for w in words[index])
            check = self._checks[index]
            if count and check is not None:
                low = (~low_complement & 0xFFFFFFFF) ^ 0x80000000
                errors.append(check.error(count, _signed(low), _signed(high ^ 0x80000000)))
        if not errors:
            return
        first = errors[0]
        if len(errors) > 1:
            others = "; ".join(str(e) for e in errors[1:])
            raise type(first)(f"{first} (and {len(errors) - 1} more: {others})")
        raise first


def _signed(word: int) -> int:
    return word - (1 << 32) if word & 0x80000000 else word
