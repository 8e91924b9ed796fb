"""asgrad against PyTorch, JAX and PyTensor, side by side: the workloads of WORKLOADS.md.

    python benchmarks/run.py [--workloads xor,mlp,cnn,transformer] [--device cpu|gpu|auto]
                             [--frameworks asgrad,torch,jax,pytensor] [--torch | --no-torch]
                             [--threads 2] [--repeat 3] [--no-warm] [--json out.json]
    hatch run bench [...same options...]        # the frameworks the dev env has
    hatch run bench:bench [...same options...]  # an env with JAX and PyTensor too

The peers are optional and never dependencies of asgrad: PyTorch eager
(``pip install torch==2.13.0``), JAX with the whole step under ``jax.jit``
(``pip install jax``; ``"jax[cuda12]"`` for ``--device gpu``) and PyTensor's C backend
(``pip install pytensor`` and a C++ compiler; xor and mlp on the CPU only).
``--frameworks`` (default: all four) picks them; one that does not import is reported
as skipped, not an error. ``--no-torch`` leaves PyTorch out.

Each measurement runs in a fresh worker process (so no framework's thread pools,
caches or allocator disturb another), with ``--threads`` threads for all: PyTorch's
``set_num_threads``, OMP/OpenBLAS/MKL/Numba for numpy, asgrad and PyTensor, and JAX's
CPU affinity. Per workload the frameworks take turns, ``max(--repeat, 2)`` workers
each (``--no-warm``: ``--repeat`` workers, so ``--repeat 1`` is one cold worker). The
first worker of each framework starts with an empty compile cache folder (*cold*:
``ASGRAD_CACHE_DIR``, JAX's persistent compilation cache, PyTensor's
``base_compiledir``); the later ones reuse it (*warm*). A worker times the first step
(from the start of building the model to the end of the first step: graph, gradients,
compile, one step), then two untimed steps and blocks of the workload's timed steps
(until they have taken a second, three at least: the median block's rate), and reports its peak
memory. The table keeps the best steps/s, the cold and the best warm time to first
step and the largest peak memory of each (see bench_worker.py for what
is measured exactly). One JSON line per result on stdout, then two markdown tables
and notes; ``--json`` writes the environment, the results and every measurement.

This machine's environment may set ``OPENBLAS_CORETYPE``/``OPENBLAS_L2_SIZE`` (a
workaround for old OpenBLAS builds that slows a current numpy): the workers' environment
unsets both, only here (never in tests or CI), and the run says so. Which BLAS numpy
loads in that environment (threadpoolctl) is printed above the tables.

``--device auto`` (the default) runs on the CPU, and also on the GPU when asgrad
finds a hardware adapter (PyTorch then runs on CUDA and JAX on its GPU backend where
they have them). ``transformer_large`` is left out of the default list on the CPU
(PyTorch takes about a second a step there with 16 threads); name it to run it.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

import bench_report as report  # noqa: E402  # this folder, after the path is set
import bench_worker  # noqa: E402

ALL_WORKLOADS = ("xor", "mlp", "cnn", "transformer", "transformer_large")
DEFAULT_WORKLOADS = ("xor", "mlp", "cnn", "transformer")
THREAD_VARS = (
    "OMP_NUM_THREADS",
    "OPENBLAS_NUM_THREADS",
    "MKL_NUM_THREADS",
    "VECLIB_MAXIMUM_THREADS",
    "NUMEXPR_NUM_THREADS",
    "NUMBA_NUM_THREADS",
)
UNSET_VARS = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")
Row = dict[str, Any]


def worker_env(base: Mapping[str, str], threads: int) -> dict[str, str]:
    """A worker's environment: ``base`` with the thread counts set, OpenBLAS overrides unset."""
    env = {k: v for k, v in base.items() if k not in UNSET_VARS}
    env.update({v: str(threads) for v in THREAD_VARS})
    return env


def rotate(frameworks: Sequence[str], turn: int) -> list[str]:
    """The order of the frameworks in turn ``turn``: each goes first in its turn."""
    if not frameworks:
        return []
    k = turn % len(frameworks)
    return [*frameworks[k:], *frameworks[:k]]


def workers_per_framework(repeat: int, warm: bool = True) -> int:
    """``repeat``, and at least two with ``warm``: the first is cold, the others warm."""
    return max(repeat, 2 if warm else 1)


def _spawn(args: list[str], threads: int, timeout: float) -> Row:
    env = worker_env(os.environ, threads)
    try:
        proc = subprocess.run(
            [sys.executable, str(Path(__file__).resolve()), *args],
            env=env, capture_output=True, text=True, timeout=timeout, check=False,
        )  # fmt: skip
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout:.0f} s"}
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if proc.returncode != 0 or not lines:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
        return {"error": " | ".join(tail) or f"exit {proc.returncode}"}
    row: Row = json.loads(lines[-1])
    return row


def _probe(what: str, threads: int) -> Row:
    return _spawn(["--probe", what], threads, 300)


def _machine() -> str:
    model = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return f"{model}, {cpus} CPUs, {platform.system()} {platform.release()}"


def _devices(args: argparse.Namespace) -> list[str] | None:
    devices = ["cpu"] if args.device in ("cpu", "auto") else []
    gpu = args.device == "gpu"
    if args.device == "auto" and _probe("gpu-hardware", args.threads).get("ok"):
        gpu = True
    if gpu:
        if not _probe("gpu", args.threads).get("ok"):
            print("asgrad finds no GPU adapter (resolve_backend_name('auto') is 'cpu')")
            return None
        devices.append("gpu")
    return devices


