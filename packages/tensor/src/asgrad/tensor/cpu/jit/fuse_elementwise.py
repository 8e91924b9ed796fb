"""Elementwise producers folded into their elementwise readers (the line path's chains).

On the line path every elementwise op is its own line: a bias add and the GELU after
it are two passes over the activations, and a residual sum after a projection's bias
is two more. `fuse_elementwise_producers` (the elementwise family's ``fuse``) folds the
line of an elementwise op into the elementwise lines that read it, when each of them
then becomes one compiled loop (`asgrad.tensor.cpu.jit.kernels.rendered_kernel` of the
composed expression: the producer's expression in place of its argument), and the
producer's line goes. Taken where the producer is no output, reads no constant, has
the float result type of its readers, at least `FOLD_MIN_ELEMENTS` elements, and an
expression of at most `MAX_REPEATED` primitives when more than one line reads it (each
reader then recomputes it: a bias add is cheaper to repeat than to write and read
back). The composed loop rounds every
intermediate as the separate lines did (each primitive at numpy's dtype), so its
results are the separate lines' bit for bit. A reader so made may be folded into its
own reader in turn.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

from asgrad.tensor.cpu.records import (
    Call,
    Line,
    Ref,
    Reuse,
    Value,
    line_readers,
    runtime_roots,
    shaped,
    values,
    with_out,
)
from asgrad.tensor.cpu.specialize import Context
from asgrad.tensor.ir.registry import TensorType, get_op
from asgrad.tensor.ir.scalar import Expr, arg, build

__all__ = ["FOLD_MIN_ELEMENTS", "MAX_REPEATED", "fuse_elementwise_producers"]

# The most primitives of a producer that more than one reader recomputes.
MAX_REPEATED = 1
# The fewest elements of a result folded: below, a compiled loop's call (several us)
# costs more than the pass it saves (the mlp workload's [64, 128] bias add into ReLU
# and its gradient made its step slower: 722-864 us against 559-741 us, one thread).
FOLD_MIN_ELEMENTS = 32768
# The names of an op's own line: its kernel, compiled kernel or float32 path.
_OWN = re.compile(r"(k|jk|z)\d+")


def _remap(e: Expr, to: Mapping[int, Expr]) -> Expr:
    """``e`` with each ``arg(i)`` replaced by ``to[i]`` (all at once)."""
    if e.op == "arg":
        return to[int(e.value)]  # type: ignore[call-overload]  # an arg's value is its index
    if not e.args:
        return e
    return Expr(e.op, tuple(_remap(a, to) for a in e.args), e.value)


def fuse_elementwise_producers(
    lines: Sequence[Line],
    refs: Mapping[int, Ref],
    types: Mapping[int, TensorType],
    env: dict[str, Any],
    context: Context,
) -> list[Line]:
    """``lines`` with elementwise producers folded into their readers (see the module
    docstring)."""
    from asgrad.tensor.cpu.jit.kernels import LazyKernel, rendered_kernel  # imports no Numba
    from asgrad.tensor.cpu.jit.render import primitives

    roots = runtime_roots(refs, context.roots)
    # The elementwise lines: node id -> (expression, the value ids its args read).
    exprs: dict[int, tuple[Expr, list[int]]] = {}
    for line in lines:
        node = line.node
        t = types[node.id]
        if t.dtype not in ("float32", "float64") or not shaped(t):
            continue
        if math.prod(t.shape) < FOLD_MIN_ELEMENTS:
            continue
        if not context.registered(node.op) or refs[node.id].id != node.id:
            continue
        op = get_op(node.op)
        ins = [refs[n.id] for n in node.inputs]
        if op.expression is None or any(r.is_const for r in ins):
            continue
        call = line.call  # the op's own line (not a line another fusion made)
        if not isinstance(call, Call) or not _OWN.fullmatch(call.fn):
            continue
        if list(values(call)) != [r.id for r in ins]:
            continue
        exprs[node.id] = (build(op.expression, len(ins), node.attrs, t.dtype), [r.id for r in ins])
    readers = line_readers(lines)
    out = list(lines)
    drop: set[int] = set()
    for k, line in enumerate(lines):
        p = line.node.id
        if p not in exprs or p in roots:
            continue
        t = types[p]
        users = readers.get(p, [])
        expr, ids = exprs[p]
        if not users or (len(users) > 1 and len(primitives(expr)) > MAX_REPEATED):
            continue
        made: dict[int, tuple[Expr, list[int], Any]] = {}
        for u in users:
            c = lines[u].node.id
            if c not in exprs or types[c] != t or u in drop:
                break
            c_expr, c_ids = exprs[c]
            new_ids = [i for i in dict.fromkeys([*c_ids, *ids]) if i != p]
            new_ids.sort(key=lambda i: types[i] != t)  # the result's type first: in place
            at = {v: arg(j) for j, v in enumerate(new_ids)}
            inner = _remap(expr, {j: at[v] for j, v in enumerate(ids)})
            composed = _remap(
                c_expr, {j: (inner if v == p else at[v]) for j, v in enumerate(c_ids)}
            )
            kernel = rendered_kernel(composed, [types[i] for i in new_ids], t, fused=True)
            if kernel is None:
                break
            made[u] = (composed, new_ids, kernel)
        else:
            for u, (composed, new_ids, kernel) in made.items():
                reader = lines[u].node
                name = f"_chain{reader.id}"
                env[name] = LazyKernel(kernel)
                call = Call(name, tuple(Value(i) for i in new_ids))
                full = sum(types[i] == t for i in new_ids)
                reuse = Reuse.IN_PLACE if kernel.leading >= full else Reuse.INTO_SLOT
                out[u] = Line(node=reader, call=call, reuse=reuse, into=with_out(call))
                exprs[reader.id] = (composed, new_ids)
                for i in new_ids:  # the producer's inputs are read by the reader now
                    readers.setdefault(i, []).append(u)
            drop.add(k)
    return [line for k, line in enumerate(out) if k not in drop]
