"""Runs of small lines as one compiled function each: the line path's segments.

On the line path every op is a call from Python, about a microsecond each (a numpy
ufunc, or a compiled kernel's dispatch and wrapper), whatever its size. A step of
small values is then mostly calls: the mlp workload's step (0.28 ms at 2 threads) ran
98 lines, of which 88 had results of at most 8,192 elements, around its 8 matrix
products and its 2 fused Adam updates. `fuse_segments` writes each run of such lines as
one Numba function, every op written by its whole-step emitter (`resolve`'s ``emit``:
the loops of `asgrad.tensor.cpu.jit.step`), so that the run costs one call.

**Which lines.** A line is taken into a run when it is the op's own line (as the
line maker made it: no family fusion changed it), reads nothing but the node's
inputs, its op has an emitter and its registered kernel, and its result has at most
`SMALL_ELEMENTS` elements and its emitted loops at most `SMALL_WORK` operations (a
product large enough for BLAS, `emit_ops.BLAS_AT`, stays a line: numpy's product, on
BLAS's threads). The
lines of a run are taken in order; a line that reads no value of the run stays where
it is, before the run's call (a parameter's value, a product of earlier values: it
and the run's lines do not read each other, so their order changes nothing), and a
line that reads one ends the run, whose call goes right before it. A run also ends
at `SEGMENT_WORK` operations or `SEGMENT_LINES` lines of source. A run of fewer than
`SEGMENT_MIN_LINES` lines that compute something stays as its lines.

**The call.** ``v = _segment<id>(inputs..., outputs..., constants..., 1)``: the values
the run reads from outside it are the arguments (a 0-d one as a 0-d array of its dtype:
the line path may hold it as a numpy scalar); every value of the run that a later line,
an output or an update reads is written into an array made just before the call (a
line ``_empty(shape, dtype)`` of its own), but the last of them, which the function
allocates and returns; the last argument is the loop bounds' factor of
`Kernel.runtime_bounds`. Each escaping value is written straight into its array where
its op's emitter writes its result as one array (`Kernel.target`), and an elementwise
op joins the loop written just before it where it reads no element that loop writes at
another index (`Kernel.fuse_loops`): Adam's moments and step are one loop, writing the
three outputs. The results are the whole step's emitters', within each op's tolerance
of the numpy path (tests: ``tests/test_cpu_jit_segments.py``).

**Compiling.** A segment's module is written under `asgrad.tensor.cpu.jit.cache_dir`
and compiled by Numba (``cache=True``) on its first call, which then binds the
compiled function as the line's callee (no wrapper between). Numba's compile time
grows with the function's arguments and statements: the small transformer's segment of
every small parameter's AdamW update (136 arrays) takes about 2.6 s on the 2-core
machine, once per machine and shape. Where Numba cannot compile a segment, its lines
run on numpy instead (`_numpy_form`: the lines as the line path would run them, with
the segment's arguments), and a `RuntimeWarning` says so; a segment that checks
indices runs them there too when an index is out of range, so that the numpy kernel
raises the typed error.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from asgrad.tensor.cpu.jit.emit import (
    BOUNDS_CHECK,
    Kernel,
    UnsupportedError,
    Val,
    arr_val,
    dt,
    flat_val,
)
from asgrad.tensor.cpu.jit.render import njit_module
from asgrad.tensor.cpu.records import (
    Call,
    Line,
    Ref,
    Reuse,
    Value,
    line_readers,
    render,
    runtime_roots,
    values,
)
from asgrad.tensor.cpu.specialize import Context
from asgrad.tensor.ir.registry import TensorType, get_op

__all__ = [
    "COMPILE_BUDGET",
    "SEGMENT_MIN_LINES",
    "SMALL_ELEMENTS",
    "SMALL_WORK",
    "compile_seconds",
    "fuse_segments",
]

# The most elements of a result taken into a run: above, numpy's vectorised loop (or
# a threaded compiled kernel) and the call's microsecond no longer compare.
SMALL_ELEMENTS = 16384
# The most operations of one op's emitted loops (elements written, or read by a
# reduction). A product is taken only below `emit_ops.BLAS_AT` operations, where the
# whole step writes it as loops too.
SMALL_WORK = 1 << 16
# The most operations and source lines of one segment: its compile time.
SEGMENT_WORK = 1 << 18
SEGMENT_LINES = 600
# The fewest computing lines (views aside) a run needs to become a segment.
SEGMENT_MIN_LINES = 2
# The most compile time (`compile_seconds`, estimated) one function's segments may
# cost: a program of many small ops (a test's tiny encoder stack: 35 s of segments)
# keeps its other runs as lines. The segments saving the most calls per second of
# compiling are taken first.
COMPILE_BUDGET = 4.0

# Ops whose lines are never taken: a value the function reads, not computes.
_SOURCES = ("input", "parameter")


@dataclass
class _Run:
    """A run being collected: its lines' indexes, and where its call goes."""

    taken: list[int] = field(default_factory=list)
    ids: set[int] = field(default_factory=set)
    work: int = 0
    source_lines: int = 0
    computing: int = 0
    end: int = -1


