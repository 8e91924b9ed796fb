"""Row programs: the one meaning of a composite op that works along rows.

Softmax, log-softmax and the normalisations reduce along some axes and then map every
element. Each states that once, as a `RowProgram`: a sequence of *stages*, each a
reduction (``sum``, ``max`` or ``mean``) over the row of an elementwise `Expr` of the
op's inputs and the earlier stages' row scalars, then one elementwise *output*
expression of the same. The backends render programs, as they render scalar
expressions: numpy here (`numpy_rows`: vectorised reductions with ``keepdims`` and one
numpy call per node), Numba loops (`asgrad.tensor.cpu.jit.render_rows`) and one WGSL
row kernel (the GPU package), each with the per-primitive spellings of its scalar
renderer. Nothing about an op lives in a backend.

>>> from asgrad.tensor.ir.scalar import exp
>>> p = RowBuilder(("element",), axes=(1,))
>>> x = p.input(0)
>>> m = p.reduce("max", x)
>>> s = p.reduce("sum", exp(x - m))
>>> softmax = p.program(exp(x - m) / s)
>>> numpy_rows(softmax, "float64")(np.log(np.array([[1.0, 3.0], [2.0, 2.0]])))
array([[0.25, 0.75],
       [0.5 , 0.5 ]])

In an expression, ``arg(i)`` for ``i`` below the number of inputs is the op's input
``i`` at the element; ``arg(len(inputs) + j)`` is stage ``j``'s row scalar (what
`RowBuilder.reduce` returns). An input is laid out per ``element`` (the shape of the
first input), per ``position`` along the reduced axes (layer norm's weight: the
reduced axes' shape) or per ``row`` (batch norm's weight: one per channel, the kept
axes' sizes). A subexpression of row scalars alone is a row scalar too: renderers
compute it once per row.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from asgrad.tensor.errors import ArgumentError
from asgrad.tensor.ir.scalar import PRIMITIVES, Expr, arg

__all__ = ["REDUCTIONS", "RowBuilder", "RowProgram", "Stage", "numpy_rows", "rows_kernel"]

Layout = Literal["element", "position", "row"]
REDUCTIONS = ("sum", "max", "mean")


@dataclass(frozen=True)
class Stage:
    """A row scalar: ``reduce`` (``sum``, ``max``, ``mean``) of ``expr`` along the row."""

    reduce: str
    expr: Expr


@dataclass(frozen=True)
class RowProgram:
    """A composite along rows: its inputs' layouts, the reduced ``axes`` (of the first
    input, sorted), its `Stage` s and its output expression (see the module docstring)."""

    inputs: tuple[Layout, ...]
    axes: tuple[int, ...]
    stages: tuple[Stage, ...]
    out: Expr

    def scalar(self, j: int) -> Expr:
        """Stage ``j``'s row scalar, as the expressions read it."""
        return arg(len(self.inputs) + j)

    def is_row_level(self, e: Expr) -> bool:
        """Whether ``e`` reads row scalars and constants alone (one value per row)."""
        if e.op == "arg":
            return index(e) >= len(self.inputs)
        return all(self.is_row_level(a) for a in e.args)

    def groups(self) -> list[list[int]]:
        """The stages in passes over the row: each pass's stages read only the row
        scalars of earlier passes (layer norm's gradient takes its two sums at once)."""
        passes: list[list[int]] = []
        for j, stage in enumerate(self.stages):
            needs = reads_scalars(stage.expr, len(self.inputs))
            if passes and not needs & set(passes[-1]):
                passes[-1].append(j)
            else:
                passes.append([j])
        return passes


def index(e: Expr) -> int:
    """The index of an ``arg`` node."""
    assert e.op == "arg"
    assert isinstance(e.value, int)
    return e.value


def reads_scalars(e: Expr, n_inputs: int) -> set[int]:
    """The stages whose row scalars ``e`` reads."""
    if e.op == "arg":
        i = index(e)
        return {i - n_inputs} if i >= n_inputs else set()
    out: set[int] = set()
    for a in e.args:
        out |= reads_scalars(a, n_inputs)
    return out


