"""What runs inside one worker process of benchmarks/run.py: a measurement or a probe.

A measurement of one (framework, workload, device) returns a row:

* ``import_s``: importing the framework (and the workload module);
* ``first_step_s``: time to first step, from the start of building the model to the end
  of the first training step (build, gradients, compile, one step, its loss ready);
* ``steps_per_s``: after two more untimed steps, blocks of the workload's timed steps,
  each ended by a sync (asgrad: reading the loss; PyTorch: ``torch.cuda.synchronize`` on
  CUDA; JAX: ``block_until_ready``; PyTensor returns host values), until the blocks
  have taken ``MIN_TIMED_S`` together (at least ``MIN_BLOCKS``, at most ``MAX_BLOCKS``):
  the median of the blocks' rates. A block of a fast GPU workload lasts 20-100 ms, short
  enough for one pause (the host, the GPU's clocks settling after a cold worker's first
  step) to halve a single block's rate; the median is the rate the step keeps. A block
  of a slow workload (transformer_large on the CPU: about 9 s) is long enough on its
  own, but one block's rate moved by a tenth between workers on a shared host: three
  of them give a median.
  ``timed_blocks`` says how many blocks were timed and ``block_steps_per_s`` gives
  each one's rate, in order (a worker slow in every block and one slow only at first
  read differently);
* ``final_loss``: the loss after the first timed block (the same number of steps for
  every framework, whatever its speed);
* ``peak_rss_mib``: ``resource.getrusage(RUSAGE_SELF).ru_maxrss`` at the end: the peak
  resident memory of the whole worker process (interpreter, imports, model, compiler;
  not the compiler subprocesses PyTensor starts);
* ``peak_gpu_mib`` on the GPU: ``torch.cuda.max_memory_allocated`` (PyTorch's caching
  allocator: tensors, not the allocator's reserve nor the CUDA context) and JAX's
  ``peak_bytes_in_use``; asgrad's step plan: the bytes its GPU plan takes from the
  device pool (known when the plan is built) plus the variables, optimizer state and
  feeds (``program.memory()``), as ``benchmarks/memory_budget.py`` measures it.

``cache_dir`` (an empty folder for the cold worker, the same folder for the warm ones)
is where each framework keeps compiled code across processes: ``ASGRAD_CACHE_DIR``,
JAX's persistent compilation cache, PyTensor's ``base_compiledir``. PyTorch eager
compiles nothing, so its warm workers are just later processes.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import resource
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
WARMUP = 3
MIN_TIMED_S = 1.0  # timed blocks continue until they have taken this long together
MIN_BLOCKS = 3
MAX_BLOCKS = 50
Row = dict[str, Any]
Built = tuple[Callable[[], Any], int, Callable[[Any], None]]


class UnavailableError(Exception):
    """The framework cannot run this measurement here (the row says ``skipped``)."""


def import_path() -> None:
    """Make the workspace's packages and this folder importable when not installed."""
    try:
        import asgrad.tensor  # noqa: F401  # probe only
    except ImportError:
        for src in [*sorted(ROOT.glob("packages/*/src")), ROOT / "examples" / "src"]:
            sys.path.insert(0, str(src))
    if str(HERE) not in sys.path:
        sys.path.insert(0, str(HERE))


def measure(build: Callable[[], Built]) -> Row:
    """Build, time the first step, warm up, then time blocks of the workload's steps."""
    start = time.perf_counter()
    step, steps, sync = build()
    loss = step()
    sync(loss)
    first = time.perf_counter() - start
    for _ in range(WARMUP - 1):
        loss = step()
    sync(loss)
    rates: list[float] = []
    final_loss: Any = None
    timed = 0.0
    while len(rates) < MIN_BLOCKS or (timed < MIN_TIMED_S and len(rates) < MAX_BLOCKS):
        seconds, loss = timed_block(step, sync, steps)
        timed += seconds
        rates.append(steps / seconds)
        if final_loss is None:
            final_loss = _float(loss)
    return {
        "first_step_s": first,
        "steps_per_s": statistics.median(rates),
        "timed_blocks": len(rates),
        "block_steps_per_s": rates,
        "final_loss": final_loss,
    }


