"""Fixtures and hooks for every test of the repository.

``torch_reference``: PyTorch's answers as committed fixtures. A cross-check written as
``want = torch_reference(lambda torch, x: torch.tensor(x).exp().numpy(), x)`` gets the
arrays that PyTorch returned when ``scripts/torch_fixtures.py`` last ran (saved under
``tests/data/torch/``, with the inputs it was given), so the comparison runs where PyTorch
is not installed, CI included. Where PyTorch imports, the function also runs live and must
agree with the fixture, so a fixture that no longer matches PyTorch fails loudly.

The skip policy: the run ends with the skips counted by reason, and under
``ASGRAD_REQUIRE_PACKAGES=1`` (CI) a test skipped because a package does not import fails
the run, unless the package is one that CI deliberately lacks (:data:`CI_LACKS`).
"""

from __future__ import annotations

import json
import os
import re
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

# pytester: tests/test_suite_policies.py runs these hooks in scratch sessions
pytest_plugins = ["pytester"]

ROOT = Path(__file__).resolve().parent
FIXTURES = ROOT / "tests" / "data" / "torch"
# ASGRAD_TORCH_FIXTURES=write: run PyTorch and (re)write the fixtures of the tests run
# (scripts/torch_fixtures.py sets it, with ASGRAD_TORCH_FIXTURES_OUT for another folder).
WRITE = os.environ.get("ASGRAD_TORCH_FIXTURES", "") == "write"

# Packages that CI does not install on purpose; a skip for any other missing package fails
# CI. PyTorch's answers come from fixtures; JAX and PyTensor are benchmark peers only.
CI_LACKS = frozenset({"torch", "jax", "jaxlib", "pytensor"})


# -- PyTorch's answers as fixtures -----------------------------------------------------


def _group(path: Path) -> str:
    """The fixture file of a test file: one per test folder (``nn``, ``examples``, ``root``)."""
    rel = path.resolve().relative_to(ROOT).parts
    if rel[0] == "packages":
        return rel[1]
    return "root" if rel[0] == "tests" else rel[0]


def _flatten(value: Any, prefix: str, arrays: dict[str, np.ndarray]) -> Any:
    """``value``'s tree (lists, tuples, dicts) as JSON, its leaves stored in ``arrays``."""
    if isinstance(value, dict):
        return {"dict": {str(k): _flatten(v, f"{prefix}.{k}", arrays) for k, v in value.items()}}
    if isinstance(value, list | tuple):
        kind = "list" if isinstance(value, list) else "tuple"
        return {kind: [_flatten(v, f"{prefix}.{i}", arrays) for i, v in enumerate(value)]}
    if hasattr(value, "detach"):  # a torch.Tensor
        value = value.detach().cpu().numpy()
    python = isinstance(value, bool | int | float | str)
    arrays[prefix] = np.asarray(value)
    return {"leaf": prefix, "python": python}


def _unflatten(tree: Any, arrays: dict[str, np.ndarray]) -> Any:
    if "dict" in tree:
        return {k: _unflatten(v, arrays) for k, v in tree["dict"].items()}
    if "list" in tree:
        return [_unflatten(v, arrays) for v in tree["list"]]
    if "tuple" in tree:
        return tuple(_unflatten(v, arrays) for v in tree["tuple"])
    leaf = arrays[tree["leaf"]]
    return leaf.item() if tree["python"] else leaf


def _assert_close(got: dict[str, np.ndarray], want: dict[str, np.ndarray], what: str) -> None:
    """Exact for integers and booleans; float32 to 1e-5 and float64 to 1e-9, relative."""
    assert sorted(got) == sorted(want), f"{what}: the entries differ: {sorted(got)}"
    for key, a in got.items():
        b = want[key]
        message = f"{what} ({key})"
        if a.dtype.kind in "fc" or b.dtype.kind in "fc":
            single = np.float32 in (a.dtype, b.dtype)
            rtol, atol = (1e-5, 1e-6) if single else (1e-9, 1e-12)
            np.testing.assert_allclose(a, b, rtol=rtol, atol=atol, err_msg=message)
        else:
            np.testing.assert_array_equal(a, b, err_msg=message)


