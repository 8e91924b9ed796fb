"""Gradient rules of the normalisations: ``softmax``, ``log_softmax``, layer and batch norm.

The composite norms' input gradients are the composite ``*_backward`` ops; the
gradients of those come from differentiating the decomposition in graph ops, so
gradients of any order work. The affine weight and bias get sums of ``g * x_hat``
and ``g`` over the axes they are broadcast along.
"""

from __future__ import annotations

from collections.abc import Callable

from asgrad.autograd.rules.common import Attrs, Grads, Ins, Needs, Rule, apply, registrar
from asgrad.tensor import Tensor
from asgrad.tensor.ir.dtypes import is_float

RULES: dict[str, Rule] = {}
rule = registrar(RULES)


@rule("softmax")
def _softmax(g: Tensor, out: Tensor, ins: Ins, attrs: Attrs, needs: Needs) -> Grads:
    axis = attrs["axis"]
    return (out * (g - (g * out).sum(axis=axis, keepdims=True)),)


@rule("log_softmax")
def _log_softmax(g: Tensor, out: Tensor, ins: Ins, attrs: Attrs, needs: Needs) -> Grads:
    axis = attrs["axis"]
    return (g - out.exp() * g.sum(axis=axis, keepdims=True),)


# -- layer and batch norm --------------------------------------------------------------------
def _layer_axes(x: Tensor, attrs: Attrs) -> tuple[int, ...]:
    k = len(tuple(attrs["normalized_shape"]))
    return tuple(range(x.ndim - k, x.ndim))


def _batch_axes(x: Tensor) -> tuple[int, ...]:
    return (0, *range(2, x.ndim))


def _channel(v: Tensor, ndim: int) -> Tensor:
    return v.reshape((-1,) + (1,) * (ndim - 2))


def _affine_grads(
    g: Tensor, x: Tensor, attrs: Attrs, needs: Needs, op: str, axes: tuple[int, ...]
) -> tuple[Tensor | None, Tensor | None]:
    """Weight and bias gradients: sums of g * x_hat and g over the non-affine axes."""
    gw = gb = None
    if needs[1]:
        x_hat = apply(op, (x,), attrs)
        gw = (g * x_hat).sum(axis=axes)
    if needs[2]:
        gb = g.sum(axis=axes)
    return gw, gb


@rule("layer_norm")
def _layer_norm(g: Tensor, out: Tensor, ins: Ins, attrs: Attrs, needs: Needs) -> Grads:
    x = ins[0]
    gx = None
    if needs[0]:
        gx = apply("layer_norm_backward", (g, x, *ins[1:2]), attrs)
    if len(ins) == 1:
        return (gx,)
    lead = tuple(range(x.ndim - len(_layer_axes(x, attrs))))
    return (gx, *_affine_grads(g, x, attrs, needs, "layer_norm", lead))


@rule("batch_norm")
def _batch_norm(g: Tensor, out: Tensor, ins: Ins, attrs: Attrs, needs: Needs) -> Grads:
    x = ins[0]
    gx = None
    if needs[0]:
        gx = apply("batch_norm_backward", (g, x, *ins[1:2]), attrs)
    if len(ins) == 1:
        return (gx,)
    return (gx, *_affine_grads(g, x, attrs, needs, "batch_norm", _batch_axes(x)))


# -- the backward ops, differentiated through their decomposition ---------------------------
def _grad(y: Tensor, wrt: list[Tensor], seed: Tensor) -> list[Tensor]:
    """`asgrad.autograd.grad`, imported on use: it looks rules up in this table."""
    from asgrad.autograd.grad import grad

    return grad(y, wrt, seed=seed)


def _normalize_composite(x: Tensor, axes: tuple[int, ...], eps: float) -> Tensor:
    """(x - mean) / sqrt(var + eps) over ``axes``, in primitive graph ops."""
    centered = x - x.mean(axis=axes, keepdims=True)
    var = (centered * centered).mean(axis=axes, keepdims=True)
    return centered / (var + eps).sqrt()


def _norm_backward_composite(
    normalize: Callable[[Tensor], Tensor],
    weight: Callable[[Tensor, Tensor], Tensor],
) -> Callable[..., Tensor]:
    """A norm's ``*_backward(g, x[, w])`` as a decomposition in primitive graph ops."""

    def backward(g: Tensor, x: Tensor, *w: Tensor) -> Tensor:
        (gx,) = _grad(normalize(x), [x], seed=weight(g, w[0]) if w else g)
        return gx

    return backward


def _composite_vjp(
    fn: Callable[..., Tensor], h: Tensor, ins: Ins, needs: Needs
) -> list[Tensor | None]:
    """The gradients of ``fn(*ins)`` (a decomposition in primitive ops) for incoming ``h``.

    Each input is first replaced by a fresh identity node, so that the gradient is
    the partial derivative in that input alone, even where one input (an incoming
    gradient, say) was itself computed from another.
    """
    fresh = tuple(t.reshape(t.shape) if is_float(t.dtype) else t for t in ins)
    value = fn(*fresh)
    chosen = [i for i, need in enumerate(needs) if need]
    grads = _grad(value, [fresh[i] for i in chosen], seed=h)
    out: list[Tensor | None] = [None] * len(ins)
    for i, gi in zip(chosen, grads, strict=True):
        out[i] = gi
    return out


@rule("layer_norm_backward")
def _layer_norm_backward(h: Tensor, out: Tensor, ins: Ins, attrs: Attrs, needs: Needs) -> Grads:
    eps = attrs["eps"]
    axes = _layer_axes(ins[1], attrs)
    fn = _norm_backward_composite(lambda x: _normalize_composite(x, axes, eps), lambda g, w: g * w)
    return _composite_vjp(fn, h, ins, needs)


@rule("batch_norm_backward")
def _batch_norm_backward(h: Tensor, out: Tensor, ins: Ins, attrs: Attrs, needs: Needs) -> Grads:
    eps = attrs["eps"]
    ndim = ins[1].ndim
    fn = _norm_backward_composite(
        lambda x: _normalize_composite(x, _batch_axes(x), eps),
        lambda g, w: g * _channel(w, ndim),
    )
    return _composite_vjp(fn, h, ins, needs)
