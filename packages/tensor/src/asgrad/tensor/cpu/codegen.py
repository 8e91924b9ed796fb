"""Code generation: one Python function per schedule and exact input shapes.

`generate_cpu_function` makes the function in four steps:

1. `_LineMaker` makes a `Line` per node
   that computes something: values that depend only on constants and shapes are
   folded, identities at these types dropped, some ops specialised
   (`asgrad.tensor.cpu.lowering`: a numpy form at exact types, or a compiled
   kernel on the compiled path), the rest call their kernel, or its float32 path
   (``OpDef.into``), as the op's declared facts allow;
2. `_needed` drops the lines no output or update needs (on the compiled path after
   the families' fusions of line groups, and before runs of small lines become one
   compiled call each: `asgrad.tensor.cpu.jit.fuse_segments`), and `_last_uses`
   finds the line after which each value dies;
3. `plan_buffers` decides where each line writes;
4. `_source` renders the lines, deleting each value after its last use, and
   `_compile` turns the source into the function.
"""

from __future__ import annotations

import builtins
import functools
import math
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

import asgrad.tensor.ir.registry as registry
from asgrad.tensor.cpu import blas, jit
from asgrad.tensor.cpu.buffers import BufferPlan, no_reuse, plan_buffers, reuse_enabled
from asgrad.tensor.cpu.jit.fuse_segments import fuse_segments
from asgrad.tensor.cpu.lowering import OpLowering, fusers, resolve
from asgrad.tensor.cpu.records import (
    Call,
    Expr,
    Line,
    Ref,
    Reuse,
    Value,
    render,
    shaped,
    values,
    with_out,
)
from asgrad.tensor.cpu.specialize import HELPERS, Context
from asgrad.tensor.ir.graph import Node
from asgrad.tensor.ir.memory import plan_memory
from asgrad.tensor.ir.passes import is_identity
from asgrad.tensor.ir.registry import IntoKernel, OpDef, TensorType, get_op
from asgrad.tensor.ir.schedule import Schedule
from asgrad.tensor.runtime.progress import current

# Values folded at code generation are kept with the function; larger ones run.
FOLD_LIMIT_BYTES = 1 << 22


def generate_cpu_function(
    schedule: Schedule,
    types: Mapping[int, TensorType],
    *,
    profile: Any = None,
    compiled: bool | None = None,
) -> Any:
    """One Python function running ``schedule`` at the exact ``types`` of its nodes.

    The function takes the feeds, applies the updates and returns the outputs; its
    source is its ``source`` attribute. ``profile`` (opt-in, see
    `asgrad.tensor.cpu.profile`) is called with a node's id after each line.
    ``compiled`` takes the compiled path (`asgrad.tensor.cpu.jit`; None: as
    `enabled` says): the ops' compiled kernels (found by
    `resolve`), the families' fused line groups (each
    large parameter's Adam update as one Numba pass), runs of small lines as one Numba
    function each (`asgrad.tensor.cpu.jit.fuse_segments`), and a small training step
    compiled whole (`asgrad.tensor.cpu.jit.step`).
    """
    if compiled is None:
        compiled = jit.enabled()
    maker = _LineMaker(schedule, types, use_jit=compiled)
    if profile is not None:
        maker.env["_prof"] = profile
    current().stage(f"CPU: planning buffers and compiling {len(maker.lines):,} lines")
    lines = _needed(maker.lines, maker.refs, maker.roots)
    if compiled:
        own = {id(line) for line in lines}
        for fuse in fusers():  # imports no Numba
            lines = fuse(lines, maker.refs, types, maker.env, maker.context)
        lines = _needed(lines, maker.refs, maker.roots)  # lines a fusion left unread
        lines = fuse_segments(
            lines, maker.refs, types, maker.env, maker.context, own, maker.name_of
        )
    reads = [[a for a in values(line.call) if not maker.refs[a].is_const] for line in lines]
    last = _last_uses(reads, maker.refs, maker.roots)
    if reuse_enabled():
        root_ids = {maker.refs[r].id for r in maker.roots if not maker.refs[r].is_const}
        plan = _plan_within_budget(schedule, types, lines, reads, last, root_ids)
    else:
        plan = no_reuse(lines)
    source = _source(maker, lines, last, plan)
    fn = _compile(source, maker.env, schedule)
    if compiled and profile is None:
        from asgrad.tensor.cpu.jit.step import with_whole_step  # imports no Numba

        fn = with_whole_step(fn, schedule, types, maker.refs, maker.context.registered)
    return fn