def fuse_segments(
    lines: Sequence[Line],
    refs: Mapping[int, Ref],
    types: Mapping[int, TensorType],
    env: dict[str, Any],
    context: Context,
    own: Collection[int],
    name_of: Callable[[int], str],
) -> list[Line]:
    """``lines`` with each run of small lines as one compiled call (see the module
    docstring); ``own`` holds the ``id()`` of each line as the line maker made it, and
    ``name_of`` names a value in the generated function."""
    from asgrad.tensor.cpu.lowering import resolve

    sizes: dict[int, tuple[int, int]] = {}  # line index -> (work, source lines)
    for k, line in enumerate(lines):
        node = line.node
        t = types[node.id]
        if id(line) not in own or node.op in _SOURCES or math.prod(t.shape) > SMALL_ELEMENTS:
            continue
        if refs[node.id].id != node.id or not context.registered(node.op):
            continue
        inputs = {refs[n.id].id for n in node.inputs}
        if not set(values(line.call)) <= inputs:
            continue
        emit = resolve(get_op(node.op)).emit
        if emit is None:
            continue
        trial = Kernel()
        trial.blas = True  # a product large enough to call BLAS shows as such
        try:
            ins = [_input_val(trial, refs, types, n.id, f"x{j}") for j, n in enumerate(node.inputs)]
            emit(trial, node, ins, t)
        except Exception:  # an emitter declining these types or attributes: a line
            continue
        if trial.flops <= SMALL_WORK and not trial.blas_flops:
            sizes[k] = (trial.flops, len(trial.body))

    runs: list[_Run] = []
    run = _Run()
    for k, line in enumerate(lines):
        size = sizes.get(k)
        fits = size is not None and (
            run.work + size[0] <= SEGMENT_WORK and run.source_lines + size[1] <= SEGMENT_LINES
        )
        if size is not None and size[0] == 0 and not set(values(line.call)) & run.ids:
            continue  # a view of a value from before the run: it stays a line
        if size is not None and fits:
            _take(run, k, line, size)
            continue
        if size is not None or set(values(line.call)) & run.ids:
            run.end = k
            runs.append(run)
            run = _Run()
            if size is not None:
                _take(run, k, line, size)
    run.end = len(lines)
    runs.append(run)

    readers = line_readers(lines)
    roots = runtime_roots(refs, context.roots)
    taken: set[int] = set()
    calls: dict[int, list[Line]] = {}
    candidates: list[tuple[float, float, _Run, list[Line]]] = []
    for run in runs:
        if run.computing < SEGMENT_MIN_LINES:
            continue
        made = _segment(run, lines, refs, types, env, readers, roots, name_of)
        if made is not None:
            segment = env[_callee(made[-1])]
            cost = compile_seconds(segment.source)
            candidates.append(((run.computing - 1) / cost, cost, run, made))
    # The most calls saved per second of compiling first, within the budget.
    spent = 0.0
    for _, cost, run, made in sorted(candidates, key=lambda c: -c[0]):
        if spent + cost > COMPILE_BUDGET:
            env.pop(_callee(made[-1]))
            continue
        spent += cost
        taken.update(run.taken)
        calls[run.end] = made
    if not calls:
        return list(lines)
    out: list[Line] = []
    for k, line in enumerate(lines):
        out += calls.get(k, [])
        if k not in taken:
            out.append(line)
    out += calls.get(len(lines), [])
    return out


def compile_seconds(source: str) -> float:
    """About how long Numba takes to compile a segment's module, in seconds on the 2-core
    machine (fitted to 14 segments of the benchmark workloads, 2026-12-03: within a
    factor of two): a fixed cost, and more per argument, loop and source line."""
    head = source[source.index("def segment(") :].split("\n", 1)[0]
    args = head.count(",") + 1
    return 0.1 + 0.012 * args + 0.025 * source.count("for ") + 0.004 * source.count("\n")


