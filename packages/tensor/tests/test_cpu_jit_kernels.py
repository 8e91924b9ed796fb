"""The compiled kernels of the line path (:mod:`asgrad.tensor.cpu.jit.kernels`) against numpy.

Every op with a compiled lowering (the structural families' kernels, and every op with
a scalar expression, whose loop is rendered from it) runs every registry case, float32
and float64, in a program compiled with the compiled path on and in one compiled with
it off: the results agree within the op's tolerance (float64: to 1e-9), and the
generated function calls the compiled kernel exactly where the op's lowering says it
applies, so the path cannot silently stop being taken. Edge cases: empty arrays,
non-contiguous inputs, NaN and infinities.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import pytest

from asgrad.tensor import Graph, OpCase, all_ops, compile, get_op
from asgrad.tensor.cpu import CPUExecutable, jit
from asgrad.tensor.cpu.lowering import FAMILY_LOWERINGS, resolve
from asgrad.tensor.ir.registry import TensorType

pytest.importorskip("numba")


@pytest.fixture(autouse=True)
def _restore_switch() -> Iterator[None]:
    yield
    jit.set_enabled(None)


def _program(
    name: str, arrays: Sequence[np.ndarray], attrs: dict[str, Any], on: bool
) -> tuple[np.ndarray, str]:
    """The op on ``arrays`` in a compiled program, and the generated function's source
    (graph passes off, so that a node of constants stays a line)."""
    jit.set_enabled(on)
    g = Graph()
    xs = [g.input(f"x{i}", a.shape, a.dtype.name) for i, a in enumerate(arrays)]
    out = g.apply(name, xs, attrs)
    program = compile([out], optimize_graph=False)
    (got,) = program({f"x{i}": a for i, a in enumerate(arrays)})
    assert isinstance(program.executable, CPUExecutable)
    (fn,) = program.executable._fns.values()
    return got, fn.source


def _cast(a: Any, dtype: str) -> np.ndarray:
    arr: np.ndarray = np.asarray(a)
    return arr.astype(dtype) if arr.dtype.kind == "f" else arr


def _compiled_ops() -> list[str]:
    """The primitive ops with a compiled lowering on the line path."""
    return sorted(
        op.name
        for op in all_ops()
        if op.primitive and op.cases is not None and resolve(op).compiled is not None
    )


def _cases() -> list[tuple[str, OpCase, str]]:
    out: list[tuple[str, OpCase, str]] = []
    for name in _compiled_ops():
        cases = get_op(name).cases
        assert cases is not None
        for case in cases(np.random.default_rng(0)):
            out.extend((name, case, dtype) for dtype in ("float32", "float64"))
    return out


CASES = _cases()


def _agree(name: str, got: np.ndarray, expected: np.ndarray, dtype: str) -> None:
    assert got.shape == expected.shape
    assert got.dtype == expected.dtype
    if got.dtype.kind in "biu":
        np.testing.assert_array_equal(got, expected)
        return
    rtol, atol = get_op(name).tolerance if dtype == "float32" else (1e-9, 1e-12)
    np.testing.assert_allclose(got, expected, rtol=rtol, atol=atol)


def _chosen(name: str, arrays: Sequence[np.ndarray], out: np.ndarray, attrs: Any) -> bool:
    """Whether the op's compiled lowering takes a node at these types."""
    op = get_op(name)
    g = Graph()
    xs = [g.input(f"x{i}", a.shape, a.dtype.name) for i, a in enumerate(arrays)]
    node = g.apply(name, xs, attrs).node
    choose = resolve(op).compiled
    assert choose is not None
    types = [TensorType(a.shape, a.dtype.name) for a in arrays]
    return choose(node, types, TensorType(out.shape, out.dtype.name)) is not None


