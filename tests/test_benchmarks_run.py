"""benchmarks/run.py: framework selection, worker environments, summaries and tables.

The bookkeeping tests need none of the peers (PyTorch, JAX, PyTensor): the orchestrator
runs with its worker processes replaced by a stub. The real workers run in subprocesses:
asgrad's always, JAX's and PyTensor's where they are installed.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

BENCH = Path(__file__).resolve().parents[1] / "benchmarks"


def _load(name: str) -> Any:
    if str(BENCH) not in sys.path:
        sys.path.insert(0, str(BENCH))
    spec = importlib.util.spec_from_file_location(f"bench_under_test_{name}", BENCH / f"{name}.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


report = _load("bench_report")
run = _load("run")


def _m(workload: str, fw: str, rate: float | None, repeat: int, **extra: Any) -> dict[str, Any]:
    row: dict[str, Any] = {"workload": workload, "framework": fw, "device": "cpu"}
    row["repeat"] = repeat
    if rate is not None:
        row.update(steps_per_s=rate, first_step_s=1.0 + repeat, final_loss=0.5)
    row.update(extra)
    return row


# -- framework selection ---------------------------------------------------------------------
def test_default_selection_runs_all_importable_and_skips_the_missing_with_a_hint() -> None:
    asked: list[str] = []

    def importable(name: str) -> bool:
        asked.append(name)
        return name != "jax"

    selected, skipped = report.select_frameworks(None, True, importable)
    assert selected == ["asgrad", "torch", "pytensor"]
    assert set(skipped) == {"jax"}
    assert "not importable" in skipped["jax"]
    assert "pip install jax" in skipped["jax"]
    assert asked == ["asgrad", "torch", "jax", "pytensor"]


def test_no_torch_leaves_torch_out_without_probing_it() -> None:
    asked: list[str] = []

    def importable(name: str) -> bool:
        asked.append(name)
        return True

    selected, skipped = report.select_frameworks("asgrad,torch,jax", False, importable)
    assert selected == ["asgrad", "jax"]
    assert skipped == {"torch": "left out (--no-torch)"}
    assert "torch" not in asked


def test_requested_order_is_kept_and_duplicates_dropped() -> None:
    selected, skipped = report.select_frameworks(
        " pytensor, asgrad,pytensor ", True, lambda _: True
    )
    assert selected == ["pytensor", "asgrad"]
    assert skipped == {}


def test_unknown_framework_is_a_selection_error() -> None:
    with pytest.raises(report.SelectionError, match="tensorflow"):
        report.select_frameworks("asgrad,tensorflow", True, lambda _: True)


def test_not_applicable() -> None:
    assert report.not_applicable("pytensor", "xor", "cpu") is None
    assert "xor, mlp only" in report.not_applicable("pytensor", "cnn", "cpu")
    assert report.not_applicable("pytensor", "mlp", "gpu") == "CPU only"
    for fw in ("asgrad", "torch", "jax"):
        assert report.not_applicable(fw, "transformer_large", "gpu") is None


# -- worker environment ------------------------------------------------------------------------
def test_worker_env_unsets_openblas_overrides_and_sets_threads() -> None:
    base = {"OPENBLAS_CORETYPE": "Haswell", "OPENBLAS_L2_SIZE": "1048576", "HOME": "/h"}
    env = run.worker_env(base, 3)
    assert "OPENBLAS_CORETYPE" not in env
    assert "OPENBLAS_L2_SIZE" not in env
    assert env["HOME"] == "/h"
    for var in run.THREAD_VARS:
        assert env[var] == "3"
    assert base["OPENBLAS_CORETYPE"] == "Haswell"  # the caller's mapping is untouched


def test_rotation_and_worker_count() -> None:
    fws = ["asgrad", "torch", "jax"]
    assert [run.rotate(fws, r)[0] for r in range(4)] == ["asgrad", "torch", "jax", "asgrad"]
    assert sorted(run.rotate(fws, 2)) == sorted(fws)
    assert run.rotate([], 1) == []
    assert run.workers_per_framework(1) == 2
    assert run.workers_per_framework(5) == 5
    assert run.workers_per_framework(1, warm=False) == 1
    assert run.workers_per_framework(3, warm=False) == 3


# -- summaries and ratios --------------------------------------------------------------------
def test_summarize_keeps_best_rate_cold_and_warm_first_step_and_largest_peak() -> None:
    rows = [
        _m("mlp", "asgrad", 100.0, 0, peak_rss_mib=90.0, first_step_s=4.0),
        _m("mlp", "asgrad", 300.0, 1, peak_rss_mib=80.0, first_step_s=0.5, final_loss=0.25),
        _m("mlp", "asgrad", 200.0, 2, peak_rss_mib=85.0, first_step_s=0.7),
        _m("mlp", "jax", None, 0, skipped="JAX has no GPU backend"),
    ]
    asg, jax = report.summarize(rows)
    assert asg["steps_per_s"] == 300.0
    assert asg["final_loss"] == 0.25
    assert asg["first_step_cold_s"] == 4.0
    assert asg["first_step_warm_s"] == 0.5
    assert asg["peak_rss_mib"] == 90.0
    assert asg["peak_gpu_mib"] is None
    assert asg["measurements"] == 3
    assert jax["skipped"] == "JAX has no GPU backend"
    assert "steps_per_s" not in jax


def test_summarize_without_a_warm_worker_has_no_warm_figure() -> None:
    (only,) = report.summarize([_m("xor", "torch", 50.0, 0)])
    assert only["first_step_cold_s"] == 1.0
    assert only["first_step_warm_s"] is None


def test_ratio() -> None:
    assert report.ratio(300.0, 100.0) == pytest.approx(3.0)
    assert report.ratio(None, 100.0) is None
    assert report.ratio(300.0, None) is None
    assert report.ratio(300.0, 0.0) is None


def test_rate_table_ratios_and_missing_cells() -> None:
    rows = [
        _m("xor", "asgrad", 40000.0, 0),
        _m("xor", "torch", 10000.0, 0),
        _m("xor", "pytensor", 160000.0, 0),
        _m("cnn", "asgrad", 250.0, 0),
        _m("cnn", "torch", 200.0, 0),
        _m("cnn", "jax", None, 0, error="boom"),
    ]
    text = report.rate_table(report.summarize(rows), ["asgrad", "torch", "jax", "pytensor"])
    lines = text.splitlines()
    assert lines[0] == (
        "| workload | device | asgrad steps/s | PyTorch steps/s | JAX steps/s | PyTensor steps/s"
        " | asgrad / PyTorch | asgrad / JAX | asgrad / PyTensor |"
    )
    assert lines[2] == "| xor | cpu | 40,000 | 10,000 | n/a | 160,000 | 4.00x | - | 0.25x |"
    assert lines[3] == "| cnn | cpu | 250.0 | 200.0 | error | n/a | 1.25x | - | - |"
    assert len(lines) == 4


def test_rate_table_only_has_selected_frameworks() -> None:
    rows = [_m("xor", "asgrad", 3.0, 0), _m("xor", "jax", 6.0, 0)]
    text = report.rate_table(report.summarize(rows), ["asgrad", "jax"])
    assert "PyTorch" not in text
    assert "PyTensor" not in text
    assert text.splitlines()[2] == "| xor | cpu | 3 | 6 | 0.50x |"


def test_startup_table_lists_each_framework_and_gpu_column_only_on_gpu() -> None:
    rows = [
        _m("xor", "torch", 10.0, 0, peak_rss_mib=300.4, import_s=2.5),
        _m("xor", "asgrad", 20.0, 0, peak_rss_mib=150.0, import_s=0.25),
        _m("xor", "asgrad", 20.0, 1, peak_rss_mib=149.0, import_s=0.125),
    ]
    text = report.startup_table(report.summarize(rows), ["asgrad", "torch"])
    assert "peak GPU" not in text
    lines = text.splitlines()
    assert lines[2] == "| xor | cpu | asgrad | 0.25 | 1 | 2 | 150 | 0.5 |"
    assert lines[3] == "| xor | cpu | PyTorch | 2.5 | 1 | - | 300 | 0.5 |"
    gpu = {**_m("xor", "torch", 10.0, 0, peak_gpu_mib=12.0), "device": "gpu"}
    text = report.startup_table(report.summarize([gpu]), ["torch"])
    assert "peak GPU (MiB)" in text.splitlines()[0]
    assert text.splitlines()[2].endswith("| 12 | 0.5 |")


def test_notes_name_left_out_frameworks_and_failed_results() -> None:
    results = report.summarize([_m("cnn", "asgrad", None, 0, skipped="no Conv2d yet")])
    lines = report.notes(results, {"jax": "not importable (pip install jax)"})
    assert lines == [
        "- JAX: not importable (pip install jax)",
        "- asgrad, cnn on cpu: skipped: no Conv2d yet",
    ]


def test_blas_line() -> None:
    info = [
        {"user_api": "openmp", "internal_api": "openmp", "num_threads": 2},
        {
            "user_api": "blas",
            "internal_api": "openblas",
            "version": "0.3.31",
            "architecture": "Zen",
            "num_threads": 2,
            "filepath": "/x/numpy.libs/libscipy_openblas64_.so",
        },
    ]
    assert report.blas_line(info) == (
        "BLAS (numpy, threadpoolctl): openblas 0.3.31, core Zen, 2 threads"
        " (libscipy_openblas64_.so)"
    )
    assert "unknown" in report.blas_line(None)
    assert "no BLAS" in report.blas_line(info[:1])


# -- the orchestrator with stub workers -------------------------------------------------------
def test_orchestrate_with_stub_workers(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spawned: list[list[str]] = []
    caches: dict[str, list[int]] = {}

    def spawn(args: list[str], threads: int, timeout: float) -> dict[str, Any]:
        spawned.append(args)
        if args[0] == "--probe":
            what = args[1]
            if what == "blas":
                info = [{"user_api": "blas", "internal_api": "openblas", "version": "9.9"}]
                return {"ok": True, "numpy": "2.0", "info": info}
            return {"ok": what in ("asgrad", "torch", "pytensor"), "version": "1.0"}
        fw = args[1]
        cache = args[args.index("--cache-dir") + 1]
        assert os.path.isdir(cache)
        caches.setdefault(cache, []).append(len(os.listdir(cache)))
        Path(cache, f"entry{len(os.listdir(cache))}").write_text("x")
        rate = {"asgrad": 200.0, "torch": 100.0, "pytensor": 400.0}[fw]
        return {"steps_per_s": rate, "first_step_s": 0.1, "final_loss": 1.0, "peak_rss_mib": 50.0}

    monkeypatch.setattr(run, "_spawn", spawn)
    monkeypatch.setenv("OPENBLAS_CORETYPE", "Haswell")
    out = tmp_path / "out.json"
    argv = ["--device", "cpu", "--workloads", "xor,cnn", "--repeat", "1", "--json", str(out)]
    assert run.main(argv) == 0
    printed = capsys.readouterr().out
    assert "| xor | cpu | 200.0 | 100.0 | 400.0 | 2.00x | 0.50x |" in printed
    assert "| cnn | cpu | 200.0 | 100.0 | n/a | 2.00x | - |" in printed
    assert "- JAX: not importable (pip install jax)" in printed
    assert "this shell had OPENBLAS_CORETYPE=Haswell" in printed
    assert "openblas 9.9" in printed
    workers = [a for a in spawned if a[0] == "--worker"]
    # two workers (cold, warm) per framework and workload; PyTensor only on xor
    assert len(workers) == 2 * 2 + 2 * 2 + 2
    # each cache folder: empty for the cold worker, reused by the warm one
    assert sorted(caches.values()) == [[0, 1]] * 5
    data = json.loads(out.read_text())
    assert data["environment"]["blas"][0]["version"] == "9.9"
    assert data["environment"]["left_out"] == {"jax": "not importable (pip install jax)"}
    assert data["environment"]["unset_in_workers"]["OPENBLAS_CORETYPE"] == "Haswell"
    assert len(data["measurements"]) == 10
    assert {m["cache"] for m in data["measurements"]} == {"cold", "warm"}
    assert len(data["results"]) == 5


def test_orchestrate_on_the_gpu_reports_a_peer_without_cuda_as_skipped(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    workers: list[tuple[str, str]] = []

    def spawn(args: list[str], threads: int, timeout: float) -> dict[str, Any]:
        if args[0] == "--probe":
            return {"ok": True, "version": "1.0", "numpy": "2.0", "info": []}
        workers.append((args[1], args[3]))
        if args[1] == "torch":
            return {"skipped": "PyTorch has no CUDA here"}
        rate = {"asgrad": 500.0, "jax": 1000.0}[args[1]]
        gpu = 64.0 if args[1] == "jax" else None
        return {"steps_per_s": rate, "first_step_s": 2.0, "peak_gpu_mib": gpu}

    monkeypatch.setattr(run, "_spawn", spawn)
    assert run.main(["--device", "gpu", "--workloads", "mlp", "--repeat", "2"]) == 0
    printed = capsys.readouterr().out
    assert "| mlp | gpu | 500.0 | skipped | 1,000 | n/a | - | 0.50x | - |" in printed
    assert "- PyTorch, mlp on gpu: skipped: PyTorch has no CUDA here" in printed
    assert "peak GPU (MiB)" in printed
    assert "| mlp | gpu | JAX | - | 2 | 2 | - | 64 | - |" in printed
    # PyTensor never runs on the GPU; PyTorch is not retried after its skip
    assert sorted(workers) == sorted(
        [("asgrad", "gpu")] * 2 + [("jax", "gpu")] * 2 + [("torch", "gpu")]
    )


def test_unknown_framework_flag_exits_2(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(run, "_spawn", lambda *a: {"ok": True})
    assert run.main(["--device", "cpu", "--frameworks", "asgrad,mxnet"]) == 2
    assert "unknown frameworks: mxnet" in capsys.readouterr().out


# -- real workers --------------------------------------------------------------------------------
def _worker(fw: str, workload: str, cache: Path | None) -> dict[str, Any]:
    argv = [sys.executable, str(BENCH / "run.py"), "--worker", fw, workload, "cpu"]
    argv += ["--threads", "1"] + (["--cache-dir", str(cache)] if cache else [])
    env = run.worker_env(os.environ, 1)
    proc = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=600, check=True)
    row: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return row


worker = _load("bench_worker")


class _FakeClock:
    """perf_counter for bench_worker: each step advances it by the next step's seconds."""

    def __init__(self, step_seconds: list[float]) -> None:
        self.now = 0.0
        self.left = list(step_seconds)

    def perf_counter(self) -> float:
        return self.now

    def step(self) -> float:
        self.now += self.left.pop(0) if self.left else 0.01
        return self.now


