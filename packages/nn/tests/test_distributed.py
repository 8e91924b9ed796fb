"""asgrad.nn.distributed in one process: no-op collectives, the sampler, buckets, the step.

The multi-rank behaviour (exactness, faults, restarts) is tested under mpiexec in
test_distributed_mpi.py.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from asgrad import nn
from asgrad.nn import distributed as dist
from asgrad.nn.errors import CheckpointNotFoundError, DataError, DistributedError
from asgrad.nn.serialization import CheckpointManager
from asgrad.tensor import Graph, Program, Variable
from asgrad.tensor.cpu import jit


def test_one_process_is_rank_0_of_1_and_collectives_return_their_input() -> None:
    dist.init()
    assert (dist.rank(), dist.world_size(), dist.is_distributed()) == (0, 1, False)
    dist.barrier()
    assert dist.all_reduce([1.0, 2.0]).tolist() == [1.0, 2.0]
    assert dist.all_reduce(np.array([3, 4]), "mean").tolist() == [3.0, 4.0]
    assert dist.all_reduce(5, "max").item() == 5
    assert dist.broadcast(np.arange(3)).tolist() == [0, 1, 2]
    assert dist.broadcast_object({"a": 1}) == {"a": 1}
    assert dist.all_gather_object("x") == ["x"]
    scalar = dist.all_reduce(2.5)
    assert scalar.shape == ()


def test_bad_collective_arguments_are_refused() -> None:
    with pytest.raises(DistributedError, match="op must be one of"):
        dist.all_reduce([1.0], "prod")
    with pytest.raises(DistributedError, match="cannot reduce"):
        dist.all_reduce(np.array(["a"]))


def test_the_timeout_comes_from_the_environment_and_is_checked(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(dist.TIMEOUT_VARIABLE, "12.5")
    dist.init()
    assert dist.timeout() == 12.5
    monkeypatch.setenv(dist.TIMEOUT_VARIABLE, "soon")
    with pytest.raises(DistributedError, match="not a positive number"):
        dist.init()
    with pytest.raises(DistributedError, match="timeout must be > 0"):
        dist.init(timeout=0)
    dist.init(timeout=dist.DEFAULT_TIMEOUT)
    assert dist.timeout() == dist.DEFAULT_TIMEOUT


def test_no_launcher_means_one_process(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in dist.comm.LAUNCHER_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    assert not dist.launched_by_mpi()
    monkeypatch.setenv("PMI_SIZE", "2")
    assert dist.launched_by_mpi()


@pytest.mark.parametrize(("n", "replicas"), [(10, 3), (12, 4), (5, 2), (3, 4)])
def test_shards_are_disjoint_and_cover_the_epoch(n: int, replicas: int) -> None:
    samplers = [dist.DistributedSampler(n, replicas, r, seed=1) for r in range(replicas)]
    shards = [s.indices() for s in samplers]
    assert {len(s) for s in shards} == {-(-n // replicas)}  # equal, padded
    everything = np.concatenate(shards)
    assert set(everything.tolist()) == set(range(n))
    assert len(everything) - len(set(everything.tolist())) == len(everything) - n  # pads only
    if n % replicas == 0:
        assert len(set(everything.tolist())) == len(everything)


def test_drop_last_drops_the_tail_evenly() -> None:
    shards = [dist.DistributedSampler(10, 3, r, drop_last=True).indices() for r in range(3)]
    assert [len(s) for s in shards] == [3, 3, 3]
    assert len(set(np.concatenate(shards).tolist())) == 9


def test_every_epoch_is_reshuffled_and_replayable() -> None:
    s = dist.DistributedSampler(20, 2, 0, seed=4)
    first, second = list(s), list(s)
    assert first != second
    s.set_epoch(0)
    assert list(s) == first
    unshuffled = dist.DistributedSampler(6, 2, 1, shuffle=False)
    assert list(unshuffled) == [1, 3, 5]


def test_ranks_together_see_one_process_batches() -> None:
    """Batch j of B on each of N ranks holds the samples of one process's batch j of N*B."""
    n, replicas, b = 24, 3, 2
    one = dist.DistributedSampler(n, 1, 0, seed=9).indices()
    shards = [dist.DistributedSampler(n, replicas, r, seed=9).indices() for r in range(replicas)]
    for j in range(n // (replicas * b)):
        together = sorted(i for s in shards for i in s[j * b : (j + 1) * b].tolist())
        assert together == sorted(one[j * replicas * b : (j + 1) * replicas * b].tolist())


def test_sampler_arguments_are_checked() -> None:
    with pytest.raises(DataError, match=r"rank must be in 0\.\.1"):
        dist.DistributedSampler(10, 2, 2)
    with pytest.raises(DataError, match="num_replicas must be >= 1"):
        dist.DistributedSampler(10, 0, 0)
    with pytest.raises(DataError, match="seed must be non-negative"):
        dist.DistributedSampler(10, seed=-1)
    assert dist.DistributedSampler(10, seed=None).seed >= 0


def test_buckets_hold_one_dtype_up_to_the_size_last_parameter_first() -> None:
    params = [
        Variable("a", np.zeros(10, np.float32)),  # 40 bytes
        Variable("b", np.zeros(10, np.float32)),
        Variable("c", np.zeros(4, np.float64)),  # 32 bytes
        Variable("d", np.zeros(30, np.float32)),  # 120 bytes: over the size, alone
    ]
    assert dist.plan_buckets(params, 100) == [[3], [2], [1, 0]]
    assert dist.plan_buckets(params, 10**6) == [[3, 1, 0], [2]]
    with pytest.raises(DistributedError, match="bucket_bytes"):
        dist.plan_buckets(params, 0)


def _regression(accumulate: int, batch: int, kind: str) -> tuple[nn.Module, object]:
    model = nn.Sequential(nn.Linear(3, 5, rng=0), nn.Tanh(), nn.Linear(5, 1, rng=1))
    g = Graph()
    x, y = g.input("x", (batch, 3)), g.input("y", (batch, 1))
    params = model.parameters()
    opt = nn.SGD(params, lr=0.1) if kind == "sgd" else nn.AdamW(params, lr=0.01)
    loss = nn.mse_loss(model(x), y)
    step = dist.compile_step(opt, loss, accumulate=accumulate, bucket_bytes=64)
    return model, step


@pytest.mark.parametrize("kind", ["sgd", "adamw"])
def test_accumulating_k_micro_batches_is_one_step_on_all_of_them(kind: str) -> None:
    rng = np.random.default_rng(0)
    x = rng.normal(size=(24, 3)).astype(np.float32)
    y = rng.normal(size=(24, 1)).astype(np.float32)
    small, step = _regression(3, 2, kind)
    big, reference = _regression(1, 6, kind)
    assert isinstance(step, dist.DistributedStep)
    assert isinstance(reference, Program)  # one process, no accumulation: the plain step
    for i in range(4):
        for j in range(3):
            rows = slice(6 * i + 2 * j, 6 * i + 2 * j + 2)
            step(x=x[rows], y=y[rows])
            assert step.updated == (j == 2)
        reference(x=x[6 * i : 6 * i + 6], y=y[6 * i : 6 * i + 6])
        for a, b in zip(small.parameters(), big.parameters(), strict=True):
            np.testing.assert_allclose(a.value, b.value, rtol=2e-5, atol=1e-6)
    assert step.pending_micro_batches == 0
    assert "accumulate=3" in repr(step)


def test_accumulate_must_be_a_positive_int() -> None:
    with pytest.raises(DistributedError, match="accumulate must be an int >= 1"):
        _regression(0, 2, "sgd")


def test_checkpoints_save_on_rank_0_and_load_everywhere(tmp_path: Path) -> None:
    model = nn.Linear(2, 2, rng=0)
    with CheckpointManager(tmp_path) as manager:
        with pytest.raises(CheckpointNotFoundError):
            dist.load(manager)
        path = dist.save(manager, 3, model.state_dict(), epoch=1)
        assert path is not None
        assert path.name == "ckpt-000000003"
        data = dist.load(manager, expected=model.state_dict())
    assert (data.step, data.epoch) == (3, 1)
    np.testing.assert_array_equal(data.model_state["weight"], model.state_dict()["weight"])


def _dropout_batchnorm_step(overlap: bool) -> tuple[nn.Module, dist.DistributedStep]:
    model = nn.Sequential(
        nn.Linear(5, 8, rng=1),
        nn.Tanh(),
        nn.Dropout(0.3, seed=5),  # its seed is updated by the step and read by the backward
        nn.Linear(8, 8, rng=3),
        nn.BatchNorm1d(8),
        nn.Linear(8, 3, rng=2),
    )
    g = Graph()
    x, y = g.input("x", (4, 5)), g.input("y", (4,), "int64")
    opt = nn.AdamW(model.parameters(), lr=1e-2)
    loss = nn.cross_entropy(model(x), y)
    step = dist.DistributedStep(opt, loss, accumulate=2, bucket_bytes=100, overlap=overlap)
    return model, step


def _overlapped_and_plain_runs(
    same: Callable[[np.ndarray, np.ndarray, str], None],
) -> dist.DistributedStep:
    """The overlapped and the unsplit step side by side over six steps, their losses and
    parameters compared by ``same`` after each."""
    split, overlapped = _dropout_batchnorm_step(True)
    whole, plain = _dropout_batchnorm_step(False)
    assert overlapped.overlap
    assert not plain.overlap
    assert overlapped.stages is not None
    assert len(overlapped.stages) == len(overlapped.sizes) > 2
    rng = np.random.default_rng(0)
    for batch in (4, 4, 4, 4, 3, 4):  # 3: not the declared size, the unsplit program runs
        xs = rng.normal(size=(batch, 5)).astype(np.float32)
        ys = rng.integers(0, 3, size=batch).astype(np.int64)
        (a,) = overlapped(x=xs, y=ys)
        (b,) = plain(x=xs, y=ys)
        same(np.asarray(a), np.asarray(b), "loss")
        for (name, p), q in zip(
            split.state_dict().items(), whole.state_dict().values(), strict=True
        ):
            same(np.asarray(p), np.asarray(q), name)
    return overlapped


def _bit_identical(a: np.ndarray, b: np.ndarray, name: str = "") -> None:
    assert a.tobytes() == b.tobytes()


def test_the_overlapped_step_is_bit_identical_to_the_unsplit_one() -> None:
    jit.set_enabled(False)  # the numpy path: every op the same function in both steps
    try:
        overlapped = _overlapped_and_plain_runs(_bit_identical)
    finally:
        jit.set_enabled(None)
    assert overlapped.reduce_seconds >= 0.0


def test_the_compiled_overlapped_step_agrees_with_the_unsplit_one_within_roundings() -> None:
    """Compiled, the stages are programs of their own whose kernels fuse other chains
    than the whole step's: a parameter may differ by a float32 rounding (one element of
    the first weight by one unit in the last place after the first update). But for
    the bias of the Linear before the batch norm: its gradient is zero but for rounding
    (the norm takes out the batch's mean), and AdamW turns that noise into steps of up
    to its learning rate (0.01) whichever way the roundings fall; the running mean
    carries a tenth of it (its momentum)."""
    pytest.importorskip("numba")
    noise = {"3.bias": 6 * 0.01, "4.running_mean": 6 * 0.01 * 0.1}

    def close(a: np.ndarray, b: np.ndarray, name: str) -> None:
        if a.dtype.kind == "f":
            np.testing.assert_allclose(a, b, rtol=1e-6, atol=noise.get(name, 1e-7), err_msg=name)
        else:
            _bit_identical(a, b)

    jit.set_enabled(True)
    try:
        _overlapped_and_plain_runs(close)
    finally:
        jit.set_enabled(None)


def _normalised(norm: nn.Module, shape: tuple[int, ...]) -> tuple[nn.Module, list[np.ndarray]]:
    model = nn.Sequential(nn.Conv2d(2, 3, 1, rng=0) if len(shape) == 4 else nn.Identity(), norm)
    g = Graph()
    x, t = g.input("x", shape), g.input("t", (*shape[:1], 3, *shape[2:]))
    out = model(x)
    step = nn.SGD(model.parameters(), lr=0.1).compile(((out - t) ** 2).mean(), [out])
    rng = np.random.default_rng(0)
    outs = []
    for _ in range(3):
        xs = rng.normal(size=shape).astype(np.float32)
        ts = rng.normal(size=(*shape[:1], 3, *shape[2:])).astype(np.float32)
        outs.append(step(x=xs, t=ts)[1])
    return model, outs


@pytest.mark.parametrize("shape", [(6, 3), (4, 2, 3, 3)])
def test_sync_batch_norm_in_one_process_is_batch_norm(shape: tuple[int, ...]) -> None:
    plain = nn.BatchNorm1d(3) if len(shape) == 2 else nn.BatchNorm2d(3)
    synced_model, synced = _normalised(nn.SyncBatchNorm(3), shape)
    plain_model, expected = _normalised(plain, shape)
    for a, b in zip(synced, expected, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    for (name, a), (_, b) in zip(
        synced_model.state_dict().items(), plain_model.state_dict().items(), strict=True
    ):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6, err_msg=name)


def test_convert_sync_batchnorm_keeps_the_order_and_the_variables() -> None:
    model = nn.Sequential(nn.Linear(3, 4, rng=0), nn.BatchNorm1d(4), nn.Tanh())
    names = [name for name, _ in model.named_variables()]
    variables = [v for _, v in model.named_variables()]
    converted = nn.SyncBatchNorm.convert_sync_batchnorm(model)
    assert converted is model
    assert [type(m).__name__ for m in model] == ["Linear", "SyncBatchNorm", "Tanh"]
    assert [name for name, _ in model.named_variables()] == names
    assert all(a is b for (_, a), b in zip(model.named_variables(), variables, strict=True))
    single = nn.SyncBatchNorm.convert_sync_batchnorm(nn.BatchNorm2d(5, momentum=None))
    assert isinstance(single, nn.SyncBatchNorm)
    assert single.momentum is None


def test_a_sync_batch_norm_step_refuses_a_short_batch() -> None:
    model = nn.Sequential(nn.Linear(3, 4, rng=0), nn.SyncBatchNorm(4))
    g = Graph()
    x = g.input("x", (4, 3))
    step = dist.DistributedStep(nn.SGD(model.parameters(), lr=0.1), model(x).mean())
    assert step.phases is not None
    assert not step.overlap
    step(x=np.ones((4, 3), np.float32))
    with pytest.raises(DistributedError, match="drop_last=True"):
        step(x=np.ones((3, 3), np.float32))


def test_a_sync_batch_norm_step_names_missing_and_unknown_feeds() -> None:
    model = nn.Sequential(nn.Linear(3, 4, rng=0), nn.SyncBatchNorm(4))
    x = Graph().input("x", (4, 3))
    step = dist.DistributedStep(nn.SGD(model.parameters(), lr=0.1), model(x).mean())
    with pytest.raises(DistributedError, match=r"missing \['x'\], not inputs \['z'\]"):
        step(z=np.ones((4, 3), np.float32))