@pytest.mark.parametrize(
    ("name", "case", "dtype"),
    CASES,
    ids=[f"{n}[{c.label or i}]-{d}" for i, (n, c, d) in enumerate(CASES)],
)
def test_compiled_kernel_agrees_with_the_numpy_path(name: str, case: OpCase, dtype: str) -> None:
    arrays = [_cast(a, dtype) for a in case.inputs]
    attrs = dict(case.attrs)
    with np.errstate(all="ignore"):
        on, source = _program(name, arrays, attrs, True)
        off, numpy_source = _program(name, arrays, attrs, False)
    _agree(name, on, off, dtype)
    applies = _chosen(name, arrays, off, attrs)
    assert ("= jk" in source) == applies, source
    assert "jk" not in numpy_source


# The ops whose compiled loop must be taken at float32 (a regression here is a
# slowdown the values would not show): the structural kernels, and elementwise ops
# whose expressions vectorise (GELU through the float32 erf and exp helpers).
_TAKEN = {
    "gelu": [np.ones((4, 8))],
    "gelu_backward": [np.ones((4, 8)), np.ones((4, 8))],
    "leaky_relu": [np.ones((4, 8))],
    "silu": [np.ones((4, 8))],
    "sigmoid": [np.ones((4, 8))],
}


def test_the_heavy_ops_have_compiled_kernels() -> None:
    compiled = {name for f in FAMILY_LOWERINGS.values() for name in f.compiled}
    assert compiled == {
        "conv2d",
        "conv2d_backward_input",
        "conv2d_backward_weight",
        "max_pool2d",
        "max_pool2d_backward",
        "scatter_add",
        "adam_ema",
        "adam_update",
    }
    registered = {op.name for op in all_ops()}
    assert compiled <= registered
    for name, arrays in _TAKEN.items():
        xs = [a.astype(np.float32) for a in arrays]
        assert _chosen(name, xs, xs[0], {}), name


@pytest.mark.parametrize(
    ("name", "arrays", "attrs"),
    [
        ("softmax", [np.ones((4, 8))], {"axis": -1}),
        ("log_softmax", [np.ones((4, 8))], {"axis": 1}),
        ("layer_norm", [np.ones((4, 8)), np.ones(8), np.ones(8)], {"normalized_shape": (8,)}),
        ("layer_norm_backward", [np.ones((4, 8))] * 2, {"normalized_shape": (8,)}),
    ],
)
def test_row_programs_over_trailing_axes_get_rendered_compiled_kernels(
    name: str, arrays: list[np.ndarray], attrs: dict[str, Any]
) -> None:
    xs = [a.astype(np.float32) for a in arrays]
    assert _chosen(name, xs, xs[0], get_op(name).normalize_attrs(attrs)), name


def test_a_softmax_over_a_middle_axis_is_compiled_and_batch_norm_is_not() -> None:
    x = np.ones((4, 8, 3), np.float32)
    assert _chosen("softmax", [x], x, {"axis": 1})
    assert not _chosen("batch_norm", [x], x, {"eps": 1e-5})


def test_no_elementwise_op_is_named_in_the_cpu_backend() -> None:
    names = {f for family in FAMILY_LOWERINGS.values() for f in (*family.numpy, *family.emit)}
    names |= {f for family in FAMILY_LOWERINGS.values() for f in family.compiled}
    elementwise = {op.name for op in all_ops() if op.family == "elementwise"}
    assert not names & elementwise