def reads_inputs(e: Expr, n_inputs: int) -> set[int]:
    """The inputs ``e`` reads."""
    if e.op == "arg":
        i = index(e)
        return {i} if i < n_inputs else set()
    out: set[int] = set()
    for a in e.args:
        out |= reads_inputs(a, n_inputs)
    return out


@dataclass
class RowBuilder:
    """Builds a `RowProgram`: `input`, `reduce` per stage, then `program`."""

    inputs: tuple[Layout, ...]
    axes: tuple[int, ...]
    stages: list[Stage] = field(default_factory=list)

    def input(self, i: int) -> Expr:
        """Input ``i`` at the element."""
        return arg(i)

    def reduce(self, kind: str, e: Expr) -> Expr:
        """A stage reducing ``e`` along the row; returns its row scalar."""
        if kind not in REDUCTIONS:
            raise ArgumentError(f"a row reduction is one of {REDUCTIONS}, got {kind!r}")
        if not any(self.inputs[i] == "element" for i in reads_inputs(e, len(self.inputs))):
            raise ArgumentError(f"a row reduction reads an element of the row, got {e!r}")
        self.stages.append(Stage(kind, e))
        return arg(len(self.inputs) + len(self.stages) - 1)

    def program(self, out: Expr) -> RowProgram:
        """The program with output expression ``out``."""
        return RowProgram(self.inputs, tuple(sorted(self.axes)), tuple(self.stages), out)


# -- numpy ----------------------------------------------------------------------------
# Primitives whose numpy function is a ufunc keeping a float operand's dtype: their
# full-size results may be written into a dead temporary (``out=``).
_IN_PLACE = {
    "add", "sub", "mul", "div", "neg", "exp", "expm1", "log", "log1p", "sqrt", "sin", "cos",
    "tanh", "abs", "maximum", "minimum", "pow",
}  # fmt: skip


@dataclass
class _Step:
    """One numpy call: a node's value (``reduce`` None) or a stage's reduction."""

    node: Expr
    operands: list[int]  # value ids (-1: a constant, in ``consts``)
    consts: list[object]
    reduce: str | None = None
    full: bool = False
    slot: int | None = None
    stage: int = -1  # a reduction's stage


@dataclass
class _Plan:
    """A program compiled to numpy calls, with the full-size temporaries assigned to
    reusable slots (the last one read holds the result)."""

    steps: list[_Step]
    result: int  # the value id of the result
    result_slot: int | None
    slots: int
    first_write: dict[int, int]  # slot -> the step that first writes it
    last_read: dict[int, int]  # input -> the last step reading it