def timed_block(
    step: Callable[[], Any], sync: Callable[[Any], None], steps: int
) -> tuple[float, Any]:
    """One timed block: ``steps`` steps ended by the sync; its seconds and last loss."""
    start = time.perf_counter()
    loss = None
    for _ in range(steps):
        loss = step()
    sync(loss)
    return time.perf_counter() - start, loss


def _float(loss: Any) -> float:
    if hasattr(loss, "detach"):  # a torch tensor
        loss = loss.detach().cpu()
    return float(loss)


def peak_rss_mib() -> float:
    """This process's peak resident memory in MiB (Linux reports ru_maxrss in KiB)."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / (2**20 if sys.platform == "darwin" else 2**10)


def _asgrad(workload: str, device: str) -> tuple[Row, Callable[[], Built]]:
    # Where Numba is installed, the compiled CPU path from the first step (unless the
    # caller chose): the timed steps measure it, not the numpy tier that the tiered
    # default runs for its first 1,000 steps; the first step then includes Numba's
    # compile, as before the tiers.
    if importlib.util.find_spec("numba") is not None:
        os.environ.setdefault("ASGRAD_CPU_JIT", "1")
    # asgrad before numpy (which the workloads module imports), as a program importing
    # asgrad first runs: it sets OpenBLAS's polling time before numpy loads OpenBLAS
    # (asgrad.tensor._openblas).
    import asgrad.tensor  # noqa: F401
    import asgrad_workloads
    from asgrad.tensor import __version__

    info: Row = {"version": __version__}
    if device == "cpu":
        try:
            from asgrad.tensor.cpu import jit

            info["backend"] = "cpu, compiled" if jit.enabled() else "cpu, numpy"
        except ImportError:
            info["backend"] = "cpu, numpy"

    def build() -> Built:
        try:
            w = asgrad_workloads.build(workload, device)
        except asgrad_workloads.UnavailableError as exc:
            raise UnavailableError(str(exc)) from exc
        _BUILT["asgrad"] = w
        return w.step, w.steps, _read

    return info, build


_BUILT: dict[str, Any] = {}  # the workload a worker measured, for its memory figure


def _asgrad_gpu_bytes(w: Any) -> int:
    """The device bytes of asgrad's step: its plan's buffers besides the variables,
    plus the variables, state and feeds the program holds."""
    plan = w.program.memory()
    held = plan.parameters + plan.state + plan.inputs
    return int(held + w.program.executable.transient_bytes(w.feeds))


def _read(loss: Any) -> None:
    """asgrad's sync: reading the loss (a device value on the GPU is read back here)."""
    _float(loss)


def _torch(workload: str, device: str, threads: int) -> tuple[Row, Callable[[], Built]]:
    import torch_workloads

    torch = torch_workloads.load_torch()
    if torch is None:
        raise UnavailableError("PyTorch is not importable")
    cuda = device == "gpu"
    if cuda and not torch.cuda.is_available():
        raise UnavailableError("PyTorch has no CUDA here")
    info: Row = {"version": torch.__version__, "backend": "cuda" if cuda else "cpu"}

    def build() -> Built:
        step, steps, sync = torch_workloads.build(workload, "cuda" if cuda else "cpu", threads)
        return step, steps, lambda _loss: sync()

    return info, build


