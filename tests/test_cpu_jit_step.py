"""Whole-step compilation (asgrad.tensor.cpu.jit.step) against the numpy reference path.

Every op the whole step can write (every op with a scalar expression, rendered, and
the structural families' emitters) runs its registered cases (float64 and float32) as
one compiled step: each case asserts that the step compiled (or names why it is
expected not to, case by case, in :data:`EXPECTED_FALLBACKS`) and that it equals numpy within the
op's tolerance, NaN and infinities included. A training step made of elementwise ops
compiles whole; the xor training step trains as the numpy path does; variables updated
in place never change an array someone else holds; an op without a whole-step
lowering keeps the numpy function.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest

pytest.importorskip("numba")

from asgrad import nn  # after the skip
from asgrad.tensor import Graph, Tensor, all_ops, compile, get_op
from asgrad.tensor.cpu import jit
from asgrad.tensor.cpu.jit import step
from asgrad.tensor.cpu.lowering import resolve
from asgrad.tensor.errors import OutOfRangeError
from asgrad.tensor.ir.variables import Variable


@pytest.fixture(autouse=True)
def _compiled_now(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The compiled path on from the first call (``set_enabled(True)``: the compiled
    tier, not the tiered default), programs without updates compiled whole too. The
    kernels go to the run's one disk cache (the root conftest), shared by the workers."""
    monkeypatch.setattr(step, "WHOLE_STEP_WITHOUT_UPDATES", True)
    jit.set_enabled(True)
    yield
    jit.set_enabled(None)


def _fn(program: Any, feeds: dict[str, np.ndarray]) -> Any:
    return program.executable.function(feeds)


def _both(build: Any, feeds: dict[str, np.ndarray], runs: int = 1) -> tuple[Any, Any, Any]:
    """The outputs of ``runs`` runs with the compiled path and with numpy; the compiled
    program's function."""
    results = []
    fn = None
    for flag in (True, False):
        jit.set_enabled(flag)
        program = build()
        for _ in range(runs):
            out = [np.array(v, copy=True) for v in program(feeds)]
        results.append(out)
        if flag:
            fn = _fn(program, feeds)
    return results[0], results[1], fn


def _close(got: Any, want: Any, tol: tuple[float, float]) -> None:
    assert len(got) == len(want)
    for a, b in zip(got, want, strict=True):
        assert a.dtype == b.dtype
        assert a.shape == b.shape
        if a.dtype.kind in "biu":
            np.testing.assert_array_equal(a, b)
        else:
            np.testing.assert_allclose(a, b, rtol=max(tol[0], 1e-6), atol=max(tol[1], 1e-6))


def _case_graph(
    name: str, dtype: str, keep: Callable[[Tensor], bool] = lambda t: True
) -> tuple[Any, dict[str, np.ndarray]] | None:
    """The registered cases of op ``name`` that ``keep`` keeps (given the case's node)
    as one program's outputs, float inputs as ``dtype``; None when it keeps none."""
    op = get_op(name)
    assert op.cases is not None
    g = Graph()
    feeds: dict[str, np.ndarray] = {}
    outs: list[Tensor] = []
    for k, case in enumerate(op.cases(np.random.default_rng(0))):
        ins = []
        case_feeds = {}
        for j, value in enumerate(case.inputs):
            arr = np.asarray(value)
            if arr.dtype == np.float64:
                arr = arr.astype(dtype)
            case_feeds[f"x{k}_{j}"] = arr
            ins.append(g.input(f"x{k}_{j}", arr.shape, str(arr.dtype)))
        try:
            out = g.apply(name, ins, dict(case.attrs))
        except Exception:  # a case of other dtypes: not built here
            continue
        if keep(out):
            outs.append(out)
            feeds.update(case_feeds)
    if not outs:
        return None
    return (lambda: compile(outs)), feeds


def _whole_step_ops() -> list[str]:
    """Every primitive op with cases that the whole step can write."""
    return sorted(
        op.name
        for op in all_ops()
        if op.primitive and op.cases is not None and resolve(op).emit is not None
    )


_OPS = _whole_step_ops()


def _dtypes(t: Tensor) -> tuple[list[str], str]:
    return [n.type.dtype for n in t.node.inputs], t.node.type.dtype


