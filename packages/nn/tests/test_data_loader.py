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