class _Store:
    """The fixture files: read on first use; under WRITE, written at the session's end."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.loaded: dict[str, dict[str, np.ndarray]] = {}
        self.written: dict[str, dict[str, np.ndarray]] = {}
        self.owner: dict[str, str] = {}  # key -> test file, to catch two tests on one key

    def file(self, group: str) -> dict[str, np.ndarray]:
        if group not in self.loaded:
            path = self.folder / f"{group}.npz"
            self.loaded[group] = {}
            if path.exists():
                with np.load(path, allow_pickle=False) as data:
                    self.loaded[group] = {k: data[k] for k in data.files}
        return self.loaded[group]

    def find(self, group: str, entry: str) -> dict[str, np.ndarray] | None:
        """The file holding ``entry``: the test folder's own, else any other (a test file
        moved to another folder keeps its fixture until it is written again)."""
        if entry in self.file(group):
            return self.file(group)
        for path in sorted(self.folder.glob("*.npz")):
            if entry in self.file(path.stem):
                return self.file(path.stem)
        return None

    def save(self) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        for group, arrays in self.written.items():
            merged = {**self.file(group), **arrays}
            # numpy types the keyword arrays as its own options (allow_pickle): hence Any
            save: Any = np.savez_compressed
            save(self.folder / f"{group}.npz", **dict(sorted(merged.items())))


_STORE = _Store(Path(os.environ.get("ASGRAD_TORCH_FIXTURES_OUT") or FIXTURES))


def _torch() -> Any:
    try:
        import torch
    except ImportError:
        return None
    return torch


class TorchReference:
    """``torch_reference(fn, *inputs)``: ``fn(torch, *inputs)``'s result, from the fixture.

    ``fn`` runs after ``torch.manual_seed(0)``, so the weights of a module it creates are
    the same in every run (and part of the result where the test needs them).

    ``inputs`` (arrays, numbers, lists of them) are what ``fn`` computes from; they are saved
    with the result and must not have changed since (else the fixture is stale). The result
    comes back with the same lists, tuples and dicts, tensors as numpy arrays.
    """

    def __init__(self, node: pytest.Item) -> None:
        self.group = _group(node.path)
        self.test = node.name
        self.path = node.path.resolve().relative_to(ROOT).as_posix()
        self.calls = 0

    def __call__(self, fn: Callable[..., Any], *inputs: Any) -> Any:
        key = f"{self.test}#{self.calls}"
        self.calls += 1
        torch = _torch()
        regenerate = "run `python scripts/torch_fixtures.py` where PyTorch is installed"
        if WRITE:
            if torch is None:
                pytest.fail("ASGRAD_TORCH_FIXTURES=write needs PyTorch")
            owner = _STORE.owner.setdefault(key, self.path)
            assert owner == self.path, f"{key}: two test files write one fixture key"
            torch.manual_seed(0)  # a module's initial weights are part of the answer
            return self._record(key, torch, fn, inputs)
        stored = _STORE.find(self.group, f"{key}:tree")
        if stored is None:
            pytest.fail(
                f"no PyTorch fixture for {self.path}::{key} in "
                f"tests/data/torch/{self.group}.npz: {regenerate}"
            )
        given: dict[str, np.ndarray] = {}
        _flatten(list(inputs), "in", given)
        saved_in = {k[len(key) + 1 :]: v for k, v in stored.items() if k.startswith(f"{key}:in")}
        _assert_close(given, saved_in, f"{key}: inputs changed since the fixture was written")
        out = {k[len(key) + 1 :]: v for k, v in stored.items() if k.startswith(f"{key}:out")}
        result = _unflatten(json.loads(str(stored[f"{key}:tree"])), out)
        if torch is not None:  # PyTorch here: the fixture must still be its answer
            live: dict[str, np.ndarray] = {}
            torch.manual_seed(0)
            _flatten(fn(torch, *inputs), "out", live)
            _assert_close(live, out, f"{key}: live PyTorch differs from the fixture; {regenerate}")
        return result

    def _record(self, key: str, torch: Any, fn: Callable[..., Any], inputs: tuple[Any, ...]) -> Any:
        arrays: dict[str, np.ndarray] = {}
        _flatten(list(inputs), "in", arrays)
        tree = _flatten(fn(torch, *inputs), "out", arrays)
        written = _STORE.written.setdefault(self.group, {})
        for name, array in arrays.items():
            written[f"{key}:{name}"] = array
        written[f"{key}:tree"] = np.asarray(json.dumps(tree))
        return _unflatten(tree, arrays)


@pytest.fixture
def torch_reference(request: pytest.FixtureRequest) -> TorchReference:
    """PyTorch's answer to ``fn(torch, *inputs)``, from ``tests/data/torch/`` (see above)."""
    return TorchReference(request.node)


# -- test files and pytest-xdist's workers ---------------------------------------------