# The registered cases that do not compile whole, and why: op -> (what the declined
# step says, which cases). The test runs them as a program of their own and asserts
# that it keeps the numpy function, saying so, and still equals numpy.
EXPECTED_FALLBACKS: dict[str, tuple[str, Callable[[Tensor], bool]]] = {
    # float to integer: numpy's value out of range (NaN, inf) differs by platform
    "cast": (
        "float to integer cast",
        lambda t: _dtypes(t)[0][0].startswith("float") and _dtypes(t)[1].startswith("int"),
    ),
    # numpy raises for an integer to a negative power; the step must not guess
    "pow": ("integer power", lambda t: _dtypes(t)[1].startswith("int")),
    # the kernels raise for an integer division by zero; so must the step: it declines
    "floor_divide": ("integer division", lambda t: True),
    "remainder": ("integer division", lambda t: True),
}


def test_every_elementwise_op_with_an_expression_has_a_whole_step_lowering() -> None:
    with_expression = {op.name for op in all_ops() if op.primitive and op.expression is not None}
    assert with_expression
    assert with_expression <= set(_OPS) | {op.name for op in all_ops() if op.cases is None}


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("name", _OPS)
def test_every_lowered_op_compiles_whole_and_matches_numpy(
    name: str, dtype: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(step, "WORK_LIMIT", 1 << 40)  # the registered cases, whatever size
    reason, declined = EXPECTED_FALLBACKS.get(name, ("", lambda t: False))
    compiled = _case_graph(name, dtype, lambda t: not declined(t))
    numpy_only = _case_graph(name, dtype, declined)
    assert compiled is not None or numpy_only is not None, f"no case of {name} builds"
    tolerance = get_op(name).tolerance
    if compiled is not None:
        with np.errstate(all="ignore"):
            got, want, fn = _both(*compiled)
        assert fn.step_plan is not None, fn.step_declined
        assert fn.whole_step_active(), fn.step_declined
        _close(got, want, tolerance)
    if name in EXPECTED_FALLBACKS:
        assert numpy_only is not None, f"{name}: no case falls back: drop it from the list"
        with np.errstate(all="ignore"):
            got, want, fn = _both(*numpy_only)
        assert fn.step_plan is None
        assert reason in fn.step_declined
        _close(got, want, tolerance)


def test_a_training_step_of_elementwise_ops_compiles_whole() -> None:
    """softplus, pow, maximum, cast, where and comparisons: no op sends it to numpy."""
    rng = np.random.default_rng(3)
    x = rng.standard_normal((4, 5)).astype(np.float32)
    w0 = rng.standard_normal((4, 5)).astype(np.float32)
    runs = []
    for flag in (True, False):
        jit.set_enabled(flag)
        w = Variable("w", w0.copy())
        g = Graph()
        a, p = g.input("a", x.shape), g.parameter("w", variable=w)
        h = g.apply("softplus", [a * p]) ** 2.0
        m = g.apply("maximum", [h, p])
        mask = (a > 0.0).cast("float32") + (p <= a).cast("float32")
        y = g.apply("where", [a != p, m * mask, h.sigmoid()]).cast("float64")
        loss = y.sum()
        program = compile([loss], [(w, p - 0.1 * m)])
        losses = [float(program({"a": x})[0]) for _ in range(3)]
        fn = program.executable.function({"a": x})  # type: ignore[attr-defined]
        runs.append((losses, w.value.copy(), fn))
    (on, w_on, fn), (off, w_off, _) = runs
    assert fn.step_plan is not None, fn.step_declined
    assert fn.whole_step_active(), fn.step_declined
    np.testing.assert_allclose(on, off, rtol=1e-5)
    np.testing.assert_allclose(w_on, w_off, rtol=1e-5, atol=1e-6)


_SPECIAL = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1.5, -2.5, 1e-30, 88.0, -88.0])


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_nan_and_infinities_propagate_as_in_numpy(dtype: str) -> None:
    x = _SPECIAL.astype(dtype)
    y = np.roll(x, 3)
    g = Graph()
    a, b = g.input("a", x.shape, dtype), g.input("b", y.shape, dtype)
    outs = [
        a + b, a - b, a * b, a / b, a.exp(), a.abs(), a.relu(), a.sigmoid(), a.tanh(),
        g.apply("maximum", [a, b]), g.apply("minimum", [a, b]), a.sum(), a.max(), b.min(),
        g.apply("where", [a > b, a, b]), (a == b).cast("float32"), a.mean(),
    ]  # fmt: skip
    with np.errstate(all="ignore"):
        got, want, fn = _both(lambda: compile(outs), {"a": x, "b": y})
    assert fn.whole_step_active(), fn.step_declined
    for p, q in zip(got, want, strict=True):
        np.testing.assert_array_equal(np.isnan(p), np.isnan(q))
        np.testing.assert_allclose(p, q, rtol=1e-6, atol=0)


