"""asgrad against PyTorch, side by side: the five workloads of WORKLOADS.md.

    python benchmarks/run.py [--workloads xor,mlp,cnn,transformer] [--device cpu|gpu|auto]
                             [--torch | --no-torch] [--threads 2] [--repeat 3]
    hatch run bench [...same options...]

Each measurement runs in a fresh worker process (so neither framework's thread
pools or caches disturb the other), with ``--threads`` threads for both: PyTorch's
``set_num_threads`` and OMP/OpenBLAS/MKL for numpy. Per workload the two frameworks
alternate, ``--repeat`` times each; a measurement is three untimed warm-up steps
then the workload's timed steps, and the best of the repeats is kept. One JSON line
per (workload, framework, device) as ../shared/bench/anchor_torch.py prints them,
then a table with the ratio asgrad / PyTorch in steps per second.

``--device auto`` (the default) runs on the CPU, and also on the GPU when asgrad
finds a hardware adapter (PyTorch then runs on CUDA where it has it).
``transformer_large`` is left out of the default list on the CPU (PyTorch takes
about a second a step there with 16 threads); name it to run it.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
ALL_WORKLOADS = ("xor", "mlp", "cnn", "transformer", "transformer_large")
DEFAULT_WORKLOADS = ("xor", "mlp", "cnn", "transformer")
THREAD_VARS = (
    "OMP_NUM_THREADS",
    "OPENBLAS_NUM_THREADS",
    "MKL_NUM_THREADS",
    "VECLIB_MAXIMUM_THREADS",
    "NUMEXPR_NUM_THREADS",
)
WARMUP = 3
Row = dict[str, Any]


# -- worker: one measurement in this process ----------------------------------------------
def _import_path() -> None:
    """Make the workspace's packages importable when they are not installed."""
    try:
        import asgrad.tensor  # noqa: F401  # probe only
    except ImportError:
        for src in [*sorted(ROOT.glob("packages/*/src")), ROOT / "examples" / "src"]:
            sys.path.insert(0, str(src))
    sys.path.insert(0, str(HERE))


def _time(step: Any, steps: int, sync: Any) -> tuple[float, Any]:
    for _ in range(WARMUP):
        step()
    sync()
    start = time.perf_counter()
    loss = None
    for _ in range(steps):
        loss = step()
    sync()
    return steps / (time.perf_counter() - start), loss


def worker(framework: str, workload: str, device: str, threads: int) -> Row:
    """Measure ``workload`` once; returns the JSON row (or a row with ``skipped``)."""
    for var in THREAD_VARS:
        os.environ[var] = str(threads)
    _import_path()
    row: Row = {"workload": workload, "framework": framework, "device": device}
    if framework == "asgrad":
        import asgrad_workloads

        try:
            w = asgrad_workloads.build(workload, device)
        except asgrad_workloads.UnavailableError as exc:
            return {**row, "skipped": str(exc)}
        rate, loss = _time(w.step, w.steps, w.sync)
    else:
        import torch_workloads

        torch_device = "cuda" if device == "gpu" else "cpu"
        step, steps, sync = torch_workloads.build(workload, torch_device, threads)
        rate, loss = _time(step, steps, sync)
        loss = loss.detach().cpu()
    return {**row, "steps_per_s": rate, "final_loss": float(loss)}


# -- orchestrator -------------------------------------------------------------------------------
def _spawn(args: list[str], threads: int, timeout: float) -> Row | None:
    env = {**os.environ, **{v: str(threads) for v in THREAD_VARS}}
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


def _probe(what: str, threads: int) -> bool:
    row = _spawn(["--probe", what], threads, 300)
    return bool(row and row.get("ok"))


def probe(what: str) -> Row:
    _import_path()
    if what == "torch":
        import torch_workloads

        return {"ok": torch_workloads.load_torch() is not None}
    if what == "cuda":
        import torch_workloads

        torch = torch_workloads.load_torch()
        return {"ok": bool(torch is not None and torch.cuda.is_available())}
    import warnings

    from asgrad.tensor import resolve_backend_name

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            ok = resolve_backend_name("auto") == "gpu"
        except Exception:
            ok = False
    if ok and what == "gpu-hardware":
        try:
            from asgrad.gpu import get_device

            caps = get_device().capabilities
            ok = caps.adapter_type.lower() != "cpu" and "llvmpipe" not in caps.adapter.lower()
        except Exception:
            ok = False
    return {"ok": ok}


def _fmt(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:,.1f}" if value < 1000 else f"{value:,.0f}"


