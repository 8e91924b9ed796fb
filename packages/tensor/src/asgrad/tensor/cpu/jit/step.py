"""Whole-step compilation: a small schedule at exact shapes as ONE Numba function.

When a schedule updates variables (a training step), every value its roots need
can be written in Numba (its op's ``emit`` lowering, found by
`resolve`: rendered from the op's scalar expression or
row program (`asgrad.tensor.cpu.jit.emit_rows`), or its family's emitter in
`asgrad.tensor.cpu.jit.emit_ops`) and the work is
small (`WORK_LIMIT`),
`plan_step` writes one Numba function for the whole step: explicit loops with
constant bounds, every intermediate in a flat work buffer allocated once per call,
the outputs returned, and the updated variables' new values written, after
everything else is computed, into their arrays in place. A larger step without loops
(up to `STEP_WORK_LIMIT`) is written as the same body cut into pieces, one function of
about `WORK_LIMIT` operations each, which the step calls in sequence with every
argument and its work buffers (a 0-d value is then an element of the work buffer, not
a local). Anything else keeps the
line-by-line numpy function (`asgrad.tensor.cpu.codegen`); so do programs
without updates (`WHOLE_STEP_WITHOUT_UPDATES`): an evaluation, often run once,
never waits for Numba. The function runs the compiled step from its first call;
when a tiered function switches to it is `asgrad.tensor.cpu.jit.tier`'s decision.

A step with ``scan`` nodes writes each as a loop of the function, the body's ops
inside it (`asgrad.tensor.cpu.jit.emit_scan`); such a step may do
`asgrad.tensor.cpu.jit.emit_scan.LOOP_STEP_WORK` more operations per time step,
calls BLAS for its products, and takes its loop bounds and work buffers as
arguments (`StepPlan.runtime_bounds`).

Updating in place keeps the numpy path's semantics: the updated variables' values
are views of one buffer per dtype that this function owns. Before each call it checks
that every such variable still holds its view, no device holds it, and nothing else
references the views or the buffer (their reference counts): an array someone took
from ``variable.value`` (or any view of it) is never written afterwards. When a check
fails the values are copied into a fresh buffer first (as the numpy path would make
fresh arrays), so the old arrays keep their values. The variables are written after
every other value is computed, so a step that raises first (an index out of range:
``IndexError``, after which the wrapper runs the numpy function for the call, whose
kernel raises the typed error) updates nothing.

The generated module is written under `cache_dir`, named
by a hash of its source, and compiled with Numba's ``cache=True``: another process
running the same step at the same shapes loads the machine code instead of compiling.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from asgrad.tensor.cpu.jit.emit import (
    ARGS,
    BOUNDS_CHECK,
    Kernel,
    UnsupportedError,
    Val,
    arr_val,
    dt,
    flat_val,
)
from asgrad.tensor.cpu.jit.emit_scan import loop_work
from asgrad.tensor.cpu.jit.render import NJIT, njit_module
from asgrad.tensor.cpu.jit.step_run import whole_step
from asgrad.tensor.cpu.lowering import resolve
from asgrad.tensor.cpu.records import Ref
from asgrad.tensor.ir.registry import TensorType, get_op
from asgrad.tensor.ir.schedule import Schedule
from asgrad.tensor.ir.variables import Variable

# A step is compiled as one function when its arithmetic is at most this many
# operations (elements written by elementwise ops and reductions, 8 per element of a
# transcendental function, 2 * M * N * K per matrix product). Measured: a tanh-GELU
# chain of 12 ops on 4 x 256 elements ran slower compiled whole than on numpy.
WORK_LIMIT = 1 << 14

# A larger step (without loops) of at most this many operations is compiled in pieces:
# functions of about `WORK_LIMIT` operations each (or one op, where it alone is more),
# called in sequence by the step, its products of at least `emit_ops.BLAS_AT`
# operations calling BLAS. The time to compile grows faster than the function's size
# (a one-block TinyGPT step of 670,172 operations took 99-262 s as one function), so
# pieces bound it; above this limit the scalar loops lose to numpy's vectorised kernels
# and the per-op overhead the compiled step removes no longer matters (that TinyGPT at
# 9,195,164 operations ran at 1,833 us compiled whole against 984 us line by line).
STEP_WORK_LIMIT = 1 << 20

# The most source lines one piece may hold (its share of the compile time).
PIECE_LINES = 600

# Whether programs without updates (evaluations, often run once) are compiled whole:
# off, so that they never wait for Numba.
WHOLE_STEP_WITHOUT_UPDATES = False


@dataclass
class StepPlan:
    """A whole-step kernel and what its Python wrapper binds.

    Attributes:
        source: The generated module's source.
        feeds: The input names, in the kernel's argument order.
        scalar_feeds: Per input, whether it is 0-d.
        readonly: The variables read but not updated (their arrays are arguments).
        state: Per dtype, the updated variables with their offsets and shapes.
        consts: The constant arrays passed as arguments.
        outputs: Per output: ``("scalar", dtype)``, ``("array", None)`` or
            ``("const", value)``.
        flops: The work estimate compared with `WORK_LIMIT`.
        runtime_bounds: Whether the kernel takes a last argument ``_u`` (1), its loop
            bounds' factor (`Kernel.runtime_bounds`), after its work buffers, which
            the wrapper then allocates once per thread and lends to every call (a
            kernel with loops holds tens of MiB, which a fresh allocation per call
            would fault in page by page: 18 ms a call for 37 MiB).
        work: Then, per dtype, the elements of its work buffer.
        pieces: How many functions the step calls in sequence (1: the step is one).
    """

    source: str
    feeds: list[str] = field(default_factory=list)
    scalar_feeds: list[bool] = field(default_factory=list)
    readonly: list[Variable] = field(default_factory=list)
    state: dict[str, list[tuple[Variable, int, tuple[int, ...]]]] = field(default_factory=dict)
    consts: list[np.ndarray] = field(default_factory=list)
    outputs: list[tuple[str, Any]] = field(default_factory=list)
    flops: int = 0
    runtime_bounds: bool = False
    work: dict[str, int] = field(default_factory=dict)
    pieces: int = 1


def value_reader(k: Kernel, refs: Mapping[int, Ref], vals: dict[int, Val]) -> Callable[[int], Val]:
    """The value a node reads as: the emitted value of the node it refers to, or its
    constant, made in ``k`` once (kept in ``vals`` under the node's id)."""

    def value(node_id: int) -> Val:
        ref = refs[node_id]
        if not ref.is_const:
            return vals[ref.id]
        if node_id not in vals:
            vals[node_id] = k.constant(ref.const)
        return vals[node_id]

    return value


def needed_nodes(schedule: Schedule, refs: Mapping[int, Ref], roots: list[int]) -> set[int]:
    """The ids of the nodes whose values ``roots`` need (constants and aliases left out)."""
    needed = {refs[r].id for r in roots if not refs[r].is_const}
    for node in reversed(schedule.nodes):
        if node.id in needed and refs[node.id].id == node.id:
            needed.update(refs[n.id].id for n in node.inputs if not refs[n.id].is_const)
    return needed


def blas_available() -> bool:
    """Whether Numba's ``np.dot`` can call BLAS here (it needs SciPy's BLAS bindings)."""
    import importlib.util

    return importlib.util.find_spec("scipy") is not None


class _TooLargeError(UnsupportedError):
    """More work than one function may hold: the step may be compiled in pieces."""


def plan_step(
    schedule: Schedule,
    types: Mapping[int, TensorType],
    refs: Mapping[int, Ref],
    registered: Callable[[str], bool],
) -> StepPlan | str:
    """The whole-step kernel for ``schedule`` at ``types`` (in pieces when one function
    would be too large), or why there is none."""
    try:
        try:
            return _plan(schedule, types, refs, registered)
        except _TooLargeError:
            return _plan(schedule, types, refs, registered, pieces=True)
    except UnsupportedError as exc:
        return str(exc)
    except Exception as exc:  # an op's attributes no lowering foresaw: keep numpy
        return f"planning failed: {type(exc).__name__}: {exc}"


def _plan(
    schedule: Schedule,
    types: Mapping[int, TensorType],
    refs: Mapping[int, Ref],
    registered: Callable[[str], bool],
    pieces: bool = False,
) -> StepPlan:
    roots = [n.id for n in schedule.outputs] + [n.id for _, n in schedule.updates]
    needed = needed_nodes(schedule, refs, roots)
    plan = StepPlan(source="")
    updated: dict[int, tuple[Variable, Val]] = {}
    for var, n in schedule.updates:
        t = types[n.id]
        if id(var) in updated or tuple(var.shape) != t.shape or var.dtype != t.dtype:
            raise UnsupportedError("an update that does not match its variable")
        group = plan.state.setdefault(t.dtype, [])
        off = sum(math.prod(s) for _, _, s in group)
        group.append((var, off, t.shape))
        dt(t.dtype)
        updated[id(var)] = (var, flat_val(f"S_{t.dtype}", off, t.shape, t.dtype))
    k = Kernel()
    # A step with loops may do more work (each step of a loop compiled saves a Python
    # call), and calls BLAS for its products (see `asgrad.tensor.cpu.jit.emit_scan`).
    loops = loop_work([n for n in schedule.nodes if n.id in needed], types)
    if pieces and loops:
        raise UnsupportedError(f"more than {WORK_LIMIT + loops:,} operations with loops")
    k.work_limit = STEP_WORK_LIMIT if pieces else WORK_LIMIT + loops
    k.blas = (loops > 0 or pieces) and blas_available()
    k.runtime_bounds = plan.runtime_bounds = loops > 0
    # In pieces, a 0-d value lives in the work buffer: a local of one piece is not
    # seen by the next.
    # So does a value read by a loop, which is a function of its own (`Kernel.outline`).
    k.scalars_in_work = pieces or loops > 0
    cuts: list[int] = []  # the body lines where a new piece starts
    piece_flops, piece_line = 0, 0
    vals: dict[int, Val] = {}
    # One ``sum_to_like`` per summand and result type: its second input gives only the
    # shape, which the graph's common subexpressions do not see (an LSTM's bias
    # gradients, b_ih's and b_hh's, were the same sum over 2,048 rows of 256, twice:
    # about 0.3 ms of the benchmark's 7.5 ms step)
    sums: dict[tuple[int, tuple[int, ...], str], Val] = {}

    value = value_reader(k, refs, vals)

    for node in schedule.nodes:
        if node.id not in needed or refs[node.id].id != node.id or refs[node.id].is_const:
            continue
        t = types[node.id]
        dt(t.dtype)
        if 0 in t.shape:
            raise UnsupportedError("an empty value")
        if node.op == "input":
            name = f"f{len(plan.feeds)}"
            plan.feeds.append(node.name)
            plan.scalar_feeds.append(not t.shape)
            vals[node.id] = arr_val(name, t.shape, t.dtype)
        elif node.op == "parameter":
            var = node.attrs["variable"]
            if id(var) in updated:
                vals[node.id] = updated[id(var)][1]
            else:
                name = f"r{len(plan.readonly)}"
                plan.readonly.append(var)
                vals[node.id] = arr_val(name, t.shape, t.dtype)
        elif node.op == "sum_to_like" and (refs[node.inputs[0].id].id, t.shape, t.dtype) in sums:
            vals[node.id] = sums[refs[node.inputs[0].id].id, t.shape, t.dtype]
        else:
            emit = resolve(get_op(node.op)).emit if registered(node.op) else None
            if emit is None:
                raise UnsupportedError(f"no Numba lowering of {node.op!r}")
            ins = [value(n.id) for n in node.inputs]
            line, before = len(k.body), k.flops + k.blas_flops
            vals[node.id] = emit(k, node, ins, t)
            if node.op == "sum_to_like":
                sums[refs[node.inputs[0].id].id, t.shape, t.dtype] = vals[node.id]
            # in pieces, the products calling BLAS count too: the limit is the step's
            if k.flops + (k.blas_flops if pieces else 0) > k.work_limit:
                error = UnsupportedError if pieces else _TooLargeError
                raise error(f"more than {k.work_limit:,} operations")
            if pieces:
                work = k.flops + k.blas_flops
                if line > piece_line and (
                    work - piece_flops > WORK_LIMIT or len(k.body) - piece_line > PIECE_LINES
                ):
                    cuts.append(line)
                    piece_flops, piece_line = before, line
    returned: list[str] = []
    for n in schedule.outputs:
        ref, t = refs[n.id], types[n.id]
        if ref.is_const:
            plan.outputs.append(("const", np.array(ref.const)))
            continue
        v = vals[ref.id]
        if not t.shape:
            returned.append(f"{dt(t.dtype)}({v.at([])})")
            plan.outputs.append(("scalar", np.dtype(t.dtype)))
            continue
        name = k.fresh("o")
        k.line(0, f"{name} = np.empty({t.shape!r}, {dt(t.dtype)})")
        idx, depth = k.loops(t.shape, 0)
        k.line(depth, f"{name}[{', '.join(idx)}] = {v.at(idx)}")
        returned.append(name)
        plan.outputs.append(("array", None))
    _write_updates(k, schedule, refs, vals, updated)
    plan.flops = k.flops
    plan.consts = k.consts
    state_args = [f"S_{d}" for d in plan.state]
    params = [f"f{i}" for i in range(len(plan.feeds))]
    params += [f"r{i}" for i in range(len(plan.readonly))] + state_args
    params += [f"c{i}" for i in range(len(plan.consts))]
    head = [f"    W_{d} = np.empty({n}, {dt(d)})" for d, n in k.work.items()]
    if plan.runtime_bounds:  # a kernel with loops: its work buffers are lent by the wrapper
        plan.work = dict(k.work)
        params += [f"W_{d}" for d in plan.work] + ["_u"]
        # Bounds LLVM may rely on: the loops run at most their sizes (so it can tell
        # the work buffer's slices apart and vectorise), yet not a known number of
        # times (so it does not unroll them fully; see `Kernel.runtime_bounds`).
        head = list(BOUNDS_CHECK)
    ret = f"    return ({''.join(r + ', ' for r in returned)})" if returned else "    return 0"
    defs: list[str] = []
    body = [*head, *k.body, ret]
    if cuts:  # pieces: each a function of every argument and work buffer
        plan.pieces = len(cuts) + 1
        args = ", ".join(params + [f"W_{d}" for d in k.work])
        bounds = [0, *cuts, len(k.body)]
        body = list(head)
        for p, (start, stop) in enumerate(itertools.pairwise(bounds)):
            last = p == len(cuts)
            defs += ["", NJIT, f"def _piece{p}({args}):", *k.body[start:stop]]
            defs.append(ret if last else "    return 0")
            body.append(f"    {'return ' if last else ''}_piece{p}({args})")
    for lines in k.functions:  # the loops moved out of the kernel: same parameters
        args = ", ".join(params)
        defs += ["", NJIT, *(text.replace(ARGS, args) for text in lines)]
    body = [text.replace(ARGS, ", ".join(params)) for text in body]
    plan.source = njit_module("step", params, body, defs)
    return plan


def _write_updates(
    k: Kernel,
    schedule: Schedule,
    refs: Mapping[int, Ref],
    vals: Mapping[int, Val],
    updated: Mapping[int, tuple[Variable, Val]],
) -> None:
    """The updates' values into the variables' state, once every other value is done;
    a value reading a variable's state is copied out first (updates are simultaneous)."""
    sources: list[tuple[Val, Val]] = []
    for var, n in schedule.updates:
        ref = refs[n.id]
        if ref.is_const:
            raise UnsupportedError("an update to a constant")
        target, src = updated[id(var)][1], vals[ref.id]
        if src is target:
            continue
        if "S_" in src.at(["0"] * len(src.shape)):
            copy = k.alloc(src.shape, src.dtype)
            idx, depth = k.loops(src.shape, 0)
            k.line(depth, f"{copy.at(idx)} = {src.at(idx)}")
            src = copy
        sources.append((target, src))
    for target, src in sources:
        if not target.shape:
            k.line(0, f"{target.at([])} = {src.at([])}")
            continue
        idx, depth = k.loops(target.shape, 0)
        k.line(depth, f"{target.at(idx)} = {src.at(idx)}")


def with_whole_step(
    line_fn: Any,
    schedule: Schedule,
    types: Mapping[int, TensorType],
    refs: Mapping[int, Ref],
    registered: Callable[[str], bool],
) -> Any:
    """``line_fn``, or a function that runs the whole step compiled (when the
    schedule updates variables and has a whole step; see the module docstring),
    compiling it on its first call.

    The result's ``step_plan`` is the `StepPlan` (None when there is none, and
    ``step_declined`` says why); ``whole_step_active()`` says whether calls now run the
    compiled step.
    """
    plan: StepPlan | str = "a program without updates (an evaluation) stays on numpy"
    if schedule.updates or WHOLE_STEP_WITHOUT_UPDATES:
        plan = plan_step(schedule, types, refs, registered)
    if isinstance(plan, str):
        line_fn.step_plan, line_fn.step_declined = None, plan
        line_fn.whole_step_active = lambda: False
        return line_fn
    impl: list[Any] = [None]

    def fallback(feeds: Any, reason: str = "Numba could not compile for these arguments") -> Any:
        marked.step_declined = reason
        impl[0] = line_fn
        return line_fn(feeds)

    def warm(feeds: Any) -> Any:
        try:
            impl[0] = whole_step(plan, fallback, line_fn)
        except Exception as exc:  # no Numba module: keep the numpy path
            return fallback(feeds, f"loading failed: {type(exc).__name__}: {exc}")
        return impl[0](feeds)

    impl[0] = warm

    def run(feeds: Any) -> Any:
        return impl[0](feeds)

    marked: Any = run
    marked.source = line_fn.source
    marked.step_plan, marked.step_declined = plan, None
    marked.whole_step_active = lambda: impl[0] is not warm and impl[0] is not line_fn
    return marked
