"""Gradient rules of the neural-network ops: convolution, pooling, norms, dropout.

The linear ops come in closed families, each member's gradient another member
(all registered ops with numpy kernels), so gradients of any order stay fast:

- ``conv2d(x, w)``: x <- ``conv2d_backward_input(g, w, x)``, w <-
  ``conv2d_backward_weight(x, g)``; those two are bilinear and their gradients are
  ``conv2d`` and each other. ``conv_transpose2d`` is ``conv2d_backward_input`` with
  the roles of input and gradient swapped.
- pooling: ``max_pool2d_backward`` and ``max_pool2d_select`` are adjoint (the
  argmax positions are piecewise constant in x), as are ``avg_pool2d`` and
  ``avg_pool2d_backward``, and the adaptive pair.

The fused norms' input gradients are the fused ``*_backward`` ops; the gradients of
those come from differentiating the unfused definition in graph ops.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from asgrad.autograd.grad import grad
from asgrad.autograd.rules import Attrs, Grads, Ins, Needs, rule
from asgrad.tensor import Tensor
from asgrad.tensor.dtypes import is_float

_CONV_KEYS = ("stride", "padding", "dilation", "groups")


def _conv_attrs(attrs: Attrs) -> dict[str, Any]:
    return {k: attrs[k] for k in _CONV_KEYS if k in attrs}


def _apply(op: str, inputs: Ins, attrs: Attrs) -> Tensor:
    return inputs[0].graph.apply(op, inputs, attrs)


def _bias_grad(g: Tensor) -> Tensor:
    return g.sum(axis=(0, 2, 3))


# -- convolution -----------------------------------------------------------------------
@rule("conv2d")
def _conv2d(g: Tensor, out: Tensor, ins: Ins, attrs: Attrs, needs: Needs) -> Grads:
    x, w = ins[0], ins[1]
    conv = _conv_attrs(attrs)
    gx = _apply("conv2d_backward_input", (g, w, x), conv) if needs[0] else None
    gw = None
    if needs[1]:
        gw = _apply("conv2d_backward_weight", (x, g), {**conv, "kernel_size": w.shape[2:]})
    if len(ins) == 2:
        return gx, gw
    return gx, gw, (_bias_grad(g) if needs[2] else None)


@rule("conv2d_backward_input")
def _conv2d_backward_input(h: Tensor, out: Tensor, ins: Ins, attrs: Attrs, needs: Needs) -> Grads:
    # out = A(g, w), linear in each: <h, A(g, w)> = <conv2d(h, w), g>.
    g, w, _ = ins
    conv = _conv_attrs(attrs)
    gg = _apply("conv2d", (h, w), conv) if needs[0] else None
    gw = None
    if needs[1]:
        gw = _apply("conv2d_backward_weight", (h, g), {**conv, "kernel_size": w.shape[2:]})
    return gg, gw, None


@rule("conv2d_backward_weight")
def _conv2d_backward_weight(h: Tensor, out: Tensor, ins: Ins, attrs: Attrs, needs: Needs) -> Grads:
    # out = B(x, g): <h, B(x, g)> = <conv2d(x, h), g>.
    x, g = ins
    conv = _conv_attrs(attrs)
    gx = _apply("conv2d_backward_input", (g, h, x), conv) if needs[0] else None
    gg = _apply("conv2d", (x, h), conv) if needs[1] else None
    return gx, gg


@rule("conv_transpose2d")
def _conv_transpose2d(g: Tensor, out: Tensor, ins: Ins, attrs: Attrs, needs: Needs) -> Grads:
    # y = conv2d_backward_input(x, w) with output size from output_padding.
    x, w = ins[0], ins[1]
    conv = _conv_attrs(attrs)
    gx = _apply("conv2d", (g, w), conv) if needs[0] else None
    gw = None
    if needs[1]:
        gw = _apply("conv2d_backward_weight", (g, x), {**conv, "kernel_size": w.shape[2:]})
    if len(ins) == 2:
        return gx, gw
    return gx, gw, (_bias_grad(g) if needs[2] else None)


# -- pooling -----------------------------------------------------------------------------
@rule("max_pool2d")
def _max_pool2d(g: Tensor, out: Tensor, ins: Ins, attrs: Attrs, needs: Needs) -> Grads:
    return (_apply("max_pool2d_backward", (g, ins[0]), attrs),)


@rule("max_pool2d_backward")
def _max_pool2d_backward(h: Tensor, out: Tensor, ins: Ins, attrs: Attrs, needs: Needs) -> Grads:
    # Linear in g; the argmax positions are piecewise constant in x.
    return _apply("max_pool2d_select", (h, ins[1]), attrs), None


@rule("max_pool2d_select")
def _max_pool2d_select(g: Tensor, out: Tensor, ins: Ins, attrs: Attrs, needs: Needs) -> Grads:
    return _apply("max_pool2d_backward", (g, ins[1]), attrs), None


@rule("avg_pool2d")
def _avg_pool2d(g: Tensor, out: Tensor, ins: Ins, attrs: Attrs, needs: Needs) -> Grads:
    return (_apply("avg_pool2d_backward", (g, ins[0]), attrs),)


@rule("avg_pool2d_backward")
def _avg_pool2d_backward(h: Tensor, out: Tensor, ins: Ins, attrs: Attrs, needs: Needs) -> Grads:
    return _apply("avg_pool2d", (h,), attrs), None


@rule("adaptive_avg_pool2d")
def _adaptive(g: Tensor, out: Tensor, ins: Ins, attrs: Attrs, needs: Needs) -> Grads:
    return (_apply("adaptive_avg_pool2d_backward", (g, ins[0]), attrs),)


@rule("adaptive_avg_pool2d_backward")
def _adaptive_backward(h: Tensor, out: Tensor, ins: Ins, attrs: Attrs, needs: Needs) -> Grads:
    return _apply("adaptive_avg_pool2d", (h,), attrs), None


# -- dropout -------------------------------------------------------------------------------
@rule("dropout")
def _dropout(g: Tensor, out: Tensor, ins: Ins, attrs: Attrs, needs: Needs) -> Grads:
    # The same seed gives the same mask: dropout is its own (diagonal) adjoint.
    return _apply("dropout", (g, ins[1]), attrs), None


# -- normalisation ---------------------------------------------------------------------------
def _layer_axes(x: Tensor, attrs: Attrs) -> tuple[int, ...]:
    k = len(tuple(attrs["normalized_shape"]))
    return tuple(range(x.ndim - k, x.ndim))


def _batch_axes(x: Tensor) -> tuple[int, ...]:
    return (0, *range(2, x.ndim))


def _channel(v: Tensor, ndim: int) -> Tensor:
    return v.reshape((-1,) + (1,) * (ndim - 2))


def _normalize_composite(x: Tensor, axes: tuple[int, ...], eps: float) -> Tensor:
    """(x - mean) / sqrt(var + eps) over ``axes``, in primitive graph ops."""
    centered = x - x.mean(axis=axes, keepdims=True)
    var = (centered * centered).mean(axis=axes, keepdims=True)
    return centered / (var + eps).sqrt()


def _affine_grads(
    g: Tensor, x: Tensor, ins: Ins, attrs: Attrs, needs: Needs, op: str, axes: tuple[int, ...]
) -> tuple[Tensor | None, Tensor | None]:
    """Weight and bias gradients: sums of g * x_hat and g over the non-affine axes."""
    gw = gb = None
    if needs[1]:
        x_hat = _apply(op, (x,), attrs)
        gw = (g * x_hat).sum(axis=axes)
    if needs[2]:
        gb = g.sum(axis=axes)
    return gw, gb


@rule("layer_norm")
def _layer_norm(g: Tensor, out: Tensor, ins: Ins, attrs: Attrs, needs: Needs) -> Grads:
    x = ins[0]
    gx = None
    if needs[0]:
        gx = _apply("layer_norm_backward", (g, x, *ins[1:2]), attrs)
    if len(ins) == 1:
        return (gx,)
    lead = tuple(range(x.ndim - len(_layer_axes(x, attrs))))
    return (gx, *_affine_grads(g, x, ins, attrs, needs, "layer_norm", lead))


@rule("batch_norm")
def _batch_norm(g: Tensor, out: Tensor, ins: Ins, attrs: Attrs, needs: Needs) -> Grads:
    x = ins[0]
    gx = None
    if needs[0]:
        gx = _apply("batch_norm_backward", (g, x, *ins[1:2]), attrs)
    if len(ins) == 1:
        return (gx,)
    return (gx, *_affine_grads(g, x, ins, attrs, needs, "batch_norm", _batch_axes(x)))


def _composite_vjp(
    fn: Callable[..., Tensor], h: Tensor, ins: Ins, needs: Needs
) -> list[Tensor | None]:
    """The gradients of ``fn(*ins)`` (an unfused definition) for incoming ``h``.

    Each input is first replaced by a fresh identity node, so that the gradient is
    the partial derivative in that input alone, even where one input (an incoming
    gradient, say) was itself computed from another.
    """
    fresh = tuple(t.reshape(t.shape) if is_float(t.dtype) else t for t in ins)
    value = fn(*fresh)
    chosen = [i for i, need in enumerate(needs) if need]
    grads = grad(value, [fresh[i] for i in chosen], seed=h)
    out: list[Tensor | None] = [None] * len(ins)
    for i, gi in zip(chosen, grads, strict=True):
        out[i] = gi
    return out


def _norm_backward_composite(
    normalize: Callable[[Tensor], Tensor],
    weight: Callable[[Tensor, Tensor], Tensor],
) -> Callable[..., Tensor]:
    def backward(g: Tensor, x: Tensor, *w: Tensor) -> Tensor:
        (gx,) = grad(normalize(x), [x], seed=weight(g, w[0]) if w else g)
        return gx

    return backward


@rule("layer_norm_backward")
def _layer_norm_backward(h: Tensor, out: Tensor, ins: Ins, attrs: Attrs, needs: Needs) -> Grads:
    eps = float(attrs.get("eps", 1e-5))
    axes = _layer_axes(ins[1], attrs)
    fn = _norm_backward_composite(lambda x: _normalize_composite(x, axes, eps), lambda g, w: g * w)
    return _composite_vjp(fn, h, ins, needs)


@rule("batch_norm_backward")
def _batch_norm_backward(h: Tensor, out: Tensor, ins: Ins, attrs: Attrs, needs: Needs) -> Grads:
    eps = float(attrs.get("eps", 1e-5))
    ndim = ins[1].ndim
    fn = _norm_backward_composite(
        lambda x: _normalize_composite(x, _batch_axes(x), eps),
        lambda g, w: g * _channel(w, ndim),
    )
    return _composite_vjp(fn, h, ins, needs)
