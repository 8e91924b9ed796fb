"""The Numba renderer of scalar expressions (:mod:`asgrad.tensor.cpu.jit.render`).

Every primitive of the IR has a Numba spelling, and each spelling computes the
primitive's numpy meaning (:func:`asgrad.tensor.ir.scalar.render_numpy`) at every
dtype where it has one, NaN, infinities and signed zeros included; where it has none
(a float to integer cast, an integer power) rendering says so instead of guessing.
"""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("numba")

from asgrad.tensor.cpu.jit.emit import UnsupportedError
from asgrad.tensor.cpu.jit.render import PRELUDE, SPELLINGS, render_numba
from asgrad.tensor.cpu.jit.step_run import load_module
from asgrad.tensor.ir import scalar as s

_FLOAT = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 0.5, -1.5, 2.5, 3.0, -7.25, 1e-30, 80.0])
_INT = np.array([0, 1, -1, 2, -3, 7, 100, -100, 5, 31, 63, 64])
_BOOL = np.array([True, False, True, False, True, True, False, False, True, False, True, False])


def test_every_primitive_has_a_numba_spelling() -> None:
    assert set(SPELLINGS) == set(s.PRIMITIVES)


def _inputs(dtype: str, arity: int) -> list[np.ndarray]:
    base = {"bool": _BOOL, "int32": _INT, "int64": _INT}.get(dtype, _FLOAT)
    return [np.roll(base, 5 * k).astype(dtype) for k in range(arity)]


def _expressions(dtype: str) -> list[tuple[str, s.Expr, list[np.ndarray]]]:
    """Each primitive applied to inputs of ``dtype`` (a condition of bools for where)."""
    out = []
    for name, prim in sorted(s.PRIMITIVES.items()):
        args = [s.arg(i) for i in range(prim.arity)]
        arrays = _inputs(dtype, prim.arity)
        if name == "where":
            arrays[0] = _BOOL.copy()
        if name == "cast":
            for target in ("float32", "float64", "int64", "bool"):
                out.append((f"cast-{target}", s.cast(args[0], target), arrays))
            continue
        out.append((name, s.Expr(name, tuple(args)), arrays))
    out.append(("const-compare", s.gt(s.arg(0), 0.1), _inputs(dtype, 1)))
    out.append(("const-mul", s.arg(0) * 0.1 + 1, _inputs(dtype, 1)))
    return out


def _reference(e: s.Expr, arrays: list[np.ndarray]) -> np.ndarray | None:
    """numpy's value, or None where numpy refuses the dtypes (no such loop)."""
    try:
        with np.errstate(all="ignore"):
            return s.render_numpy(e, arrays, _composite_dtype(e, arrays))
    except (TypeError, ValueError):
        return None


def _composite_dtype(e: s.Expr, arrays: list[np.ndarray]) -> str:
    """numpy's dtype of an expression of several primitives, evaluated as numpy would."""
    if e.op == "arg":
        return arrays[int(e.value)].dtype.name  # type: ignore[call-overload]  # the index
    if e.op == "cast":
        return str(e.value)
    samples = [
        a.value if a.op == "const" else np.zeros((), _composite_dtype(a, arrays)) for a in e.args
    ]
    with np.errstate(all="ignore"):
        return str(np.asarray(s.PRIMITIVES[e.op].numpy(*samples)).dtype)


