"""The device-side check slots (``asgrad.gpu.device.checks``): allocation and reporting."""

from __future__ import annotations

import numpy as np
import pytest

from asgrad.gpu import Device, to_gpu
from asgrad.gpu.device.checks import Check, DeviceChecks
from asgrad.gpu.errors import GpuIntegerOverflowError
from asgrad.gpu.lowering.index import one_hot
from asgrad.tensor import OutOfRangeError

pytestmark = pytest.mark.gpu


def test_one_slot_per_distinct_check_and_a_shared_one_when_full(device: Device) -> None:
    checks = DeviceChecks(device)
    a = checks.slot("index", "gather", "indices must satisfy 0 <= index < 3")
    assert checks.slot("index", "gather", "indices must satisfy 0 <= index < 3") == a
    with checks.lowering("gather", "model.py:7"):  # the node being lowered names it
        b = checks.slot("index", "gather", "indices must satisfy 0 <= index < 3")
    assert b != a
    checks.SLOTS = b + 1  # full from here on
    c = checks.slot("index", "one_hot", "indices must satisfy 0 <= index < 5")
    d = checks.slot("overflow", "sum", "the sum must fit")
    assert len({a, b, c, d}) == 4
    assert checks.slot("index", "gather", "other") == c  # the shared slot of its kind


def test_messages_name_op_line_count_and_span() -> None:
    check = Check("index", "gather", "model.py:7", "indices must satisfy 0 <= index < 3")
    error = check.error(2, -1, 5)
    assert isinstance(error, OutOfRangeError)
    assert str(error).startswith("gather (made at model.py:7): indices from -1 to 5 ")
    assert "(2 elements)" in str(error)
    overflow = Check("overflow", "sum", "", "the sum must fit").error(1, 0, 0)
    assert isinstance(overflow, GpuIntegerOverflowError)
    assert isinstance(overflow, OverflowError)
    assert str(overflow).startswith("sum: an integer result left the int32 range")


def test_a_clean_readback_does_not_look_at_the_slots(device: Device) -> None:
    labels = to_gpu(np.array([0, 2], np.int32), device)
    out = one_hot(labels, 3)
    assert device.checks.armed  # an eager checking kernel arms the device
    reads = device.counter.readbacks
    np.testing.assert_array_equal(out.numpy(), np.eye(3, dtype=np.float32)[[0, 2]])
    assert device.counter.readbacks == reads + 1  # the summary word came with the data
    assert not device.checks.armed