@pytest.mark.parametrize(
    ("sa", "sb"),
    [((3, 4), (4,)), ((2, 3, 4), (3, 1)), ((1, 5), (4, 1)), ((), (2, 3)), ((2, 1, 3), (4, 1))],
)
def test_broadcasting_reductions_and_views(sa: tuple[int, ...], sb: tuple[int, ...]) -> None:
    rng = np.random.default_rng(1)
    x, y = rng.standard_normal(sa).astype(np.float32), rng.standard_normal(sb).astype(np.float32)
    g = Graph()
    a, b = g.input("a", sa), g.input("b", sb)
    c = a * b + b
    outs = [c, c.sum(), (c - 1.0).relu(), c.max()]
    if len(c.shape) >= 2:
        outs += [c.sum(0), c.mean(-1, keepdims=True), c.swapaxes(-1, -2) * 2.0]
        outs += [c.reshape(-1) + 1.0, c.swapaxes(-1, -2) @ c]
    got, want, fn = _both(lambda: compile(outs), {"a": x, "b": y})
    assert fn.whole_step_active(), fn.step_declined
    _close(got, want, (1e-5, 1e-5))


def _xor(optimizer: str) -> tuple[Any, dict[str, np.ndarray], list[Any]]:
    model = nn.Sequential(nn.Linear(2, 8), nn.ReLU(), nn.Linear(8, 1), nn.Sigmoid())
    model.initialize(0)
    g = Graph("xor")
    x, y = g.input("x", (4, 2)), g.input("y", (4, 1))
    loss = nn.mse_loss(model(x), y)
    params = list(model.parameters())
    opt = nn.SGD(params, lr=0.5, momentum=0.9) if optimizer == "sgd" else nn.Adam(params, lr=0.05)
    program = opt.compile(loss, backend="cpu")
    feeds = {
        "x": np.array([[0, 0], [0, 1], [1, 0], [1, 1]], np.float32),
        "y": np.array([[0], [1], [1], [0]], np.float32),
    }
    return program, feeds, params


@pytest.mark.parametrize("optimizer", ["sgd", "adam"])
def test_xor_trains_as_on_the_numpy_path(optimizer: str) -> None:
    runs = {}
    for flag in (True, False):
        jit.set_enabled(flag)
        program, feeds, params = _xor(optimizer)
        losses = [float(program(feeds)[0]) for _ in range(60)]
        runs[flag] = (losses, [p.value.copy() for p in params], _fn(program, feeds))
    fn = runs[True][2]
    assert fn.step_plan is not None
    assert fn.whole_step_active(), fn.step_declined
    assert not hasattr(runs[False][2], "step_plan")
    np.testing.assert_allclose(runs[True][0], runs[False][0], rtol=1e-4, atol=1e-6)
    for a, b in zip(runs[True][1], runs[False][1], strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)
    assert runs[True][0][-1] < runs[True][0][0]


def test_arrays_taken_from_variables_never_change() -> None:
    program, feeds, params = _xor("sgd")
    program(feeds)
    w = params[0]
    held = w.value  # the view the step installed: taking it must stop in-place writes
    part = w.value[0]  # a view of it
    before, before_part = held.copy(), part.copy()
    program(feeds)
    np.testing.assert_array_equal(held, before)
    np.testing.assert_array_equal(part, before_part)
    assert not np.array_equal(w.value, before)
    mine = np.full(w.shape, 0.25, np.float32)
    w.value = mine  # assigned by the user: read, never written
    program(feeds)
    np.testing.assert_array_equal(mine, np.full(w.shape, 0.25, np.float32))
    assert not np.array_equal(w.value, mine)


def test_in_place_updates_are_taken_when_nothing_holds_the_arrays() -> None:
    program, feeds, _params = _xor("sgd")
    program(feeds)
    fn = _fn(program, feeds)
    repacks = [0]
    (impl,) = [c.cell_contents for c in fn.__closure__ if isinstance(c.cell_contents, list)][:1]
    env = impl[0].__globals__
    original = env["_repack"]

    def counted() -> None:
        repacks[0] += 1
        original()

    env["_repack"] = counted
    for _ in range(5):
        program(feeds)
    assert repacks[0] == 0


