"""``einsum`` and ``cross``: linear-algebra ops that expand into others.

``einsum(equation, *operands)`` takes numpy's and PyTorch's notation in full: any
number of operands, ``...`` for broadcast leading axes, a label repeated within one
operand (a diagonal; ``ii->`` is a trace), and the implicit output (no ``->``: the
``...`` axes, then the labels used once, in alphabetical order). It expands into
``diagonal`` for repeated labels, ``sum`` for labels no later operand or the output
needs, and one batched ``matmul`` per pair of operands (left to right), between
``transpose`` and ``reshape``; so its gradient and GPU kernels are theirs. The
reshapes fix the operands' sizes except that of the first label the two operands
of a product share and keep (a batch axis: ``bij,bjk->bik`` runs on any batch).

``cross(a, b, axis)``: the cross product of 3-vectors along ``axis`` (broadcasting),
as ``torch.linalg.cross``.
"""

from __future__ import annotations

import math
import string
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from asgrad.tensor.errors import DTypeError, FreeAxisError, ShapeError
from asgrad.tensor.ir.common import broadcast_shapes, normalize_axis, randn, same_dtype
from asgrad.tensor.ir.dtypes import is_float
from asgrad.tensor.ir.free_sizes import free_axes_of
from asgrad.tensor.ir.graph import user_location
from asgrad.tensor.ir.registry import Attr, Attrs, OpCase, OpDef, TensorType, register_op
from asgrad.tensor.ir.retrace import mark_specialised
from asgrad.tensor.ops.shape_expand import apply, axis_slice, refuse_free_axes

if TYPE_CHECKING:
    from asgrad.tensor.api.tensor import Tensor

Labels = tuple[str, ...]


def parse_einsum(equation: str, ranks: Sequence[int]) -> tuple[list[Labels], Labels]:
    """The labels of each operand's axes and of the output; ``...`` axes become labels
    ``"0"``, ``"1"``... counted from the last (so they broadcast right-aligned)."""
    eq = equation.replace(" ", "")
    lhs, arrow, rhs = eq.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(ranks):
        raise ShapeError(f"equation {equation!r} has {len(terms)} operands, {len(ranks)} given")
    allowed = set(string.ascii_letters)
    ellipsis_rank = 0
    inputs: list[Labels] = []
    for term, rank in zip(terms, ranks, strict=True):
        letters = term.replace("...", "")
        if set(letters) - allowed or term.count("...") > 1:
            raise ShapeError(f"operand term {term!r} of {equation!r}: use letters and one '...'")
        if "..." in term:
            k = rank - len(letters)
            if k < 0:
                raise ShapeError(f"term {term!r} has more labels than its operand's rank {rank}")
            ellipsis_rank = max(ellipsis_rank, k)
            dots = tuple(str(i) for i in reversed(range(k)))
            at = term.index("...")
            inputs.append((*term[:at], *dots, *term[at + 3 :]))
        elif len(letters) != rank:
            raise ShapeError(
                f"term {term!r} has {len(letters)} labels for an operand of rank {rank}"
            )
        else:
            inputs.append(tuple(term))
    dots = tuple(str(i) for i in reversed(range(ellipsis_rank)))
    if not arrow:
        counts = [label for labels in inputs for label in labels if not label.isdigit()]
        once = sorted(label for label in set(counts) if counts.count(label) == 1)
        return inputs, (*dots, *once)
    letters = rhs.replace("...", "")
    if set(letters) - allowed or rhs.count("...") > 1:
        raise ShapeError(f"output term {rhs!r} of {equation!r}: use letters and one '...'")
    if "..." in rhs:
        at = rhs.index("...")
        output: Labels = (*rhs[:at], *dots, *rhs[at + 3 :])
    else:
        output = tuple(rhs)
    known = {label for labels in inputs for label in labels}
    for label in output:
        if output.count(label) > 1:
            raise ShapeError(f"output label {label!r} of {equation!r} appears twice")
        if label not in known and not label.isdigit():
            raise ShapeError(f"output label {label!r} of {equation!r} is in no operand")
    if ellipsis_rank and "..." not in rhs:
        raise ShapeError(f"{equation!r}: the operands have '...' axes; name them in the output")
    return inputs, output


def label_sizes(inputs: Sequence[Labels], shapes: Sequence[tuple[int, ...]]) -> dict[str, int]:
    """Each label's size; ``...`` sizes broadcast, a letter's sizes must agree."""
    sizes: dict[str, int] = {}
    for labels, shape in zip(inputs, shapes, strict=True):
        for label, n in zip(labels, shape, strict=True):
            old = sizes.get(label)
            if old is None or old == n:
                sizes[label] = n
            elif label.isdigit() and 1 in (old, n):
                sizes[label] = max(old, n)
            else:
                raise ShapeError(f"label {label!r} has sizes {old} and {n}")
    return sizes


def _infer_einsum(types: Sequence[TensorType], attrs: Attrs) -> TensorType:
    if not types:
        raise ShapeError("einsum needs at least one operand")
    dtype = same_dtype(types)
    if not is_float(dtype):
        raise DTypeError(f"einsum takes float operands, got {dtype}; cast them first")
    inputs, output = parse_einsum(attrs["equation"], [len(t.shape) for t in types])
    sizes = label_sizes(inputs, [t.shape for t in types])
    return TensorType(tuple(sizes.get(label, 1) for label in output), dtype)