def _callee(line: Line) -> str:
    assert isinstance(line.call, Call)
    return line.call.fn


def _take(run: _Run, k: int, line: Line, size: tuple[int, int]) -> None:
    run.taken.append(k)
    run.ids.add(line.node.id)
    run.work += size[0]
    run.source_lines += size[1]
    run.computing += size[0] > 0


def _input_val(
    k: Kernel, refs: Mapping[int, Ref], types: Mapping[int, TensorType], node_id: int, name: str
) -> Val:
    """The value an input reads as in a trial emission: its constant, or an argument."""
    ref = refs[node_id]
    if ref.is_const:
        return k.constant(ref.const)
    t = types[ref.id]
    return arr_val(name, t.shape, t.dtype)


def _segment(
    run: _Run,
    lines: Sequence[Line],
    refs: Mapping[int, Ref],
    types: Mapping[int, TensorType],
    env: dict[str, Any],
    readers: Mapping[int, list[int]],
    roots: Collection[int],
    name_of: Callable[[int], str],
) -> list[Line] | None:
    """The lines replacing ``run`` (its outputs' ``_empty`` lines, then its call), or
    None when an op cannot be written after all."""
    from asgrad.tensor.cpu.jit.step import value_reader
    from asgrad.tensor.cpu.lowering import resolve

    inside = set(run.taken)
    escaping = [
        lines[i].node.id
        for i in run.taken
        if lines[i].node.id in roots
        or any(r not in inside for r in readers.get(lines[i].node.id, ()))
    ]
    if not escaping:
        return None
    *written, returned = escaping
    # Where each escaping value goes: its output array (``o<j>``, ``r``), seen flat
    # (``O<j>``, ``R``: a reshape, where it has two axes or more).
    names = {node_id: f"o{j}" for j, node_id in enumerate(written)} | {returned: "r"}
    targets = {node_id: _output(name, types[node_id]) for node_id, name in names.items()}
    k = Kernel()
    k.work_limit = SEGMENT_WORK
    k.runtime_bounds = True
    k.fuse_loops = True
    vals: dict[int, Val] = {}
    args: list[int] = []  # the value ids passed in, in order
    value = value_reader(k, refs, vals)
    try:
        for i in run.taken:
            node = lines[i].node
            read = set(values(lines[i].call))
            for n in node.inputs:
                ref = refs[n.id]
                if not ref.is_const and ref.id not in vals and ref.id in read:
                    t = types[ref.id]
                    vals[ref.id] = arr_val(f"a{len(args)}", t.shape, t.dtype)
                    args.append(ref.id)
            emit = resolve(get_op(node.op)).emit
            assert emit is not None
            ins = [
                value(n.id)
                if refs[n.id].is_const or refs[n.id].id in vals
                else _unread(types[n.id])
                for n in node.inputs
            ]
            # An escaping value is written into its output where its op's first array
            # is its result (else copied there at the end).
            k.target = targets.get(node.id)
            vals[node.id] = emit(k, node, ins, types[node.id])
            k.target = None
        for node_id in escaping:
            target, v = targets[node_id], vals[node_id]
            if v is not target and (v.flat is None or v.flat != target.flat):
                k.copy(target, v)
    except UnsupportedError:
        return None
    name = f"_segment{returned}"
    params = [f"a{j}" for j in range(len(args))] + [f"o{j}" for j in range(len(written))]
    params += [f"c{j}" for j in range(len(k.consts))] + ["_u"]
    t = types[returned]
    head = list(BOUNDS_CHECK)
    head += [f"    W_{d} = np.empty({n}, {dt(d)})" for d, n in k.work.items()]
    head.append(f"    r = np.empty({t.shape!r}, {dt(t.dtype)})")
    head += [
        f"    {name.upper()} = {name}.reshape(-1)"
        for node_id, name in names.items()
        if len(types[node_id].shape) > 1
    ]
    source = njit_module("segment", params, [*head, *k.body, "    return r"])
    numpy = _numpy_form(
        name, [lines[i] for i in run.taken], args, written, returned, types, env, name_of
    )
    env[name] = _LazySegment(env, name, source, numpy)
    env["_empty"] = np.empty
    call_args: list[Any] = []
    for node_id in args:
        t = types[node_id]
        call_args.append(
            Call("_asarray", (Value(node_id), repr(t.dtype))) if not t.shape else Value(node_id)
        )
    call_args += [Value(node_id) for node_id in written]
    for j, c in enumerate(k.consts):
        env[f"{name}_c{j}"] = c
        call_args.append(f"{name}_c{j}")
    call_args.append("1")
    node_of = {lines[i].node.id: lines[i].node for i in run.taken}
    made = [
        Line(
            node=node_of[node_id],
            call=Call("_empty", (repr(types[node_id].shape), repr(types[node_id].dtype))),
            reuse=Reuse.FRESH,
        )
        for node_id in written
    ]
    made.append(Line(node=node_of[returned], call=Call(name, tuple(call_args)), reuse=Reuse.FRESH))
    return made


