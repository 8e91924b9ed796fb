"""The CPU lowering protocol: how an op runs on the CPU backend, found by one resolver.

Every way the CPU backend may run an op besides calling its numpy kernel is one of
three lowerings, and `resolve` finds an op's three in one structure,
`FAMILY_LOWERINGS` (op family -> `FamilyLowering`):

* ``numpy``: a faster numpy line at exact types (`asgrad.tensor.cpu.specialize`):
  a view instead of a copy, numpy itself instead of the kernel's wrapper, a batched
  product as one product;
* ``compiled``: a Numba kernel that a line of the compiled path calls instead of the
  numpy kernel (`asgrad.tensor.cpu.jit.kernels`);
* ``emit``: how the op is written into a whole-step Numba kernel
  (`asgrad.tensor.cpu.jit.step`).

An op with a scalar expression (``OpDef.expression``: every elementwise op) needs no
entry: its three lowerings are rendered from the expression, one spelling per
primitive (`asgrad.tensor.cpu.specialize.expression_line`,
`asgrad.tensor.cpu.jit.kernels.rendered_kernel`,
`asgrad.tensor.cpu.jit.emit_ops.emit_expression`), so no elementwise op is named
in this package. An op with a row program (``OpDef.rows``: softmax, the norms) needs
none either: its numpy kernel is rendered from the program, and so are its compiled
kernel (`asgrad.tensor.cpu.jit.render_rows.rows_kernel`) and its whole-step loops
(`asgrad.tensor.cpu.jit.emit_rows.emit_rows`). Ops of the structural
families (reductions, shape, linalg, conv, pool, index, control, optim) have entries
keyed by op inside their family's entry, and a family may fuse groups of lines
(``fuse``: Adam's three ops per parameter as one pass, a convolution's ReLU in its
kernel, a ReLU's gradient in max pooling's gradient kernel, softmax's input gradient
as one row kernel, a layer norm's weight gradient as one pass, a large sum over
leading axes in blocks of rows over threads, a transposed value's reshape copied over
threads, attention's scaled and masked softmax as one pass, a sum of slice gradients as
one assembled array, an elementwise line folded into the elementwise lines reading it).

Each lowering is written for the op's registered kernel and is taken only while the
op's kernel is that one (the code generator and the whole step check).

The linalg family's fusion runs a batched product of many small matrices with each
matrix on one of BLAS's threads (`asgrad.tensor.cpu.jit.batched_matmul`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from asgrad.tensor.cpu import specialize as sp
from asgrad.tensor.cpu.jit import batched_matmul as fb
from asgrad.tensor.cpu.jit import emit_ops as em
from asgrad.tensor.cpu.jit import emit_scan as es
from asgrad.tensor.cpu.jit import fuse as fu
from asgrad.tensor.cpu.jit import fuse_attention as fa
from asgrad.tensor.cpu.jit import fuse_conv as fc
from asgrad.tensor.cpu.jit import fuse_copies as fcp
from asgrad.tensor.cpu.jit import fuse_elementwise as fe
from asgrad.tensor.cpu.jit import fuse_pool as fp
from asgrad.tensor.cpu.jit import fuse_rows as fr
from asgrad.tensor.cpu.jit import fuse_slices as fs
from asgrad.tensor.cpu.jit import fuse_sums as fsum
from asgrad.tensor.cpu.jit.kernels import JitKernel, rendered_kernel
from asgrad.tensor.cpu.records import Line, Ref
from asgrad.tensor.ir.graph import Node
from asgrad.tensor.ir.registry import OpDef, TensorType

__all__ = [
    "FAMILY_LOWERINGS",
    "FamilyLowering",
    "OpLowering",
    "expression_of",
    "fusers",
    "resolve",
]

Specializer = Callable[[Node, sp.Context], Line | None]
Emitter = em.Emitter
# (node, input types, result type) -> the compiled kernel for the node, or None.
Chooser = Callable[[Node, Sequence[TensorType], TensorType], JitKernel | None]
Fuser = Callable[
    [Sequence[Line], Mapping[int, Ref], Mapping[int, TensorType], dict[str, Any], sp.Context],
    list[Line],
]


@dataclass(frozen=True)
class FamilyLowering:
    """The CPU lowerings of one op family, by op name inside the family.

    Attributes:
        numpy: Exact-shape numpy lines (see `asgrad.tensor.cpu.specialize`).
        compiled: Compiled kernels of the line path, each with its ``applies``.
        emit: Writers of the op into a whole-step kernel.
        fuse: Rewrites groups of the family's lines into fused kernels, or None.
    """

    numpy: Mapping[str, Specializer] = field(default_factory=dict)
    compiled: Mapping[str, JitKernel] = field(default_factory=dict)
    emit: Mapping[str, Emitter] = field(default_factory=dict)
    fuse: Fuser | None = None


def _chain(*fuses: Fuser) -> Fuser:
    """One fuser running ``fuses`` in turn (a family's several line groups)."""

    def run(
        lines: Sequence[Line],
        refs: Mapping[int, Ref],
        types: Mapping[int, TensorType],
        env: dict[str, Any],
        context: sp.Context,
    ) -> list[Line]:
        out = list(lines)
        for fuse in fuses:
            out = fuse(out, refs, types, env, context)
        return out

    return run


@dataclass(frozen=True)
class OpLowering:
    """What `resolve` found for one op (None: the numpy kernel's line, and a
    whole step containing the op stays on the line-by-line function)."""

    numpy: Specializer | None = None
    compiled: Chooser | None = None
    emit: Emitter | None = None


FAMILY_LOWERINGS: dict[str, FamilyLowering] = {
    "linalg": FamilyLowering(
        numpy={"matmul": sp.matmul}, emit={"matmul": em.matmul}, fuse=fb.fuse_batched_products
    ),
    "reduction": FamilyLowering(
        numpy=dict.fromkeys(("sum", "mean", "max", "min"), sp.reduce),
        emit={name: em.reduction(name) for name in ("sum", "mean", "max", "min")},
        fuse=_chain(fr.fuse_softmax_backward, fsum.fuse_leading_sums),
    ),
    "shape": FamilyLowering(
        numpy={
            "transpose": sp.transpose,
            **dict.fromkeys(("reshape", "reshape_like", "expand_dims", "squeeze"), sp.reshape_view),
            **dict.fromkeys(("broadcast_to", "broadcast_like"), sp.broadcast),
            "sum_to_like": sp.sum_to_like,
        },
        emit={
            "transpose": em.transpose,
            **dict.fromkeys(("reshape", "reshape_like", "expand_dims", "squeeze"), em.reshape),
            **dict.fromkeys(("broadcast_to", "broadcast_like"), em.broadcast),
            "sum_to_like": em.sum_to_like,
            "concat": em.concat,
        },
        fuse=fcp.fuse_transposed_reshapes,
    ),
    "norm": FamilyLowering(fuse=_chain(fr.fuse_layer_norm_weight_grad, fa.fuse_masked_softmax)),
    "conv": FamilyLowering(
        compiled={
            name: JitKernel("kernels_conv", name)
            for name in ("conv2d", "conv2d_backward_input", "conv2d_backward_weight")
        },
        fuse=fc.fuse_conv_relu,
    ),
    "pool": FamilyLowering(
        compiled={
            "max_pool2d": JitKernel("kernels_pool", "max_pool2d"),
            "max_pool2d_backward": JitKernel("kernels_pool", "max_pool2d_backward"),
        },
        fuse=fp.fuse_pool_relu_backward,
    ),
    "index": FamilyLowering(
        emit={
            "slice": em.slice_view,
            "scatter_slice": em.scatter_slice,
            "gather": em.gather,
            "scatter_add": em.scatter_add,
            "one_hot": em.one_hot,
        },
        compiled={
            "scatter_add": JitKernel(
                "kernels_pool", "scatter_add", applies=JitKernel.index_gradient
            )
        },
        fuse=fs.fuse_slice_sums,
    ),
    "control": FamilyLowering(emit=es.EMITTERS),
    "optim": FamilyLowering(
        compiled={
            "adam_ema": JitKernel("kernels_optim", "adam_ema", leading=2),
            "adam_update": JitKernel("kernels_optim", "adam_update", leading=3),
        },
        emit={"adam_ema": em.adam_ema, "adam_update": em.adam_update},
        fuse=fu.fuse_adam,
    ),
    # Elementwise ops lower from their expressions (`resolve`); the family's entry
    # holds its fusion alone, run last: the other families' fusions match plain lines.
    "elementwise": FamilyLowering(fuse=fe.fuse_elementwise_producers),
}


def expression_of(op: OpDef, node: Node, dtype: str) -> Any:
    """The scalar expression of a node of ``op`` (its inputs as ``arg(i)``; ``dtype``:
    the result's dtype, for an expression function that takes it)."""
    from asgrad.tensor.ir.scalar import build

    assert op.expression is not None
    return build(op.expression, len(node.inputs), node.attrs, dtype)


def _rendered_numpy(op: OpDef) -> Specializer:
    def line(node: Node, ctx: sp.Context) -> Line | None:
        return sp.expression_line(node, ctx, expression_of(op, node, ctx.types[node.id].dtype))

    return line


def _rendered_compiled(op: OpDef) -> Chooser:
    def choose(node: Node, ins: Sequence[TensorType], out: TensorType) -> JitKernel | None:
        return rendered_kernel(expression_of(op, node, out.dtype), ins, out)

    return choose


def _rendered_emit(op: OpDef) -> Emitter:
    def emit(k: Any, node: Node, ins: Sequence[Any], out: TensorType) -> Any:
        return em.emit_expression(k, expression_of(op, node, out.dtype), ins, out)

    return emit


def _rows_compiled(op: OpDef) -> Chooser:
    def choose(node: Node, ins: Sequence[TensorType], out: TensorType) -> JitKernel | None:
        from asgrad.tensor.cpu.jit.render_rows import rows_kernel

        assert op.rows is not None
        program = op.rows(len(ins[0].shape), len(ins), **node.attrs)
        return rows_kernel(program, ins, out)

    return choose


def _rows_emit(op: OpDef) -> Emitter:
    def emit(k: Any, node: Node, ins: Sequence[Any], out: TensorType) -> Any:
        from asgrad.tensor.cpu.jit.emit_rows import emit_rows

        assert op.rows is not None
        program = op.rows(len(ins[0].shape), len(ins), **node.attrs)
        return emit_rows(k, program, ins, out)

    return emit


def _family_compiled(entry: JitKernel) -> Chooser:
    def choose(node: Node, ins: Sequence[TensorType], out: TensorType) -> JitKernel | None:
        return entry if entry.applies_to(ins, out, node.attrs) else None

    return choose


def resolve(op: OpDef) -> OpLowering:
    """The CPU lowerings of ``op``: rendered from its expression when it has one, else
    its family's entries (see the module docstring)."""
    if op.expression is not None:
        return OpLowering(_rendered_numpy(op), _rendered_compiled(op), _rendered_emit(op))
    if op.rows is not None:
        return OpLowering(compiled=_rows_compiled(op), emit=_rows_emit(op))
    family = FAMILY_LOWERINGS.get(op.family)
    if family is None:
        return OpLowering()
    compiled = family.compiled.get(op.name)
    return OpLowering(
        family.numpy.get(op.name),
        None if compiled is None else _family_compiled(compiled),
        family.emit.get(op.name),
    )


def fusers() -> list[Fuser]:
    """The families' line-group fusions, in `FAMILY_LOWERINGS`' order."""
    return [f.fuse for f in FAMILY_LOWERINGS.values() if f.fuse is not None]