class _Compiler:
    def __init__(self, program: RowProgram, dtype: str) -> None:
        self.p = program
        self.dtype = dtype
        self.n = len(program.inputs)
        self.steps: list[_Step] = []
        self.values: dict[Expr, int] = {}  # node -> value id (its step + n + stages)
        self.full: dict[int, bool] = {}

    def value(self, e: Expr) -> int:
        """The value id of ``e`` (inputs and row scalars: their arg index)."""
        if e.op == "arg":
            return index(e)
        if e in self.values:
            return self.values[e]
        operands = [-1 if a.op == "const" else self.value(a) for a in e.args]
        consts = [a.value if a.op == "const" else None for a in e.args]
        full = any(self.is_full(v) for v in operands if v >= 0)
        vid = self.add(_Step(e, operands, consts, full=full), full)
        self.values[e] = vid
        return vid

    def is_full(self, vid: int) -> bool:
        if vid < self.n:
            return self.p.inputs[vid] == "element"
        return self.full.get(vid, False)

    def add(self, step: _Step, full: bool) -> int:
        self.steps.append(step)
        vid = self.n + len(self.p.stages) + len(self.steps) - 1
        self.full[vid] = full
        return vid

    def compile(self) -> _Plan:
        for j, stage in enumerate(self.p.stages):
            e = stage.expr
            if stage.reduce in ("sum", "mean") and e.op == "mul" and _dot_operands(self, e):
                operands = [self.value(a) for a in e.args]  # the einsum of the two
            else:
                operands = [self.value(e)]
            # the stage's value is its row scalar's arg index; the step's own id is unused
            self.add(_Step(e, operands, [], stage.reduce, stage=self.n + j), False)
        result = self.value(self.p.out)
        return self.assign(result)

    def assign(self, result: int) -> _Plan:
        base = self.n + len(self.p.stages)
        last: dict[int, int] = {}
        for i, step in enumerate(self.steps):
            for v in step.operands:
                if v >= 0:
                    last[v] = i
        last[result] = len(self.steps)
        free: list[int] = []
        owner: dict[int, int] = {}  # slot -> the value it holds
        slots = 0
        first_write: dict[int, int] = {}
        for i, step in enumerate(self.steps):
            vid = base + i
            if step.reduce is not None or not step.full or step.node.op not in _IN_PLACE:
                continue
            # a slot whose value is read for the last time here may take the result
            for s, v in list(owner.items()):
                if last.get(v, -1) <= i and s not in free:
                    free.append(s)
            if free:
                step.slot = free.pop(0)
            else:
                step.slot = slots
                slots += 1
            owner[step.slot] = vid
            first_write.setdefault(step.slot, i)
        result_slot = self.steps[result - base].slot if result >= base else None
        last_read = {v: i for v, i in last.items() if v < self.n}
        return _Plan(self.steps, result, result_slot, slots, first_write, last_read)


def _dot_operands(c: _Compiler, e: Expr) -> bool:
    """Whether a sum of ``e`` (a product) is taken as a dot product of its full-size
    operands (numpy's einsum, without the product's temporary)."""
    a, b = e.args
    if a.op == "const" or b.op == "const":
        return False
    return c.is_full(c.value(a)) and c.is_full(c.value(b))


@functools.lru_cache(maxsize=512)
def _plan(program: RowProgram, dtype: str) -> _Plan:
    return _Compiler(program, dtype).compile()


@functools.lru_cache(maxsize=1024)
def _view(
    axes: tuple[int, ...], shape: tuple[int, ...]
) -> tuple[tuple[int, ...], tuple[int, ...], int, tuple[int, ...], tuple[int, ...]]:
    """``(shape, axes, n, position shape, row shape)`` of the view the numpy path
    computes on: contiguous reduced axes merged into one, with the axes before and
    after merged too (a 2-D ``(rows, n)`` view when they end the shape); the shape as
    it is otherwise. ``n``: the row's length."""
    if axes == tuple(range(axes[0], axes[-1] + 1)):
        pre = math.prod(shape[: axes[0]])
        n = math.prod(shape[axes[0] : axes[-1] + 1])
        post = math.prod(shape[axes[-1] + 1 :])
        shape, axes = ((pre, n), (1,)) if post == 1 else ((pre, n, post), (1,))
    n = math.prod(shape[a] for a in axes)
    position = tuple(d if i in axes else 1 for i, d in enumerate(shape))
    row = tuple(1 if i in axes else d for i, d in enumerate(shape))
    return shape, axes, n, position, row


