"""MetricWriter: one flushed record per call, CSV or JSON lines."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest

from asgrad import nn
from asgrad.nn.metrics import MetricError, MetricWriter


def test_exported_from_nn_and_metrics() -> None:
    assert nn.MetricWriter is MetricWriter


def test_jsonl_one_record_per_call_numpy_values_become_floats(tmp_path: Path) -> None:
    path = tmp_path / "m.jsonl"
    with MetricWriter(path) as log:
        log.write(step=0, loss=np.float32(0.5), acc=np.array([0.25]))
        log.write({"step": 1, "loss": np.array(0.125, dtype=np.float64)}, note="x")
    records = [json.loads(line) for line in path.read_text().splitlines()]
    assert records == [
        {"step": 0, "loss": 0.5, "acc": 0.25},
        {"step": 1, "loss": 0.125, "note": "x"},
    ]
    assert all(type(r["loss"]) is float for r in records)


def test_each_record_is_flushed_before_close(tmp_path: Path) -> None:
    path = tmp_path / "m.csv"
    log = MetricWriter(path)
    log.write(step=0, loss=1.0)
    assert path.read_text().splitlines() == ["step,loss", "0,1.0"]
    log.write(step=1, loss=0.5)
    assert path.read_text().splitlines()[-1] == "1,0.5"
    log.close()
    log.close()  # a second close does nothing


def test_csv_header_is_fixed_new_key_is_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "m.csv"
    with MetricWriter(path) as log:
        log.write(step=0, loss=1.0, acc=0.5)
        log.write(step=1, loss=0.5)  # a missing key is an empty cell
        with pytest.raises(MetricError, match=r"\['lr'\] are not in the CSV header.*\.jsonl"):
            log.write(step=2, loss=0.25, lr=0.1)
    with path.open(newline="") as f:
        rows = list(csv.DictReader(f))
    assert rows == [
        {"step": "0", "loss": "1.0", "acc": "0.5"},
        {"step": "1", "loss": "0.5", "acc": ""},
    ]


def test_append_keeps_and_truncate_drops_earlier_records(tmp_path: Path) -> None:
    path = tmp_path / "m.csv"
    with MetricWriter(path) as log:
        log.write(step=0, loss=1.0)
    with MetricWriter(path, mode="a") as log:
        log.write(step=1, loss=0.5)  # the header comes from the file
        with pytest.raises(MetricError, match="CSV header"):
            log.write(step=2, acc=1.0)
    assert path.read_text().splitlines() == ["step,loss", "0,1.0", "1,0.5"]
    with MetricWriter(path, mode="w") as log:
        log.write(epoch=0)
    assert path.read_text().splitlines() == ["epoch", "0"]


def test_format_from_argument_overrides_suffix(tmp_path: Path) -> None:
    path = tmp_path / "metrics.log"
    with MetricWriter(path, format="jsonl") as log:
        log.write(loss=1.0)
    assert json.loads(path.read_text()) == {"loss": 1.0}


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"path": "m.txt"}, r"name it \.csv or \.jsonl"),
        ({"path": "m.csv", "format": "xml"}, "use 'csv' or 'jsonl'"),
        ({"path": "m.csv", "mode": "r"}, "use 'w'"),
    ],
)
def test_bad_arguments_say_what_to_do(tmp_path: Path, kwargs: dict[str, str], match: str) -> None:
    kwargs = {**kwargs, "path": str(tmp_path / kwargs["path"])}
    with pytest.raises(MetricError, match=match):
        MetricWriter(**kwargs)  # type: ignore[arg-type]


def test_bad_values_and_closed_writer_are_clear_errors(tmp_path: Path) -> None:
    log = MetricWriter(tmp_path / "m.jsonl")
    with pytest.raises(MetricError, match=r"'w' has shape \(3,\).*\.mean\(\)"):
        log.write(w=np.zeros(3))
    with pytest.raises(MetricError, match="'obj' is a list"):
        log.write(obj=[1.0])
    log.close()
    with pytest.raises(MetricError, match="is closed"):
        log.write(loss=1.0)
    assert (tmp_path / "m.jsonl").read_text() == ""
