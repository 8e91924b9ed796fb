"""--plot and --log on the example CLIs; --quiet hides the progress bar only."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from asgrad.examples import cnn, transformer, xor

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def assert_png(path: Path) -> None:
    """A real picture: the PNG signature, some size, and matplotlib reads pixels back."""
    import matplotlib.image

    data = path.read_bytes()
    assert data[:8] == PNG_SIGNATURE
    assert len(data) > 5_000
    pixels = matplotlib.image.imread(path)
    assert pixels.ndim == 3
    assert pixels.shape[0] > 200
    assert pixels.shape[1] > 300
    assert pixels.std() > 0.05  # not a blank canvas


def test_xor_plot_and_jsonl_log(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    png, log = tmp_path / "c.png", tmp_path / "m.jsonl"
    xor.main(["--steps", "20", "--quiet", "--plot", str(png), "--log", str(log)])
    assert_png(png)
    records = [json.loads(line) for line in log.read_text().splitlines()]
    assert [r["step"] for r in records] == list(range(1, 21))
    losses = [r["loss"] for r in records]
    assert all(isinstance(v, float) for v in losses)
    assert losses[-1] < 0.8 * losses[0]
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert summary["example"] == "xor"
    assert summary["steps"] == 20
    assert summary["final_loss"] == losses[-1]


def test_plot_without_matplotlib_is_one_line_and_status_1(tmp_path: Path) -> None:
    code = textwrap.dedent(
        f"""
        import sys
        sys.modules["matplotlib"] = None  # as if it were not installed
        from asgrad.examples import xor
        sys.exit(xor.main(["--quiet", "--plot", {str(tmp_path / "c.png")!r},
                           "--log", {str(tmp_path / "m.jsonl")!r}]))
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 1
    assert out.stdout == ""
    assert out.stderr.strip().splitlines() == [
        "error: --plot needs matplotlib; install it with pip install 'asgrad-examples[plot]'"
    ]
    assert not (tmp_path / "m.jsonl").exists()  # it stopped before training


def test_log_with_unknown_suffix_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(SystemExit, match=r"^error: --log .*m\.txt.*\.csv or \.jsonl"):
        xor.main(["--steps", "2", "--quiet", "--log", str(tmp_path / "m.txt")])


def test_cnn_csv_log_has_one_row_per_epoch_and_plot(tmp_path: Path) -> None:
    png, log = tmp_path / "c.png", tmp_path / "m.csv"
    cnn.main(["--epochs", "2", "--quiet", "--plot", str(png), "--log", str(log)])
    assert_png(png)
    with log.open(newline="") as f:
        rows = list(csv.DictReader(f))
    assert [r["epoch"] for r in rows] == ["1", "2"]
    assert set(rows[0]) == {"epoch", "train_loss", "test_accuracy", "lr"}
    assert float(rows[1]["train_loss"]) < float(rows[0]["train_loss"])
    assert 0.5 < float(rows[1]["test_accuracy"]) <= 1.0


def test_cnn_per_epoch_accuracy_does_not_change_training() -> None:
    plain = cnn.train(epochs=2)
    tracked = cnn.train(epochs=2, per_epoch_accuracy=True)
    assert tracked["epoch_losses"] == plain["epoch_losses"]
    assert tracked["test_accuracy"] == plain["test_accuracy"]
    assert plain["epoch_accuracies"] == []
    assert tracked["epoch_accuracies"][-1] == tracked["test_accuracy"]


@pytest.mark.slow
def test_transformer_quiet_keeps_summary_and_plots(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    png, log = tmp_path / "c.png", tmp_path / "m.jsonl"
    transformer.main(["--steps", "25", "--quiet", "--plot", str(png), "--log", str(log)])
    out, err = capsys.readouterr()
    assert "validation loss" in err  # the summary line is not hidden by --quiet
    assert "it/s" not in err  # but the progress bar is
    assert json.loads(out.strip().splitlines()[-1])["example"] == "transformer"
    assert_png(png)
    records = [json.loads(line) for line in log.read_text().splitlines()]
    assert [r["step"] for r in records] == list(range(1, 26))
    assert {"loss", "lr"} <= set(records[0])


def test_transformer_quiet_hides_only_the_progress_bar(capsys: pytest.CaptureFixture[str]) -> None:
    transformer.main(["--steps", "2", "--quiet"])
    out, err = capsys.readouterr()
    assert err.strip().startswith("train loss ")
    assert "validation loss" in err
    assert json.loads(out.strip().splitlines()[-1])["steps"] == 2