def test_generated_line_calls_the_compiled_kernel_into_a_buffer(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from asgrad.tensor.cpu.jit import fuse_segments

    monkeypatch.setattr(fuse_segments, "SMALL_ELEMENTS", 0)  # each op its own line
    jit.set_enabled(True)
    g = Graph()
    x = g.input("x", (8, 64))
    y = ((x * 2.0).gelu() * 3.0).softmax(-1) * 1.0
    program = compile([y])
    a = np.random.default_rng(1).standard_normal((8, 64)).astype(np.float32)
    (got,) = program({"x": a})
    assert isinstance(program.executable, CPUExecutable)
    (fn,) = program.executable._fns.values()
    called = [
        getattr(fn.__globals__[line.split("= ")[1].split("(")[0]], "func", None)
        for line in fn.source.splitlines()
        if "= jk" in line
    ]
    assert len(called) == 2, fn.source
    assert called[0].__module__.startswith("asgrad_loop_")  # gelu's, rendered
    assert called[1].__module__.startswith("asgrad_rows_")  # softmax's, rendered
    # Both write into a buffer (a dying input or a scratch slot), not fresh memory.
    assert sum("= jk" in line and "out=" in line for line in fn.source.splitlines()) == 2
    jit.set_enabled(False)
    (expected,) = compile([y])({"x": a})
    np.testing.assert_allclose(got, expected, rtol=5e-5, atol=5e-6)


def test_asgrad_cpu_jit_0_runs_the_numpy_path(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ASGRAD_CPU_JIT", "0")
    jit.set_enabled(None)
    assert not jit.enabled()
    x = np.random.default_rng(2).standard_normal((4, 16)).astype(np.float32)
    got, _ = _program("gelu", [x], {"approximate": "none"}, on=False)
    jit.set_enabled(None)
    got_env, source_env = _program_env(x)
    assert "jk" not in source_env
    assert " = z" in source_env  # the numpy float32 path
    np.testing.assert_array_equal(got_env, got)
    monkeypatch.setenv("ASGRAD_CPU_JIT", "1")
    assert jit.enabled()
    _, source_on = _program_env(x)
    assert "= jk" in source_on


def _program_env(x: np.ndarray) -> tuple[np.ndarray, str]:
    """:func:`_program` for gelu, following the environment (no override)."""
    g = Graph()
    out = g.input("x0", x.shape).gelu()
    program = compile([out])
    (got,) = program({"x0": x})
    assert isinstance(program.executable, CPUExecutable)
    (fn,) = program.executable._fns.values()
    return got, fn.source


# -- edge cases -----------------------------------------------------------------------------
_EDGES: list[tuple[str, list[np.ndarray], dict[str, Any]]] = [
    ("gelu", [np.zeros((0, 5))], {"approximate": "none"}),
    ("softmax", [np.zeros((0, 4))], {"axis": -1}),
    ("log_softmax", [np.zeros((3, 0, 2))], {"axis": 0}),
    ("layer_norm", [np.zeros((0, 8))], {"normalized_shape": (8,), "eps": 1e-5}),
    (
        "scatter_add",
        [np.zeros((0, 3)), np.zeros((0,), np.int64), np.zeros((4, 3))],
        {"axis": 0},
    ),
    ("adam_ema", [np.zeros((0,)), np.zeros((0,))], {"beta": 0.9}),
]


@pytest.mark.parametrize(("name", "arrays", "attrs"), _EDGES, ids=[e[0] for e in _EDGES])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_empty_arrays(
    name: str, arrays: list[np.ndarray], attrs: dict[str, Any], dtype: str
) -> None:
    inputs = [_cast(a, dtype) for a in arrays]
    on, _ = _program(name, inputs, attrs, True)
    off, _ = _program(name, inputs, attrs, False)
    assert on.shape == off.shape
    assert on.dtype == off.dtype


_SPECIALS = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -3.0, 40.0, -40.0, 1e-30])


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_nan_and_infinities_propagate_as_in_numpy(dtype: str) -> None:
    x = _SPECIALS.astype(dtype)
    rows = np.stack([x, np.roll(x, 3), np.linspace(-2, 2, x.size).astype(dtype)])
    cases: list[tuple[str, list[np.ndarray], dict[str, Any]]] = [
        ("gelu", [x], {"approximate": "none"}),
        ("gelu_backward", [np.ones_like(x), x], {"approximate": "none"}),
        ("softmax", [rows], {"axis": -1}),
        ("log_softmax", [rows], {"axis": -1}),
        ("softmax", [rows], {"axis": 0}),
        ("layer_norm", [rows], {"normalized_shape": (x.size,), "eps": 1e-5}),
        ("adam_ema", [x, np.roll(x, 1)], {"beta": 0.9, "square": True}),
        (
            "max_pool2d_backward",
            [np.ones((1, 1, 2, 5), dtype), rows[:, :10].reshape(1, 1, 3, 10)[:, :, :2]],
            {"kernel_size": (1, 2), "stride": (1, 2), "padding": (0, 0)},
        ),
    ]
    for name, arrays, attrs in cases:
        on, source = _program(name, arrays, attrs, True)
        with np.errstate(all="ignore"):  # numpy warns of the NaNs it makes; Numba does not
            off, _ = _program(name, arrays, attrs, False)
        assert "= jk" in source
        assert np.array_equal(np.isnan(on), np.isnan(off)), (name, on, off)
        finite = np.isfinite(off)
        assert np.array_equal(np.isfinite(on), finite), (name, on, off)
        assert np.array_equal(on[~finite & ~np.isnan(off)], off[~finite & ~np.isnan(off)]), name
        rtol, atol = get_op(name).tolerance
        np.testing.assert_allclose(on[finite], off[finite], rtol=rtol, atol=atol, err_msg=name)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_the_compiled_tanh_is_within_a_few_ulp_of_the_exact_one(dtype: str) -> None:
    from asgrad.tensor.cpu.jit import _numba

    @_numba.kernel
    def tanh_all(x: np.ndarray, out: np.ndarray) -> None:
        for i in range(x.size):
            out[i] = _numba.tanh(x[i])

    x = np.concatenate([np.linspace(-12, 12, 200_001), np.geomspace(1e-12, 1e-2, 2001)])
    x = np.concatenate([x, -x, [0.0, np.inf, -np.inf, np.nan]]).astype(dtype)
    got = np.empty_like(x)
    tanh_all(x, got)
    exact = np.tanh(x.astype(np.float64))
    finite = np.isfinite(x)
    ulp = np.spacing(np.abs(exact[finite]).astype(dtype)).astype(np.float64)
    assert np.max(np.abs(got[finite] - exact[finite]) / ulp) <= 8
    assert np.array_equal(got[~finite], exact[~finite], equal_nan=True)
    assert np.all(np.abs(got[finite]) <= 1)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_non_contiguous_inputs(dtype: str) -> None:
    """Transposed and strided values reach the kernels as numpy would see them."""
    rng = np.random.default_rng(5)
    a = rng.standard_normal((6, 32)).astype(dtype)
    img = rng.standard_normal((2, 3, 4, 9, 8)).astype(dtype)

    def build(on: bool) -> list[np.ndarray]:
        jit.set_enabled(on)
        g = Graph()
        x = g.input("a", a.shape, dtype)
        xi = g.input("img", img.shape, dtype)
        t = x.transpose((1, 0))
        outs = [
            t.gelu(),
            t.softmax(-1),
            g.apply("layer_norm", [t], {"normalized_shape": (6,), "eps": 1e-5}),
            g.apply(
                "max_pool2d_backward",
                [xi[1].transpose((0, 1, 3, 2))[:, :, 1::2, 1::2], xi[0].transpose((0, 1, 3, 2))],
                {"kernel_size": (2, 2), "stride": (2, 2), "padding": (0, 0)},
            ),
        ]
        return list(compile(outs)({"a": a, "img": img}))

    names = ("gelu", "softmax", "layer_norm", "max_pool2d_backward")
    for name, on, off in zip(names, build(True), build(False), strict=True):
        _agree(name, on, off, dtype)


