"""The Python side of a whole-step kernel: its module on disk, and the wrapper calling it.

`whole_step` writes the generated module (`StepPlan`)
under `cache_dir`, named by a hash of its source, imports
it (Numba's ``cache=True`` needs a real file) and returns the wrapper: a generated
Python function binding the feeds, variables and constants to the kernel's arguments,
checking that the variables' arrays may be written in place (see
`asgrad.tensor.cpu.jit.step`), and turning 0-d results into arrays.
"""

from __future__ import annotations

import hashlib
import importlib.util
import math
import os
import sys
import tempfile
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from asgrad.tensor.cpu.jit import cache_dir
from asgrad.tensor.ir.variables import Variable

if TYPE_CHECKING:
    from asgrad.tensor.cpu.jit.step import StepPlan


def load(source: str) -> Any:
    """The ``step`` function of the module with ``source``, written under the cache."""
    return load_module(source, "asgrad_step").step


def load_module(source: str, prefix: str) -> Any:
    """The generated module with ``source``, written under the cache as
    ``<prefix>_<hash of the source>.py`` (Numba's ``cache=True`` needs a real file)."""
    digest = hashlib.sha256(source.encode()).hexdigest()[:24]
    name = f"{prefix}_{digest}"
    if name in sys.modules:
        return sys.modules[name]
    folder = cache_dir() / "steps"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.py"
    if not path.exists() or path.read_text() != source:
        fd, tmp = tempfile.mkstemp(dir=folder, suffix=".tmp")
        with os.fdopen(fd, "w") as f:
            f.write(source)
        os.replace(tmp, path)
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    sys.modules[name] = module
    return module


def wrapper(
    plan: StepPlan, kernel: Any, fallback: Callable[[Any], Any], numpy: Callable[[Any], Any]
) -> Any:
    """The Python function calling ``kernel``: ``run(feeds)``, with the variables bound;
    ``fallback(feeds)`` runs a step Numba cannot compile for the arguments given, and
    ``numpy(feeds)`` runs the numpy function for one call whose indices the step found
    out of range (``IndexError``, raised before any variable is written): its kernels
    raise the typed error."""
    from numba.core.errors import NumbaError  # the compiled path has Numba

    env: dict[str, Any] = {
        "_step": kernel,
        "_rc": sys.getrefcount,
        "_np_array": np.array,
        "_asarray": np.asarray,
        "_NumbaError": NumbaError,
        "_fallback": fallback,
        "_numpy": numpy,
    }
    checks, calib, expected, args = [], [], [], []
    for i, (name, scalar) in enumerate(zip(plan.feeds, plan.scalar_feeds, strict=True)):
        env[f"name{i}"] = name
        # a 0-d feed may come as a numpy scalar (a loop counter): one type for Numba
        args.append(f"_asarray(feeds[name{i}])" if scalar else f"feeds[name{i}]")
    for i, var in enumerate(plan.readonly):
        env[f"r{i}"] = var
        args.append(f"r{i}.value")
    views: list[tuple[Variable, str]] = []
    for d, group in plan.state.items():
        env[f"_S_{d}"], env[f"_eS_{d}"] = None, -1
        checks.append(f"_rc(_S_{d}) == _eS_{d}")
        calib.append(f"_rc(_S_{d})")
        expected.append(f"_eS_{d}")
        args.append(f"_S_{d}")
        for var, _, _ in group:
            j = len(views)
            env[f"u{j}"], env[f"_w{j}"], env[f"_ew{j}"] = var, None, -1
            checks.append(f"u{j}._value is _w{j} and u{j}._holder is None and _rc(_w{j}) == _ew{j}")
            calib.append(f"_rc(_w{j})")
            expected.append(f"_ew{j}")
            views.append((var, f"_w{j}"))
    for i, c in enumerate(plan.consts):
        env[f"c{i}"] = c
        args.append(f"c{i}")
    if plan.runtime_bounds:
        env["_work"] = _work_buffers(plan.work)
        args += [f"_w[{i}]" for i in range(len(plan.work))] + ["1"]
    outs: list[str] = []
    for i, (kind, extra) in enumerate(plan.outputs):
        env[f"_o{i}"] = extra
        if kind == "scalar":
            outs.append(f"_np_array(r[{len(outs)}], _o{i})")
        elif kind == "array":
            outs.append(f"r[{len(outs)}]")
    result = []
    position = 0
    for i, (kind, _) in enumerate(plan.outputs):
        if kind == "const":
            result.append(f"_o{i}.copy()")
        else:
            result.append(outs[position])
            position += 1
    lines = ["def run(feeds):"]
    if checks:
        lines += [f"    if not ({' and '.join(checks)}):", "        _repack()"]
    if plan.runtime_bounds:
        lines.append("    _w = _work()")
    lines += [
        "    try:",
        f"        r = _step({', '.join(args)})",
        "    except _NumbaError:  # arguments of types it cannot compile for: numpy",
        "        return _fallback(feeds)",
        "    except IndexError:  # an index out of range: numpy's kernels say which",
        "        return _numpy(feeds)",
        f"    return [{', '.join(result)}]",
    ]
    lines += ["", "def _calib():", f"    return ({''.join(c + ', ' for c in calib)})"]
    source = "\n".join(lines)

    def repack() -> None:
        for d, group in plan.state.items():
            size = sum(math.prod(s) for _, _, s in group)
            buf = np.empty(size, np.dtype(d))
            for var, off, shape in group:
                n = math.prod(shape)
                buf[off : off + n] = np.asarray(var.value, dtype=np.dtype(d)).reshape(n)
            env[f"_S_{d}"] = buf
        j = 0
        for d, group in plan.state.items():
            buf = env[f"_S_{d}"]
            for var, off, shape in group:
                view = buf[off : off + math.prod(shape)].reshape(shape)
                var.set_host_value(view)
                env[f"_w{j}"] = view
                j += 1
        del buf, view
        env.update(zip(expected, env["_calib"](), strict=True))

    env["_repack"] = repack
    exec(compile(source, "<asgrad whole step>", "exec"), env)
    run = env["run"]
    run.source = source
    return run


def _work_buffers(sizes: dict[str, int]) -> Callable[[], list[np.ndarray]]:
    """The calling thread's work buffers of ``sizes`` (dtype -> elements), allocated on
    its first call and lent to every later one."""
    local = threading.local()

    def work() -> list[np.ndarray]:
        buffers: list[np.ndarray] | None = getattr(local, "buffers", None)
        if buffers is None:
            buffers = local.buffers = [_aligned(n, np.dtype(d)) for d, n in sizes.items()]
        return buffers

    return work


def _aligned(n: int, dtype: np.dtype[Any]) -> np.ndarray:
    """``n`` elements of ``dtype`` starting at a multiple of 64 bytes (a cache line:
    the kernel aligns its arrays within the buffer to it)."""
    raw = np.empty(n * dtype.itemsize + 64, np.uint8)
    skip = -raw.ctypes.data % 64
    return raw[skip : skip + n * dtype.itemsize].view(dtype)


def whole_step(plan: StepPlan, fallback: Callable[[Any], Any], numpy: Callable[[Any], Any]) -> Any:
    """The compiled step's ``run(feeds)`` (compiled, or loaded from the disk cache, on
    its first call); ``fallback`` and ``numpy`` as `wrapper` takes them."""
    return wrapper(plan, load(plan.source), fallback, numpy)