def test_an_op_without_a_whole_step_lowering_keeps_the_numpy_function() -> None:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((3, 5)).astype(np.float32)
    g = Graph()
    a = g.input("a", x.shape)
    outs = [g.apply("cumsum", [a * 2.0], {"axis": -1}).sum()]
    got, want, fn = _both(lambda: compile(outs), {"a": x}, runs=3)
    assert fn.step_plan is None
    assert "no Numba lowering of 'cumsum'" in fn.step_declined
    assert not fn.whole_step_active()
    np.testing.assert_array_equal(got[0], want[0])


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_row_programs_keep_nan_and_infinities_as_numpy(dtype: str) -> None:
    """Softmax (over the last and a middle axis), log-softmax and layer norm of rows
    holding NaN, infinities and a fully masked row, compiled whole, against numpy."""
    x = np.array(
        [[np.nan, 1.0, 2.0, 0.5], [np.inf, 1.0, 2.0, 3.0], [-np.inf] * 4, [1.0, -2.0, 3.0, 0.0]],
        dtype,
    )
    g = Graph()
    a = g.input("a", x.shape, dtype)
    b = (a * 1.0).reshape(2, 2, 4)
    outs = [a.softmax(-1), b.softmax(1), g.apply("log_softmax", [a], {"axis": -1})]
    outs.append(g.apply("layer_norm", [a], {"normalized_shape": (4,), "eps": 1e-5}))
    with np.errstate(all="ignore"):
        got, want, fn = _both(lambda: compile(outs), {"a": x})
    assert fn.whole_step_active(), fn.step_declined
    for a_, b_ in zip(got, want, strict=True):
        np.testing.assert_array_equal(np.isnan(a_), np.isnan(b_))
    _close(got, want, get_op("layer_norm").tolerance)


def _classifier(seed: int = 0) -> tuple[Any, dict[str, np.ndarray], list[Variable]]:
    """Linear, layer norm, GELU, linear, softmax cross-entropy, AdamW: a small
    classifier's training step."""
    rng = np.random.default_rng(seed)
    model = nn.Sequential(nn.Linear(6, 8), nn.LayerNorm(8), nn.GELU(), nn.Linear(8, 4))
    model.initialize(seed)
    g = Graph()
    x, y = g.input("x", (8, 6)), g.input("y", (8,), "int64")
    logits = model(x)
    probs = logits.softmax(-1)
    loss = nn.cross_entropy(logits, y) + (probs * probs).mean()
    program = nn.AdamW(model.parameters(), lr=1e-2).compile(loss)
    feeds: dict[str, np.ndarray] = {
        "x": rng.standard_normal((8, 6)).astype(np.float32),
        "y": rng.integers(0, 4, 8),
    }
    return program, feeds, list(model.parameters())


def test_a_training_step_with_layer_norm_and_softmax_compiles_whole() -> None:
    """The row programs (layer norm, softmax, log-softmax and their gradients) and
    one_hot are written into the step: the classifier's step runs as one compiled
    function and trains as the numpy path does."""
    runs = {}
    for flag in (True, False):
        jit.set_enabled(flag)
        program, feeds, params = _classifier()
        losses = [float(program(feeds)[0]) for _ in range(20)]
        runs[flag] = (losses, [p.value.copy() for p in params], _fn(program, feeds))
    fn = runs[True][2]
    assert fn.step_plan is not None, fn.step_declined
    assert fn.whole_step_active(), fn.step_declined
    ops = {n.op for n in program.executable.schedule.nodes}
    assert {"layer_norm", "layer_norm_backward", "log_softmax", "softmax", "one_hot"} <= ops
    np.testing.assert_allclose(runs[True][0], runs[False][0], rtol=1e-4, atol=1e-6)
    for a, b in zip(runs[True][1], runs[False][1], strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)
    assert runs[True][0][-1] < runs[True][0][0]


