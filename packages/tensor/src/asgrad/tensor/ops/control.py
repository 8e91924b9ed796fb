"""Control flow: ``scan``, a loop body applied along a leading axis, and its parts.

``scan(*carries, *xs, *captures, loop=body, save=..., reverse=..., length=...)`` runs
the traced body (`asgrad.tensor.loops.body.Body`) once per step ``t``: the body maps
``(carries, xs[t], captures)`` to ``(new carries, ys[t])``. An op has one result, so a
scan's is *packed*: one vector of its single dtype holding, in order, the final
carries, each ys stacked along a new leading axis, and (``save=True``) the carries
each step started from, stacked too, which the gradient reads. ``scan_part(packed,
*scan inputs, part=i)`` is part ``i`` at its shape (the scan's inputs give the shapes
at any fed batch size); ``scan_unpart`` is its adjoint, part ``i`` placed in a zero
vector of the packed size. The front door is [`asgrad.tensor.loops.scan`][asgrad.tensor.scan].
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from asgrad.tensor.errors import DTypeError, ShapeError
from asgrad.tensor.ir.registry import Attr, Attrs, OpCase, OpDef, TensorType, register_op

if TYPE_CHECKING:
    from asgrad.tensor.loops.body import Body

__all__ = ["layout", "step_order"]


def layout(types: Sequence[TensorType], attrs: Attrs) -> tuple[list[TensorType], int]:
    """The parts of a scan's packed result for inputs of ``types``, and the step count.

    Raises naming the loop body when the inputs do not fit it.
    """
    loop: Body = attrs["loop"]
    nc, nx = loop.n_carry, loop.n_x
    expected = nc + nx + loop.n_capture
    if len(types) != expected:
        raise ShapeError(
            f"{loop.describe()} takes {nc} carries, {nx} xs and {loop.n_capture} captured"
            f" values ({expected} inputs); got {len(types)}"
        )
    xs = types[nc : nc + nx]
    length = int(attrs["length"]) if not xs else (xs[0].shape[0] if xs[0].shape else -1)
    for i, t in enumerate(xs):
        if not t.shape or t.shape[0] != length:
            raise ShapeError(
                f"xs {i} of {loop.describe()} is {t}; every xs needs the same leading"
                f" (step) axis, of length {length}"
            )
    steps = [TensorType(t.shape[1:], t.dtype) for t in xs]
    body_types = [*types[:nc], *steps, *types[nc + nx :]]
    body = loop.at([t.dtype for t in body_types])
    for t, node in zip(body_types, body.inputs, strict=True):
        if len(t.shape) != len(node.shape):
            raise ShapeError(f"{node.name} of {loop.describe()} is {node.type}; got {t}")
    outs = body.output_types(body_types)
    for i, (have, want) in enumerate(zip(outs[:nc], types[:nc], strict=True)):
        if have != want:
            raise ShapeError(
                f"{loop.describe()} returns carry {i} as {have} for a carry of {want}; a"
                " loop's carry keeps its shape and dtype from step to step"
            )
    parts = list(types[:nc]) + [TensorType((length, *t.shape), t.dtype) for t in outs[nc:]]
    if attrs["save"]:
        parts += [TensorType((length, *t.shape), t.dtype) for t in types[:nc]]
    dtypes = sorted({t.dtype for t in parts})
    if len(dtypes) > 1:
        raise DTypeError(
            f"{loop.describe()}: the carries and per-step outputs have dtypes {dtypes}; a"
            " loop's carries and outputs share one dtype (cast them in the body)"
        )
    return parts, length


# A scan's attributes; its parts add which part they take.
SCAN_ATTRS = (
    Attr(name="loop", kind=object, doc="the traced loop body (a Body)"),
    Attr(name="length", kind=int, doc="the step count where there are no xs"),
    Attr(name="save", kind=bool, default=False, doc="also stack each step's carries"),
    Attr(name="reverse", kind=bool, default=False, doc="run the steps from the end"),
)
PART = Attr(name="part", kind=int, doc="which carry or stacked output")


def _packed(parts: Sequence[TensorType]) -> TensorType:
    return TensorType((sum(math.prod(p.shape) for p in parts),), parts[0].dtype)


def _infer_scan(types: Sequence[TensorType], attrs: Attrs) -> TensorType:
    parts, _ = layout(types, attrs)
    if not parts:
        raise ShapeError(f"{attrs['loop'].describe()} has no carries and no outputs")
    return _packed(parts)


def _views(packed: np.ndarray, parts: Sequence[TensorType]) -> list[np.ndarray]:
    views, start = [], 0
    for p in parts:
        size = math.prod(p.shape)
        views.append(packed[start : start + size].reshape(p.shape))
        start += size
    return views


def step_order(length: int, reverse: bool) -> range:
    """The steps in the order the loop runs them."""
    return range(length - 1, -1, -1) if reverse else range(length)


def _type(a: np.ndarray) -> TensorType:
    return TensorType(tuple(a.shape), a.dtype.name)


def _scan(*arrays: np.ndarray, loop: Body, length: int, save: bool, reverse: bool) -> np.ndarray:
    attrs = {"loop": loop, "length": length, "save": save}
    parts, steps = layout([_type(a) for a in arrays], attrs)
    packed = np.empty(_packed(parts).shape, parts[0].dtype)
    views = _views(packed, parts)
    nc, nx = loop.n_carry, loop.n_x
    body = loop.at([a.dtype.name for a in arrays])
    names = body.input_names()
    feeds = dict(zip(names[nc + nx :], arrays[nc + nx :], strict=True))
    carry_names, x_names = names[:nc], names[nc : nc + nx]
    xs = arrays[nc : nc + nx]
    carries = list(arrays[:nc])
    ny = body.n_y
    ys, saved = views[nc : nc + ny], views[nc + ny :]
    run = None
    for t in step_order(steps, reverse):
        if save:
            for view, c in zip(saved, carries, strict=True):
                view[t] = c
        for name, c in zip(carry_names, carries, strict=True):
            feeds[name] = c
        for name, x in zip(x_names, xs, strict=True):
            feeds[name] = x[t]
        if run is None:  # the shapes stay the same from step to step
            run = body.executable().function(feeds)
        outs = run(feeds)
        carries = outs[:nc]
        for view, y in zip(ys, outs[nc:], strict=True):
            view[t] = y
    for i, c in enumerate(carries):
        views[i][...] = c
    return packed


def _part_attrs(attrs: Attrs) -> dict[str, Any]:
    return {k: v for k, v in attrs.items() if k != "part"}


def _infer_part(types: Sequence[TensorType], attrs: Attrs) -> TensorType:
    parts, _ = layout(types[1:], _part_attrs(attrs))
    if types[0] != _packed(parts):
        raise ShapeError(f"the packed value is {types[0]}; the scan's is {_packed(parts)}")
    return parts[int(attrs["part"])]


def _scan_part(packed: np.ndarray, *ins: np.ndarray, part: int, **attrs: Any) -> np.ndarray:
    parts, _ = layout([_type(a) for a in ins], attrs)
    return _views(packed, parts)[part]


def _infer_unpart(types: Sequence[TensorType], attrs: Attrs) -> TensorType:
    parts, _ = layout(types[1:], _part_attrs(attrs))
    if types[0] != parts[int(attrs["part"])]:
        raise ShapeError(f"part {attrs['part']} is {parts[int(attrs['part'])]}; got {types[0]}")
    return _packed(parts)


def _scan_unpart(value: np.ndarray, *ins: np.ndarray, part: int, **attrs: Any) -> np.ndarray:
    parts, _ = layout([_type(a) for a in ins], attrs)
    packed = np.zeros(_packed(parts).shape, parts[0].dtype)
    _views(packed, parts)[part][...] = value
    return packed


def _cases(rng: np.random.Generator) -> list[OpCase]:
    """A tanh RNN step (carry, xs and a captured weight) and a reversed cumulative sum."""
    from asgrad.tensor.loops import case_body

    rnn, cumsum = case_body("rnn"), case_body("cumsum")
    w = rng.standard_normal((3, 3)) * 0.5
    common = {"length": 0, "reverse": False}
    return [
        OpCase(
            (rng.standard_normal((2, 3)), rng.standard_normal((4, 2, 3)), w),
            {"loop": rnn, "save": True, **common},
            label="rnn",
        ),
        OpCase(
            (rng.standard_normal((2, 3)), rng.standard_normal((4, 2, 3)), w),
            {"loop": rnn, "save": False, **common},
            label="rnn-unsaved",
        ),
        OpCase(
            (rng.standard_normal(3), rng.standard_normal((5, 3))),
            {"loop": cumsum, "save": True, "length": 0, "reverse": True},
            label="cumsum-reversed",
        ),
    ]


def _part_cases(rng: np.random.Generator) -> list[OpCase]:
    out = []
    for case in _cases(rng):
        ins = case.inputs
        n = _infer_scan([_type(a) for a in ins], case.attrs).shape[0]
        for part in range(2):
            attrs = {**case.attrs, "part": part}
            out.append(OpCase((rng.standard_normal(n), *ins), attrs, wrt=(0,), label=f"part{part}"))
    return out


def _unpart_cases(rng: np.random.Generator) -> list[OpCase]:
    out = []
    for case in _part_cases(rng):
        types = [_type(a) for a in case.inputs]
        shape = _infer_part(types, case.attrs).shape
        out.append(OpCase((rng.standard_normal(shape), *case.inputs[1:]), case.attrs, wrt=(0,)))
    return out


register_op(
    OpDef(
        name="scan",
        family="control",
        infer=_infer_scan,
        kernel=_scan,
        arity=None,
        cases=_cases,
        composite=True,
        attrs=SCAN_ATTRS,
        fresh_result=True,
        doc="a traced loop body applied along the leading axis of xs, carrying state",
        tolerance=(1e-4, 1e-5),
    )
)
register_op(
    OpDef(
        name="scan_part",
        family="control",
        infer=_infer_part,
        kernel=_scan_part,
        arity=None,
        cases=_part_cases,
        attrs=(*SCAN_ATTRS, PART),
        doc="one carry or stacked output of a scan's packed result",
    )
)
register_op(
    OpDef(
        name="scan_unpart",
        family="control",
        infer=_infer_unpart,
        kernel=_scan_unpart,
        arity=None,
        cases=_unpart_cases,
        attrs=(*SCAN_ATTRS, PART),
        fresh_result=True,
        doc="a scan part placed in zeros of the packed size (scan_part's adjoint)",
    )
)
