"""Launched GPU runs (``Program.launch``): steps queue back to back, values read later.

The values must be exactly those of synchronous runs; a variable read while steps are
queued sees the latest launched update; a device check that fails raises at the read;
the readback ring keeps its pages bounded.
"""

from __future__ import annotations

import numpy as np
import pytest

from asgrad import nn
from asgrad.gpu import Device, backend, to_gpu
from asgrad.gpu.device.readback import ReadbackRing, readback_ring
from asgrad.gpu.plan import capture
from asgrad.tensor import DeviceValue, Graph, OutOfRangeError, Program, compile, read_all

pytestmark = pytest.mark.gpu

X = np.array([[0, 0], [0, 1], [1, 0], [1, 1]], dtype=np.float32)
Y = np.array([[0], [1], [1], [0]], dtype=np.float32)


def _xor() -> tuple[nn.Module, Program]:
    model = nn.Sequential(nn.Linear(2, 8), nn.ReLU(), nn.Linear(8, 1), nn.Sigmoid())
    model.initialize(0)
    g = Graph("xor")
    x, y = g.input("x", (4, 2)), g.input("y", (4, 1))
    prediction = model(x)
    loss = nn.mse_loss(prediction, y)
    optimizer = nn.SGD(model.parameters(), lr=0.5, momentum=0.9)
    return model, optimizer.compile(loss, [prediction], backend="gpu")


def _sync_losses(steps: int) -> tuple[list[float], list[np.ndarray]]:
    model, program = _xor()
    losses = [float(program(x=X, y=Y)[0]) for _ in range(steps)]
    return losses, [np.array(p.value) for p in model.parameters()]


def test_queued_steps_give_the_losses_of_synchronous_steps(device: Device) -> None:
    steps = 2 * ReadbackRing.LAUNCHES_PER_PAGE * ReadbackRing.PAGES_IN_FLIGHT + 7
    expected, params = _sync_losses(steps)
    model, program = _xor()
    reads = device.counter.readbacks
    values = [program.launch(x=X, y=Y) for _ in range(steps)]
    # the host ran ahead: no readback per step, only the ring's bounded catch-up
    assert device.counter.readbacks - reads <= steps // ReadbackRing.LAUNCHES_PER_PAGE
    losses = [float(loss) for loss, _ in values]
    assert losses == expected
    assert losses[-1] < losses[0] / 10  # it trained
    prediction = values[-1][1]
    assert isinstance(prediction, DeviceValue)
    assert prediction.shape == (4, 1)
    assert prediction.dtype == np.float32
    for p, want in zip(model.parameters(), params, strict=True):
        np.testing.assert_array_equal(p.value, want)


def test_reading_a_variable_mid_queue_sees_the_latest_update(device: Device) -> None:
    _, after_5 = _sync_losses(5)
    expected, after_9 = _sync_losses(9)
    model, program = _xor()
    first = [program.launch(x=X, y=Y)[0] for _ in range(5)]
    assert not first[-1].is_ready()
    for p, want in zip(model.parameters(), after_5, strict=True):
        np.testing.assert_array_equal(p.value, want)
    rest = [program.launch(x=X, y=Y)[0] for _ in range(4)]
    assert [float(v) for v in first + rest] == expected
    for p, want in zip(model.parameters(), after_9, strict=True):
        np.testing.assert_array_equal(p.value, want)


def test_a_value_set_mid_queue_is_used_by_the_next_launch(device: Device) -> None:
    model, program = _xor()
    program.launch(x=X, y=Y)
    weight = model.parameters()[0]
    weight.value = np.zeros_like(weight.value)  # a dead first layer
    before, prediction = program.launch(x=X, y=Y)
    # zero weights, zero-initialised biases: every row sees the same hidden layer
    np.testing.assert_allclose(prediction.numpy(), np.full((4, 1), prediction.numpy()[0, 0]))
    assert float(before) == pytest.approx(float(np.mean((prediction.numpy() - Y) ** 2)))