def numpy_rows(program: RowProgram, dtype: str) -> Callable[..., np.ndarray]:
    """The numpy function of ``program`` on inputs of ``dtype``:
    ``fn(*inputs, out=None, work=None)``, the result of the first input's shape.

    Each reduction is one numpy reduction with ``keepdims`` (a sum of a product of two
    full-size values is one ``einsum``, without the product); each other node one numpy
    call, a shared subexpression once, every full-size temporary written into one whose
    value is dead (``out=``). The result is written into ``out`` when given (which may
    be an input: when the program reads that input after it first writes the result's
    buffer, the result is computed aside and copied); ``work`` arrays (the first
    input's shape) serve as the other temporaries. The function is straight-line
    numpy calls (its text is ``.source``).
    """
    plan = _plan(program, dtype)
    np_dtype = np.dtype(dtype)
    n_in = len(program.inputs)
    base = n_in + len(program.stages)
    env: dict[str, Any] = {
        "np": np,
        "_view": _view,
        "_finish": _finish,
        "_buffers": _buffers,
        "_dot": _dot,
        "_plan": plan,
        "_dtype": np_dtype,
        "_f": np_dtype.type,
        "_axes": program.axes,
    }
    params = ", ".join(f"x{i}" for i in range(n_in))
    lines = [
        f"def rendered({params}, out=None, work=None):",
        "    if x0.size == 0:",
        "        return np.empty(x0.shape, _dtype) if out is None else out",
        "    shape, axes, n, position, row = _view(_axes, x0.shape)",
    ]
    for i, layout in enumerate(program.inputs):
        target = {"element": "shape", "position": "position"}.get(layout, "row")
        lines.append(f"    v{i} = x{i}.reshape({target})")
    if plan.slots:
        names = ", ".join(f"b{k}" for k in range(plan.slots))
        lines.append(f"    {names}, = _buffers(_plan, ({params},), shape, _dtype, out, work)")

    def operand(v: int, c: object) -> str:
        if v >= 0:
            return f"v{v}"
        finite = not isinstance(c, float) or math.isfinite(c)
        if finite:
            return repr(c)
        name = f"c{len(env)}"
        env[name] = c
        return name

    for i, step in enumerate(plan.steps):
        if step.reduce is not None:
            target = f"v{step.stage}"
            if len(step.operands) == 2:
                a, b = (f"v{v}" for v in step.operands)
                lines.append(f"    {target} = _dot({a}, {b}, axes)")
            else:
                fn = "np.maximum.reduce" if step.reduce == "max" else "np.add.reduce"
                lines.append(f"    {target} = {fn}(v{step.operands[0]}, axis=axes, keepdims=True)")
            if step.reduce == "mean":
                lines.append(f"    {target} *= _f(1.0 / n)")
            continue
        args = [operand(v, c) for v, c in zip(step.operands, step.consts, strict=True)]
        op = step.node.op
        if op == "cast":
            name = f"_to{len(env)}"
            env[name] = np.dtype(str(step.node.value))
            lines.append(f"    v{base + i} = np.asarray({args[0]}).astype({name})")
            continue
        env[f"_{op}"] = PRIMITIVES[op].numpy
        if step.slot is not None:
            args.append(f"out=b{step.slot}")
        lines.append(f"    v{base + i} = _{op}({', '.join(args)})")
    lines.append(f"    return _finish(v{plan.result}, x0.shape, shape, _dtype, out)")
    source = "\n".join(lines) + "\n"
    exec(compile(source, "<row program>", "exec"), env)  # our own text, from the program
    rendered: Callable[..., np.ndarray] = env["rendered"]
    rendered.source = source  # type: ignore[attr-defined]  # shown to a reader
    rendered.plan = plan  # type: ignore[attr-defined]  # shown to a reader and the tests
    return rendered


def _finish(
    result: Any,
    shape0: tuple[int, ...],
    shape: tuple[int, ...],
    dtype: np.dtype[Any],
    out: np.ndarray | None,
) -> np.ndarray:
    """The result of the first input's shape and ``dtype``, in ``out`` when given."""
    array: np.ndarray = np.asarray(result)
    if array.dtype != dtype:
        array = array.astype(dtype)
    if array.shape != shape:
        array = np.broadcast_to(array, shape).copy()
    array = array.reshape(shape0)
    if out is None or not out.flags.c_contiguous:
        return array
    if not np.shares_memory(array, out):
        out[...] = array
    return out


