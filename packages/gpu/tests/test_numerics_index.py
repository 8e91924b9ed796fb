"""Out-of-range indices on the GPU: a defined result and an error the user sees.

A gather (embedding), scatter-add or one-hot kernel that meets an index outside
``[0, n)`` (negative ones too: they do not wrap) reads nothing, gives 0 (an all-zero
one-hot row, nothing added) and records the fault on the device; the next readback
raises :class:`~asgrad.tensor.errors.OutOfRangeError` naming the op, the user's line
and the valid range (``asgrad.gpu.device.checks``). Nothing extra is read back for it.
"""

from __future__ import annotations

import numpy as np
import pytest

from asgrad.gpu import Device, to_gpu
from asgrad.gpu.lowering.index import gather
from asgrad.tensor import (
    AsgradError,
    Graph,
    OutOfRangeError,
    Tensor,
    Variable,
    compile,
    evaluate,
)

pytestmark = pytest.mark.gpu

TABLE = np.arange(40, dtype=np.float32).reshape(10, 4)


def _embedding() -> tuple[Graph, list[Tensor]]:
    g = Graph("lookup")
    table = g.input("table", (10, 4))
    ids = g.input("ids", (3,), "int64")
    return g, [table.gather(ids, axis=0), ids.one_hot(10)]


@pytest.mark.parametrize("bad", [10, 12, -1, -11, 2**31 - 1, -(2**31)])
@pytest.mark.parametrize("which", [0, 1], ids=["gather", "one_hot"])
def test_an_index_out_of_range_raises_naming_op_and_range(
    device: Device, bad: int, which: int
) -> None:
    _, outs = _embedding()
    feeds = {"table": TABLE, "ids": np.array([1, bad, 3])}
    op = ("gather", "one_hot")[which]
    with pytest.raises(OutOfRangeError) as info:
        evaluate([outs[which]], feeds, backend="gpu")
    message = str(info.value)
    assert message.startswith(f"{op} (made at ")
    assert "test_numerics_index.py" in message  # the user's line
    assert f"index {bad} " in message
    assert "0 <= index < 10" in message
    assert isinstance(info.value, IndexError)
    assert isinstance(info.value, AsgradError)
    # the fault is cleared: good indices run again
    good = evaluate(outs, {"table": TABLE, "ids": np.array([1, 0, 9])}, backend="gpu")
    np.testing.assert_array_equal(good[0], TABLE[[1, 0, 9]])
    np.testing.assert_array_equal(good[1], np.eye(10, dtype=np.float32)[[1, 0, 9]])


def test_several_bad_indices_are_counted_with_their_span(device: Device) -> None:
    _, outs = _embedding()
    with pytest.raises(OutOfRangeError, match=r"indices from -3 to 15 .*\(2 elements\)"):
        evaluate(outs[:1], {"table": TABLE, "ids": np.array([-3, 2, 15])}, backend="gpu")


def test_scatter_add_raises_and_adds_nothing(device: Device) -> None:
    g = Graph("scatter")
    grad = g.input("g", (3, 4))
    ids = g.input("ids", (3,), "int32")
    like = g.input("like", (10, 4))
    out = g.apply("scatter_add", [grad, ids, like], {"axis": 0})
    feeds = {"g": np.ones((3, 4), np.float32), "ids": np.array([1, 10, 1], np.int32)}
    feeds["like"] = TABLE
    with pytest.raises(OutOfRangeError, match=r"^scatter_add .*0 <= index < 10"):
        evaluate([out], feeds, backend="gpu")


def test_the_bad_rows_are_zero_not_arbitrary_memory(device: Device) -> None:
    table = to_gpu(TABLE, device)
    out = gather(table, to_gpu(np.array([2, 1000000, -5], np.int32), device), 0)
    with pytest.raises(OutOfRangeError, match="gather"):
        out.numpy()  # the readback raises once ...
    got = out.numpy()  # ... and the data are defined
    np.testing.assert_array_equal(got, [TABLE[2], np.zeros(4), np.zeros(4)])


def test_a_step_that_reads_nothing_raises_at_the_next_readback(device: Device) -> None:
    g = Graph("train")
    table = Variable("table", TABLE.copy())
    ids = g.input("ids", (3,), "int64")
    param = g.parameter("table", variable=table)
    step = compile([], [(table, param + param.gather(ids, axis=0).sum())], backend="gpu")
    before = device.counter.snapshot()
    step.run({"ids": np.array([0, 11, 2])})  # reads nothing back: no error yet
    step.run({"ids": np.array([0, 1, 2])})
    assert (device.counter - before).readbacks == 0
    with pytest.raises(OutOfRangeError, match=r"^gather .*0 <= index < 10"):
        _ = table.value  # the first readback after the faulty step
    step.run({"ids": np.array([0, 1, 2])})
    fine = evaluate([param.sum()], backend="gpu")[0]  # later readbacks are clean
    assert np.isfinite(fine)


def test_checks_cost_no_extra_readback_or_submit(device: Device) -> None:
    _, outs = _embedding()
    program = compile(outs, backend="gpu")
    feeds = {"table": TABLE, "ids": np.array([1, 2, 3])}
    program.run(feeds)
    before = device.counter.snapshot()
    for _ in range(3):
        program.run(feeds)
    spent = device.counter - before
    assert spent.readbacks == 3  # one per run: the check word rides along
    assert spent.submits == 3
    assert not device.checks.armed  # the readback looked


def test_a_failed_variable_read_does_not_leave_the_stale_host_value(device: Device) -> None:
    g = Graph("train")
    table = Variable("table", TABLE.copy())
    ids = g.input("ids", (3,), "int64")
    param = g.parameter("table", variable=table)
    step = compile([], [(table, param + param.gather(ids, axis=0).sum())], backend="gpu")
    step.run({"ids": np.array([0, 11, 2])})  # the device value changes, with a fault
    with pytest.raises(OutOfRangeError):
        _ = table.value
    # The next read returns the device's value (bad row summed as 0), not the stale host one.
    expected = TABLE + (TABLE[0] + TABLE[2]).sum()
    np.testing.assert_allclose(table.value, expected, rtol=1e-6)