def test_values_read_together_and_in_any_order(device: Device) -> None:
    g = Graph("several")
    x = g.input("x", (3,))
    n = g.input("n", (2,), "int64")
    program = compile([x * 2.0, (x > 1.0), n + 1, x.sum()], backend="gpu")
    launched = [
        program.launch(x=np.array([i, 1, 2], np.float32), n=np.array([i, -i])) for i in range(3)
    ]
    np.testing.assert_array_equal(launched[2][2], np.array([3, -1]))
    assert launched[2][2].dtype == np.int64
    doubled, above, _ints, total = launched[0]
    assert read_all([total, doubled]) == [3.0, pytest.approx([0, 2, 4])]
    np.testing.assert_array_equal(np.asarray(above), [False, False, True])
    assert np.asarray(above).dtype == np.bool_
    assert f"{launched[1][3]:.1f}" == "4.0"
    assert launched[1][3].item() == 4.0
    assert launched[1][1].is_ready()  # its page was read with launch 0's


def test_an_index_fault_raises_at_the_read_naming_the_op(device: Device) -> None:
    g = Graph("lookup")
    table = g.input("table", (10, 4))
    ids = g.input("ids", (3,), "int64")
    program = compile([table.gather(ids, axis=0).sum()], backend="gpu")
    values = np.arange(40, dtype=np.float32).reshape(10, 4)
    (good,) = program.launch(table=values, ids=np.array([1, 2, 3]))
    (bad,) = program.launch(table=values, ids=np.array([1, 12, 3]))  # does not raise here
    assert float(good) == values[[1, 2, 3]].sum()
    with pytest.raises(OutOfRangeError, match=r"^gather \(made at .*test_gpu_launch.py.*index 12 "):
        bad.numpy()
    with pytest.raises(OutOfRangeError):  # reading again raises again
        float(bad)
    (later,) = program.launch(table=values, ids=np.array([0, 0, 9]))
    assert float(later) == values[[0, 0, 9]].sum()  # the fault was cleared


def test_the_host_runs_a_bounded_number_of_steps_ahead(device: Device) -> None:
    _, program = _xor()
    ring = readback_ring(device)
    per_page, pages = ReadbackRing.LAUNCHES_PER_PAGE, ReadbackRing.PAGES_IN_FLIGHT
    created, reads = ring.created, device.counter.readbacks
    steps = 3 * per_page * pages
    for _ in range(steps):
        program.launch(x=X, y=Y)  # nobody keeps the loss
    # a page is read (the host waits for its last step) once pages are in flight,
    # and page buffers go round instead of piling up
    assert device.counter.readbacks - reads >= steps // per_page - pages
    assert ring.created - created <= pages + 1
    kept = [program.launch(x=X, y=Y)[0] for _ in range(per_page * 8)]
    assert ring.created - created <= pages + 1
    assert all(v > 0 for v in read_all(kept))


@pytest.mark.parametrize("native", [True, False], ids=["wgpu-native", "wgpu-py"])
def test_both_replay_paths_record_the_same_step(
    device: Device, native: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    if native and capture._NATIVE is None:
        pytest.fail("wgpu-py 0.32's cffi library should be reachable (capture.native_calls)")
    monkeypatch.setattr(capture, "_NATIVE", capture._NATIVE if native else None)
    expected, _ = _sync_losses(6)
    _, program = _xor()
    losses = [program.launch(x=X, y=Y)[0] for _ in range(6)]
    assert [float(v) for v in losses] == expected


@pytest.mark.parametrize("native", [True, False], ids=["wgpu-native", "wgpu-py"])
def test_a_launch_is_one_submit_whichever_path_records_it(
    device: Device, native: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A launch's encoder, pass, replay, output copies and submit go through
    wgpu-native's C functions (`capture.NativeSubmit`) or wgpu-py's methods: one
    submit a step either way, the same losses as synchronous steps."""
    if native and backend._SUBMIT is None:
        pytest.fail("wgpu-py 0.32's cffi library should be reachable (capture.native_submit)")
    monkeypatch.setattr(backend, "_SUBMIT", backend._SUBMIT if native else None)
    expected, params = _sync_losses(6)
    model, program = _xor()
    xs, ys = to_gpu(X, device), to_gpu(Y, device)
    first = program.launch(x=xs, y=ys)[0]  # the feeds copied into the plan's inputs
    submits, dispatches = device.counter.submits, device.counter.dispatches
    losses = [program.launch(x=xs, y=ys)[0] for _ in range(5)]
    assert device.counter.submits - submits == 5
    plan = next(iter(program.executable._plans.values()))  # type: ignore[attr-defined]
    assert device.counter.dispatches - dispatches == 5 * len(plan.commands)
    assert [float(v) for v in [first, *losses]] == expected
    for p, want in zip(model.parameters(), params, strict=True):
        np.testing.assert_array_equal(p.value, want)