def table(
    results: dict[tuple[str, str, str], Row], workloads: Sequence[str], devices: Sequence[str]
) -> str:
    head = (
        f"{'workload':<18} {'device':<6} {'asgrad steps/s':>15} {'torch steps/s':>14}"
        f" {'ratio':>7}  {'asgrad loss':>11} {'torch loss':>11}"
    )
    lines = [head, "-" * len(head)]
    for device in devices:
        for w in workloads:
            a = results.get((w, "asgrad", device), {})
            t = results.get((w, "torch", device), {})
            ra, rt = a.get("steps_per_s"), t.get("steps_per_s")
            ratio = f"{ra / rt:.2f}x" if ra and rt else "-"
            la = a.get("final_loss")
            lt = t.get("final_loss")
            line = (
                f"{w:<18} {device:<6} {_fmt(ra):>15} {_fmt(rt):>14} {ratio:>7}"
                f"  {'-' if la is None else f'{la:.4g}':>11}"
                f" {'-' if lt is None else f'{lt:.4g}':>11}"
            )
            notes = [
                f"{fw}: {r.get('skipped') or r.get('error')}"
                for fw, r in (("asgrad", a), ("torch", t))
                if r.get("skipped") or r.get("error")
            ]
            lines.append(line + ("   " + "; ".join(notes) if notes else ""))
    return "\n".join(lines)


def orchestrate(args: argparse.Namespace) -> int:
    workloads = [w.strip() for w in args.workloads.split(",") if w.strip()]
    unknown = [w for w in workloads if w not in ALL_WORKLOADS]
    if unknown:
        print(
            f"unknown workloads: {', '.join(unknown)}; choose from {', '.join(ALL_WORKLOADS)}",
            file=sys.stderr,
        )
        return 2
    devices = ["cpu"] if args.device in ("cpu", "auto") else []
    if args.device == "gpu" or (args.device == "auto" and _probe("gpu-hardware", args.threads)):
        devices.append("gpu")
    if args.device == "gpu" and not _probe("gpu", args.threads):
        print(
            "asgrad finds no GPU adapter (resolve_backend_name('auto') is 'cpu')", file=sys.stderr
        )
        return 2
    with_torch = args.torch and _probe("torch", args.threads)
    torch_cuda = with_torch and "gpu" in devices and _probe("cuda", args.threads)
    if args.torch and not with_torch:
        print("PyTorch is not importable: asgrad only (pip install torch==2.13.0)", file=sys.stderr)
    print(
        f"# {len(workloads)} workloads on {', '.join(devices)}, {args.threads} threads,"
        f" best of {args.repeat}",
        file=sys.stderr,
    )
    results: dict[tuple[str, str, str], Row] = {}
    for device in devices:
        for w in workloads:
            frameworks = ["asgrad"]
            if with_torch and (device == "cpu" or torch_cuda):
                frameworks.append("torch")
            for r in range(args.repeat):
                order = frameworks if r % 2 == 0 else frameworks[::-1]
                for fw in order:
                    key = (w, fw, device)
                    best = results.get(key)
                    if best is not None and ("skipped" in best or "error" in best):
                        continue
                    row = _spawn(
                        ["--worker", fw, w, device, "--threads", str(args.threads)],
                        args.threads,
                        args.timeout,
                    ) or {"error": "no result"}
                    row = {"workload": w, "framework": fw, "device": device, **row}
                    print(f"#   {json.dumps(row)}", file=sys.stderr)
                    if best is None or row.get("steps_per_s", 0) > best.get("steps_per_s", 0):
                        results[key] = row
            for fw in frameworks:
                row = results[(w, fw, device)]
                if "steps_per_s" in row:
                    print(
                        json.dumps(
                            {
                                k: row[k]
                                for k in (
                                    "workload",
                                    "framework",
                                    "device",
                                    "steps_per_s",
                                    "final_loss",
                                )
                            }
                        ),
                        flush=True,
                    )
    print()
    print(table(results, workloads, devices))
    if args.json:
        Path(args.json).write_text(json.dumps(list(results.values()), indent=1) + "\n")
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
        help="alternating measurements per framework; the best is kept",
    )
    p.add_argument("--timeout", type=float, default=1800, help="seconds per measurement")
    p.add_argument("--json", help="also write every result to this file")
    p.add_argument(
        "--worker", nargs=3, metavar=("FRAMEWORK", "WORKLOAD", "DEVICE"), help=argparse.SUPPRESS
    )
    p.add_argument("--probe", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.probe:
        print(json.dumps(probe(args.probe)))
        return 0
    if args.worker:
        framework, workload, device = args.worker
        print(json.dumps(worker(framework, workload, device, args.threads)), flush=True)
        return 0
    return orchestrate(args)


if __name__ == "__main__":
    sys.exit(main())
