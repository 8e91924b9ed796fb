"""The CPU (numpy) backend: one generated Python function per schedule and input shapes.

Each line of the generated function calls one node's numpy kernel; intermediates
are deleted after their last use, and dying values and per-thread scratch slots are
reused as ``out=`` buffers (see :func:`generate_cpu_function`).
"""

from __future__ import annotations

import builtins
import functools
import os
import threading
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from asgrad.tensor import cpu_kernels, passes
from asgrad.tensor.backends import Executable, register_backend
from asgrad.tensor.graph import Node
from asgrad.tensor.ops import nn as nn_ops
from asgrad.tensor.registry import TensorType, get_op
from asgrad.tensor.schedule import Schedule


class CPUExecutable:
    """The numpy backend: one generated Python function per schedule and input shapes.

    The first run with a given set of input shapes infers every node's exact type
    and generates a function for them: a line per node calling its numpy kernel,
    deleting each intermediate after its last use. Exact types let the generator
    do what the static graph cannot (shapes may change between runs): drop ops that
    are identities at these shapes, fold values that depend only on constants and
    shapes (a mean's gradient scale), call numpy directly for simple ops, run a
    batched matmul against a matrix as one matrix product, and sum a batched
    product over its batch inside one product (a weight gradient), and take the
    float32 fast paths of :mod:`asgrad.tensor.cpu_kernels` (erf, GELU).
    Specialisations apply only to ops whose registered kernel they were written for.
    """

    MAX_SPECIALIZATIONS = 16

    def __init__(self, schedule: Schedule) -> None:
        self.schedule = schedule
        self._input_names = tuple(n.name for n in schedule.inputs)
        self._fns: dict[tuple[tuple[int, ...], ...], Any] = {}

    def run(self, feeds: Mapping[str, np.ndarray]) -> list[np.ndarray]:
        key = tuple([feeds[name].shape for name in self._input_names])
        fn = self._fns.get(key)
        if fn is None:
            fn = self._specialize(key)
        result: list[np.ndarray] = fn(feeds)
        return result

    def _specialize(self, key: tuple[tuple[int, ...], ...]) -> Any:
        if len(self._fns) >= self.MAX_SPECIALIZATIONS:
            self._fns.clear()
        types = self.schedule.infer_types(dict(zip(self._input_names, key, strict=True)))
        fn = self._fns[key] = generate_cpu_function(self.schedule, types)
        return fn


class CPUBackend:
    """The numpy reference backend."""

    name = "cpu"

    def available(self) -> bool:
        return True

    def compile(self, schedule: Schedule) -> Executable:
        return CPUExecutable(schedule)


register_backend("cpu", CPUBackend)


# -- CPU code generation ---------------------------------------------------------------------
# Ops whose listed inputs are read for their shape (and dtype) only: at known shapes
# the value is not needed, so it may be folded away or freed earlier.
SHAPE_ONLY_INPUTS: dict[str, tuple[int, ...]] = {
    "sum_to_like": (1,),
    "broadcast_like": (1,),
    "reshape_like": (1,),
    "size_ratio": (0, 1),
    "scatter_slice": (1,),
    "scatter_add": (2,),
}
# At exact shapes every identity op of the passes is one when the types agree.
IDENTITY_OPS = passes.IDENTITY_OPS | passes.SHAPE_LIKE_IDENTITY_OPS
# Values folded at code generation are kept with the function; larger ones run.
FOLD_LIMIT_BYTES = 1 << 22

_HELPERS: dict[str, Any] = {
    "_matmul": np.matmul,
    "_divide": np.divide,
    "_maximum": np.maximum,
    "_add_reduce": np.add.reduce,
    "_max_reduce": np.maximum.reduce,
    "_min_reduce": np.minimum.reduce,
    "_broadcast_to": np.broadcast_to,
    "_asarray": np.asarray,
    "_array": np.array,
    "_erf_f32": cpu_kernels.erf_f32,
    "_gelu_f32": cpu_kernels.gelu_f32,
    "_gelu_backward_f32": cpu_kernels.gelu_backward_f32,
    "_where_zero": cpu_kernels.where_zero,
    "np_float32": np.float32,
    "np_float64": np.float64,
}