def test_importing_asgrad_does_not_import_numba() -> None:
    code = "import sys, asgrad.tensor; print('numba' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_compiled_kernels_are_cached_on_disk(tmp_path: Any) -> None:
    code = (
        "import numpy as np\n"
        "from asgrad.tensor import Graph, compile\n"
        "g = Graph(); x = g.input('x', (3, 4), 'float64')\n"
        "print(compile([x.softmax(-1)])({'x': np.ones((3, 4))})[0].sum())\n"
    )
    env = {**os.environ, "ASGRAD_CACHE_DIR": str(tmp_path), "ASGRAD_CPU_JIT": "1"}
    env.pop("NUMBA_CACHE_DIR", None)
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env
    )
    assert float(out.stdout) == pytest.approx(3.0)
    assert list((tmp_path / "numba").rglob("*.nbi")), "no Numba cache index written"


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_scatter_add_of_an_embedding_gradient(dtype: str) -> None:
    """2-D indices (a batch of token ids): the same sums, in ``np.add.at``'s order."""
    from asgrad.tensor.errors import OutOfRangeError

    rng = np.random.default_rng(6)
    g = rng.standard_normal((4, 9, 8)).astype(dtype)
    idx = rng.integers(0, 5, (4, 9))
    like = np.zeros((5, 8), dtype)
    on, source = _program("scatter_add", [g, idx, like], {"axis": 0}, True)
    off, _ = _program("scatter_add", [g, idx, like], {"axis": 0}, False)
    assert "= jk" in source
    np.testing.assert_array_equal(on, off)
    idx[1, 2] = 5
    for flag in (True, False):
        with pytest.raises(OutOfRangeError, match="index 5 is out of range"):
            _program("scatter_add", [g, idx, like], {"axis": 0}, flag)


