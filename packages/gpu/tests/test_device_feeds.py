"""A ``GpuArray`` is a feed: checked as a numpy feed is, run with no host traffic.

The run copies a device feed into its input's buffer on the device, and skips even that
when the same array was that input's feed in the plan's run before; whatever it skips,
the results must be those of the numpy feed, bit for bit.
"""

from __future__ import annotations

import numpy as np
import pytest

from asgrad.gpu import Device, GpuArray, GpuUnsupportedError, to_gpu
from asgrad.gpu.data import take_rows
from asgrad.tensor import FeedError, Graph, NumericsError, Variable, compile
from asgrad.tensor.runtime.executor import Program

pytestmark = pytest.mark.gpu


def _program() -> Program:
    """Rows of ``x`` scaled and summed, plus an embedding row per label of ``y``."""
    g = Graph()
    x, y = g.input("x", (4, 3)), g.input("y", (4,), "int64")
    table = g.constant(np.arange(15, dtype=np.float32).reshape(5, 3) / 7.0)
    return compile([(x.tanh() * 1.5).sum(axis=1), table[y] + x], backend="gpu")


def _feeds(seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {
        "x": rng.standard_normal((4, 3)).astype(np.float32),
        "y": rng.integers(0, 5, 4).astype(np.int64),
    }


def test_a_device_feed_gives_the_numpy_feeds_results_bit_for_bit(device: Device) -> None:
    program = _program()
    host = _feeds(0)
    on_device = {name: to_gpu(v) for name, v in host.items()}
    for want, got in zip(program(host), program(on_device), strict=True):
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)


def test_the_same_device_arrays_fed_again_move_no_data(device: Device) -> None:
    program = _program()
    program(_feeds(1))  # builds the plan (its constants are uploaded then)
    on_device = {name: to_gpu(v) for name, v in _feeds(0).items()}
    first = device.counter.snapshot()
    program.launch(on_device)
    copied = device.counter.snapshot() - first
    assert (copied.uploads, copied.device_copies) == (0, 2)  # each into its input's buffer
    before = device.counter.snapshot()
    for _ in range(3):
        (loss, _) = program.launch(on_device)
    loss.numpy()
    moved = device.counter.snapshot() - before
    assert (moved.uploads, moved.upload_bytes, moved.device_copies) == (0, 0, 0)


def test_a_new_device_array_each_run_is_copied_on_the_device(device: Device) -> None:
    program = _program()
    program(_feeds(9))  # builds the plan (its constants are uploaded then)
    batches = [_feeds(seed) for seed in range(3)]
    before = device.counter.snapshot()
    for feeds in batches:
        got = program({name: to_gpu(v) for name, v in feeds.items()})
        np.testing.assert_array_equal(got[0], program(feeds)[0])
    moved = device.counter.snapshot() - before
    # the to_gpu uploads (2 a batch) and the numpy runs' (2 a run): none for the device runs
    assert moved.uploads == 2 * len(batches) + 2 * len(batches)
    assert moved.device_copies == 2 * len(batches)


def test_a_numpy_feed_between_two_runs_of_one_device_array_does_not_stale_it(
    device: Device,
) -> None:
    # The input's buffer holds the numpy feed after the middle run: the device array
    # must be copied in again, not assumed to be there still.
    program = _program()
    a, b = _feeds(1), _feeds(2)
    a_on_device = {name: to_gpu(v) for name, v in a.items()}
    want_a, want_b = program(a)[1], program(b)[1]
    np.testing.assert_array_equal(program(a_on_device)[1], want_a)
    np.testing.assert_array_equal(program(b)[1], want_b)
    np.testing.assert_array_equal(program(a_on_device)[1], want_a)


def test_device_feeds_update_variables_as_numpy_feeds_do(device: Device) -> None:
    # A training-like step: the variable's update reads the feed; the plan's captured
    # dispatches replay with the device feed's copy recorded before them.
    def step() -> tuple[Program, Variable]:
        w = Variable("w", np.linspace(-1, 1, 3, dtype=np.float32).reshape(3, 1))
        g = Graph()
        x = g.input("x", (4, 3))
        wt = g.parameter("w", variable=w)
        loss = ((x @ wt) ** 2).mean()
        return compile([loss], {w: wt - x.T @ (x @ wt) * 0.01}, backend="gpu"), w

    (host_step, w_host), (device_step, w_device) = step(), step()
    batches = [_feeds(seed)["x"] for seed in range(4)]
    on_device = [to_gpu(x) for x in batches]
    for x, x_on_device in zip(batches, on_device, strict=True):
        for _ in range(2):  # the second run of the same array copies nothing
            host_loss = host_step(x=x)[0]
            device_loss = device_step.launch(x=x_on_device)[0]
            np.testing.assert_array_equal(np.asarray(device_loss), host_loss)
    np.testing.assert_array_equal(w_device.value, w_host.value)


