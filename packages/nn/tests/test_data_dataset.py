"""Datasets, random_split and train_test_split."""

from __future__ import annotations

import numpy as np
import pytest

from asgrad.nn.data import (
    ConcatDataset,
    DataError,
    Dataset,
    MapDataset,
    Sample,
    Subset,
    TensorDataset,
    default_collate,
    random_split,
    train_test_split,
)


class Squares(Dataset):
    """A dataset with only __len__/__getitem__, to exercise the generic paths."""

    def __len__(self) -> int:
        return 5

    def __getitem__(self, index: int) -> Sample:
        if not 0 <= index < 5:
            raise IndexError(index)
        return (np.array([index, index**2]), np.array(index % 2))


def test_tensor_dataset_items_are_arrays_and_rows() -> None:
    x = np.arange(12.0).reshape(4, 3)
    y = np.array([3, 1, 4, 1])
    ds = TensorDataset(x, y)
    assert len(ds) == 4
    xi, yi = ds[2]
    assert isinstance(yi, np.ndarray)
    assert yi.shape == ()
    assert int(yi) == 4
    np.testing.assert_array_equal(xi, [6.0, 7.0, 8.0])
    np.testing.assert_array_equal(ds[-1][0], x[3])
    with pytest.raises(IndexError):
        ds[4]
    with pytest.raises(TypeError):
        ds[1.0]  # type: ignore[index]  # the test passes a wrong type on purpose


def test_tensor_dataset_rejects_unequal_lengths() -> None:
    with pytest.raises(DataError, match=r"\[3, 2\]"):
        TensorDataset(np.zeros(3), np.zeros(2))
    with pytest.raises(DataError):
        TensorDataset()


def test_tensor_dataset_get_batch_is_fancy_indexing() -> None:
    x = np.arange(20).reshape(10, 2)
    ds = TensorDataset(x, x[:, 0])
    xb, yb = ds.get_batch(np.array([7, 0, 7, -1]))
    np.testing.assert_array_equal(xb, x[[7, 0, 7, 9]])
    np.testing.assert_array_equal(yb, [14, 0, 14, 18])
    with pytest.raises(IndexError):
        ds.get_batch([10])


def test_generic_dataset_get_batch_and_iteration() -> None:
    ds = Squares()
    xb, yb = ds.get_batch([4, 1])
    np.testing.assert_array_equal(xb, [[4, 16], [1, 1]])
    np.testing.assert_array_equal(yb, [0, 1])
    assert [int(s[1]) for s in ds] == [0, 1, 0, 1, 0]


def test_default_collate_errors_name_the_field() -> None:
    with pytest.raises(DataError, match="field 0"):
        default_collate([(np.zeros(2),), (np.zeros(3),)])
    with pytest.raises(DataError, match="2 fields"):
        default_collate([(np.zeros(2), np.zeros(1)), (np.zeros(2),)])


def test_map_dataset_columns_whole_sample_and_batched() -> None:
    base = TensorDataset(np.arange(6.0).reshape(3, 2), np.array([0, 1, 2]))
    by_column = MapDataset(base, lambda a: a * 10, columns=(0,))
    np.testing.assert_array_equal(by_column[1][0], [20.0, 30.0])
    assert int(by_column[1][1]) == 1
    swapped = MapDataset(base, lambda x, y: (y, x))
    assert swapped[2][0].shape == ()
    assert swapped[2][1].shape == (2,)
    batched = MapDataset(base, lambda a: a + 1, columns=(1,), batched=True)
    np.testing.assert_array_equal(batched.get_batch([2, 0])[1], [3, 1])
    # The batched and per-item paths agree.
    per_item = MapDataset(base, lambda a: a + 1, columns=(1,))
    np.testing.assert_array_equal(per_item.get_batch([2, 0])[1], [3, 1])
    with pytest.raises(DataError, match="column 5"):
        MapDataset(base, lambda a: a, columns=(5,))[0]


