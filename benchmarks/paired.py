"""asgrad against PyTorch on one workload, their timed blocks taking turns.

    python benchmarks/paired.py transformer_large [--threads 16] [--rounds 6]
                                [--steps N] [--device cpu] [--json out.json]

`run.py` measures each framework in worker processes that run one after the other: on
a host whose speed drifts (the 16-core device host's blocks of one worker spread by a
fifth), the ratio of two workers' rates carries that drift. Here one worker process per
framework builds its step as `run.py`'s workers do (`bench_worker`, the same thread
settings) and warms it up (its first step and two more); then each round times one
block of each, the order switching every round, so that neighbouring blocks see the
same host. A worker waits on its pipe while the other runs, and each block starts
``--gap`` seconds (1 by default) after the previous one ends: threads that spin for a
while after their work (OpenMP's, OpenBLAS's) have mostly gone to sleep by then (on the
2-core machine PyTorch's small transformer ran at 36-38 steps/s in a block right after
asgrad's without the gap and 43 after its own worker's wait; with it, 38.5-39 against
40.8-42.4): the order switching every round spreads what is left over both. Each round gives a
ratio (asgrad's block rate over PyTorch's in the same round); the summary gives their
median, the smallest and largest, and the ratio of the two frameworks' median rates.

Both in one process would not do: on the 2-core machine PyTorch's small transformer
ran at 26-31 steps/s in a process where asgrad's step had run, against 42-43 alone
(2026-12-03; both frameworks' OpenMP thread pools in one process).

``--steps`` sets the steps of a block (the workload's own count by default, as
`run.py` times). Prints one line per round and a JSON summary line.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from run import worker_env  # noqa: E402  # the environment run.py gives its workers


def serve(framework: str, workload: str, device: str, threads: int) -> int:
    """A worker: build and warm up ``framework``'s step, say ``ready``, then answer each
    ``block N`` line on stdin with the rate of N timed steps, until ``quit``; or say
    ``unavailable`` and why (PyTorch not installed, a workload asgrad lacks)."""
    import bench_worker

    bench_worker.import_path()
    start = time.perf_counter()
    try:
        if framework == "asgrad":
            _, build = bench_worker._asgrad(workload, device)
        else:
            _, build = bench_worker._torch(workload, device, threads)
        step, steps, sync = build()
    except bench_worker.UnavailableError as exc:
        print(f"unavailable {exc}", flush=True)
        return 2
    for _ in range(bench_worker.WARMUP):
        sync(step())
    print(f"ready {steps} {time.perf_counter() - start:.3f}", flush=True)
    for line in sys.stdin:
        words = line.split()
        if not words or words[0] == "quit":
            break
        n = int(words[1]) or steps
        seconds, _ = bench_worker.timed_block(step, sync, n)
        print(f"{n / seconds!r}", flush=True)
    return 0


def summary(rounds: Sequence[tuple[float, float]]) -> dict[str, Any]:
    """The figures of the rounds' ``(asgrad, torch)`` block rates.

    >>> summary([(2.0, 1.0), (1.0, 1.0), (3.0, 2.0)])["median_ratio"]
    1.5
    """
    ratios = [a / t for a, t in rounds]
    asgrad, torch = [a for a, _ in rounds], [t for _, t in rounds]
    return {
        "rounds": len(rounds),
        "asgrad_steps_per_s": statistics.median(asgrad),
        "torch_steps_per_s": statistics.median(torch),
        "ratio_of_medians": statistics.median(asgrad) / statistics.median(torch),
        "median_ratio": statistics.median(ratios),
        "min_ratio": min(ratios),
        "max_ratio": max(ratios),
        "ratios": ratios,
    }


def _spawn(framework: str, args: argparse.Namespace) -> subprocess.Popen[str]:
    argv = [sys.executable, __file__, "--serve", framework, args.workload]
    argv += ["--device", args.device, "--threads", str(args.threads)]
    env = worker_env(os.environ, args.threads)
    return subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)


def _ask(worker: subprocess.Popen[str], line: str | None = None) -> str:
    assert worker.stdin is not None
    assert worker.stdout is not None
    if line is not None:
        worker.stdin.write(line + "\n")
        worker.stdin.flush()
    answer = worker.stdout.readline()
    if not answer:
        raise RuntimeError(f"a worker stopped (exit {worker.wait()})")
    return answer.strip()


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument("workload")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--rounds", type=int, default=6)
    p.add_argument("--steps", type=int, default=0, help="steps a block (0: the workload's)")
    p.add_argument("--device", default="cpu", choices=["cpu", "gpu"])
    p.add_argument("--gap", type=float, default=1.0, help="seconds idle before each block")
    p.add_argument("--json", default=None, help="also write the summary to this file")
    p.add_argument("--serve", default=None, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.serve:
        return serve(args.serve, args.workload, args.device, args.threads)
    workers = {}
    try:
        for name in ("asgrad", "torch"):  # one at a time: a build is timed alone
            workers[name] = _spawn(name, args)
            word, *said = _ask(workers[name]).split(" ", 1)
            if word != "ready":
                raise SystemExit(f"paired.py: {name} cannot run {args.workload} here: {said[0]}")
            steps, seconds = said[0].split()
            print(
                f"# {name}: {steps} steps a block; built and warmed up in {seconds} s", flush=True
            )
        rounds: list[tuple[float, float]] = []
        for r in range(args.rounds):
            order = ("asgrad", "torch") if r % 2 == 0 else ("torch", "asgrad")
            rate = {}
            for name in order:
                time.sleep(args.gap)  # the other worker's threads stop waiting for work
                rate[name] = float(_ask(workers[name], f"block {args.steps}"))
            rounds.append((rate["asgrad"], rate["torch"]))
            print(
                f"round {r + 1}: asgrad {rate['asgrad']:.3f}, PyTorch {rate['torch']:.3f}"
                f" steps/s ({order[0]} first): {rate['asgrad'] / rate['torch']:.3f}x",
                flush=True,
            )
    finally:
        for worker in workers.values():
            if worker.poll() is None:
                with contextlib.suppress(OSError):
                    _ask_quit(worker)
                worker.wait()
    result = {"workload": args.workload, "device": args.device, "threads": args.threads}
    result.update(summary(rounds))
    line = json.dumps(result)
    print(line)
    if args.json:
        Path(args.json).write_text(line + "\n")
    return 0


def _ask_quit(worker: subprocess.Popen[str]) -> None:
    assert worker.stdin is not None
    worker.stdin.write("quit\n")
    worker.stdin.close()


if __name__ == "__main__":
    sys.exit(main())