def _jax(
    workload: str, device: str, threads: int, cache_dir: str | None
) -> tuple[Row, Callable[[], Built]]:
    if device == "cpu":
        os.environ["JAX_PLATFORMS"] = "cpu"
        # XLA's CPU thread pool takes every CPU this process may run on: pin to --threads.
        cpus = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
        if 0 < threads < len(cpus):
            os.sched_setaffinity(0, cpus[:threads])
    import jax_workloads

    jax = jax_workloads.load_jax()
    if jax is None:
        raise UnavailableError("JAX is not importable")
    backend = jax.default_backend()
    if device == "gpu" and backend != "gpu":
        raise UnavailableError(
            f'JAX has no GPU backend here ({backend} only; pip install "jax[cuda12]")'
        )
    info: Row = {"version": jax.__version__, "backend": backend}
    return info, lambda: jax_workloads.build(workload, cache_dir)


def _pytensor(workload: str, cache_dir: str | None) -> tuple[Row, Callable[[], Built]]:
    import pytensor_workloads

    pytensor = pytensor_workloads.load_pytensor(cache_dir)
    if pytensor is None:
        raise UnavailableError("PyTensor is not importable")
    blas = pytensor.config.blas__ldflags or "numpy C-API (no BLAS linked)"
    info: Row = {"version": pytensor.__version__, "backend": "c (cvm)", "blas": blas}

    def build() -> Built:
        step, steps = pytensor_workloads.build(workload, cache_dir)
        return step, steps, lambda _loss: None

    return info, build


def _peak_gpu_mib(framework: str) -> float | None:
    if framework == "asgrad" and "asgrad" in _BUILT:
        return _asgrad_gpu_bytes(_BUILT["asgrad"]) / 2**20
    if framework == "torch":
        torch = sys.modules["torch"]
        return float(torch.cuda.max_memory_allocated()) / 2**20
    if framework == "jax":
        stats = sys.modules["jax"].devices()[0].memory_stats() or {}
        peak = stats.get("peak_bytes_in_use")
        return None if peak is None else float(peak) / 2**20
    return None


def worker(
    framework: str, workload: str, device: str, threads: int, cache_dir: str | None = None
) -> Row:
    """Measure ``workload`` once; returns the row (or one with ``skipped``)."""
    row: Row = {"workload": workload, "framework": framework, "device": device}
    if cache_dir and framework == "asgrad":
        os.environ["ASGRAD_CACHE_DIR"] = cache_dir
    import_path()
    start = time.perf_counter()
    try:
        if framework == "asgrad":
            info, build = _asgrad(workload, device)
        elif framework == "torch":
            info, build = _torch(workload, device, threads)
        elif framework == "jax":
            info, build = _jax(workload, device, threads, cache_dir)
        elif framework == "pytensor":
            if device != "cpu":
                raise UnavailableError("PyTensor runs on the CPU only")
            info, build = _pytensor(workload, cache_dir)
        else:
            raise ValueError(f"unknown framework {framework!r}")
        row.update(info, import_s=time.perf_counter() - start)
        row.update(measure(build))
    except UnavailableError as exc:
        return {**row, "skipped": str(exc)}
    row["peak_rss_mib"] = peak_rss_mib()
    if device == "gpu":
        row["peak_gpu_mib"] = _peak_gpu_mib(framework)
    return row


def probe(what: str) -> Row:
    """Answers the orchestrator's questions about this machine, in a fresh process."""
    if what == "blas":  # numpy alone, so that only the BLAS numpy loads is listed
        import numpy as np

        try:
            threadpoolctl = importlib.import_module("threadpoolctl")
        except ImportError:
            return {"ok": False, "numpy": np.__version__}
        return {"ok": True, "numpy": np.__version__, "info": threadpoolctl.threadpool_info()}
    import_path()
    if what in ("torch", "jax", "pytensor"):
        try:
            module = importlib.import_module(what)
        except ImportError:
            return {"ok": False}
        return {"ok": True, "version": getattr(module, "__version__", "?")}
    if what == "asgrad":
        try:
            import asgrad_workloads  # noqa: F401  # probe only
            from asgrad.tensor import __version__
        except ImportError:
            return {"ok": False}
        return {"ok": True, "version": __version__}
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