@pytest.mark.parametrize("dtype", ["float32", "float64", "int64", "bool"])
def test_each_spelling_computes_the_primitives_numpy_meaning(dtype: str) -> None:
    # One module of loops per dtype, written under the compiled path's cache and compiled
    # with Numba's cache: a later run loads the loops of an unchanged source.
    loops: list[str] = []
    checks: list[tuple[int, str, list[np.ndarray], np.ndarray]] = []
    for k, (label, e, arrays) in enumerate(_expressions(dtype)):
        want = _reference(e, arrays)
        if want is None:
            continue
        out = str(want.dtype)
        names = [f"x{j}" for j in range(len(arrays))]
        try:
            body = render_numba(e, [f"{n}[i]" for n in names], [a.dtype.name for a in arrays], out)
        except UnsupportedError:
            continue  # no Numba form at these dtypes: see the test below
        loops += [
            "@numba.njit(cache=True, error_model='numpy')",
            f"def f{k}({', '.join(names)}, out):",
            "    for i in range(out.shape[0]):",
            f"        out[i] = {body}",
            "",
        ]
        checks.append((k, label, arrays, want))
    assert checks
    source = "import numpy as np\nimport numba\n" + PRELUDE + "\n" + "\n".join(loops)
    module = load_module(source, "asgrad_test_render")
    for k, label, arrays, want in checks:
        got = np.empty_like(want)
        getattr(module, f"f{k}")(*arrays, got)
        if want.dtype.kind == "f":
            assert np.array_equal(np.isnan(got), np.isnan(want)), (label, got, want)
            finite = np.isfinite(want)
            assert np.array_equal(got[~finite], want[~finite], equal_nan=True), (label, got, want)
            rtol = 3e-6 if want.dtype == np.float32 else 1e-12
            np.testing.assert_allclose(
                got[finite], want[finite], rtol=rtol, atol=1e-6, err_msg=label
            )
        else:
            np.testing.assert_array_equal(got, want, err_msg=label)


@pytest.mark.parametrize(
    ("e", "dtypes", "out"),
    [
        (s.cast(s.arg(0), "int32"), ["float32"], "int32"),
        (s.pow(s.arg(0), s.arg(1)), ["int64", "int64"], "int64"),
        (s.bitwise_and(s.arg(0), s.arg(1)), ["float32", "float32"], "float32"),
        (s.floor_divide(s.arg(0), s.arg(1)), ["int64", "int64"], "int64"),
        (s.remainder(s.arg(0), s.arg(1)), ["int32", "int32"], "int32"),
    ],
    ids=["float-to-int-cast", "integer-power", "bits-of-floats", "floor-divide", "remainder"],
)
def test_primitives_without_a_numba_form_at_these_dtypes_are_declined(
    e: s.Expr, dtypes: list[str], out: str
) -> None:
    with pytest.raises(UnsupportedError):
        render_numba(e, [f"x{j}" for j in range(len(dtypes))], dtypes, out)


def test_constants_take_numpys_type_beside_their_operand() -> None:
    # NEP 50: 0.1 meets a float32 as a float32, so x > 0.1 compares in float32
    text = render_numba(s.gt(s.arg(0), 0.1), ["x"], ["float32"], "bool")
    assert "np.float32(0.1)" in text
    text = render_numba(s.arg(0) * 0.5, ["i"], ["int64"], "float64")
    assert "np.float64(0.5)" in text


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_the_exponential_of_a_negated_square_is_erfs_own_and_numpys_value(dtype: str) -> None:
    """``exp(-(y * y))`` is spelled as erf's float32 form spells its exponential
    (``_exp_neg``), so that LLVM computes one where both apply (GELU's gradient); its
    values are numpy's (NaN stays NaN; an infinite y gives 0; below e**-87, where numpy's
    float32 result is subnormal, within 1e-37)."""
    y = s.arg(0)
    e = s.exp(-(y * y))
    body = render_numba(e, ["x0[i]"], [dtype], dtype)
    assert body.startswith("_exp_neg(")
    assert render_numba(s.exp(-(y * s.arg(1))), ["a", "b"], [dtype] * 2, dtype).startswith("_exp(")
    x = np.concatenate([_FLOAT, np.linspace(-12.0, 12.0, 97)]).astype(dtype)
    source = "\n".join(
        [
            "import numpy as np",
            "import numba",
            PRELUDE,
            "@numba.njit(cache=True, error_model='numpy')",
            "def f(x0, out):",
            "    for i in range(out.shape[0]):",
            f"        out[i] = {body}",
        ]
    )
    got = np.empty_like(x)
    load_module(source, "asgrad_test_render_exp_neg").f(x, got)
    with np.errstate(all="ignore"):
        want = np.exp(-(x * x))
    assert np.array_equal(np.isnan(got), np.isnan(want))
    rtol = 3e-6 if dtype == "float32" else 1e-12
    np.testing.assert_allclose(got, want, rtol=rtol, atol=1e-37)