# Opt-in (ASGRAD_SERIAL_GEMM_FLOPS=N): a program whose largest matrix product is
# below N flops runs with numpy's BLAS on one thread. On an oversubscribed machine a
# descheduled BLAS worker stalls every multi-threaded product for a scheduler
# quantum; one thread is then steadier. On an idle machine the configured thread
# count is faster, so it is the default. Switching per product is not done: raising
# the count wakes the pool, which costs more than a product of this size.
SERIAL_GEMM_FLOPS = int(os.environ.get("ASGRAD_SERIAL_GEMM_FLOPS", "0"))


class _BlasThreads:
    """Sets the thread count of numpy's BLAS (through threadpoolctl, when installed)."""

    def __init__(self) -> None:
        self.get: Any = None
        self.set: Any = None
        try:
            from threadpoolctl import ThreadpoolController  # type: ignore[import-untyped]
        except ImportError:
            return
        try:
            blas = [c for c in ThreadpoolController().lib_controllers if c.user_api == "blas"]
        except Exception:  # an unusual BLAS build: leave its threads alone
            return
        # numpy's own BLAS (scipy may have loaded another copy, left alone).
        mine = [c for c in blas if os.sep + "numpy" in str(c.filepath)] or blas[:1]
        if mine:
            self.get = lambda: mine[0].num_threads
            self.set = mine[0].set_num_threads


_blas_threads: _BlasThreads | None = None


def _blas() -> _BlasThreads:
    global _blas_threads
    if _blas_threads is None:
        _blas_threads = _BlasThreads()
    return _blas_threads