def _einsum(*xs: np.ndarray, equation: str) -> np.ndarray:
    return np.asarray(np.einsum(equation, *xs))


# -- the expansion ----------------------------------------------------------------------------
def _unique(x: Tensor, labels: Labels) -> tuple[Tensor, Labels]:
    """Diagonals taken until no label repeats."""
    while len(set(labels)) < len(labels):
        label = next(lb for lb in labels if labels.count(lb) > 1)
        p = labels.index(label)
        q = labels.index(label, p + 1)
        x = apply(x, "diagonal", offset=0, axis1=p, axis2=q)
        labels = (*(lb for i, lb in enumerate(labels) if i not in (p, q)), label)
    return x, labels


def _sum_unneeded(x: Tensor, labels: Labels, needed: set[str]) -> tuple[Tensor, Labels]:
    axes = tuple(i for i, label in enumerate(labels) if label not in needed)
    if not axes:
        return x, labels
    x = apply(x, "sum", axis=axes, keepdims=False)
    return x, tuple(label for label in labels if label in needed)


def _arrange(x: Tensor, labels: Labels, order: Labels) -> Tensor:
    perm = tuple(labels.index(label) for label in order)
    return apply(x, "transpose", axes=perm) if perm != tuple(range(len(perm))) else x


def _contract(
    a: Tensor, la: Labels, b: Tensor, lb: Labels, needed: set[str]
) -> tuple[Tensor, Labels]:
    batch = tuple(lbl for lbl in la if lbl in lb and lbl in needed)
    inner = tuple(lbl for lbl in la if lbl in lb and lbl not in needed)
    left = tuple(lbl for lbl in la if lbl not in lb)
    right = tuple(lbl for lbl in lb if lbl not in la)
    size = dict(zip(la, a.shape, strict=True)) | dict(zip(lb, b.shape, strict=True))

    def n(group: Labels) -> int:
        return math.prod(size[lbl] for lbl in group)

    # The batch group's size is left to the reshape (-1), so that a leading batch
    # axis may change size per run ('bij,bjk->bik' on any batch); the others are fixed.
    free = bool(batch) and min(n(left), n(inner), n(right), n(batch)) > 0
    lead = -1 if free else n(batch)
    sizes = {"left": n(left), "inner": n(inner), "right": n(right)}
    labels = batch + left + right
    shape: tuple[int, ...] = tuple(size[lbl] for lbl in labels)
    # A free axis outside the batch group (a batch of rows times a constant matrix,
    # 'bi,ij->bj') takes the -1 of its group's reshape and of the result's instead.
    moved = _free_label(a, la, b, lb)
    groups = {"left": left, "inner": inner, "right": right}
    group = next((k for k, g in groups.items() if moved in g), None)
    if group is not None and moved not in batch and min(sizes.values(), default=1) > 0:
        free, lead = False, n(batch)
        sizes[group] = -1
        if moved in labels:
            shape = tuple(-1 if lbl == moved else d for lbl, d in zip(labels, shape, strict=True))
    a3 = apply(
        _arrange(a, la, batch + left + inner),
        "reshape",
        shape=(lead, sizes["left"], sizes["inner"]),
    )
    b3 = apply(
        _arrange(b, lb, batch + inner + right),
        "reshape",
        shape=(lead, sizes["inner"], sizes["right"]),
    )
    out = a3.graph.apply("matmul", (a3, b3), {})
    return apply(out, "reshape", shape=(-1, *shape[1:]) if free else shape), labels


def _free_labels(xs: Sequence[Tensor], inputs: Sequence[Labels]) -> set[str]:
    """The labels on an axis that follows a free input axis, in any operand."""
    found: set[str] = set()
    for x, labels in zip(xs, inputs, strict=True):
        axes = free_axes_of(x.node)
        found |= {labels[i] for i in axes or ()}
    return found


def _free_label(a: Tensor, la: Labels, b: Tensor, lb: Labels) -> str | None:
    """The one label whose axis follows a free input axis (None: none, several, or
    not known), of either operand."""
    fa, fb = free_axes_of(a.node), free_axes_of(b.node)
    if fa is None or fb is None:
        return None
    found = {la[i] for i in fa} | {lb[i] for i in fb}
    return found.pop() if len(found) == 1 else None