def value_refs(
    schedule: Schedule, types: Mapping[int, TensorType]
) -> tuple[dict[int, Ref], Callable[[str], bool]]:
    """What each node's value is at ``types`` (itself, a folded constant, or the value
    of the node it is an identity of), as the generated function has it, and whether
    an op's kernel is its registered one: what a whole-step kernel reads (a loop
    body's, `asgrad.tensor.cpu.jit.emit_scan`)."""
    maker = _LineMaker(schedule, types, use_jit=True)
    return maker.refs, maker.context.registered


def _plan_within_budget(
    schedule: Schedule,
    types: Mapping[int, TensorType],
    lines: Sequence[Line],
    reads: Sequence[Sequence[int]],
    last: Mapping[int, int],
    root_ids: set[int],
) -> BufferPlan:
    """The buffer plan; under a memory budget, with as many scratch slots as keep the
    run's peak (slots, fresh results, feeds and variables) within it.

    Slots are held between runs and serve values of one size only, so unlimited
    they may hold more than the schedule's planned peak; fresh memory costs page
    faults instead. The cap on the slots' bytes is the largest (by bisection) whose
    plan fits, leaving room for the kernels' own temporaries (a softmax's
    exponentials): one and a half times the largest result; with no slots at all the
    plan is the schedule's.
    """
    plan = plan_buffers(lines, reads, types, last, root_ids)
    if schedule.memory_budget is None:
        return plan
    roots = schedule.outputs + [n for _, n in schedule.updates]
    planned = plan_memory(schedule.nodes, roots, types)
    sizes = (types[line.node.id] for line in lines)
    largest = max((math.prod(t.shape) * np.dtype(t.dtype).itemsize for t in sizes), default=0)
    room = schedule.memory_budget - (planned.parameters + planned.state + planned.inputs)
    room -= largest * 3 // 2
    if plan.peak_bytes <= room:
        return plan
    low, high = 0, sum(math.prod(t.shape) * np.dtype(t.dtype).itemsize for t in plan.slots)
    best = plan_buffers(lines, reads, types, last, root_ids, 0)
    while high - low > max(high // 64, 1 << 16):
        mid = (low + high) // 2
        trial = plan_buffers(lines, reads, types, last, root_ids, mid)
        if trial.peak_bytes <= room:
            low, best = mid, trial
        else:
            high = mid
    return best


def _shape_dummy(t: TensorType) -> np.ndarray:
    """A zero-strided read-only array of type ``t``: for inputs read for shape only."""
    return np.broadcast_to(np.zeros((), dtype=t.dtype), t.shape)


def _natural_dtype(ufunc: np.ufunc, dtypes: Sequence[str]) -> str | None:
    try:
        resolved = ufunc.resolve_dtypes((*(np.dtype(d) for d in dtypes), None))
    except Exception:  # no loop, or an old numpy: no out=
        return None
    return str(resolved[-1])


def _is_registered(op: OpDef) -> bool:
    """Whether ``op`` runs its registered kernel: only then do the op's declared CPU
    facts and the specialisations (written for that kernel) apply."""
    return op.kernel is registry.get_op(op.name).kernel


def _into_applies(into: IntoKernel, ins: Sequence[TensorType], out: TensorType, node: Node) -> bool:
    """Whether the float32 path ``into`` may run ``node`` (see `IntoKernel`)."""
    if out.dtype != "float32" or not out.shape or any(t.dtype != "float32" for t in ins):
        return False
    if (into.exact and 0 in out.shape) or (into.when is not None and not into.when(node.attrs)):
        return False
    lead = into.leading
    return not lead or (all(t == out for t in ins[:lead]) and all(t != out for t in ins[lead:]))


class _LineMaker:
    """The lines of a schedule at exact types, and what rendering them needs."""

    def __init__(
        self, schedule: Schedule, types: Mapping[int, TensorType], *, use_jit: bool
    ) -> None:
        self.schedule, self.types = schedule, types
        self.use_jit = use_jit  # the compiled path's switch, read once per function
        self.env: dict[str, Any] = {**HELPERS, "_asarray": np.asarray, "_array": np.array}
        self.refs: dict[int, Ref] = {}
        self.position = {node.id: i for i, node in enumerate(schedule.nodes)}
        self.roots = [n.id for n in schedule.outputs] + [n.id for _, n in schedule.updates]
        users: dict[int, int] = {}
        for node in schedule.nodes:
            for inp in node.inputs:
                users[inp.id] = users.get(inp.id, 0) + 1
        for r in self.roots:
            users[r] = users.get(r, 0) + 1
        self.producer: dict[int, Node] = {}
        self.context = Context(
            types,
            self.refs,
            self.producer,
            users,
            self.roots,
            lambda name: _is_registered(get_op(name)),
        )
        self.lines: list[Line] = []
        progress = current()
        for i, node in enumerate(schedule.nodes):
            self._add(i, node)
            progress.advance()

    def name_of(self, node_id: int) -> str:
        """The name of a node's value in the function (a constant is added to env)."""
        r = self.refs[node_id]
        if not r.is_const:
            return f"v{self.position[r.id]}"
        name = f"c{self.position[r.id]}"
        self.env[name] = r.const
        return name

    def _add(self, i: int, node: Node) -> None:
        """Node ``i``'s value: a line, a constant, or another node's value (an identity)."""
        if node.op == "input":
            self.refs[node.id] = Ref(node.id)
            # The name goes in as a value, never as source text (braces, odd reprs).
            self.env[f"name{i}"] = str.__str__(node.name)
            self.lines.append(Line(node=node, call=f"feeds[name{i}]"))
            return
        if node.op == "parameter":
            self.refs[node.id] = Ref(node.id)
            self.env[f"var{i}"] = node.attrs["variable"]
            self.lines.append(Line(node=node, call=f"var{i}.value"))
            return
        if node.op == "constant":
            self.refs[node.id] = Ref(node.id, node.attrs["value"], True)
            return
        op = get_op(node.op)
        original = _is_registered(op)
        folded = self._fold(node, op, op.shape_only_inputs if original else ())
        if folded is not None:
            self.refs[node.id] = folded
            return
        in_t = [self.types[n.id] for n in node.inputs]
        if original and is_identity(op, in_t[0], self.types[node.id], exact=True):
            self.refs[node.id] = self.refs[node.inputs[0].id]
            return
        self.refs[node.id] = Ref(node.id)
        lowered = resolve(op) if original else OpLowering()
        line = None if lowered.numpy is None else lowered.numpy(node, self.context)
        if line is None:
            line = self._kernel_line(i, node, op, original, lowered)
        self.lines.append(line)
        self.producer[node.id] = node

    def _fold(self, node: Node, op: OpDef, shape_only: tuple[int, ...]) -> Ref | None:
        """A constant for a pure node whose inputs are constants or read for shape only."""
        ins = [self.refs[n.id] for n in node.inputs]
        if not op.pure or not all(r.is_const or j in shape_only for j, r in enumerate(ins)):
            return None
        out_t = self.types[node.id]
        if math.prod(out_t.shape) * np.dtype(out_t.dtype).itemsize > FOLD_LIMIT_BYTES:
            return None  # checked before computing: folding would materialise it
        args = [
            r.const if r.is_const else _shape_dummy(self.types[n.id])
            for r, n in zip(ins, node.inputs, strict=True)
        ]
        try:
            value: Any = op.kernel(*args, **node.attrs)
        except Exception:  # left to fail (or not) at run time
            return None
        if value is None or np.asarray(value).nbytes > FOLD_LIMIT_BYTES:
            return None
        if isinstance(value, np.ndarray):
            value.setflags(write=False)
        return Ref(node.id, value, True)

    def _kernel_line(
        self, i: int, node: Node, op: OpDef, original: bool, lowered: OpLowering
    ) -> Line:
        """The line calling the op's kernel ``k<i>``, or its float32 path ``z<i>``."""
        in_t = [self.types[n.id] for n in node.inputs]
        out_t = self.types[node.id]
        args: list[Expr] = []
        for j, n in enumerate(node.inputs):
            if original and j in op.shape_only_inputs:  # a stand-in, so the value can go
                self.env[f"s{i}_{j}"] = _shape_dummy(in_t[j])
                args.append(f"s{i}_{j}")
            else:
                args.append(Value(self.refs[n.id].id))
        self.env[f"k{i}"] = functools.partial(op.kernel, **node.attrs) if node.attrs else op.kernel
        call = Call(f"k{i}", tuple(args))
        if not original:
            return Line(node=node, call=call)
        if self.use_jit and lowered.compiled is not None:
            compiled = self._jit_line(i, node, lowered, tuple(args), in_t, out_t)
            if compiled is not None:
                return compiled
        into = op.into
        if into is not None and _into_applies(into, in_t, out_t, node):
            self.env[f"z{i}"] = functools.partial(into.fn, **node.attrs) if node.attrs else into.fn
            z = Call(f"z{i}", tuple(args))
            fresh = call if into.exact else z
            if not shaped(out_t):
                return Line(node=node, call=fresh)
            reuse = Reuse.IN_PLACE if into.leading else Reuse.INTO_SLOT
            z_into = with_out(z, work=into.work > 0)
            return Line(node=node, call=fresh, reuse=reuse, into=z_into, work=into.work)
        return _kernel_reuse(Line(node=node, call=call), op, in_t, out_t)

    def _jit_line(
        self,
        i: int,
        node: Node,
        lowered: OpLowering,
        args: tuple[Expr, ...],
        in_t: Sequence[TensorType],
        out_t: TensorType,
    ) -> Line | None:
        """The line calling the op's compiled kernel ``jk<i>`` (`.jit.kernels`),
        into a buffer as an `IntoKernel` path would, or None where none applies."""
        assert lowered.compiled is not None
        entry = lowered.compiled(node, in_t, out_t)
        if entry is None:
            return None
        fn = entry.load()
        self.env[f"jk{i}"] = functools.partial(fn, **node.attrs) if node.attrs else fn
        call = Call(f"jk{i}", args)
        if not shaped(out_t):
            return Line(node=node, call=call, reuse=Reuse.FRESH)
        lead = entry.leading
        in_place = lead and all(t == out_t for t in in_t[:lead])
        in_place = in_place and all(t != out_t for t in in_t[lead:])
        reuse = Reuse.IN_PLACE if in_place else Reuse.INTO_SLOT
        return Line(node=node, call=call, reuse=reuse, into=with_out(call))


def _kernel_reuse(line: Line, op: OpDef, in_t: Sequence[TensorType], out_t: TensorType) -> Line:
    """``line`` (a call of the op's registered kernel) with what the kernel allows:
    a numpy ufunc writes in place, a kernel declaring ``writes_out`` into a slot, a
    kernel declaring ``fresh_result`` gives a buffer of its own."""
    assert isinstance(line.call, Call)
    kernel, node = op.kernel, line.node
    if not shaped(out_t):
        return line
    if (
        isinstance(kernel, np.ufunc)
        and not node.attrs
        and kernel.nout == 1
        and kernel.nin == len(node.inputs)
        and _natural_dtype(kernel, [t.dtype for t in in_t]) == out_t.dtype
    ):
        return Line(node=node, call=line.call, reuse=Reuse.IN_PLACE, into=with_out(line.call))
    if op.writes_out and all(t.dtype == out_t.dtype for t in in_t):
        return Line(node=node, call=line.call, reuse=Reuse.INTO_SLOT, into=with_out(line.call))
    if op.fresh_result:
        return Line(node=node, call=line.call, reuse=Reuse.FRESH)
    return line


def _needed(lines: Sequence[Line], refs: Mapping[int, Ref], roots: Sequence[int]) -> list[Line]:
    """The lines the roots need (dead code after folding and specialisation goes)."""
    needed = {refs[r].id for r in roots if not refs[r].is_const}
    kept: list[Line] = []
    for line in reversed(lines):
        if line.node.id in needed:
            kept.append(line)
            needed.update(a for a in values(line.call) if not refs[a].is_const)
    kept.reverse()
    return kept


def _last_uses(
    reads: Sequence[Sequence[int]], refs: Mapping[int, Ref], roots: Sequence[int]
) -> dict[int, int]:
    """The line of each runtime value's last use; the roots' is past the last line."""
    last: dict[int, int] = {}
    for step, used in enumerate(reads):
        for a in used:
            last[a] = step
    for r in roots:
        if not refs[r].is_const:
            last[refs[r].id] = len(reads)
    return last


def _scratch_prologue(slots: Sequence[TensorType], env: dict[str, Any]) -> list[str]:
    """Lines binding the scratch slots ``_s<k>``: kept with the function, one set per thread."""
    if not slots:
        return []
    shapes = [(t.shape, np.dtype(t.dtype)) for t in slots]
    env["_scratch"] = threading.local()
    env["_scratch_alloc"] = lambda: tuple(np.empty(shape, dt) for shape, dt in shapes)
    return [
        "    try:",
        "        _s = _scratch.s",
        "    except AttributeError:",
        "        _s = _scratch.s = _scratch_alloc()",
        f"    {''.join(f'_s{k}, ' for k in range(len(slots)))}= _s",
    ]


def _source(
    maker: _LineMaker, lines: Sequence[Line], last: Mapping[int, int], plan: BufferPlan
) -> str:
    """The function's source: the lines in order, each value deleted after its last use."""
    freed: dict[int, list[int]] = {}
    for node_id, step in last.items():
        freed.setdefault(step, []).append(node_id)
    body = _scratch_prologue(plan.slots, maker.env)
    if maker.use_jit:  # a step begins: the compiled kernels measure their threads by steps
        from asgrad.tensor.cpu.jit.threads import new_step  # imports no Numba

        maker.env["_new_step"] = new_step
        body.insert(0, "    _new_step()")
    for step, (line, placement) in enumerate(zip(lines, plan.placements, strict=True)):
        if placement.writes:
            assert line.into is not None
            out = "None"
            shape = maker.types[line.node.id].shape
            if placement.into_slot is not None:
                out = _slot(placement.into_slot, plan, shape)
            elif placement.into_value is not None:
                out = maker.name_of(placement.into_value)
            work = f"({', '.join(_slot(k, plan, shape) for k in placement.work)},)"
            expr = render(line.into, maker.name_of, out, work)
        else:
            expr = render(line.call, maker.name_of)
        body.append(f"    v{maker.position[line.node.id]} = {expr}")
        if "_prof" in maker.env:
            body.append(f"    _prof({line.node.id})")
        dead = sorted(f"v{maker.position[d]}" for d in freed.get(step, []))
        if dead:
            body.append(f"    del {', '.join(dead)}")
    largest = max((line.flops for line in lines), default=0)
    source = ["def run(feeds):", *blas.serial_body(body, largest, maker.env)]
    schedule = maker.schedule
    for k, (var, n) in enumerate(schedule.updates):
        maker.env[f"upd{k}"] = var
        src = maker.name_of(n.id)
        source.append(f"    upd{k}.set_host_value({_array(src, maker.refs[n.id])})")
    outs = []
    leaf_views = _leaf_views(lines, maker.refs)
    for n in schedule.outputs:
        src = maker.name_of(n.id)
        ref = maker.refs[n.id]
        if not ref.is_const and ref.id in leaf_views:  # the caller owns what it gets
            src = f"_array({src})"
        elif not ref.is_const and not maker.types[n.id].shape:
            src = f"_asarray({src})"
        outs.append(_array(src, ref))
    source.append(f"    return [{', '.join(outs)}]")
    return "\n".join(source)


def _slot(k: int, plan: BufferPlan, shape: tuple[int, ...]) -> str:
    """Scratch slot ``k`` in ``shape`` (a slot serves values of one size, any shape)."""
    return f"_s{k}" if plan.slots[k].shape == shape else f"_s{k}.reshape({shape})"


def _leaf_views(lines: Sequence[Line], refs: Mapping[int, Ref]) -> set[int]:
    """The values that may be (or view) a feed or a variable's value.

    Returned as they are, a write into an output would change the model or the
    caller's feed, so such outputs are copied.
    """
    found: set[int] = set()
    for line in lines:
        leaf = line.node.op in ("input", "parameter")
        reads_one = any(refs[a].id in found for a in values(line.call))
        if leaf or (line.reuse is Reuse.ALIAS and reads_one):
            found.add(line.node.id)
    return found


def _array(name: str, ref: Ref) -> str:
    """A constant as a fresh array (outputs and variables must be writable)."""
    return f"_array({name})" if ref.is_const else name


def _compile(source: str, env: dict[str, Any], schedule: Schedule) -> Any:
    # The source is generated from the schedule alone; no user strings reach it.
    code = builtins.compile(source, f"<asgrad schedule {id(schedule):x}>", "exec")
    exec(code, env)
    run = env["run"]
    run.source = source
    return run