def test_a_compiled_row_max_that_no_sum_rereads_keeps_nan() -> None:
    from asgrad.tensor.cpu.jit.render_rows import rows_kernel
    from asgrad.tensor.ir.rows import RowBuilder

    p = RowBuilder(("element",), axes=(1,))
    x = p.input(0)
    program = p.program(x - p.reduce("max", x))  # the max alone reaches the result
    a = np.array([[1.0, np.nan, 3.0] + [0.0] * 13, [1.0] * 16], np.float32)
    t = TensorType(a.shape, "float32")
    entry = rows_kernel(program, [t], t)
    assert entry is not None
    got = entry.load()(a)
    assert np.isnan(got[0]).all()
    np.testing.assert_array_equal(got[1], np.zeros(16, np.float32))


_WRITTEN_OVER = [
    ("gelu_backward", 2, {"approximate": "none"}),
    ("sigmoid", 1, {}),
    ("softmax", 1, {"axis": -1}),
    ("softmax", 1, {"axis": 1}),  # the slab form: rows along a middle axis
    ("layer_norm_backward", 2, {"normalized_shape": (16,), "eps": 1e-5}),
]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize(("name", "arity", "attrs"), _WRITTEN_OVER, ids=lambda v: str(v))
def test_a_kernel_written_over_one_of_its_inputs_computes_what_it_computes_fresh(
    name: str, arity: int, attrs: dict[str, Any], dtype: str
) -> None:
    """The executor hands a dying input back as ``out`` (``k(v1, v2, out=v1)``): the
    compiled kernels have a loop reading that input from ``out``, whose result must be
    the fresh one's, for each input it may be."""
    rng = np.random.default_rng(11)
    arrays = [rng.standard_normal((3, 5, 16)).astype(dtype) for _ in range(arity)]
    types = [TensorType(a.shape, dtype) for a in arrays]
    g = Graph()
    node = g.apply(name, [g.input(f"x{i}", a.shape, dtype) for i, a in enumerate(arrays)], attrs)
    choose = resolve(get_op(name)).compiled
    assert choose is not None
    entry = choose(node.node, types, node.node.type)
    assert entry is not None
    fn = entry.load()
    expected = fn(*arrays, **attrs)
    for j in range(entry.leading):
        given = [a.copy() for a in arrays]
        got = fn(*given, out=given[j], **attrs)
        assert got is given[j]
        np.testing.assert_array_equal(got, expected)