def test_a_device_feed_of_another_dtype_is_a_feed_error(device: Device) -> None:
    program = _program()
    feeds = _feeds(0)
    wrong = {"x": to_gpu(feeds["x"].astype(np.int32)), "y": to_gpu(feeds["y"])}
    with pytest.raises(FeedError, match=r"input 'x' is float32; got a int32 device array"):
        program(wrong)
    with pytest.raises(FeedError, match=r"\.astype\('float32'\)"):
        program.launch(wrong)


def test_a_device_feed_of_another_shape_gets_the_numpy_feeds_error(device: Device) -> None:
    program = _program()
    feeds = _feeds(0)
    bad_x = np.zeros((4, 2), np.float32)
    with pytest.raises(FeedError) as host_error:
        program(x=bad_x, y=feeds["y"])
    with pytest.raises(FeedError) as device_error:
        program(x=to_gpu(bad_x), y=to_gpu(feeds["y"]))
    assert str(device_error.value) == str(host_error.value)
    assert "[4, 2]" in str(device_error.value)


def test_placing_a_device_array_again_moves_nothing(device: Device) -> None:
    placed = to_gpu(np.arange(4, dtype=np.float32))
    before = device.counter.snapshot()
    assert to_gpu(placed) is placed
    moved = device.counter.snapshot() - before
    assert (moved.uploads, moved.readbacks) == (0, 0)


def test_a_cpu_program_reads_a_device_feed_back(device: Device) -> None:
    g = Graph()
    x = g.input("x", (2, 3))
    cpu = compile([x * 2.0], backend="cpu")
    host = np.arange(6, dtype=np.float32).reshape(2, 3)
    np.testing.assert_array_equal(cpu(x=to_gpu(host))[0], host * 2.0)
    np.testing.assert_array_equal(np.asarray(to_gpu(host)), host)


def test_take_rows_gathers_every_array_at_the_same_rows(device: Device) -> None:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((10, 2, 3)).astype(np.float32)
    y = rng.integers(0, 100, 10).astype(np.int64)
    order = rng.permutation(10).astype(np.int32)
    arrays, order_on_device = [to_gpu(x), to_gpu(y)], to_gpu(order)
    before = device.counter.snapshot()
    taken = take_rows(arrays, order_on_device, 3, 8)
    assert (device.counter.snapshot() - before).uploads == 0
    assert all(isinstance(t, GpuArray) for t in taken)
    np.testing.assert_array_equal(taken[0].numpy(), x[order[3:8]])
    np.testing.assert_array_equal(taken[1].numpy(), y[order[3:8]])
    assert [t.shape for t in take_rows(arrays, order_on_device, 4, 4)] == [(0, 2, 3), (0,)]


def test_take_rows_refuses_rows_outside_the_order(device: Device) -> None:
    order = to_gpu(np.arange(4, dtype=np.int32))
    with pytest.raises(GpuUnsupportedError, match="rows 2:6 are outside the 4 row numbers"):
        take_rows([to_gpu(np.zeros(4, np.float32))], order, 2, 6)
    with pytest.raises(GpuUnsupportedError, match="1-D integer GpuArray"):
        take_rows([order], to_gpu(np.zeros(4, np.float32)), 0, 2)


def test_a_numerics_checked_program_takes_device_feeds(device: Device) -> None:
    g = Graph()
    x = g.input("x", (2, 3))
    program = compile([(x * 2.0).log()], backend="gpu", check_numerics=True)
    host = np.arange(1, 7, dtype=np.float32).reshape(2, 3)
    np.testing.assert_array_equal(program(x=to_gpu(host))[0], program(x=host)[0])
    with pytest.raises(NumericsError, match="log"):
        program(x=to_gpu(host - 1.0))