def _expand_einsum(*xs: Tensor, equation: str) -> Tensor:
    inputs, output = parse_einsum(equation, [x.ndim for x in xs])
    sizes = label_sizes(inputs, [x.shape for x in xs])
    ops: list[tuple[Tensor, Labels]] = []
    free = _free_labels(xs, inputs)
    for x, labels in zip(xs, inputs, strict=True):
        want = tuple(sizes[label] for label in labels)
        repeated = {lbl for lbl in labels if labels.count(lbl) > 1}
        # a broadcast to the declared sizes fixes every axis of the operand
        spread = set(labels) if x.shape != want else set()
        if (repeated | spread) & free and not mark_specialised():
            label = sorted((repeated | spread) & free)[0]
            what = "a diagonal" if label in repeated else "a broadcast"
            raise FreeAxisError(
                f"einsum {equation!r}: label {label!r} follows a free axis of an input (its"
                f" size may change per run), but it takes {what} at its declared size"
                f" {sizes[label]}. Declare that input axis fixed (g.input(..., free=...)"
                f" without it)\n  (at {user_location()})"
            )
        if x.shape != want:  # '...' axes of size 1 broadcast
            x = apply(x, "broadcast_to", shape=want)
        ops.append(_unique(x, labels))

    def needed_after(k: int) -> set[str]:
        return {label for _, labels in ops[k:] for label in labels} | set(output)

    acc, la = _sum_unneeded(*ops[0], needed_after(1))
    for k in range(1, len(ops)):
        b, lb = _sum_unneeded(*ops[k], needed_after(k + 1) | set(la))
        acc, la = _contract(acc, la, b, lb, needed_after(k + 1))
    return _arrange(acc, la, output)


# -- cross -----------------------------------------------------------------------------------------
def _infer_cross(types: Sequence[TensorType], attrs: Attrs) -> TensorType:
    a, b = types
    dtype = same_dtype(types)
    shape = broadcast_shapes(a.shape, b.shape)
    axis = normalize_axis(attrs["axis"], len(shape))
    for t in (a, b):
        if len(t.shape) != len(shape) or t.shape[axis] != 3:
            raise ShapeError(f"cross needs size 3 at axis {axis} of both operands, got {t}")
    return TensorType(shape, dtype)


def _cross(a: np.ndarray, b: np.ndarray, axis: int) -> np.ndarray:
    return np.asarray(np.cross(a, b, axisa=axis, axisb=axis, axisc=axis))


def _expand_cross(a: Tensor, b: Tensor, axis: int) -> Tensor:
    axis = normalize_axis(axis, a.ndim)
    for x in (a, b):  # three components, sliced at the declared size
        refuse_free_axes(x, (axis,), "takes its three components", specialise=False)
    ca = [axis_slice(a, axis, slice(i, i + 1)) for i in range(3)]
    cb = [axis_slice(b, axis, slice(i, i + 1)) for i in range(3)]
    parts = [
        ca[(i + 1) % 3] * cb[(i + 2) % 3] - ca[(i + 2) % 3] * cb[(i + 1) % 3] for i in range(3)
    ]
    return a.graph.apply("concat", tuple(parts), {"axis": axis})


# -- cases ---------------------------------------------------------------------------------
def _einsum_cases(rng: np.random.Generator) -> list[OpCase]:
    def c(eq: str, *shapes: tuple[int, ...]) -> OpCase:
        return OpCase(tuple(randn(rng, *s) for s in shapes), {"equation": eq}, label=eq)

    return [
        c("ij,jk->ik", (3, 4), (4, 2)),
        c("bij,bjk->bik", (2, 3, 4), (2, 4, 5)),
        c("ii->", (4, 4)),
        c("ii->i", (3, 3)),
        c("ij->ji", (2, 3)),
        c("ij", (2, 3)),
        c("ba,ac", (2, 3), (3, 4)),
        c("i,j->ij", (3,), (4,)),
        c("...ij,...jk->...ik", (2, 1, 3, 4), (5, 4, 2)),
        c("bii->bi", (2, 3, 3)),
        c("ij,jk,kl->il", (2, 3), (3, 4), (4, 2)),
        c("abc,cd,b->ad", (2, 3, 4), (4, 5), (3,)),
        c("i,i->", (5,), (5,)),
        c("iij,jk->ik", (3, 3, 2), (2, 4)),
    ]


def _cross_cases(rng: np.random.Generator) -> list[OpCase]:
    return [
        OpCase((randn(rng, 4, 3), randn(rng, 4, 3)), {"axis": -1}),
        OpCase((randn(rng, 3, 2), randn(rng, 3, 1)), {"axis": 0}),
    ]


def _linalg_op(
    name: str,
    arity: int | None,
    cases: Any,
    doc: str,
    infer: Any,
    kernel: Any,
    expand: Any,
    attrs: tuple[Attr, ...],
) -> None:
    register_op(
        OpDef(
            name=name,
            family="linalg",
            infer=infer,
            kernel=kernel,
            arity=arity,
            tolerance=(1e-4, 1e-5),
            cases=cases,
            doc=doc,
            expand=expand,
            attrs=attrs,
        )
    )


_linalg_op(
    "einsum",
    None,
    _einsum_cases,
    "Einstein summation: any operands, '...', diagonals, implicit output",
    _infer_einsum,
    _einsum,
    _expand_einsum,
    (Attr(name="equation", kind=str, doc="numpy's subscripts, e.g. 'ij,jk->ik'"),),
)
_linalg_op(
    "cross",
    2,
    _cross_cases,
    "cross product of 3-vectors along an axis",
    _infer_cross,
    _cross,
    _expand_cross,
    (Attr(name="axis", kind=int, doc="the axis of the 3-vectors"),),
)