def test_subset_and_concat() -> None:
    a = TensorDataset(np.arange(3))
    b = TensorDataset(np.arange(100, 104))
    cat = a + b
    assert isinstance(cat, ConcatDataset)
    assert len(cat) == 7
    assert [int(s[0]) for s in cat] == [0, 1, 2, 100, 101, 102, 103]
    assert int(cat[-1][0]) == 103
    idx = np.array([5, 0, 3, 2, 6, 0])
    np.testing.assert_array_equal(cat.get_batch(idx)[0], [102, 0, 100, 2, 103, 0])
    sub = Subset(cat, [6, 1])
    assert len(sub) == 2
    assert int(sub[0][0]) == 103
    np.testing.assert_array_equal(sub.get_batch([1, 0, 1])[0], [1, 103, 1])
    with pytest.raises(IndexError):
        Subset(a, [3])


@pytest.mark.parametrize("lengths", [[7, 3], [0.7, 0.3], [0.34, 0.33, 0.33]])
def test_random_split_is_a_disjoint_cover(lengths: list[float]) -> None:
    ds = TensorDataset(np.arange(10))
    parts = random_split(ds, lengths, seed=3)
    ids = [int(s[0]) for p in parts for s in p]
    assert sorted(ids) == list(range(10))
    assert sum(len(p) for p in parts) == 10
    again = random_split(ds, lengths, seed=3)
    assert [p.indices.tolist() for p in parts] == [p.indices.tolist() for p in again]


def test_random_split_sizes_and_errors() -> None:
    ds = TensorDataset(np.arange(10))
    assert [len(p) for p in random_split(ds, [0.34, 0.33, 0.33], seed=0)] == [4, 3, 3]
    with pytest.raises(DataError, match="sum"):
        random_split(ds, [5, 4])
    with pytest.raises(DataError, match="sum to 1"):
        random_split(ds, [0.5, 0.2])


def test_train_test_split_is_disjoint_and_complete() -> None:
    x = np.arange(100).reshape(50, 2)
    y = np.arange(50)
    x_tr, x_te, y_tr, y_te = train_test_split(x, y, test_size=0.2, seed=0)
    assert len(x_te) == 10
    assert len(x_tr) == 40
    assert set(y_tr.tolist()).isdisjoint(y_te.tolist())
    assert sorted(y_tr.tolist() + y_te.tolist()) == list(range(50))
    # Rows stay aligned across arrays.
    np.testing.assert_array_equal(x_tr[:, 0] // 2, y_tr)
    np.testing.assert_array_equal(x_te[:, 0] // 2, y_te)
    # Reproducible from the seed, different for another seed.
    assert train_test_split(y, seed=0)[1].tolist() == train_test_split(y, seed=0)[1].tolist()
    assert train_test_split(y, seed=0)[1].tolist() != train_test_split(y, seed=1)[1].tolist()


def test_train_test_split_without_shuffle_takes_the_tail() -> None:
    tr, te = train_test_split(np.arange(10), test_size=3, shuffle=False)
    assert tr.tolist() == list(range(7))
    assert te.tolist() == [7, 8, 9]


def test_train_test_split_stratified_keeps_class_shares() -> None:
    y = np.array([0] * 60 + [1] * 30 + [2] * 10)
    idx = np.arange(100)
    i_tr, i_te, y_tr, y_te = train_test_split(idx, y, test_size=0.2, seed=5, stratify=y)
    assert np.bincount(y_te).tolist() == [12, 6, 2]
    assert np.bincount(y_tr).tolist() == [48, 24, 8]
    assert set(i_tr.tolist()).isdisjoint(i_te.tolist())
    np.testing.assert_array_equal(y[i_te], y_te)


def test_train_test_split_stratified_rounding_hits_the_exact_size() -> None:
    y = np.array([0] * 7 + [1] * 7 + [2] * 7)
    _, te = train_test_split(y, test_size=5, seed=0, stratify=y)
    assert len(te) == 5
    assert max(np.bincount(te, minlength=3)) == 2


def test_train_test_split_errors() -> None:
    with pytest.raises(DataError, match="same length"):
        train_test_split(np.zeros(4), np.zeros(5))
    with pytest.raises(DataError, match="empty"):
        train_test_split(np.zeros(4), test_size=4)
    with pytest.raises(DataError, match="fraction"):
        train_test_split(np.zeros(4), test_size=1.5)
    with pytest.raises(DataError, match="shuffle"):
        train_test_split(np.zeros(4), stratify=np.zeros(4), shuffle=False)