def test_a_label_out_of_range_raises_the_typed_error_and_updates_nothing() -> None:
    program, feeds, params = _classifier()
    program(feeds)
    fn = _fn(program, feeds)
    assert fn.whole_step_active(), fn.step_declined
    before = [p.value.copy() for p in params]
    bad = dict(feeds, y=np.array([0, 1, 2, 3, 4, 0, 1, 2]))
    with pytest.raises(OutOfRangeError, match="one_hot: index 4 is out of range"):
        program(bad)
    for p, b in zip(params, before, strict=True):
        np.testing.assert_array_equal(p.value, b)
    program(feeds)  # the step stays compiled
    assert fn.whole_step_active(), fn.step_declined
    assert not np.array_equal(params[0].value, before[0])


class _Attention(nn.Module):
    """Embedding, pre-norm causal self-attention (qkv in one Linear, sliced), head."""

    def __init__(self, vocab: int, d: int) -> None:
        super().__init__()
        self.emb, self.ln = nn.Embedding(vocab, d), nn.LayerNorm(d)
        self.qkv, self.head = nn.Linear(d, 3 * d), nn.Linear(d, vocab)

    def forward(self, idx: Tensor) -> Tensor:
        x = self.emb(idx)
        _, t, d = x.shape
        qkv = self.qkv(self.ln(x))
        q, k, v = (qkv[:, :, i * d : (i + 1) * d] for i in range(3))
        mask = np.triu(np.full((t, t), -1e9, dtype=np.float32), 1)
        att = ((q @ k.swapaxes(-1, -2)) * (1.0 / np.sqrt(d)) + x.graph.constant(mask)).softmax(-1)
        out: Tensor = self.head(x + att @ v)
        return out


def _attention() -> tuple[Any, dict[str, np.ndarray], list[Variable]]:
    rng = np.random.default_rng(1)
    model = _Attention(8, 8)
    model.initialize(1)
    g = Graph()
    idx, tgt = g.input("idx", (2, 4), "int64"), g.input("tgt", (8,), "int64")
    loss = nn.cross_entropy(model(idx).reshape(8, 8), tgt)
    # SGD: the key projection's bias has a zero gradient (softmax is shift-invariant),
    # whose rounding noise Adam would turn into full-size steps
    program = nn.SGD(model.parameters(), lr=0.2).compile(loss)
    feeds: dict[str, np.ndarray] = {"idx": rng.integers(0, 8, (2, 4)), "tgt": rng.integers(0, 8, 8)}
    return program, feeds, list(model.parameters())


def test_a_small_attention_training_step_compiles_whole(monkeypatch: pytest.MonkeyPatch) -> None:
    """Embedding lookups and their gradients (gather, scatter_add), slices of the qkv
    projection and their gradients (slice, scatter_slice), layer norm and softmax: one
    compiled step (above the default work limit: raised here), training as numpy."""
    monkeypatch.setattr(step, "WORK_LIMIT", 1 << 17)
    runs = {}
    for flag in (True, False):
        jit.set_enabled(flag)
        program, feeds, params = _attention()
        losses = [float(program(feeds)[0]) for _ in range(15)]
        runs[flag] = (losses, [p.value.copy() for p in params], _fn(program, feeds))
    fn = runs[True][2]
    assert fn.step_plan is not None, fn.step_declined
    assert fn.whole_step_active(), fn.step_declined
    ops = {n.op for n in program.executable.schedule.nodes}
    assert {"gather", "scatter_add", "slice", "scatter_slice", "softmax", "layer_norm"} <= ops
    np.testing.assert_allclose(runs[True][0], runs[False][0], rtol=1e-4, atol=1e-6)
    for a, b in zip(runs[True][1], runs[False][1], strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)
    assert runs[True][0][-1] < runs[True][0][0]
    before = [p.value.copy() for p in params]
    with pytest.raises(OutOfRangeError, match="gather: index 9 is out of range"):
        program(dict(feeds, idx=np.full((2, 4), 9)))
    for p, b in zip(params, before, strict=True):
        np.testing.assert_array_equal(p.value, b)
    assert fn.whole_step_active(), fn.step_declined


def _deep(layers: int) -> tuple[Any, dict[str, np.ndarray], list[Variable]]:
    """A deep narrow MLP (``layers`` Linear(8, 8) + tanh) trained by Adam on a batch of 4."""
    rng = np.random.default_rng(3)
    blocks: list[nn.Module] = []
    for _ in range(layers):
        blocks += [nn.Linear(8, 8), nn.Tanh()]
    model = nn.Sequential(*blocks, nn.Linear(8, 1))
    model.initialize(3)
    g = Graph()
    x, y = g.input("x", (4, 8)), g.input("y", (4, 1))
    program = nn.Adam(model.parameters(), lr=1e-2).compile(nn.mse_loss(model(x), y))
    feeds = {"x": rng.normal(size=(4, 8)).astype(np.float32),
             "y": rng.normal(size=(4, 1)).astype(np.float32)}  # fmt: skip
    return program, feeds, list(model.parameters())