def test_measure_times_blocks_until_a_second_and_keeps_the_median_block(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # build + first step + 2 warm-up steps, then blocks of 10 steps: the first block
    # slow (0.05 s a step, a cold start settling), the later ones 0.01 s a step.
    clock = _FakeClock([0.5, 0.01, 0.01] + [0.05] * 10)
    monkeypatch.setattr(worker.time, "perf_counter", clock.perf_counter)
    row = worker.measure(lambda: (clock.step, 10, lambda _loss: None))
    # 0.5 s for the slow block, then 0.1 s blocks until 1 s in all: 6 blocks
    assert row["timed_blocks"] == 6
    assert row["steps_per_s"] == pytest.approx(100.0)  # the median, not 60 / 1.0 s
    assert row["first_step_s"] == pytest.approx(0.5)
    assert row["final_loss"] == pytest.approx(0.5 + 0.02 + 0.5)  # after the first block


def test_measure_times_three_blocks_when_each_takes_over_a_second(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Blocks of 3.5, 2.5 and 3.0 s: three of them although the first passes a second,
    # and the median's rate, not the first's.
    clock = _FakeClock([1.0, 1.0, 1.0] + [0.35] * 10 + [0.25] * 10 + [0.3] * 10)
    monkeypatch.setattr(worker.time, "perf_counter", clock.perf_counter)
    row = worker.measure(lambda: (clock.step, 10, lambda _loss: None))
    assert row["timed_blocks"] == 3
    assert row["block_steps_per_s"] == pytest.approx([10 / 3.5, 10 / 2.5, 10 / 3.0])
    assert row["steps_per_s"] == pytest.approx(10 / 3.0)
    assert row["final_loss"] == pytest.approx(3.0 + 3.5)  # after the first block


def _check_row(row: dict[str, Any], fw: str) -> None:
    assert row["framework"] == fw
    assert row["steps_per_s"] > 0
    assert 0 < row["first_step_s"] < 600
    assert row["import_s"] > 0
    assert row["peak_rss_mib"] > 20  # an interpreter with numpy is more than 20 MiB
    assert row["final_loss"] == pytest.approx(row["final_loss"])  # a number, not NaN


# Over 30 s on 2 busy cores: the benchmark worker is a fresh process timing 1000+ steps.
def test_asgrad_worker_measures_a_real_step(tmp_path: Path) -> None:
    row = _worker("asgrad", "xor", tmp_path)
    _check_row(row, "asgrad")
    assert row["final_loss"] < 0.25  # 1000+ steps of SGD learn XOR


@pytest.mark.slow
def test_jax_worker_uses_its_compile_cache(tmp_path: Path) -> None:
    pytest.importorskip("jax")
    cold = _worker("jax", "xor", tmp_path)
    _check_row(cold, "jax")
    assert cold["backend"] == "cpu"
    assert any(tmp_path.iterdir()), "JAX wrote nothing to its persistent compilation cache"
    warm = _worker("jax", "xor", tmp_path)
    assert warm["final_loss"] == cold["final_loss"]


@pytest.mark.slow
def test_pytensor_worker_runs_its_c_backend() -> None:
    pytest.importorskip("pytensor")
    row = _worker("pytensor", "xor", None)  # PyTensor's own compiledir: warm after a first run
    _check_row(row, "pytensor")
    assert row["backend"] == "c (cvm)"
    assert row["final_loss"] < 0.25
