"""DataLoader and samplers: batching, epochs, reproducibility, fast path."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest

from asgrad.nn.data import (
    BatchSampler,
    DataError,
    DataLoader,
    Dataset,
    RandomSampler,
    Sample,
    SequentialSampler,
    TensorDataset,
    WeightedRandomSampler,
)


def make_dataset(n: int = 10) -> TensorDataset:
    return TensorDataset(np.arange(n * 2, dtype=np.float32).reshape(n, 2), np.arange(n))


@pytest.mark.parametrize(
    ("n", "batch", "drop_last", "expected"),
    [
        (10, 3, False, 4),
        (10, 3, True, 3),
        (9, 3, True, 3),
        (9, 3, False, 3),
        (2, 5, True, 0),
    ],
)
def test_len_matches_iteration(n: int, batch: int, drop_last: bool, expected: int) -> None:
    loader = DataLoader(make_dataset(n), batch_size=batch, drop_last=drop_last)
    batches = list(loader)
    assert len(loader) == expected == len(batches)
    if drop_last:
        assert all(len(b[1]) == batch for b in batches)


def test_sequential_batches_are_stacked_arrays() -> None:
    xb, yb = next(iter(DataLoader(make_dataset(), batch_size=4)))
    assert xb.shape == (4, 2)
    assert xb.dtype == np.float32
    np.testing.assert_array_equal(yb, [0, 1, 2, 3])
    last = list(DataLoader(make_dataset(), batch_size=4))[-1]
    np.testing.assert_array_equal(last[1], [8, 9])


def test_shuffle_covers_everything_and_changes_each_epoch() -> None:
    loader = DataLoader(make_dataset(20), batch_size=6, shuffle=True, seed=1)
    epochs = [np.concatenate([yb for _, yb in loader]) for _ in range(3)]
    for order in epochs:
        assert sorted(order.tolist()) == list(range(20))
    assert epochs[0].tolist() != epochs[1].tolist() != epochs[2].tolist()
    # The same seed replays the same sequence of epochs.
    replay = DataLoader(make_dataset(20), batch_size=6, shuffle=True, seed=1)
    for order in epochs:
        np.testing.assert_array_equal(np.concatenate([yb for _, yb in replay]), order)
    # ...and a resumed loader can jump straight to epoch 2.
    resumed = DataLoader(make_dataset(20), batch_size=6, shuffle=True, seed=1)
    resumed.set_epoch(2)
    assert resumed.epoch == 2
    np.testing.assert_array_equal(np.concatenate([yb for _, yb in resumed]), epochs[2])


def test_features_and_labels_stay_aligned_when_shuffled() -> None:
    for xb, yb in DataLoader(make_dataset(), batch_size=3, shuffle=True, seed=0):
        np.testing.assert_array_equal(xb[:, 0], 2 * yb)


class CountingDataset(TensorDataset):
    def __init__(self, *arrays: np.ndarray) -> None:
        super().__init__(*arrays)
        self.getitem_calls = 0
        self.batch_calls = 0

    def __getitem__(self, index: int) -> Sample:
        self.getitem_calls += 1
        return super().__getitem__(index)

    def get_batch(self, indices: object) -> Sample:
        self.batch_calls += 1
        return super().get_batch(indices)  # type: ignore[arg-type]  # forwarded as is


def test_tensor_dataset_uses_the_batched_fast_path() -> None:
    ds = CountingDataset(np.zeros((100, 3)), np.arange(100))
    batches = list(DataLoader(ds, batch_size=32, shuffle=True, seed=0))
    assert len(batches) == 4
    assert ds.batch_calls == 4
    assert ds.getitem_calls == 0


def test_collate_fn_receives_items() -> None:
    seen: list[int] = []

    def collate(items: Sequence[Sample]) -> Sample:
        seen.append(len(items))
        return (np.array([float(x.sum()) for x, _ in items]),)

    ds = CountingDataset(np.ones((5, 2)), np.arange(5))
    out = list(DataLoader(ds, batch_size=2, collate_fn=collate))
    assert seen == [2, 2, 1]
    assert ds.getitem_calls == 5
    np.testing.assert_array_equal(out[0][0], [2.0, 2.0])


def test_generic_dataset_goes_through_getitem() -> None:
    class Ragged(Dataset):
        def __len__(self) -> int:
            return 3

        def __getitem__(self, index: int) -> Sample:
            return (np.full(2, index),)

    (xb,) = next(iter(DataLoader(Ragged(), batch_size=3)))
    np.testing.assert_array_equal(xb, [[0, 0], [1, 1], [2, 2]])


def test_custom_sampler_and_conflicts() -> None:
    sampler = WeightedRandomSampler([0, 0, 1.0, 0, 0], num_samples=6, seed=0)
    loader = DataLoader(make_dataset(5), batch_size=4, sampler=sampler)
    assert len(loader) == 2
    assert np.concatenate([yb for _, yb in loader]).tolist() == [2] * 6
    with pytest.raises(DataError, match="not both"):
        DataLoader(make_dataset(5), shuffle=True, sampler=sampler)
    with pytest.raises(DataError, match="batch_size"):
        DataLoader(make_dataset(5), batch_size=0)


def test_sequential_sampler() -> None:
    s = SequentialSampler(make_dataset(4))
    assert list(s) == [0, 1, 2, 3] == list(s)
    assert len(s) == 4


def test_random_sampler_modes() -> None:
    s = RandomSampler(10, seed=0)
    assert sorted(s) == list(range(10))
    short = RandomSampler(10, seed=0, num_samples=4)
    drawn = list(short)
    assert len(drawn) == 4 == len(short)
    assert len(set(drawn)) == 4
    many = list(RandomSampler(3, seed=0, replacement=True, num_samples=50))
    assert len(many) == 50
    assert set(many) <= {0, 1, 2}
    assert len(set(many)) == 3
    with pytest.raises(DataError, match="replacement=True"):
        RandomSampler(3, num_samples=4)
    # Unseeded samplers still give each epoch a different order.
    u = RandomSampler(50)
    assert list(u) != list(u)


def test_weighted_sampler_follows_the_weights() -> None:
    s = WeightedRandomSampler([1.0, 3.0], num_samples=20000, seed=0)
    counts = np.bincount(list(s), minlength=2) / 20000
    np.testing.assert_allclose(counts, [0.25, 0.75], atol=0.02)
    distinct = list(WeightedRandomSampler([1, 1, 1, 0], 3, replacement=False, seed=0))
    assert sorted(distinct) == [0, 1, 2]
    with pytest.raises(DataError, match="non-zero weight"):
        WeightedRandomSampler([1, 0], 2, replacement=False)
    with pytest.raises(DataError, match="non-negative"):
        WeightedRandomSampler([1, -1], 2)
    with pytest.raises(DataError, match="1-D"):
        WeightedRandomSampler(np.ones((2, 2)), 2)


def test_batch_sampler() -> None:
    bs = BatchSampler(SequentialSampler(7), 3, drop_last=True)
    assert [b.tolist() for b in bs] == [[0, 1, 2], [3, 4, 5]]
    assert len(bs) == 2
    bs = BatchSampler(SequentialSampler(7), 3)
    assert [len(b) for b in bs] == [3, 3, 1]
    assert len(bs) == 3
    assert all(b.dtype == np.intp for b in bs)


# -- DataLoader(device=...): batches on a backend's device ---------------------------------
class Held:
    """An array on the fake device below."""

    def __init__(self, array: np.ndarray) -> None:
        self.array = array


class HostDevice:
    """A data backend whose "device" is a list of uploads: counts what moves."""

    name = "host-device"

    def __init__(self, limit: int = 1 << 30) -> None:
        self.limit = limit
        self.uploads: list[np.ndarray] = []

    def available(self) -> bool:
        return True

    def compile(self, schedule: object) -> object:
        raise NotImplementedError

    def to_device(self, array: np.ndarray) -> Held:
        self.uploads.append(array.copy())
        return Held(array.copy())

    def holds(self, nbytes: int) -> bool:
        return nbytes <= self.limit

    def take(self, arrays: Sequence[Held], order: Held, start: int, stop: int) -> tuple[Held, ...]:
        return tuple(Held(a.array[order.array[start:stop]]) for a in arrays)


@pytest.fixture
def host_device(monkeypatch: pytest.MonkeyPatch) -> HostDevice:
    from asgrad.tensor.runtime import backends

    fake = HostDevice()
    monkeypatch.setitem(backends._BACKENDS, fake.name, lambda: fake)
    return fake


def _batches(loader: DataLoader) -> list[tuple[np.ndarray, ...]]:
    return [tuple(a.array if isinstance(a, Held) else a for a in b) for b in loader]


def _assert_equal(got: list[tuple[np.ndarray, ...]], want: list[Sample]) -> None:
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        for a, b in zip(g, w, strict=True):
            np.testing.assert_array_equal(a, b)
            assert a.dtype == b.dtype


def test_a_resident_data_set_is_uploaded_once_and_each_epoch_its_order(
    host_device: HostDevice,
) -> None:
    ds = make_dataset(10)
    host = DataLoader(ds, batch_size=4, shuffle=True, seed=0)
    on_device = DataLoader(ds, batch_size=4, shuffle=True, seed=0, device=host_device.name)
    for epoch in range(3):
        _assert_equal(_batches(on_device), list(host))
        # the two arrays at the first epoch, then one order (the permutation) per epoch
        assert len(host_device.uploads) == 2 + epoch + 1
    order = host_device.uploads[-1]
    assert order.dtype == np.int32
    assert sorted(order.tolist()) == list(range(10))


def test_an_unchanged_order_is_not_uploaded_again(host_device: HostDevice) -> None:
    loader = DataLoader(make_dataset(10), batch_size=4, device=host_device.name)
    for _ in range(3):
        _assert_equal(_batches(loader), list(DataLoader(make_dataset(10), batch_size=4)))
    assert len(host_device.uploads) == 3  # two arrays and one order, at the first epoch


def test_a_data_set_that_does_not_fit_is_streamed(host_device: HostDevice) -> None:
    host_device.limit = 16  # bytes: no array of the data set fits
    ds = make_dataset(10)
    loader = DataLoader(ds, batch_size=4, device=host_device.name, prefetch=1)
    _assert_equal(_batches(loader), list(DataLoader(ds, batch_size=4)))
    assert len(host_device.uploads) == 2 * 3  # each batch's two arrays


def test_a_streamed_loader_uploads_prefetch_batches_ahead(host_device: HostDevice) -> None:
    def collate(items: Sequence[Sample]) -> Sample:
        return tuple(np.stack(field) for field in zip(*items, strict=True))

    loader = DataLoader(
        make_dataset(10), batch_size=2, collate_fn=collate, device=host_device.name, prefetch=2
    )
    batches = iter(loader)
    next(batches)
    assert len(host_device.uploads) == 2 * 3  # the batch handed out and the next two
    rest = list(batches)
    assert len(rest) == 4
    assert len(host_device.uploads) == 2 * 5


def test_a_device_loader_needs_a_data_backend_and_a_prefetch_of_zero_or_more(
    host_device: HostDevice, monkeypatch: pytest.MonkeyPatch
) -> None:
    from asgrad.tensor import BackendError
    from asgrad.tensor.runtime import backends

    with pytest.raises(DataError, match="prefetch must be 0 or more"):
        DataLoader(make_dataset(), device=host_device.name, prefetch=-1)
    with pytest.raises(BackendError, match="unknown backend 'nowhere'"):
        DataLoader(make_dataset(), device="nowhere")
    monkeypatch.setitem(backends._BACKENDS, "no-data", lambda: backends.get_backend("cpu"))
    with pytest.raises(DataError, match="the 'no-data' backend cannot hold data"):
        DataLoader(make_dataset(), device="no-data")
    cpu_batches = list(DataLoader(make_dataset(4), batch_size=4, device="cpu"))
    assert all(isinstance(a, np.ndarray) for a in cpu_batches[0])