def _buffers(
    plan: _Plan,
    inputs: Sequence[np.ndarray],
    shape: tuple[int, ...],
    dtype: np.dtype[Any],
    out: np.ndarray | None,
    work: Sequence[np.ndarray] | None,
) -> list[np.ndarray]:
    """The slots' arrays: the result's is ``out`` (unless the program reads an input
    that ``out`` overlaps after it first writes the result) or fresh, never a ``work``
    array (which the caller reuses); the others ``work`` arrays, or fresh."""
    spare = [w.reshape(shape) for w in work or () if w.flags.c_contiguous]
    buffers: list[np.ndarray] = []
    for s in range(plan.slots):
        if s != plan.result_slot:
            buffers.append(spare.pop() if spare else np.empty(shape, dtype))
            continue
        if out is not None and out.flags.c_contiguous:
            start = plan.first_write[s]
            clash = any(
                plan.last_read.get(i, -1) > start and np.shares_memory(out, x)
                for i, x in enumerate(inputs)
            )
            if not clash:
                buffers.append(out.reshape(shape))
                continue
        buffers.append(np.empty(shape, dtype))
    return buffers


def _dot(a: np.ndarray, b: np.ndarray, axes: tuple[int, ...]) -> np.ndarray:
    """The sum of ``a * b`` over ``axes`` (keepdims), as one einsum."""
    letters = "abcdefghijklmnopqrstuvwxyz"[: a.ndim]
    kept = "".join(c for i, c in enumerate(letters) if i not in axes)
    total: np.ndarray = np.einsum(f"{letters},{letters}->{kept}", a, b)
    return total.reshape(tuple(1 if i in axes else d for i, d in enumerate(a.shape)))


def _hashable(value: Any) -> Any:
    if isinstance(value, list | tuple):
        return tuple(_hashable(v) for v in value)
    return value


def rows_kernel(build: Callable[..., RowProgram]) -> Callable[..., np.ndarray]:
    """The numpy kernel of an op whose meaning is ``build(ndim, arity, **attrs)``
    (``ndim``: the first input's rank; ``arity``: how many inputs the node has):
    ``kernel(*inputs, out=None, work=None, **attrs)``, `numpy_rows` of its program
    (made once per rank, arity, dtype and attributes). It is both an op's ``kernel``
    and its `IntoKernel` path. float16 inputs run the program in float32 and round
    its result to float16 once (`asgrad.tensor.ir.dtypes.accumulation_dtype`)."""

    @functools.lru_cache(maxsize=512)
    def rendered(ndim: int, arity: int, dtype: np.dtype[Any], attrs: tuple[Any, ...]) -> Any:
        return numpy_rows(build(ndim, arity, **dict(attrs)), dtype.name)

    def kernel(
        *inputs: np.ndarray | None,
        out: np.ndarray | None = None,
        work: Sequence[np.ndarray] | None = None,
        **attrs: Any,
    ) -> np.ndarray:
        while inputs[-1] is None:  # optional inputs not given (a norm's weight and bias)
            inputs = inputs[:-1]
        try:
            key = tuple(attrs.items())
            hash(key)
        except TypeError:  # a list attribute
            key = tuple((k, _hashable(v)) for k, v in attrs.items())
        first = inputs[0]
        assert first is not None
        if first.dtype == np.float16:  # accumulates in float32, rounded once at the end
            wide = rendered(first.ndim, len(inputs), np.dtype(np.float32), key)
            half = wide(*(x.astype(np.float32) for x in inputs if x is not None))
            if out is None:
                return np.asarray(half.astype(np.float16))
            out[...] = half
            return out
        fn = rendered(first.ndim, len(inputs), first.dtype, key)
        result: np.ndarray = fn(*inputs, out=out, work=work)
        return result

    kernel.__doc__ = f"The numpy kernel rendered from ``{build.__name__}``'s row program."
    # It lives where its program does: the op's meaning is stated there, once.
    kernel.__module__ = build.__module__
    kernel.__name__ = kernel.__qualname__ = f"{build.__name__}_kernel"
    return kernel