# Under `--dist loadgroup` pytest-xdist hands the tests out one at a time, each to the next
# worker that runs out of work, in the order of the collection; tests marked with the same
# `pytest.mark.xdist_group(name)` go out together, as one unit, to one worker (for a file
# whose tests must share a module fixture). Every run records each test's duration in
# pytest's cache (`.pytest_cache`), and a run that finds them hands out the longest files
# first, so that no long file is left for the end while the other cores idle (a test not
# measured yet counts as the median one).
DURATIONS_KEY = "asgrad/durations"
_DURATIONS: dict[str, float] = {}


def _loadgroup(config: pytest.Config) -> bool:
    """``--dist loadgroup``: on the controller ``dist``; pytest-xdist sets ``dist`` to "no"
    on its workers and keeps the choice in ``loadgroup``."""
    return config.getoption("dist", "no") == "loadgroup" or bool(
        config.getoption("loadgroup", False)
    )


def _recorded_durations(config: pytest.Config) -> dict[str, float]:
    cache = getattr(config, "cache", None)  # None under -p no:cacheprovider
    if cache is None or not _loadgroup(config):
        return {}
    recorded = cache.get(DURATIONS_KEY, {})
    return recorded if isinstance(recorded, dict) else {}


def _one_numba_cache() -> None:
    """Every kernel of the run in the compiled path's one disk cache (``ASGRAD_CACHE_DIR``,
    else ``~/.cache/asgrad``), shared by the workers and kept between runs.

    Numba's cache directory (``NUMBA_CACHE_DIR``) is set by the first `prepare_numba` of
    a process, from ``ASGRAD_CACHE_DIR`` as it is then; a test that points that at a
    directory of its own (a ``tmp_path``) would otherwise send every later kernel of its
    worker there, to be compiled again in the next run. The tests of a cold cache run a
    process of their own without ``NUMBA_CACHE_DIR``.
    """
    if "NUMBA_CACHE_DIR" in os.environ:  # set already: nothing moves it
        return
    from asgrad.tensor.cpu import jit

    jit.prepare_numba()


def pytest_configure(config: pytest.Config) -> None:
    if hasattr(config, "workerinput") or not config.getoption("numprocesses", None):
        _one_numba_cache()  # in a process that runs tests (not pytest-xdist's controller)
    if _recorded_durations(config):
        # the controller's scheduler keeps the order the workers collected (below)
        config.option.loadscopereorder = False


def _longest_groups_first(items: list[pytest.Item], recorded: dict[str, float]) -> None:
    median = float(np.median(list(recorded.values())))
    # A file's tests stay together and in their order, so that a worker runs them one
    # after another and builds the file's module fixtures once.
    groups: dict[str, list[pytest.Item]] = {}
    for item in items:
        marker = item.get_closest_marker("xdist_group")
        key = str(marker.args[0]) if marker is not None and marker.args else str(item.path)
        groups.setdefault(key, []).append(item)
    seconds = {
        key: sum(float(recorded.get(item.nodeid, median)) for item in members)
        for key, members in groups.items()
    }
    order = sorted(groups, key=lambda key: -seconds[key])  # stable: ties keep their order
    items[:] = [item for key in order for item in groups[key]]


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist reads the groups (--dist loadgroup)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if WRITE:  # writing fixtures: only the tests that use them
        keep = [item for item in items if "torch_reference" in getattr(item, "fixturenames", ())]
        config.hook.pytest_deselected(items=[item for item in items if item not in keep])
        items[:] = keep
    recorded = _recorded_durations(config)
    if recorded:
        _longest_groups_first(items, recorded)


def _plain_nodeid(nodeid: str) -> str:
    """The test's id without the ``@group`` that pytest-xdist appends to it (its own rule:
    an ``@`` after the last ``]``)."""
    return nodeid.rpartition("@")[0] if nodeid.rfind("@") > nodeid.rfind("]") else nodeid


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    nodeid = _plain_nodeid(report.nodeid)
    _DURATIONS[nodeid] = _DURATIONS.get(nodeid, 0.0) + report.duration


def _save_durations(config: pytest.Config) -> None:
    cache = getattr(config, "cache", None)
    if cache is None or not _DURATIONS:
        return
    recorded = cache.get(DURATIONS_KEY, {})
    recorded = recorded if isinstance(recorded, dict) else {}
    recorded.update({nodeid: round(seconds, 3) for nodeid, seconds in _DURATIONS.items()})
    root = Path(str(config.rootpath))
    kept = {  # forget the tests of files that are gone
        nodeid: seconds
        for nodeid, seconds in recorded.items()
        if (root / nodeid.split("::", 1)[0]).is_file()
    }
    cache.set(DURATIONS_KEY, kept)


_SESSION: list[pytest.Session] = []


