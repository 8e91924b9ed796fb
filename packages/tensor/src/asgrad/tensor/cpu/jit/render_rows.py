"""Numba row kernels rendered from row programs (`asgrad.tensor.ir.rows`).

A composite along rows (softmax, layer norm and its gradient...) states its meaning
once, as a `RowProgram`; `rows_kernel` writes it as compiled loops, each expression
spelled by `render_numba`, so the compiled path has no per-op kernel. Two forms, in one
generated module:

* ``_rows``, for reduced axes that end the shape, over the rows of a ``(rows, n)``
  view. Per row, each pass of stages (`RowProgram.groups`) is one loop: a sum or mean
  over a generated helper compiled with reassociation (`asgrad.tensor.cpu.jit._numba.sums`:
  vectorised, as numpy's pairwise sums are reassociated), a max of an input over
  `row_max` (eight lanes, which vectorise) where a later sum reads the input through
  NaN-propagating arithmetic (so a NaN it skips still reaches the results), else over
  `row_max_nan`; subexpressions
  of row scalars alone (layer norm's ``1 / sqrt(var + eps)``) are computed once per
  row; the output expression is one loop writing the row.
* ``_slabs``, for reduced axes followed by others (a softmax over axis 1 of three),
  over ``(pre, n, post)``: the row scalars are arrays over ``post`` and every loop over
  ``post`` is innermost, so it vectorises without reassociation (a NaN-propagating max).

Each form also has a parallel twin (``_p_rows``, ``_p_slabs``: the loop over rows, or
over ``pre``, a ``numba.prange``; each row reduced by one thread exactly as serially),
taken for large results (`asgrad.tensor.cpu.jit.threads`).

In both, the expression of the last stage that the output reads (softmax's
``exp(x - m)``) is written into the output once and reduced from there, not computed
twice, and ``exp(x - max(x))`` is the cheaper ``exp_neg`` (its argument is at most 0).
Batch norm (its kept axis between reduced ones, its weight per row) keeps the numpy
kernel.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from asgrad.tensor.cpu.jit.emit import UnsupportedError, literal
from asgrad.tensor.cpu.jit.kernels import JitKernel
from asgrad.tensor.cpu.jit.render import PRELUDE, render_numba
from asgrad.tensor.ir.registry import TensorType
from asgrad.tensor.ir.rows import RowProgram, Stage, index, reads_inputs
from asgrad.tensor.ir.scalar import Expr, arg, replace

__all__ = ["rows_kernel"]

_FLOATS = ("float32", "float64")


def _contains(e: Expr, sub: Expr) -> bool:
    return e == sub or any(_contains(a, sub) for a in e.args)


# Primitives whose value is NaN when an operand is NaN.
_NAN_PROPAGATING = {
    "add", "sub", "mul", "div", "neg", "exp", "expm1", "log", "log1p", "sqrt", "sin",
    "cos", "tanh", "abs",
}  # fmt: skip


def _propagates(e: Expr) -> bool:
    return e.op in ("arg", "const") or (
        e.op in _NAN_PROPAGATING and all(_propagates(a) for a in e.args)
    )


def _nan_reaches_a_sum(program: RowProgram, j: int, i: int) -> bool:
    """Whether a later stage sums input ``i`` through NaN-propagating arithmetic, so
    that a NaN element the fast max of stage ``j`` skips still makes the row's results
    NaN (softmax's sum of ``exp(x - max)``)."""
    return any(
        s.reduce in ("sum", "mean")
        and i in reads_inputs(s.expr, len(program.inputs))
        and _propagates(s.expr)
        for s in program.stages[j + 1 :]
    )


def _args(e: Expr) -> set[int]:
    """The arguments ``e`` reads."""
    if e.op == "arg":
        return {index(e)}
    return set().union(*(_args(a) for a in e.args)) if e.args else set()


class _Writer:
    """The kernel's source, line by line; names the row scalars it hoists."""

    def __init__(self, program: RowProgram, dtype: str, at: str = "") -> None:
        """``at``: the index of the row's lanes (``"q"``: the slab form's row scalars
        are arrays over the ``post`` axis, its elements ``e[j, q]``)."""
        self.p = program
        self.dtype = dtype
        self.n = len(program.inputs)
        self.at = at
        lane = f"[{at}]" if at else ""
        self.names: list[str] = []  # arg index -> source of its value at (r, j)
        for i, layout in enumerate(program.inputs):
            element = f"e{i}[j, {at}]" if at else f"e{i}[j]"
            self.names.append({"element": element, "position": f"in{i}[j]"}.get(layout, "?"))
        self.names.extend(f"s{j}{lane}" for j in range(len(program.stages)))
        self.arrays: list[str] = []  # the slab form's hoisted row scalars
        self.hoisted: dict[Expr, Expr] = {}
        self.negative: dict[str, str] = {}  # the text of exp(x - max) -> _exp_neg's
        self.body: list[str] = []
        self.helpers: list[str] = []

    def pseudo(self, source: str) -> Expr:
        """A new argument naming ``source``."""
        self.names.append(source)
        return arg(len(self.names) - 1)

    def below_max(self, e: Expr) -> None:
        """Note each ``exp(x - max(x))`` of ``e`` (at most 0) to be spelled
        ``_exp_neg``: the exponential of a non-positive argument, which is cheaper."""
        for a in e.args:
            self.below_max(a)
        if e.op == "exp" and e.args[0].op == "sub":
            x, m = e.args[0].args
            j = index(m) - self.n if m.op == "arg" else -1
            if 0 <= j < len(self.p.stages) and self.p.stages[j] == Stage("max", x):
                self.negative[self.render(e)] = f"_exp_neg({self.render(e.args[0])})"

    def hoist(self, e: Expr, indent: str) -> Expr:
        """``e`` with each subexpression of row scalars alone computed once, before."""
        if e.op in ("arg", "const"):
            return e
        if self.p.is_row_level(e):
            if e not in self.hoisted:
                name = f"h{len(self.hoisted)}"
                if self.at:  # one per lane
                    self.arrays.append(name)
                    self.body.append(f"{indent}for q in range(post):")
                    self.body.append(f"{indent}    {name}[q] = {self.render(e)}")
                    name += "[q]"
                else:
                    self.body.append(f"{indent}{name} = {self.render(e)}")
                self.hoisted[e] = self.pseudo(name)
            return self.hoisted[e]
        return Expr(e.op, tuple(self.hoist(a, indent) for a in e.args), e.value)

    def render(self, e: Expr) -> str:
        text = render_numba(e, self.names, [self.dtype] * len(self.names), self.dtype)
        for old, new in self.negative.items():
            text = text.replace(old, new)
        return text


def _source(program: RowProgram, dtype: str) -> tuple[str, int]:
    """The module's source and how many leading inputs may be the output."""
    n_in = len(program.inputs)
    w = _Writer(program, dtype)
    out = program.out
    stages = [s.expr for s in program.stages]
    # The last stage whose expression the output reads is written into the row once.
    groups = program.groups()
    alone = {g[0] for g in groups if len(g) == 1}
    cached: int | None = None
    for j in reversed(range(len(stages))):
        if stages[j].op != "arg" and _contains(out, stages[j]):
            cached = j if j in alone else None
            break
    after_write: set[int] = set()  # inputs read after the output row is first written
    ind = "        "
    params = [f"a{i}" for i in range(n_in)]
    w.body.append("    for r in range(out.shape[0]):")
    w.body.append(f"{ind}dst = out[r]")
    for i, layout in enumerate(program.inputs):
        if layout == "element":
            w.body.append(f"{ind}e{i} = a{i}[r]")
        else:
            w.body.append(f"{ind}in{i} = a{i}")
    dst: Expr | None = None
    cached_expr = out
    for e in (*stages, out):
        w.below_max(e)
    for k, group in enumerate(groups):
        exprs = [w.hoist(stages[j], ind) for j in group]
        if dst is not None:
            exprs = [replace(e, cached_expr, dst) for e in exprs]
            for e in exprs:
                after_write |= reads_inputs(e, n_in)
        if cached in group:  # a pass of its own
            assert cached is not None
            (e,) = exprs
            cached_expr = e
            w.body.append(f"{ind}for j in range(dst.shape[0]):")
            w.body.append(f"{ind}    dst[j] = {w.render(e)}")
            reduce = program.stages[cached].reduce
            total = "_row_max_nan(dst)" if reduce == "max" else "_row_sum(dst)"
            w.body.append(f"{ind}s{cached} = {total}{' * inv_n' if reduce == 'mean' else ''}")
            dst = w.pseudo("dst[j]")
            continue
        if len(group) == 1 and exprs[0].op == "arg" and index(exprs[0]) < n_in:
            i = index(exprs[0])
            if program.inputs[i] != "element":
                raise UnsupportedError("a reduction of a weight")
            reduce = program.stages[group[0]].reduce
            fast = _nan_reaches_a_sum(program, group[0], i)
            total = (
                f"_row_max{'' if fast else '_nan'}(e{i})" if reduce == "max" else f"_row_sum(e{i})"
            )
            w.body.append(f"{ind}s{group[0]} = {total}{' * inv_n' if reduce == 'mean' else ''}")
            continue
        if any(program.stages[j].reduce == "max" for j in group):
            raise UnsupportedError("a max of an expression")
        w.body.append(_pass(w, k, group, exprs, ind))
    body = w.hoist(out, ind)
    if dst is not None:
        body = replace(body, cached_expr, dst)
        after_write |= reads_inputs(body, n_in)
    w.body.append(f"{ind}for j in range(dst.shape[0]):")
    w.body.append(f"{ind}    dst[j] = {w.render(body)}")
    leading = 0
    while leading < n_in and program.inputs[leading] == "element" and leading not in after_write:
        leading += 1
    kernel = _NJIT + f"def _rows({', '.join(params)}, inv_n, out):\n" + "\n".join(w.body) + "\n"
    kernel += "\n\n" + _slabs(program, dtype, groups, cached)
    kernel += "".join("\n\n" + _over(kernel, i) for i in range(leading))
    serial = [fn for fn in re.split(r"(?m)^(?=@numba\.njit)", kernel) if fn.strip()]
    kernel += "\n\n" + "\n\n".join(_parallel_form(fn) for fn in serial)
    source = "\n".join(
        [
            "import math",
            "import numpy as np",
            "import numba",
            PRELUDE,
            "from time import perf_counter as _clock",
            "from asgrad.tensor.cpu.jit.threads import Site as _Site",
            "_site = _Site(__name__)",
            "from asgrad.tensor.cpu.jit._numba import SUMS as _SUMS",
            "from asgrad.tensor.cpu.jit._numba import row_max as _row_max",
            "from asgrad.tensor.cpu.jit._numba import row_max_nan as _row_max_nan",
            "from asgrad.tensor.cpu.jit._numba import row_sum as _row_sum",
            "",
            *w.helpers,
            kernel,
            _WRAPPER.format(
                params=", ".join(params),
                over="".join(_OVER_CALL.format(i=i) for i in range(leading)),
                first=program.axes[0],
                last=program.axes[-1] + 1,
                dtype=dtype,
                rows=", ".join(_flat(i, layout) for i, layout in enumerate(program.inputs)),
                rows2=", ".join(
                    f"np.ascontiguousarray(a{i}).reshape(pre, n)"
                    if layout == "element"
                    else f"np.ascontiguousarray(a{i}).reshape(-1)"
                    for i, layout in enumerate(program.inputs)
                ),
            ),
        ]
    )
    return source, leading


_NJIT = (
    '@numba.njit(cache=True, fastmath=False, error_model="numpy", nogil=True, boundscheck=False)\n'
)
_NJIT_PARALLEL = _NJIT.replace(")\n", ", parallel=True)\n")


def _parallel_form(fn: str) -> str:
    """The parallel form of a row or slab kernel's source (named ``_p`` + its name):
    its loop over rows (over the leading axis) is a ``numba.prange``, each iteration
    the serial kernel's, so each row is reduced by one thread exactly as serially; the
    slab form's row-scalar arrays are allocated in the loop (one set per thread)."""
    fn = fn.rstrip("\n") + "\n"
    fn = fn.replace(_NJIT, _NJIT_PARALLEL, 1).replace("def _", "def _p_", 1)
    rows = "    for r in range(out.shape[0]):\n"
    if rows in fn:
        return fn.replace(rows, "    for r in numba.prange(out.shape[0]):\n", 1)
    lines = fn.split("\n")
    scratch = [ln for ln in lines if ln.startswith("    ") and " = np.empty(post, " in ln]
    loop = lines.index("    for p in range(pre):")
    kept = [ln for ln in lines[: loop + 1] if ln not in scratch]
    kept[-1] = "    for p in numba.prange(pre):"
    return "\n".join([*kept, *("    " + ln for ln in scratch), *lines[loop + 1 :]])


def _slabs(program: RowProgram, dtype: str, groups: list[list[int]], cached: int | None) -> str:
    """The kernel of the slab form: ``(pre, n, post)`` arrays reduced along axis 1, each
    row scalar an array over ``post``, the loops over ``post`` innermost (vectorised)."""
    n_in = len(program.inputs)
    w = _Writer(program, dtype, at="q")
    stages = [s.expr for s in program.stages]
    for e in (*stages, program.out):
        w.below_max(e)
    ind = "        "
    w.body.append("    for p in range(pre):")
    w.body.append(f"{ind}dst = out[p]")
    for i, layout in enumerate(program.inputs):
        w.body.append(f"{ind}e{i} = a{i}[p]" if layout == "element" else f"{ind}in{i} = a{i}")
    dst: Expr | None = None
    cached_expr = program.out
    minus_inf = literal(float("-inf"), dtype)
    for group in groups:
        exprs = [w.hoist(stages[j], ind) for j in group]
        if dst is not None:
            exprs = [replace(e, cached_expr, dst) for e in exprs]
        w.body.append(f"{ind}for q in range(post):")
        for j in group:
            start = minus_inf if program.stages[j].reduce == "max" else literal(0, dtype)
            w.body.append(f"{ind}    s{j}[q] = {start}")
        w.body.append(f"{ind}for j in range(n):")
        w.body.append(f"{ind}    for q in range(post):")
        for j, e in zip(group, exprs, strict=True):
            w.body.append(f"{ind}        v = {w.render(e)}")
            if j == cached:
                w.body.append(f"{ind}        dst[j, q] = v")
            if program.stages[j].reduce == "max":  # NaN-propagating
                w.body.append(
                    f"{ind}        s{j}[q] = v if ((v > s{j}[q] or v != v) and s{j}[q] == s{j}[q])"
                    f" else s{j}[q]"
                )
            else:
                w.body.append(f"{ind}        s{j}[q] += v")
        means = [j for j in group if program.stages[j].reduce == "mean"]
        if means:
            w.body.append(f"{ind}for q in range(post):")
            w.body.extend(f"{ind}    s{j}[q] = s{j}[q] * inv_n" for j in means)
        if cached in group:
            (cached_expr,) = exprs
            dst = w.pseudo("dst[j, q]")
    body = w.hoist(program.out, ind)
    if dst is not None:
        body = replace(body, cached_expr, dst)
    w.body.append(f"{ind}for j in range(n):")
    w.body.append(f"{ind}    for q in range(post):")
    w.body.append(f"{ind}        dst[j, q] = {w.render(body)}")
    params = ", ".join(f"a{i}" for i in range(n_in))
    arrays = [f"s{j}" for j in range(len(stages))] + w.arrays
    head = ["    pre, n, post = out.shape"]
    head += [f"    {a} = np.empty(post, np.{dtype})" for a in arrays]
    return _NJIT + f"def _slabs({params}, inv_n, out):\n" + "\n".join(head + w.body) + "\n"


def _flat(i: int, layout: str) -> str:
    if layout == "element":
        return f"np.ascontiguousarray(a{i}).reshape(pre, n, post)"
    return f"np.ascontiguousarray(a{i}).reshape(-1)"


_WRAPPER = """
def kernel({params}, *, out=None, **attrs):
    shape = a0.shape
    if out is None or not out.flags.c_contiguous:
        out = np.empty(shape, np.{dtype})
    n = math.prod(shape[{first}:{last}])
    if out.size == 0 or n == 0:
        return out
    pre = math.prod(shape[:{first}])
    post = out.size // (pre * n)
    form = _site.form(out.size) if pre > 1 else 0
    par = form & 1
    rows, slabs = (_p_rows, _p_slabs) if par else (_rows, _slabs){over}
    if form >= 2:
        start = _clock()
    if post == 1:
        rows({rows2}, np.{dtype}(1.0 / n), out.reshape(pre, n))
    else:
        slabs({rows}, np.{dtype}(1.0 / n), out.reshape(pre, n, post))
    if form >= 2:
        _site.timed(out.size, form, _clock() - start)
    return out
"""
_OVER_CALL = """
    if out is a{i}:
        rows, slabs = (
            (_p_rows_over{i}, _p_slabs_over{i}) if par else (_rows_over{i}, _slabs_over{i})
        )"""


def _over(kernels: str, i: int) -> str:
    """``_rows`` and ``_slabs`` of ``kernels`` as ``_rows_over{i}``/``_slabs_over{i}``,
    which read input ``i``'s row from ``out``'s: the executor's memory plan may hand
    that input back as ``out``, and LLVM guards its vectorised loops with a check that
    the output overlaps no input, so an exact alias would run the scalar loops (softmax
    of (16, 4, 64, 64) float32: 0.31 ms into a fresh array, 1.4 ms into its input)."""
    out = []
    for name, at in (("_rows", "r"), ("_slabs", "p")):
        start = kernels.index(f"def {name}(")
        start = kernels.rindex("@numba.njit", 0, start)
        end = kernels.find("\n\n\n", start)
        fn = kernels[start : end if end >= 0 else len(kernels)]
        binding = f" = a{i}[{at}]\n"
        assert fn.count(f"e{i}{binding}") == 1, fn
        fn = fn.replace(f"def {name}(", f"def {name}_over{i}(")
        out.append(fn.replace(f"e{i}{binding}", f"e{i} = dst\n"))
    return "\n\n".join(out) + "\n"


def _pass(w: _Writer, k: int, group: Sequence[int], exprs: Sequence[Expr], ind: str) -> str:
    """A helper summing several stages' expressions in one loop (reassociated), and the
    line calling it."""
    p = w.p
    read = sorted(set().union(*(_args(e) for e in exprs)))
    rows = [f"e{i}" if p.inputs[i] == "element" else f"in{i}" for i in read if i < len(p.inputs)]
    scalars = [w.names[i] for i in read if i >= len(p.inputs)]
    zero = literal(0, w.dtype)
    lines = [
        "@numba.njit(**_SUMS)",
        f"def _pass{k}({', '.join(['r', *rows, *scalars])}):",
        *(f"    t{j} = {zero}" for j in group),
        f"    for j in range({rows[0]}.shape[0]):" if rows else "    for j in range(0):",
        *(f"        t{j} += {w.render(e)}" for j, e in zip(group, exprs, strict=True)),
        f"    return {', '.join(f't{j}' for j in group)}{',' if len(group) == 1 else ''}",
        "",
    ]
    w.helpers.append("\n".join(lines) + "\n")
    means = [j for j in group if p.stages[j].reduce == "mean"]
    call = (
        f"{ind}{', '.join(f's{j}' for j in group)}, = _pass{k}({', '.join(['r', *rows, *scalars])})"
    )
    scale = "".join(f"\n{ind}s{j} = s{j} * inv_n" for j in means)
    return call + scale


def rows_kernel(
    program: RowProgram, ins: Sequence[TensorType], out: TensorType
) -> JitKernel | None:
    """The compiled row kernel of ``program`` at these types, or None (the numpy
    kernel): a float result whose inputs share its dtype, reduced axes that follow one
    another, no input laid out per row."""
    if out.dtype not in _FLOATS or not out.shape or any(t.dtype != out.dtype for t in ins):
        return None
    axes = program.axes
    if axes != tuple(range(axes[0], axes[-1] + 1)) or "row" in program.inputs:
        return None
    try:
        source, leading = _source(program, out.dtype)
    except UnsupportedError:
        return None
    return JitKernel("asgrad_rows", "kernel", leading=leading, source=source)
