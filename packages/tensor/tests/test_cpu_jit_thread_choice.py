"""The measured choice between a compiled kernel's serial and parallel forms
(`asgrad.tensor.cpu.jit.threads.Site`): serial in the first step, measured over the
next calls, kept in the routes file and read back, forced by the settings; both
forms give the same bits.

The threshold is lowered to one element so that small arrays may take the parallel
form (``parallel=True`` compiles slowly: few kernels, each once).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from asgrad.tensor import ArgumentError, Graph, get_op, make_schedule
from asgrad.tensor.cpu.codegen import generate_cpu_function
from asgrad.tensor.cpu.jit import route, threads
from asgrad.tensor.cpu.lowering import resolve
from asgrad.tensor.ir.registry import TensorType

numba = pytest.importorskip("numba")
if numba.config.NUMBA_NUM_THREADS < 2:
    pytest.skip("Numba runs one thread here: nothing to choose", allow_module_level=True)

P, S = threads.PARALLEL, threads.SERIAL
T = threads.TIMED


@pytest.fixture(autouse=True)
def cache(fresh_choices: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """An empty cache folder, no settings, no decisions, two kernel threads, measured
    from two threads up."""
    monkeypatch.setattr(threads, "PARALLEL_MIN", 1)
    monkeypatch.setattr(threads, "MEASURE_MIN_THREADS", 2)
    before = numba.get_num_threads()
    numba.set_num_threads(2)
    threads.new_step()  # the settings are read again
    yield fresh_choices
    threads.set_threads(None)
    numba.set_num_threads(before)


def _stored(cache: Path) -> dict[str, str]:
    data = json.loads((cache / route.FILE).read_text())
    return dict(data[f"{route.machine()}|threads"])


def _measure(site: threads.Site, size: int, serial: float, parallel: float) -> list[int]:
    """A site's calls from its first until it decides, reporting the given times."""
    forms = [site.form(size), site.form(size)]  # the first step
    threads.new_step()
    for _ in range(threads.PROBES):
        form = site.form(size)
        forms.append(form)
        site.timed(size, form, serial)
    forms.append(site.form(size))  # the warm-up
    for _ in range(2 * threads.SAMPLES):
        form = site.form(size)
        if not form & T:  # decided
            break
        forms.append(form)
        site.timed(size, form, parallel if form & P else serial)
    return forms


def test_a_kernel_runs_serially_in_its_first_step_then_alternates_and_decides(
    cache: Path,
) -> None:
    site = threads.Site("kernel_a")
    forms = _measure(site, 100, serial=1.0, parallel=3.0)
    probe = threads.PROBE + T + S
    # serial while the first step runs, timed serial probes, an untimed warm-up
    warm = 2 + threads.PROBES
    assert forms[: warm + 1] == [S, S, *[probe] * threads.PROBES, P]
    timed = forms[warm + 1 :]
    # serial was 3x faster in each of the first two calls of each form: decided there
    assert [f & P for f in timed] == [P, S, S, P]
    assert all(f & T for f in timed)
    assert site.form(100) == S
    key = repr(site.key(100, 2))
    assert _stored(cache) == {key: "serial"}
    assert threads.ROUTE.measured == {site.key(100, 2)}
    # another size is another decision; a close race takes every sample of each form
    # and keeps the parallel form
    timed = _measure(site, 200, serial=1.0, parallel=1.05)[warm + 1 :]
    assert [f & P for f in timed] == [P, S, S, P, P, S, S, P]
    assert site.form(200) == P
    assert _stored(cache)[repr(site.key(200, 2))] == "parallel"


def test_a_clear_difference_in_some_samples_only_takes_every_sample() -> None:
    site = threads.Site("kernel_noisy")
    forms = [site.form(100), site.form(100)]  # the first step
    threads.new_step()
    for _ in range(threads.PROBES):
        form = site.form(100)
        site.timed(100, form, 1.0)
    forms.append(site.form(100))  # the warm-up
    # parallel 4x faster, but one of its first two calls was slowed: not clear yet
    parallel = iter([0.25, 0.9, 0.25, 0.25])
    timed = []
    for _ in range(2 * threads.SAMPLES):
        form = site.form(100)
        if not form & T:
            break
        timed.append(form & P)
        site.timed(100, form, next(parallel) if form & P else 1.0)
    assert timed == [P, S, S, P, P, S, S, P]
    assert site.form(100) == P