def _header(args: argparse.Namespace, env: Row, devices: Sequence[str], n: int) -> list[str]:
    was = [f"{v}={os.environ[v]}" for v in UNSET_VARS if v in os.environ]
    versions = ", ".join(
        f"{report.LABELS[f]} {env['versions'].get(f, '?')}" for f in env["frameworks"]
    )
    return [
        f"Run {env['date']}: {env['machine']}; Python {platform.python_version()},"
        f" numpy {env['numpy']}; {versions}.",
        f"Devices: {', '.join(devices)}; {args.threads} threads; {n} workers per framework"
        " and workload (the first cold, the others warm; best steps/s kept).",
        f"{' and '.join(UNSET_VARS)} are unset in the workers' environments"
        f" ({'this shell had ' + ', '.join(was) if was else 'neither is set in this shell'}).",
        report.blas_line(env["blas"]),
    ]


def orchestrate(args: argparse.Namespace) -> int:
    workloads = report._split(args.workloads)
    unknown = [w for w in workloads if w not in ALL_WORKLOADS]
    if unknown:
        print(f"unknown workloads: {', '.join(unknown)}; choose from {', '.join(ALL_WORKLOADS)}")
        return 2
    versions: dict[str, str] = {}

    def importable(framework: str) -> bool:
        answer = _probe(framework, args.threads)
        if answer.get("ok"):
            versions[framework] = str(answer.get("version", "?"))
        return bool(answer.get("ok"))

    try:
        frameworks, skipped = report.select_frameworks(args.frameworks, args.torch, importable)
    except report.SelectionError as exc:
        print(exc)
        return 2
    devices = _devices(args)
    if devices is None:
        return 2
    blas = _probe("blas", args.threads)
    n = workers_per_framework(args.repeat, args.warm)
    env: Row = {
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "machine": _machine(),
        "python": platform.python_version(),
        "numpy": blas.get("numpy", "?"),
        "threads": args.threads,
        "devices": devices,
        "workers_per_framework": n,
        "frameworks": frameworks,
        "versions": versions,
        "left_out": skipped,
        "unset_in_workers": {v: os.environ.get(v) for v in UNSET_VARS},
        "blas": blas.get("info"),
    }
    header = _header(args, env, devices, n)
    for line in header:
        print(f"# {line}", file=sys.stderr, flush=True)
    measurements: list[Row] = []
    root = tempfile.mkdtemp(prefix="asgrad-bench-")
    try:
        for device in devices:
            for w in workloads:
                # a peer without a GPU backend is reported by its worker as skipped
                runs = [f for f in frameworks if report.not_applicable(f, w, device) is None]
                failed: set[str] = set()
                for r in range(n):
                    for fw in rotate(runs, r):
                        if fw in failed:
                            continue
                        cache = os.path.join(root, f"{fw}-{w}-{device}")
                        os.makedirs(cache, exist_ok=True)
                        argv = ["--worker", fw, w, device, "--threads", str(args.threads)]
                        row = _spawn([*argv, "--cache-dir", cache], args.threads, args.timeout)
                        row = {"workload": w, "framework": fw, "device": device, **row}
                        row["repeat"] = r
                        row["cache"] = "cold" if r == 0 else "warm"
                        print(f"#   {json.dumps(row)}", file=sys.stderr, flush=True)
                        measurements.append(row)
                        if "steps_per_s" not in row:
                            failed.add(fw)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    results = report.summarize(measurements)
    for result in results:
        if "steps_per_s" in result:
            keys = ("workload", "framework", "device", "steps_per_s", "final_loss")
            print(json.dumps({k: result[k] for k in keys}), flush=True)
    print()
    print("\n".join(header))
    print()
    print(report.rate_table(results, frameworks))
    print()
    print(report.startup_table(results, frameworks))
    lines = report.notes(results, skipped)
    if lines:
        print()
        print("\n".join(lines))
    if args.json:
        out = {"environment": env, "results": results, "measurements": measurements}
        Path(args.json).write_text(json.dumps(out, indent=1) + "\n")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument(
        "--workloads",
        default=",".join(DEFAULT_WORKLOADS),
        help=f"comma-separated, from {','.join(ALL_WORKLOADS)}",
    )
    p.add_argument("--device", choices=("cpu", "gpu", "auto"), default="auto")
    p.add_argument(
        "--frameworks",
        help=f"comma-separated, from {','.join(report.FRAMEWORKS)} (default: all that import)",
    )
    p.add_argument(
        "--torch",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="run PyTorch side by side where it is importable",
    )
    p.add_argument("--threads", type=int, default=2)
    p.add_argument(
        "--repeat",
        type=int,
        default=3,
        help="workers per framework and workload (at least 2 unless --no-warm; the first is cold)",
    )
    p.add_argument(
        "--warm",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="run at least two workers, so a warm time to first step is measured",
    )
    p.add_argument("--timeout", type=float, default=1800, help="seconds per measurement")
    p.add_argument("--json", help="also write the environment and every result to this file")
    p.add_argument(
        "--worker", nargs=3, metavar=("FRAMEWORK", "WORKLOAD", "DEVICE"), help=argparse.SUPPRESS
    )
    p.add_argument("--cache-dir", help=argparse.SUPPRESS)
    p.add_argument("--probe", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.probe:
        print(json.dumps(bench_worker.probe(args.probe)))
        return 0
    if args.worker:
        framework, workload, device = args.worker
        row = bench_worker.worker(framework, workload, device, args.threads, args.cache_dir)
        print(json.dumps(row), flush=True)
        return 0
    return orchestrate(args)


if __name__ == "__main__":
    sys.exit(main())
