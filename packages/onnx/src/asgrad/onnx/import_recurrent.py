"""ONNX's ``LSTM``, ``GRU`` and ``RNN`` as one asgrad ``scan`` per direction.

The input projection ``X W^T + Wb`` of every step is one matmul before the loop;
the loop body adds ``H R^T + Rb`` and applies ONNX's gate equations (gates ``iofc``
for LSTM, ``zrh`` for GRU, with ``linear_before_reset``). Both layouts, the three
directions, initial states and LSTM peepholes are taken; the activations are
ONNX's defaults or ``Sigmoid``/``Tanh``/``Relu``. ``clip``, ``input_forget`` and
sequence lengths shorter than the sequence are refused.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import onnx

from asgrad.onnx.errors import OnnxImportError
from asgrad.onnx.import_context import ImportContext, Importer, Value, attributes
from asgrad.tensor import Tensor, concat, scan

__all__ = ["RECURRENT_IMPORTERS"]

_ACTIVATIONS: dict[str, Callable[[Tensor], Tensor]] = {
    "Sigmoid": lambda t: t.sigmoid(),
    "Tanh": lambda t: t.tanh(),
    "Relu": lambda t: t.relu(),
}
_GATES = {"LSTM": 4, "GRU": 3, "RNN": 1}
_DEFAULTS = {"LSTM": ["Sigmoid", "Tanh", "Tanh"], "GRU": ["Sigmoid", "Tanh"], "RNN": ["Tanh"]}


def _optional(ctx: ImportContext, node: onnx.NodeProto, xs: list[Value], i: int) -> Tensor | None:
    return ctx.tensor(xs[i]) if len(xs) > i and node.input[i] else None


def _activations(node: onnx.NodeProto, directions: int) -> list[Callable[[Tensor], Tensor]]:
    a = attributes(node)
    names = [str(n) for n in a.get("activations", [])] or _DEFAULTS[node.op_type] * directions
    for key in ("activation_alpha", "activation_beta", "clip"):
        if key in a:
            raise OnnxImportError(f"{node.op_type} with {key} is not supported")
    unknown = sorted({n for n in names if n not in _ACTIVATIONS})
    if unknown:
        raise OnnxImportError(f"{node.op_type} activations {unknown} are not supported")
    return [_ACTIVATIONS[n] for n in names]


def _recurrent(ctx: ImportContext, node: onnx.NodeProto, xs: list[Value]) -> list[Value]:
    a = attributes(node)
    kind = node.op_type
    x = ctx.tensor(xs[0])
    w, r = ctx.tensor(xs[1]), ctx.tensor(xs[2])
    b = _optional(ctx, node, xs, 3)
    batch_first = bool(a.get("layout", 0))
    if batch_first:
        x = x.transpose((1, 0, 2))
    steps, batch = x.shape[0], x.shape[1]
    hidden = int(a["hidden_size"])
    direction = str(a.get("direction", "forward"))
    directions = 2 if direction == "bidirectional" else 1
    if a.get("input_forget", 0):
        raise OnnxImportError("LSTM with input_forget=1 is not supported")
    lengths = _optional(ctx, node, xs, 4)
    if lengths is not None:
        given = ctx.static(lengths, f"{kind}'s sequence_lens")
        if np.any(given != steps):
            raise OnnxImportError(
                f"{kind} with sequence_lens {given.tolist()} shorter than the {steps} steps"
                " is not supported"
            )
    h0 = _optional(ctx, node, xs, 5)
    c0 = _optional(ctx, node, xs, 6) if kind == "LSTM" else None
    peep = _optional(ctx, node, xs, 7) if kind == "LSTM" else None
    acts = _activations(node, directions)
    per = len(acts) // directions
    gates = _GATES[kind] * hidden
    ys: list[Tensor] = []
    hs: list[Tensor] = []
    cs: list[Tensor] = []
    zeros = ctx.graph.constant(np.zeros((batch, hidden), dtype=x.dtype), dtype=x.dtype)
    for d in range(directions):
        wd, rd = w[d], r[d]
        xw = x @ wd.transpose((1, 0))
        rb: Tensor | None = None
        if b is not None:
            xw = xw + b[d][:gates]
            rb = b[d][gates:]
        h = h0[d] if h0 is not None else zeros
        f = acts[d * per : (d + 1) * per]
        reverse = direction == "reverse" or d == 1
        rt = rd.transpose((1, 0))
        if kind == "LSTM":
            c = c0[d] if c0 is not None else zeros
            p = peep[d] if peep is not None else None
            (h_n, c_n), y = scan(_lstm_body(rt, rb, p, f, hidden), (h, c), xw, reverse=reverse)
            cs.append(c_n)
        else:
            body = _gru_body(rt, rb, f, hidden, a) if kind == "GRU" else _rnn_body(rt, rb, f)
            h_n, y = scan(body, h, xw, reverse=reverse)
        ys.append(y.expand_dims(1))
        hs.append(h_n.expand_dims(0))
    y_all = ys[0] if directions == 1 else concat(ys, 1)  # (steps, dirs, batch, hidden)
    h_all = hs[0] if directions == 1 else concat(hs, 0)
    outs: list[Tensor] = [y_all, h_all]
    if kind == "LSTM":
        outs.append(cs[0] if directions == 1 else concat([c.expand_dims(0) for c in cs], 0))
        if directions == 1:
            outs[2] = outs[2].expand_dims(0)
    if batch_first:  # Y (batch, steps, dirs, hidden); the states (batch, dirs, hidden)
        outs = [outs[0].transpose((2, 0, 1, 3)), *(o.transpose((1, 0, 2)) for o in outs[1:])]
    return list(outs)


def _split(t: Tensor, parts: int, size: int) -> list[Tensor]:
    return [t[..., k * size : (k + 1) * size] for k in range(parts)]


def _lstm_body(
    rt: Tensor,
    rb: Tensor | None,
    peep: Tensor | None,
    f: list[Callable[[Tensor], Tensor]],
    hidden: int,
) -> Callable[[tuple[Tensor, Tensor], Tensor], tuple[tuple[Tensor, Tensor], Tensor]]:
    def body(carry: tuple[Tensor, Tensor], xw: Tensor) -> tuple[tuple[Tensor, Tensor], Tensor]:
        h, c = carry
        g = xw + h @ rt
        if rb is not None:
            g = g + rb
        i, o, fg, cand = _split(g, 4, hidden)
        if peep is not None:
            pi, po, pf = _split(peep, 3, hidden)
            i, fg = i + pi * c, fg + pf * c
        i, fg, cand = f[0](i), f[0](fg), f[1](cand)
        c_new = fg * c + i * cand
        if peep is not None:
            o = o + po * c_new
        h_new = f[0](o) * f[2](c_new)
        return (h_new, c_new), h_new

    return body


def _gru_body(
    rt: Tensor,
    rb: Tensor | None,
    f: list[Callable[[Tensor], Tensor]],
    hidden: int,
    a: dict[str, object],
) -> Callable[[Tensor, Tensor], tuple[Tensor, Tensor]]:
    before_reset = bool(a.get("linear_before_reset", 0))
    rz, rr, rh = _split(rt, 3, hidden)
    bz, br, bh = _split(rb, 3, hidden) if rb is not None else (None, None, None)

    def plus(t: Tensor, bias: Tensor | None) -> Tensor:
        return t if bias is None else t + bias

    def body(h: Tensor, xw: Tensor) -> tuple[Tensor, Tensor]:
        xz, xr, xh = _split(xw, 3, hidden)
        z = f[0](xz + plus(h @ rz, bz))
        reset = f[0](xr + plus(h @ rr, br))
        if before_reset:
            cand = f[1](xh + reset * plus(h @ rh, bh))
        else:
            cand = f[1](xh + plus((reset * h) @ rh, bh))
        h_new = (1.0 - z) * cand + z * h
        return h_new, h_new

    return body


def _rnn_body(
    rt: Tensor, rb: Tensor | None, f: list[Callable[[Tensor], Tensor]]
) -> Callable[[Tensor, Tensor], tuple[Tensor, Tensor]]:
    def body(h: Tensor, xw: Tensor) -> tuple[Tensor, Tensor]:
        g = xw + h @ rt
        h_new = f[0](g if rb is None else g + rb)
        return h_new, h_new

    return body


RECURRENT_IMPORTERS: dict[str, Importer] = {
    "LSTM": _recurrent,
    "GRU": _recurrent,
    "RNN": _recurrent,
}
"""The importers of this module, by ONNX op type."""