def test_a_saved_choice_is_reused_without_measuring(
    cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _measure(threads.Site("kernel_b"), 100, serial=5.0, parallel=1.0)
    # a later process: no decision in memory, the file's
    monkeypatch.setattr(threads, "ROUTE", route.Route("threads"))
    site = threads.Site("kernel_b")
    assert [site.form(100) for _ in range(3)] == [P, P, P]  # no serial first step, no timing
    assert not threads.ROUTE.measured
    # ... unless asked to measure again
    monkeypatch.setenv(route.ENV, "measure")
    monkeypatch.setattr(threads, "ROUTE", route.Route("threads"))
    threads.new_step()
    again = threads.Site("kernel_b")
    assert _measure(again, 100, serial=1.0, parallel=5.0)[:2] == [S, S]
    assert again.form(100) == S
    assert _stored(cache) == {repr(again.key(100, 2)): "serial"}


def test_a_saved_serial_choice_is_measured_again_in_a_later_process(
    cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Serial won under load; a later process on a quiet machine measures again and the
    parallel form, now faster, replaces the file's decision."""
    _measure(threads.Site("kernel_d"), 100, serial=1.0, parallel=5.0)
    key = repr(threads.Site("kernel_d").key(100, 2))
    assert _stored(cache) == {key: "serial"}
    monkeypatch.setattr(threads, "ROUTE", route.Route("threads"))  # a later process
    threads.new_step()
    later = threads.Site("kernel_d")
    forms = _measure(later, 100, serial=5.0, parallel=1.0)
    assert forms[:2] == [S, S]  # the first step serial, as before any measurement
    assert any(form & T for form in forms)  # timed: measured again
    assert later.form(100) == P
    assert _stored(cache) == {key: "parallel"}


def test_the_settings_force_a_form_without_measuring(monkeypatch: pytest.MonkeyPatch) -> None:
    site = threads.Site("kernel_c")
    assert site.form(threads.PARALLEL_MIN - 1 if threads.PARALLEL_MIN > 1 else 0) == S
    # the settings are read as a step begins (`new_step`), or when set_threads is called
    monkeypatch.setenv(threads.ENV, "1")
    threads.new_step()
    assert [site.form(100) for _ in range(3)] == [S, S, S]
    monkeypatch.setenv(threads.ENV, "2")
    threads.new_step()
    assert [site.form(100) for _ in range(3)] == [P, P, P]
    monkeypatch.delenv(threads.ENV)
    monkeypatch.setenv(route.ENV, "parallel")
    threads.new_step()
    assert site.form(100) == P
    assert threads.may_thread(100)
    monkeypatch.setenv(route.ENV, "serial")
    threads.new_step()
    assert site.form(100) == S
    assert not threads.may_thread(100)
    threads.set_threads(2)  # before the environment
    assert site.form(100) == P
    threads.set_threads(None)
    monkeypatch.delenv(route.ENV)
    numba.set_num_threads(1)
    threads.new_step()
    assert site.form(100) == S  # one Numba thread: nothing to measure
    assert not threads.ROUTE.measured
    assert not site._trials


@pytest.mark.parametrize(
    ("name", "value"), [(threads.ENV, "two"), (threads.ENV, "0"), (route.ENV, "fast")]
)
def test_a_bad_setting_is_a_typed_error(
    name: str, value: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(name, value)
    threads.new_step()
    with pytest.raises(ArgumentError, match=name):
        threads.Site("kernel_d").form(100)


def _kernel(name: str, arrays: list[np.ndarray], attrs: dict[str, Any]) -> Any:
    types = [TensorType(a.shape, a.dtype.name) for a in arrays]
    g = Graph()
    node = g.apply(name, [g.input(f"x{i}", t.shape, t.dtype) for i, t in enumerate(types)], attrs)
    choose = resolve(get_op(name)).compiled
    assert choose is not None
    entry = choose(node.node, types, node.node.type)
    assert entry is not None
    return entry.load()


@pytest.mark.parametrize(
    ("name", "n", "shape", "attrs"),
    [
        ("gelu_backward", 2, (3, 7), {"approximate": "none"}),
        ("softmax", 1, (6, 1000), {"axis": -1}),  # rows long enough to sum in vector lanes
        ("softmax", 1, (5, 300, 4), {"axis": 1}),  # the slab form
    ],
)
def test_a_measured_kernel_gives_the_same_bits_in_every_call(
    name: str,
    n: int,
    shape: tuple[int, ...],
    attrs: dict[str, Any],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal(shape).astype(np.float32) for _ in range(n)]
    arrays[0].reshape(-1)[3] = np.nan
    fn = _kernel(name, arrays, attrs)
    site = sys.modules[fn.__module__]._site
    size = arrays[0].size
    threads.new_step()
    results = [fn(*arrays, **attrs).tobytes()]
    threads.new_step()
    monkeypatch.setattr(threads, "SERIAL_FLOOR", 0.0)  # measured, however quick
    for _ in range(threads.PROBES + 1 + 2 * threads.SAMPLES):  # probes, warm-up, timed calls
        results.append(fn(*arrays, **attrs).tobytes())
    assert threads.ROUTE.chosen.get(site.key(size, 2)) in ("serial", "parallel")
    assert threads.ROUTE.measured == {site.key(size, 2)}
    for form in ("serial", "parallel"):
        monkeypatch.setenv(route.ENV, form)
        threads.new_step()
        results.append(fn(*arrays, **attrs).tobytes())
    assert len(set(results)) == 1  # bit for bit, NaN and all
    module = sys.modules[fn.__module__]
    ran = {
        k
        for k, v in vars(module).items()
        if k[:2] in ("_l", "_r", "_s", "_p") and getattr(v, "signatures", None)
    }
    assert any(k.startswith("_p_") for k in ran)
    assert any(not k.startswith("_p_") for k in ran)  # both forms ran


def test_each_compiled_line_function_begins_a_step() -> None:
    x = Graph().input("x", (4, 8), "float32")
    schedule = make_schedule([(x * 2.0 + 1.0).exp()])
    types = schedule.infer_types({"x": (4, 8)})
    run = generate_cpu_function(schedule, types, compiled=True)
    before = threads._steps[0]
    feeds = {"x": np.ones((4, 8), np.float32)}
    run(feeds)
    run(feeds)
    assert threads._steps[0] == before + 2
    numpy_run = generate_cpu_function(schedule, types, compiled=False)
    numpy_run(feeds)
    assert threads._steps[0] == before + 2  # the numpy path has no kernels to choose for


@pytest.mark.parametrize("decay", [None, 0.99])
def test_adams_fused_step_gives_the_same_bits_serially_and_over_threads(
    decay: float | None,
) -> None:
    from asgrad.tensor.cpu.jit import kernels_optim as ko

    rng = np.random.default_rng(1)
    n = 2 * threads.CHUNK + 5
    p, m, g = (rng.standard_normal(n).astype(np.float32) for _ in range(3))
    v = np.abs(rng.standard_normal(n)).astype(np.float32)
    scalars = (np.float32(1e-3), np.float32(0.9))
    results = []
    for form in ("serial", "parallel"):
        ko._site.force = form
        try:
            m2, v2 = np.empty_like(m), np.empty_like(v)
            dec = None if decay is None else np.float32(decay)
            out = ko.adam_step(
                p, m, v, g, g, *scalars, m2, v2, dec, beta1=0.9, beta2=0.999, eps=1e-8
            )
        finally:
            ko._site.force = None
        results.append(b"".join(a.tobytes() for a in (out, m2, v2)))
    assert results[0] == results[1]
    assert ko._adam_loop_threads.signatures  # the parallel form ran
    np.testing.assert_array_equal(m2, m * np.float32(0.9) + g * np.float32(1 - 0.9))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_the_masked_softmax_gives_the_same_bits_serially_and_over_threads(dtype: str) -> None:
    from asgrad.tensor.cpu.jit import kernels_attention as ka

    rng = np.random.default_rng(2)
    n = 48  # rows of several chunks of CHUNK elements, the last one short
    x = rng.standard_normal((3, threads.CHUNK // n * 2 + 7, n)).astype(dtype)
    mask = np.triu(np.full((n, n), -np.inf), 1).astype(dtype)[:5]  # rows repeating
    results = []
    for form in ("serial", "parallel"):
        ka._site.force = form
        try:
            results.append(ka.masked_softmax(x, 0.25, mask).tobytes())
        finally:
            ka._site.force = None
    assert results[0] == results[1]
    assert ka._masked_softmax_p.signatures  # the parallel form ran
    rows = x.reshape(-1, n) * x.dtype.type(0.25)
    rows += np.tile(mask, (len(rows) // len(mask) + 1, 1))[: len(rows)]
    want = np.exp(rows - rows.max(1, keepdims=True))
    want /= want.sum(1, keepdims=True)
    got = np.frombuffer(results[1], dtype).reshape(-1, n)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-7)


def test_below_the_measured_thread_count_a_kernel_stays_serial_unmeasured(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """At fewer threads than `MEASURE_MIN_THREADS` an unset choice is serial from the
    first call on: no parallel form compiled and timed inside the first steps."""
    monkeypatch.setattr(threads, "MEASURE_MIN_THREADS", 4)
    site = threads.Site("below")
    for _ in range(12):
        threads.new_step()
        assert site.form(1 << 20) == threads.SERIAL
    assert not site._trials


def test_the_assembled_copy_gives_the_same_array_serially_and_over_threads() -> None:
    from asgrad.tensor.cpu.jit import kernels_copy as kc
    from asgrad.tensor.cpu.jit.fuse_slices import assemble

    rng = np.random.default_rng(3)
    b, t, h, d = 3, 11, 4, 16  # heads' layout, read from [b, h, t, d]
    parts = [rng.standard_normal((b, h, t, d)).astype(np.float32) for _ in range(3)]
    heads = [p.transpose(0, 2, 1, 3) for p in parts]
    index = [(slice(None), slice(None), slice(k * h * d, (k + 1) * h * d)) for k in range(3)]
    results = []
    for form in ("serial", "parallel"):
        kc._site.force = form
        try:
            out = assemble(
                *heads, indices=index, covers=True, shape=(b, t, 3 * h * d), dtype="float32"
            )
        finally:
            kc._site.force = None
        results.append(out)
    assert kc._copy_rows_p.signatures  # the parallel form ran
    np.testing.assert_array_equal(results[0], results[1])
    want = np.concatenate([x.reshape(b, t, h * d) for x in heads], axis=-1)
    np.testing.assert_array_equal(results[1], want)