def _matmul_batch_sum(p: np.ndarray, q: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """``(p @ q).sum(batch axes)`` as one matrix product: p (..., K, T), q (..., T, N).

    ``sum_b p_b @ q_b`` is ``P @ Q`` with the batches laid side by side along T, so
    a weight gradient needs no batched product nor the reduction after it. ``out``:
    a (K, N) buffer to write into.
    """
    k, n = p.shape[-2], q.shape[-1]
    a, b = p.swapaxes(-1, -2).reshape(-1, k).T, q.reshape(-1, n)
    result: np.ndarray = np.matmul(a, b) if out is None else np.matmul(a, b, out=out)
    return result


def _scatter_slice_into(g: np.ndarray, out: np.ndarray, index: Any) -> np.ndarray:
    """``scatter_slice``'s kernel (zeros, then ``g`` at ``index``) writing into ``out``."""
    out[...] = 0
    out[index] = g
    return out


def _registered_kernel(name: str) -> Any:
    from asgrad.tensor.registry import get_op as registry_get_op

    return registry_get_op(name).kernel


def _shape_dummy(t: TensorType) -> np.ndarray:
    """A zero-strided read-only array of type ``t``: for inputs read for shape only."""
    return np.broadcast_to(np.zeros((), dtype=t.dtype), t.shape)


def _sum_to_axes(src: tuple[int, ...], dst: tuple[int, ...]) -> tuple[int, ...]:
    lead = len(src) - len(dst)
    stretched = (i + lead for i, d in enumerate(dst) if d == 1 and src[i + lead] != 1)
    return (*range(lead), *stretched)


class _Ref:
    """What a node's value is at code generation: a runtime value or a constant."""

    __slots__ = ("const", "id", "is_const")

    def __init__(self, node_id: int, const: Any = None, is_const: bool = False) -> None:
        self.id, self.const, self.is_const = node_id, const, is_const


def generate_cpu_function(schedule: Schedule, types: Mapping[int, TensorType]) -> Any:
    """One Python function running ``schedule`` at the exact ``types`` of its nodes.

    The function takes the feeds, applies the updates and returns the outputs.
    """
    from asgrad.tensor.passes import IMPURE_OPS

    env: dict[str, Any] = dict(_HELPERS)
    env["_matmul_batch_sum"] = _matmul_batch_sum
    refs: dict[int, _Ref] = {}
    # (node, format string over the argument names, argument node ids)
    plan: list[tuple[Node, str, list[int]]] = []
    position = {node.id: i for i, node in enumerate(schedule.nodes)}
    users: dict[int, int] = {}
    for node in schedule.nodes:
        for inp in node.inputs:
            users[inp.id] = users.get(inp.id, 0) + 1
    roots = [n.id for n in schedule.outputs] + [n.id for _, n in schedule.updates]
    for r in roots:
        users[r] = users.get(r, 0) + 1
    producer: dict[int, tuple[Node, list[int]]] = {}
    # How each line's value may reuse memory (see _plan_buffers).
    kinds: dict[int, tuple[str, str | None, int]] = {}

    def const_name(node_id: int) -> str:
        name = f"c{position[node_id]}"
        env[name] = refs[node_id].const
        return name

    for i, node in enumerate(schedule.nodes):
        out_t = types[node.id]
        if node.op == "input":
            refs[node.id] = _Ref(node.id)
            plan.append((node, f"feeds[{node.name!r}]", []))
            continue
        if node.op == "parameter":
            refs[node.id] = _Ref(node.id)
            env[f"var{i}"] = node.attrs["variable"]
            plan.append((node, f"var{i}.value", []))
            continue
        if node.op == "constant":
            refs[node.id] = _Ref(node.id, node.attrs["value"], True)
            continue
        op = get_op(node.op)
        ins = [refs[n.id] for n in node.inputs]
        in_t = [types[n.id] for n in node.inputs]
        original = op.kernel is _registered_kernel(node.op)
        shape_only = SHAPE_ONLY_INPUTS.get(node.op, ()) if original else ()
        # 1. Fold what depends on constants and shapes only.
        if node.op not in IMPURE_OPS and all(
            r.is_const or j in shape_only for j, r in enumerate(ins)
        ):
            args = [r.const if r.is_const else _shape_dummy(in_t[j]) for j, r in enumerate(ins)]
            try:
                value = op.kernel(*args, **node.attrs)
            except Exception:  # left to fail (or not) at run time
                value = None
            if value is not None and np.asarray(value).nbytes <= FOLD_LIMIT_BYTES:
                if isinstance(value, np.ndarray):
                    value.setflags(write=False)
                refs[node.id] = _Ref(node.id, value, True)
                continue
        # 2. Identities at these shapes.
        if original and node.op in IDENTITY_OPS and in_t[0] == out_t:
            refs[node.id] = ins[0]
            continue
        refs[node.id] = _Ref(node.id)
        arg_ids = [r.id for r in ins]
        special = _specialize(node, types, producer, users, roots, refs) if original else None
        if special is not None:
            fmt = special[0]
            if special[1] is not None:
                arg_ids = [refs[a].id for a in special[1]]
        else:
            env[f"k{i}"] = functools.partial(op.kernel, **node.attrs) if node.attrs else op.kernel
            fmt = f"k{i}(" + ", ".join(f"{{{j}}}" for j in range(len(ins))) + ")"
            for j in shape_only:  # a zero-strided stand-in, so the value can go
                dummy = f"s{i}_{j}"
                env[dummy] = _shape_dummy(in_t[j])
                fmt = fmt.replace(f"{{{j}}}", dummy)
        plan.append((node, fmt, arg_ids))
        producer[node.id] = (node, [n.id for n in node.inputs])
        kinds[node.id] = _reuse_kind(node, op, fmt, special is not None, original, types)
        if (
            node.op == "scatter_slice"
            and original
            and special is None
            and out_t.shape
            and in_t[0].dtype == out_t.dtype
        ):  # the kernel's zeros, then the slice: into a buffer when one is free
            env[f"z{i}"] = functools.partial(_scatter_slice_into, index=node.attrs["index"])
            kinds[node.id] = ("matmul", f"z{i}({{0}}, {{out}})", 0)
        into = _INTO_KERNELS.get(node.op) if original and special is None else None
        if (
            into is not None
            and out_t.shape
            and 0 not in out_t.shape
            and out_t.dtype == "float32"
            and all(t.dtype == "float32" for t in in_t)
            and all(t == out_t for t in in_t[: into[1]])
            and all(t != out_t for t in in_t[into[1] :])  # never out= a weight or bias
        ):  # float32 kernels writing into a dying input or a slot (with scratch)
            env[f"z{i}"] = functools.partial(into[0], **node.attrs)
            call = ", ".join(f"{{{j}}}" for j in range(len(ins)))
            extra = ", work={work}" if into[2] else ""
            kinds[node.id] = ("ufunc", f"z{i}({call}, out={{out}}{extra})", into[2])

    # Dead code after folding and fusion: keep what the roots need.
    needed = {refs[r].id for r in roots if not refs[r].is_const}
    kept: list[tuple[Node, str, list[int]]] = []
    for node, fmt, arg_ids in reversed(plan):
        if node.id not in needed:
            continue
        kept.append((node, fmt, arg_ids))
        for j, a in enumerate(arg_ids):
            if f"{{{j}}}" in fmt and not refs[a].is_const:
                needed.add(a)
    kept.reverse()

    def name_of(node_id: int) -> str:
        r = refs[node_id]
        return const_name(r.id) if r.is_const else f"v{position[r.id]}"

    last: dict[int, int] = {}
    for step, (_, fmt, arg_ids) in enumerate(kept):
        for j, a in enumerate(arg_ids):
            if f"{{{j}}}" in fmt and not refs[a].is_const:
                last[a] = step
    end = len(kept)
    for r in roots:
        if not refs[r].is_const:
            last[refs[r].id] = end
    freed: dict[int, list[int]] = {}
    for node_id, step in last.items():
        freed.setdefault(step, []).append(node_id)

    used = [
        [a for j, a in enumerate(arg_ids) if f"{{{j}}}" in fmt and not refs[a].is_const]
        for _, fmt, arg_ids in kept
    ]
    root_ids = {refs[r].id for r in roots if not refs[r].is_const}
    outs_to: list[tuple[str | int | None, tuple[str, ...]]] = [(None, ())] * len(kept)
    slots: list[TensorType] = []
    if reuse_enabled():
        outs_to, slots = _plan_buffers(kept, used, types, kinds, last, root_ids)

    body: list[str] = []
    if slots:
        # Scratch buffers kept with the function, one set per thread.
        shapes = [(t.shape, np.dtype(t.dtype)) for t in slots]
        env["_scratch"] = scratch = threading.local()
        env["_scratch_alloc"] = lambda: tuple(np.empty(shape, dt) for shape, dt in shapes)
        del scratch
        body += [
            "    try:",
            "        _s = _scratch.s",
            "    except AttributeError:",
            "        _s = _scratch.s = _scratch_alloc()",
            f"    {''.join(f'_s{k}, ' for k in range(len(slots)))}= _s",
        ]
    largest = 0  # flops of the largest matrix product
    for step, (node, fmt, arg_ids) in enumerate(kept):
        flops = _gemm_flops(fmt, [types[a] for a in arg_ids], types[node.id])
        largest = max(largest, flops or 0)
        names = [name_of(a) for a in arg_ids]
        target, work = outs_to[step]
        if target is None and not work:
            expr = fmt.format(*names)
        else:
            out_fmt = kinds[node.id][1]
            assert out_fmt is not None
            if target is None:
                out_name = "None"
            else:
                out_name = target if isinstance(target, str) else name_of(target)
            expr = out_fmt.format(*names, out=out_name, work=f"({', '.join(work)},)")
        body.append(f"    v{position[node.id]} = {expr}")
        dead = sorted(f"v{position[d]}" for d in freed.get(step, []))
        if dead:
            body.append(f"    del {', '.join(dead)}")
    lines = ["def run(feeds):"]
    control = _blas()
    # OpenBLAS itself runs products below 2 * 65536 * 4 flops on one thread.
    if control.set is not None and 1 << 19 <= largest < SERIAL_GEMM_FLOPS:
        env["_blas_set"], env["_blas_get"] = control.set, control.get
        lines += ["    _threads = _blas_get()", "    _blas_set(1)", "    try:"]
        lines += ["    " + line for line in body]
        lines += ["    finally:", "        _blas_set(_threads)"]
    else:
        lines += body
    for k, (var, n) in enumerate(schedule.updates):
        env[f"upd{k}"] = var
        src = name_of(n.id)
        if refs[n.id].is_const:
            src = f"_array({src})"
        lines.append(f"    upd{k}.set_host_value({src})")
    outs = []
    for n in schedule.outputs:
        src = name_of(n.id)
        if refs[n.id].is_const:
            src = f"_array({src})"
        elif not types[n.id].shape:
            src = f"_asarray({src})"
        outs.append(src)
    lines.append(f"    return [{', '.join(outs)}]")
    # The source is generated from the schedule alone; no user strings reach it.
    code = builtins.compile("\n".join(lines), f"<asgrad schedule {id(schedule):x}>", "exec")
    exec(code, env)
    run = env["run"]
    run.source = "\n".join(lines)
    return run


# -- buffer reuse ---------------------------------------------------------------------------
# A static version of a caching allocator. Large intermediates are first-touch page faults
# when freshly allocated (a fresh 2 MiB result costs more than the arithmetic into it), so
# the generated function writes elementwise results into a dying input (``out=`` the
# input) and the other out-capable results (ufuncs, matrix products) into scratch buffers
# kept with the function across runs, one set per thread.
#
# Each value references a set of *buffers*: the arrays known to be fresh that it may
# alias. A value made by a kernel known to return a fresh array (nothing else refers to
# its memory) is a buffer of its own; a view (reshape, transpose, broadcast), or the
# result of any kernel not known to be fresh, may alias every buffer of its inputs.
# Feeds, variables' values and constants are no buffers: never written. A buffer is
# written only when no live value references it. Values that are returned or stored in
# a variable (or may alias such a value) never live in a scratch buffer.

# Ops whose registered kernel returns a fresh array (not a view of an input).
FRESH_KERNEL_OPS = frozenset(
    {
        "gelu_backward",
        "adam_ema",
        "adam_update",
        "layer_norm",
        "layer_norm_backward",
        "softmax",
        "log_softmax",
        "scatter_slice",
        "scatter_add",
        "one_hot",
    }
)
# Ops whose registered kernel also takes ``out=`` (its whole result written there, no
# input aliased): their lines write into a free scratch slot, as a matrix product does.
OUT_KERNEL_OPS = frozenset(
    {
        "conv2d",
        "conv2d_backward_input",
        "conv2d_backward_weight",
        "max_pool2d",
        "max_pool2d_backward",
    }
)
# Registered kernels' float32 paths that write into ``out`` (x's type; may be a dying
# input, as a ufunc: each reads an input only before writing that element or row):
# op -> (function, leading inputs of the output's type, scratch arrays lent).
_INTO_KERNELS: dict[str, tuple[Any, int, int]] = {
    "softmax": (cpu_kernels.softmax_into, 1, 0),
    "layer_norm": (nn_ops.layer_norm_into, 1, 0),
    "layer_norm_backward": (nn_ops.layer_norm_backward_into, 2, 1),
}
_FRESH_PREFIXES = ("_where_zero(", "_add_reduce(", "(_add_reduce(")
# Float32 fast paths writing into ``out`` with scratch arrays of the output's type.
_WORK_FORMS = {
    "_erf_f32({0})": ("_erf_f32({0}, {out}, {work})", 2),
    "_gelu_f32({0})": ("_gelu_f32({0}, {out}, {work})", 3),
    "_gelu_backward_f32({0}, {1})": ("_gelu_backward_f32({0}, {1}, {out}, {work})", 2),
}
_VIEW_PREFIXES = ("{0}.transpose(", "{0}.reshape(", "_broadcast_to(")


def reuse_enabled() -> bool:
    """Whether generated CPU functions reuse buffers (``ASGRAD_CPU_REUSE=0`` turns it off)."""
    return os.environ.get("ASGRAD_CPU_REUSE", "1") != "0"


def _natural_dtype(ufunc: np.ufunc, dtypes: Sequence[str]) -> str | None:
    try:
        resolved = ufunc.resolve_dtypes((*(np.dtype(d) for d in dtypes), None))
    except Exception:  # no loop, or an old numpy: no out=
        return None
    return str(resolved[-1])


def _reuse_kind(
    node: Node,
    op: Any,
    fmt: str,
    special: bool,
    original: bool,
    types: Mapping[int, TensorType],
) -> tuple[str, str | None, int]:
    """``(kind, out format, scratch arrays)`` of a generated line.

    Kinds: ``ufunc`` (elementwise, may write into an input: ``out`` format given),
    ``matmul`` (may write into a buffer that no input aliases, with that many scratch
    arrays of its type), ``fresh`` (a new array, no ``out``), ``other`` (may alias its
    inputs: views and unknown kernels).
    """
    out_t = types[node.id]
    in_t = [types[n.id] for n in node.inputs]
    if not original:
        return "other", None, 0
    if special and fmt.startswith(_FRESH_PREFIXES):  # a fresh array or a numpy scalar
        return "fresh", None, 0
    if not out_t.shape or 0 in out_t.shape:
        return "other", None, 0
    same = all(t.dtype == out_t.dtype for t in in_t)
    if special:
        if fmt == "_divide({0}, {1})" and _natural_dtype(np.divide, [t.dtype for t in in_t]) == (
            out_t.dtype
        ):
            return "ufunc", "_divide({0}, {1}, out={out})", 0
        if fmt == "_maximum({0}, 0)" and same:
            return "ufunc", "_maximum({0}, 0, out={out})", 0
        if fmt == "_matmul({0}, {1})" and same:
            return "matmul", "_matmul({0}, {1}, out={out})", 0
        if fmt.startswith("_matmul({0}.reshape(") and same:
            rows, k = int(np.prod(out_t.shape[:-1])), in_t[0].shape[-1]
            out_fmt = (
                f"_matmul({{0}}.reshape({rows}, {k}), {{1}},"
                f" out={{out}}.reshape({rows}, {out_t.shape[-1]})).reshape({out_t.shape})"
            )
            return "matmul", out_fmt, 0
        if fmt == "_matmul_batch_sum({0}, {1})" and same:
            return "matmul", "_matmul_batch_sum({0}, {1}, {out})", 0
        if fmt in _WORK_FORMS and same:
            return "matmul", *_WORK_FORMS[fmt]
        if fmt.startswith("{0}.astype(") or fmt in _WORK_FORMS:
            return "fresh", None, 0
        return "other", None, 0
    kernel = op.kernel
    if (
        isinstance(kernel, np.ufunc)
        and not node.attrs
        and kernel.nout == 1
        and kernel.nin == len(node.inputs)
        and fmt.endswith(")")
        and _natural_dtype(kernel, [t.dtype for t in in_t]) == out_t.dtype
    ):
        return "ufunc", fmt[:-1] + ", out={out})", 0
    if node.op in OUT_KERNEL_OPS and same and fmt.endswith(")"):
        return "matmul", fmt[:-1] + ", out={out})", 0
    if node.op in FRESH_KERNEL_OPS:
        return "fresh", None, 0
    return "other", None, 0


def _plan_buffers(
    kept: Sequence[tuple[Node, str, list[int]]],
    used: Sequence[Sequence[int]],
    types: Mapping[int, TensorType],
    kinds: Mapping[int, tuple[str, str | None, int]],
    last: Mapping[int, int],
    root_ids: set[int],
) -> tuple[list[tuple[str | int | None, tuple[str, ...]]], list[TensorType]]:
    """Where each line writes: ``out=`` a dying input (its id), a scratch slot, or new.

    Returns per line the target (``"_s<k>"``, an input's value id, or None) and the
    scratch slots lent to it for the line's duration, and the type of each slot.
    """
    # Values that are returned or stored, or may alias one: never in scratch slots.
    escapes: set[int] = set(root_ids)
    for step in range(len(kept) - 1, -1, -1):
        node = kept[step][0]
        if node.id in escapes and kinds.get(node.id, ("other", None, 0))[0] == "other":
            escapes.update(used[step])

    buffers: dict[int, frozenset[int]] = {}  # value -> buffers it may reference
    whole: dict[int, int] = {}  # value -> the buffer that it is, whole
    holders: dict[int, set[int]] = {}  # buffer -> live values referencing it
    slot_of: dict[int, int] = {}  # buffer -> its scratch slot
    free: dict[TensorType, list[int]] = {}  # type -> free slots
    slots: list[TensorType] = []
    targets: list[tuple[str | int | None, tuple[str, ...]]] = [(None, ())] * len(kept)
    next_buffer = -1
    dying: dict[int, list[int]] = {}
    for value, step in last.items():
        dying.setdefault(step, []).append(value)

    def take(t: TensorType) -> int:
        pool = free.get(t)
        if pool:
            return pool.pop()
        slots.append(t)
        return len(slots) - 1

    for step, (node, _, _) in enumerate(kept):
        v, t = node.id, types[node.id]
        kind, _, n_work = kinds.get(v, ("other", None, 0))
        args = used[step]
        buffer: int | None = None
        target: str | int | None = None
        if kind == "ufunc":  # in place into a dying input that is a whole fresh buffer
            for a in dict.fromkeys(args):
                b = whole.get(a)
                if (
                    b is not None
                    and types[a] == t
                    and last.get(a) == step
                    and holders[b] == {a}
                    and not (v in escapes and b in slot_of)
                ):
                    buffer, target = b, a
                    break
        if buffer is None and kind in ("ufunc", "matmul") and v not in escapes:
            slot = take(t)
            buffer, next_buffer = next_buffer, next_buffer - 1
            slot_of[buffer] = slot
            target = f"_s{slot}"
        # Scratch lent for this line only: free slots, which no live value references.
        work = [take(t) for _ in range(n_work)]
        for k in work:
            free.setdefault(t, []).append(k)
        targets[step] = (target, tuple(f"_s{k}" for k in work))
        if buffer is None and kind in ("ufunc", "matmul", "fresh"):
            buffer, next_buffer = next_buffer, next_buffer - 1
        if buffer is not None:
            buffers[v] = frozenset((buffer,))
            whole[v] = buffer
        else:
            buffers[v] = frozenset().union(*(buffers.get(a, frozenset()) for a in args))
        for b in buffers[v]:
            holders.setdefault(b, set()).add(v)
        for d in dying.get(step, []) + ([] if v in last else [v]):
            for b in buffers.get(d, frozenset()):
                holders[b].discard(d)
                if not holders[b] and b in slot_of:
                    free.setdefault(slots[slot_of[b]], []).append(slot_of[b])
    return targets, slots


def _gemm_flops(fmt: str, args: Sequence[TensorType], out: TensorType) -> int | None:
    """The flops of a generated matrix product line, or None for any other line."""
    if fmt.startswith("_matmul_batch_sum("):
        p = args[0].shape
        return 2 * int(np.prod(p)) * int(args[1].shape[-1])
    if fmt.startswith("_matmul("):
        return 2 * int(np.prod(out.shape)) * int(args[0].shape[-1])
    return None


def _specialize(
    node: Node,
    types: Mapping[int, TensorType],
    producer: Mapping[int, tuple[Node, list[int]]],
    users: Mapping[int, int],
    roots: Sequence[int],
    refs: Mapping[int, _Ref],
) -> tuple[str, list[int] | None] | None:
    """A faster expression for ``node`` at exact types, or None for its kernel.

    Returns ``(format, argument ids)``; ``None`` ids mean the node's own inputs.
    """
    op, attrs = node.op, node.attrs
    in_t = [types[n.id] for n in node.inputs]
    out_t = types[node.id]
    is_float = out_t.dtype in ("float32", "float64")
    if op == "matmul":
        a, b = in_t
        if len(a.shape) > 2 and len(b.shape) == 2:
            rows = int(np.prod(a.shape[:-1]))
            return (
                f"_matmul({{0}}.reshape({rows}, {a.shape[-1]}), {{1}}).reshape({out_t.shape})",
                None,
            )
        return "_matmul({0}, {1})", None
    if op == "div":
        return "_divide({0}, {1})", None
    if op == "where" and is_float and out_t.shape and in_t[0].shape == out_t.shape:
        cond, when_true, when_false = node.inputs
        for keep, value, other in ((True, when_true, when_false), (False, when_false, when_true)):
            zero = refs[other.id]
            if (
                types[value.id].shape == out_t.shape
                and zero.is_const
                and np.shape(zero.const) == ()
                and float(zero.const) == 0.0
                and not np.signbit(zero.const)
            ):
                return f"_where_zero({{0}}, {{1}}, {keep})", [cond.id, value.id]
    if op == "erf" and out_t.dtype == "float32" and out_t.shape:
        return "_erf_f32({0})", None
    gelu_exact = op in ("gelu", "gelu_backward") and attrs.get("approximate", "none") == "none"
    if gelu_exact and out_t.dtype == "float32" and out_t.shape:
        if op == "gelu":
            return "_gelu_f32({0})", None
        if all(t.dtype == "float32" for t in in_t):  # the kernel's own float32 path
            return "_gelu_backward_f32({0}, {1})", None
    if op == "relu":
        return "_maximum({0}, 0)", None
    if op in ("transpose",):
        return f"{{0}}.transpose({tuple(attrs['axes'])})", None
    if op in ("reshape", "reshape_like", "expand_dims", "squeeze"):
        return f"{{0}}.reshape({out_t.shape})", None
    if op == "broadcast_like" or op == "broadcast_to":
        return f"_broadcast_to({{0}}, {out_t.shape})", None
    if op == "cast":
        return f"{{0}}.astype({out_t.dtype!r})", None
    if op in ("sum", "mean", "max", "min") and is_float and tuple(attrs["axis"]):
        axes = tuple(attrs["axis"])
        keep = bool(attrs.get("keepdims", False))
        reduce = {
            "sum": "_add_reduce",
            "mean": "_add_reduce",
            "max": "_max_reduce",
            "min": "_min_reduce",
        }[op]
        expr = f"{reduce}({{0}}, {axes}, None, None, {keep})"
        if op == "mean":
            count = int(np.prod([in_t[0].shape[a] for a in axes]))
            expr = f"({expr} / np_{out_t.dtype}({count}))"
        return expr, None
    if op == "sum_to_like" and is_float:
        src, dst = in_t[0].shape, out_t.shape
        x = node.inputs[0]
        made = producer.get(x.id)
        if (
            made is not None
            and made[0].op == "matmul"
            and users.get(x.id, 0) == 1
            and x.id not in roots
            and len(dst) == 2
            and len(src) > 2
            and dst == src[-2:]
            and _registered_kernel("matmul") is get_op("matmul").kernel
        ):
            p, q = made[0].inputs
            if types[p.id].shape[:-2] == types[q.id].shape[:-2] == src[:-2]:
                return "_matmul_batch_sum({0}, {1})", [p.id, q.id]
        axes = _sum_to_axes(src, dst)
        if not axes:
            return f"{{0}}.reshape({dst})", None
        if axes == tuple(range(len(src) - len(dst))):  # leading axes only
            return f"_add_reduce({{0}}, {axes})", None
        return f"_add_reduce({{0}}, {axes}, None, None, True).reshape({dst})", None
    return None
