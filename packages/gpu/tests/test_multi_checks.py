"""``all(isfinite(x))`` of many tensors (GradScaler's found_inf) computed as flags:
one fill and a kernel per binding limit for every check (`asgrad.gpu.plan.multi_finite`)."""

from __future__ import annotations

import numpy as np
import pytest

from asgrad.gpu import Device
from asgrad.gpu.plan import build_plan
from asgrad.gpu.plan.dispatch_kinds import count_kinds
from asgrad.tensor import Graph, Tensor, compile

pytestmark = pytest.mark.gpu

SHAPES = [(3, 5), (700,), (2, 3, 4), (1,), (64, 65)]


def _program(dtype: str) -> tuple[list[Tensor], list[str]]:
    g = Graph()
    scale = g.input("scale", (), free=())
    oks: list[Tensor] = []
    names: list[str] = []
    for k, shape in enumerate(SHAPES * 3):
        name = f"g{k}"
        x = g.input(name, shape, dtype, free=())
        u = (x.cast("float32") if dtype == "float16" else x) * (1.0 / scale)
        oks.append(u.isfinite().all())
        names.append(name)
    found = oks[0]
    for ok in oks[1:]:
        found = found & ok
    return [~found, oks[4], oks[7]], names


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_finite_checks_of_many_tensors_match_numpy(device: Device, dtype: str) -> None:
    outs, names = _program(dtype)
    program = compile(outs, backend="gpu")
    rng = np.random.default_rng(1)
    base = {n: rng.standard_normal(s).astype(dtype) for n, s in zip(names, SHAPES * 3, strict=True)}
    scale = np.asarray(4.0, np.float32)
    cases = {
        "clean": {},
        "inf": {"g7": np.full(SHAPES[2], np.inf, dtype)},
        "nan in the last": {"g14": np.where(np.arange(64 * 65).reshape(64, 65) == 4159, np.nan, 1)},
        "one of many": {"g4": np.r_[np.ones(64 * 65 - 1), -np.inf].reshape(64, 65)},
    }
    for case, changed in cases.items():
        feeds = {**base, **{k: v.astype(dtype) for k, v in changed.items()}, "scale": scale}
        found, ok4, ok7 = program(feeds)
        want = [bool(np.isfinite(feeds[n].astype(np.float32) / scale).all()) for n in names]
        assert bool(found) == (not all(want)), case
        assert (bool(ok4), bool(ok7)) == (want[4], want[7]), case
    kinds = count_kinds(build_plan(program.schedule, base | {"scale": scale}, device).commands)
    # 15 checks, each binding its tensor and the scale: 6 a kernel
    assert kinds["checks"] == 3, kinds
    assert kinds["reduction"] == 0, kinds
    assert kinds["fill"] == 1, kinds
    # the & of the 15 checks is a flag of their kernels: the one elementwise kernel is
    # ``~found`` (a kernel each binding a few flags before: 3)
    assert kinds["elementwise"] == 1, kinds


def test_the_and_of_checks_launched_apart_is_computed_from_their_flags(device: Device) -> None:
    # a reader of one check between them launches the first checks on their own: the
    # & over checks of two launches is then computed from the flags, as before
    g = Graph()
    xs = [g.input(f"x{k}", (40,), free=()) for k in range(4)]
    oks = [x.isfinite().all() for x in xs]
    early = xs[2] * oks[0].cast("float32")  # reads the first check before the others
    found = oks[0] & oks[1] & oks[2] & oks[3]
    program = compile([~found, early], backend="gpu")
    rng = np.random.default_rng(0)
    base = {f"x{k}": rng.standard_normal(40).astype(np.float32) for k in range(4)}
    for bad in (None, 0, 3):
        feeds = dict(base)
        if bad is not None:
            feeds[f"x{bad}"] = np.r_[np.ones(39), np.nan].astype(np.float32)
        got_found, got_early = program(feeds)
        assert bool(got_found) == (bad is not None), bad
        np.testing.assert_array_equal(got_early, feeds["x2"] * float(bad != 0))


def test_a_sum_read_elsewhere_is_no_check(device: Device) -> None:
    """``sum(cast(x)) == 0`` whose sum another node reads too stays a sum: the count
    of true elements is its value."""
    g = Graph()
    x = g.input("x", (4, 6), free=())
    count = (x > 0.0).cast("int32").sum()
    program = compile([count == 0, count], backend="gpu")
    v = np.linspace(-1, 1, 24, dtype=np.float32).reshape(4, 6)
    none, n = program({"x": v})
    assert not bool(none)
    assert int(n) == int((v > 0).sum())
    kinds = count_kinds(build_plan(program.schedule, {"x": v}, device).commands)
    assert kinds["checks"] == 0, kinds


def test_checks_launched_apart_keep_their_flags(device: Device) -> None:
    """A check read by a kernel launched before a later check exists (a sum of a chain
    reading it) is launched first; the later launch leaves its flag as it was."""
    g = Graph()
    x = g.input("x", (5,), free=())
    y = g.input("y", (7,), free=())
    first = x.isfinite().all()
    total = (y * first.cast("float32")).sum()  # a launched reader of the first check
    second = (y * total).isfinite().all()
    program = compile([first, second, total], backend="gpu")
    feeds = {"x": np.array([1, 2, np.inf, 4, 5], np.float32), "y": np.ones(7, np.float32)}
    got_first, got_second, got_total = program(feeds)
    assert not bool(got_first)  # not refilled by the second check's launch
    assert bool(got_second)
    assert float(got_total) == 0.0
    kinds = count_kinds(build_plan(program.schedule, feeds, device).commands)
    assert kinds["checks"] == 2, kinds
    assert kinds["fill"] == 2, kinds


def test_a_check_of_strided_and_broadcast_reads_is_launched_whole(device: Device) -> None:
    """A check whose expression reads a transpose and a broadcast row (leaves the
    checks' kernel reads only contiguous or as one value) is computed from ``x``
    launched on its own, with the same answer."""
    g = Graph()
    a = g.input("a", (4, 6), free=())
    b = g.input("b", (1, 4), free=())
    program = compile([(a.transpose() * b).isfinite().all()], backend="gpu")
    ones = np.ones((4, 6), np.float32)
    for a_value, b_value, want in [
        (ones, np.ones((1, 4), np.float32), True),
        (ones, np.array([[1, 2, np.nan, 4]], np.float32), False),
        (
            np.where(np.eye(4, 6) > 0, np.float32(3e38), 1).astype(np.float32),
            np.full((1, 4), 2, np.float32),
            False,
        ),
    ]:
        (got,) = program({"a": a_value, "b": b_value})
        assert bool(got) == want
    kinds = count_kinds(
        build_plan(program.schedule, {"a": ones, "b": ones[:1, :4]}, device).commands
    )
    assert kinds["checks"] == 1, kinds