def test_a_step_too_large_for_one_function_compiles_in_pieces(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A deep model's step, above the work of one function (lowered here so that the
    model stays small), compiles as several functions called in sequence (0-d values
    passed between them in the work buffer: Adam's bias corrections) and trains as
    the numpy path does."""
    monkeypatch.setattr(step, "WORK_LIMIT", 1 << 11)
    runs = {}
    for flag in (True, False):
        jit.set_enabled(flag)
        program, feeds, params = _deep(6)
        losses = [float(program(feeds)[0]) for _ in range(5)]
        runs[flag] = (losses, [p.value.copy() for p in params], _fn(program, feeds))
    fn = runs[True][2]
    assert fn.step_plan is not None, fn.step_declined
    assert fn.whole_step_active(), fn.step_declined
    assert fn.step_plan.flops > 4 * step.WORK_LIMIT
    assert fn.step_plan.pieces >= 4
    assert fn.step_plan.source.count("def _piece") == fn.step_plan.pieces
    np.testing.assert_allclose(runs[True][0], runs[False][0], rtol=1e-4, atol=1e-6)
    for a, b in zip(runs[True][1], runs[False][1], strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)
    assert runs[True][0][-1] < runs[True][0][0]


def test_a_step_within_one_function_is_not_cut() -> None:
    program, feeds, _ = _xor("sgd")
    program(feeds)
    fn = _fn(program, feeds)
    assert fn.step_plan is not None, fn.step_declined
    assert fn.step_plan.pieces == 1
    assert "def _piece" not in fn.step_plan.source


def test_large_steps_stay_on_numpy() -> None:
    g = Graph()
    a = g.input("a", (256, 256))
    program = compile([(a @ a).sum()])
    feeds = {"a": np.ones((256, 256), np.float32)}
    program(feeds)
    fn = _fn(program, feeds)
    assert fn.step_plan is None
    assert "operations" in fn.step_declined


def test_switching_off_takes_effect_for_the_next_run() -> None:
    program, feeds, _ = _xor("sgd")
    program(feeds)
    assert _fn(program, feeds).whole_step_active()
    jit.set_enabled(False)
    program(feeds)
    assert not hasattr(_fn(program, feeds), "step_plan")


def test_the_compiled_step_is_cached_on_disk_across_processes(tmp_path: Any) -> None:
    script = (
        "import time, numpy as np\n"
        "from asgrad.tensor import Graph, compile\n"
        "from asgrad.tensor.cpu.jit import step\n"
        "step.WHOLE_STEP_WITHOUT_UPDATES = True\n"
        "g = Graph(); a = g.input('a', (3, 4))\n"
        "p = compile([(a * 3.0 + 1.0).relu().sum(0)])\n"
        "f = {'a': np.ones((3, 4), np.float32)}\n"
        "t = time.perf_counter(); out = p(f)[0]\n"
        "fn = p.executable.function(f)\n"
        "assert fn.whole_step_active(), fn.step_declined\n"
        "print(out.tolist(), fn.step_plan.source.count('def step'))\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_CACHE_DIR"}  # set by this process
    env.update({"ASGRAD_CACHE_DIR": str(tmp_path), "ASGRAD_CPU_JIT": "1"})
    outs = [
        subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True)
        for _ in range(2)
    ]
    for o in outs:
        assert o.returncode == 0, o.stderr
        assert o.stdout.strip() == "[12.0, 12.0, 12.0, 12.0] 1"
    modules = list((tmp_path / "numba" / "steps").glob("asgrad_step_*.py"))
    assert len(modules) == 1
    assert list(tmp_path.rglob("*.nbi")), "no Numba cache index"


def test_evaluations_stay_on_numpy_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(step, "WHOLE_STEP_WITHOUT_UPDATES", False)
    g = Graph()
    a = g.input("a", (3, 4))
    program = compile([(a * 2.0).sum()])
    feeds = {"a": np.ones((3, 4), np.float32)}
    for _ in range(3):
        program(feeds)
    fn = _fn(program, feeds)
    assert fn.step_plan is None
    assert "without updates" in fn.step_declined