def pytest_sessionstart(session: pytest.Session) -> None:
    _SESSION.append(session)


def pytest_sessionfinish(session: pytest.Session) -> None:
    worker = getattr(session.config, "workeroutput", None)
    if worker is not None:  # a pytest-xdist worker: tell the controller what it left out
        worker["slow_left_out"] = _SLOW_LEFT_OUT[0]
        return
    _save_durations(session.config)  # the controller has every worker's reports
    if WRITE:
        _STORE.save()


# -- the machine's numerics in the run's header ---------------------------------------


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown CPU"


def numerics_header() -> str:
    """The CPU, numpy and its BLAS with the kernels it chose: a floating-point warning
    from a matrix product that only some runs raise may depend on them (CI's runners
    differ in CPU, and ``OPENBLAS_CORETYPE`` changes OpenBLAS's kernels)."""
    blas = "BLAS: unknown (threadpoolctl is not installed)"
    try:
        from threadpoolctl import threadpool_info  # type: ignore[import-untyped]
    except ImportError:
        pass
    else:
        found = [i for i in threadpool_info() if i.get("user_api") == "blas"]
        if found:
            info = found[0]
            blas = (
                f"BLAS: {info.get('internal_api')} {info.get('version')}, kernels"
                f" {info.get('architecture')}, {info.get('num_threads')} threads"
            )
    forced = os.environ.get("OPENBLAS_CORETYPE")
    if forced:
        blas += f" (OPENBLAS_CORETYPE={forced})"
    return f"numpy {np.__version__}, {blas}; CPU: {_cpu_model()}"


def pytest_report_header(config: pytest.Config) -> str:
    return numerics_header()


# -- the tests left out by `hatch run test` -------------------------------------------

_SLOW_LEFT_OUT = [0]  # tests marked slow that -m deselected (here, or the workers' count)


def pytest_deselected(items: list[pytest.Item]) -> None:
    _SLOW_LEFT_OUT[0] += sum(1 for item in items if item.get_closest_marker("slow"))


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: object) -> None:  # pytest-xdist's controller
    # every worker collects and deselects the same tests
    output = getattr(node, "workeroutput", {})
    _SLOW_LEFT_OUT[0] = max(_SLOW_LEFT_OUT[0], int(output.get("slow_left_out", 0)))


def _report_left_out(terminalreporter: pytest.TerminalReporter) -> None:
    if _SLOW_LEFT_OUT[0]:
        terminalreporter.line(
            f"left out {_SLOW_LEFT_OUT[0]} tests marked slow (the checkpoint kill suite, "
            "the MPI runs, the browser tests): `hatch run test-all` runs them",
            yellow=True,
        )


# -- the skip policy -------------------------------------------------------------------

# pytest.importorskip's reason, and the phrasing of this repository's own skips
_MISSING = (
    re.compile(r"could not import '([\w.]+)'"),
    re.compile(r"^([\w.-]+) is not installed"),
)


def _skip_reason(report: pytest.TestReport | pytest.CollectReport) -> str:
    longrepr = report.longrepr
    if isinstance(longrepr, tuple):
        reason = longrepr[2]
        return reason.removeprefix("Skipped: ")
    return str(longrepr)


def _missing_package(reason: str) -> str | None:
    for pattern in _MISSING:
        found = pattern.search(reason)
        if found:
            return found.group(1).split(".")[0]
    return None


def pytest_terminal_summary(
    terminalreporter: pytest.TerminalReporter, exitstatus: int, config: pytest.Config
) -> None:
    _report_left_out(terminalreporter)
    skipped = terminalreporter.stats.get("skipped", [])
    if not skipped:
        return
    by_reason = Counter(_skip_reason(report) for report in skipped)
    terminalreporter.section(f"skips by reason ({len(skipped)} in all)")
    for reason, count in by_reason.most_common():
        terminalreporter.line(f"{count:6d}  {reason}")
    if os.environ.get("ASGRAD_REQUIRE_PACKAGES", "") in ("", "0"):
        return
    unexpected = {
        package: count
        for reason, count in by_reason.items()
        if (package := _missing_package(reason)) and package not in CI_LACKS
    }
    if unexpected:
        terminalreporter.line(
            "ASGRAD_REQUIRE_PACKAGES=1: tests skipped for packages that CI installs: "
            + ", ".join(f"{p} ({n})" for p, n in sorted(unexpected.items()))
            + f"; only these may be missing: {', '.join(sorted(CI_LACKS))}",
            red=True,
        )
        _SESSION[-1].exitstatus = pytest.ExitCode.TESTS_FAILED