def _output(name: str, t: TensorType) -> Val:
    """The value an output array ``name`` of type ``t`` is written as: an element of it
    (0-d), or of it seen flat (its own name when 1-d, else the name upper-cased, a
    reshape the segment makes first)."""
    if not t.shape:
        return arr_val(name, (), t.dtype)
    return flat_val(name if len(t.shape) == 1 else name.upper(), 0, t.shape, t.dtype)


def _unread(t: TensorType) -> Val:
    """An input the line reads for its type only (``sum_to_like``'s second): its
    emitter may not read an element of it either."""

    def at(idx: Sequence[str]) -> str:
        raise UnsupportedError("an input read for its shape only")

    return Val(t.shape, t.dtype, at)


def _numpy_form(
    name: str,
    taken: Sequence[Line],
    args: Sequence[int],
    written: Sequence[int],
    returned: int,
    types: Mapping[int, TensorType],
    env: dict[str, Any],
    name_of: Callable[[int], str],
) -> Callable[..., Any]:
    """The segment as its lines on numpy, with the compiled function's arguments and
    result: what runs where Numba cannot compile it, and on an index out of range (the
    numpy kernels raise the typed error that says which)."""
    params = [name_of(i) for i in args] + [f"_o{j}" for j in range(len(written))]
    body = [f"    {name_of(line.node.id)} = {render(line.call, name_of)}" for line in taken]
    body += [f"    _copyto(_o{j}, {name_of(i)})" for j, i in enumerate(written)]
    body.append(f"    return _fresh({name_of(returned)}, {types[returned].dtype!r})")
    env["_copyto"], env["_fresh"] = np.copyto, np.array
    fn = f"{name}_numpy"
    source = "\n".join([f"def {fn}({', '.join(params)}, *_consts):", *body])
    exec(compile(source, f"<asgrad segment {name}>", "exec"), env)
    numpy: Callable[..., Any] = env.pop(fn)
    return numpy


class _LazySegment:
    """A segment's callee until its first call, which compiles the module and binds the
    compiled function in its place (behind `_Checked` when the segment checks indices).
    Where Numba cannot compile it, the segment's numpy form is bound instead, with a
    warning."""

    def __init__(
        self, env: dict[str, Any], name: str, source: str, numpy: Callable[..., Any]
    ) -> None:
        self.env, self.name, self.source, self.numpy = env, name, source, numpy
        self.checked = "raise IndexError" in source  # an index range check (`one_hot`...)

    def __call__(self, *args: Any) -> Any:
        from numba.core.errors import NumbaError

        from asgrad.tensor.cpu.jit.step_run import load_module

        fn = load_module(self.source, "asgrad_segment").segment
        try:
            result = fn(*args)
        except NumbaError as exc:  # raised while compiling: nothing ran
            warnings.warn(
                f"asgrad: Numba could not compile a run of small CPU lines ({exc}); they "
                "run on numpy. Please report it.",
                RuntimeWarning,
                stacklevel=2,
            )
            self.env[self.name] = self.numpy
            return self.numpy(*args)
        except IndexError:
            self.env[self.name] = _Checked(fn, self.numpy)
            return self.numpy(*args)
        self.env[self.name] = _Checked(fn, self.numpy) if self.checked else fn
        return result


class _Checked:
    """A compiled segment that checks indices: on an index out of range, its numpy form
    runs instead and raises the typed error (the compiled one raises a bare
    ``IndexError`` before writing any output)."""

    def __init__(self, fn: Callable[..., Any], numpy: Callable[..., Any]) -> None:
        self.fn, self.numpy = fn, numpy

    def __call__(self, *args: Any) -> Any:
        try:
            return self.fn(*args)
        except IndexError:
            return self.numpy(*args)
