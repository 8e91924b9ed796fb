"""RNN, LSTM, GRU and their cells against PyTorch: outputs, final states and gradients,
with every option; weights loaded from PyTorch's state_dict unchanged (PyTorch's answers
saved as fixtures: the torch_reference fixture)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from asgrad.autograd import grad
from asgrad.nn import GRU, LSTM, RNN, GRUCell, LSTMCell, RNNCell
from asgrad.tensor import Graph, ShapeError, Tensor, compile

RNG = np.random.default_rng(0)
CLASSES = {"RNN": (RNN, "RNN"), "LSTM": (LSTM, "LSTM"), "GRU": (GRU, "GRU")}
Reference = Callable[..., Any]  # the torch_reference fixture


@pytest.fixture(autouse=True)
def _same_inputs_alone_or_together() -> None:
    """Each test draws from a fresh RNG: its inputs match PyTorch's saved answers whichever
    tests run with it."""
    global RNG
    RNG = np.random.default_rng(0)


def _run(
    torch_reference: Reference,
    kind: str,
    opts: dict[str, Any],
    *,
    with_state: bool = False,
    lengths: list[int] | None = None,
) -> None:
    cls, _ = CLASSES[kind]
    ours = cls(4, 3, dtype="float64", **opts)
    batch, steps = 3, 5
    bf = opts.get("batch_first", False)
    shape = (batch, steps, 4) if bf else (steps, batch, 4)
    x_np = RNG.standard_normal(shape)
    layers = opts.get("num_layers", 1) * (2 if opts.get("bidirectional") else 1)
    h_np = RNG.standard_normal((layers, batch, 3))
    c_np = RNG.standard_normal((layers, batch, 3))

    g = Graph()
    x = g.input("x", shape, "float64")
    h0 = g.input("h0", h_np.shape, "float64", free=(1,)) if with_state else None
    c0 = g.input("c0", c_np.shape, "float64", free=(1,)) if with_state else None
    mask_t = None
    feeds: dict[str, np.ndarray] = {"x": x_np}
    if lengths is not None:
        valid = np.arange(steps)[None, :] < np.array(lengths)[:, None]  # (batch, steps)
        feeds["mask"] = valid if bf else valid.T
        mask_t = g.input("mask", feeds["mask"].shape, "bool")
    if with_state:
        feeds.update(h0=h_np, c0=c_np)
    hx: Any = ((h0, c0) if kind == "LSTM" else h0) if with_state else None
    out, state = ours(x, hx, mask=mask_t)
    finals = list(state) if kind == "LSTM" else [state]
    proj = [RNG.standard_normal(t.shape) for t in (out, *finals)]
    loss = sum(
        ((t * p).sum() for t, p in zip((out, *finals), proj, strict=True)), start=x.sum() * 0.0
    )
    params = dict(ours.named_parameters())
    wrt: list[Tensor] = [x, *(g.bind(p) for p in params.values())]
    if with_state:
        wrt.append(h0)  # type: ignore[arg-type]

    def run(torch: Any, x_np: Any, h_np: Any, c_np: Any, proj: list[Any]) -> Any:
        theirs = getattr(torch.nn, kind)(4, 3, **opts).double()
        state = {k: v.detach().clone() for k, v in theirs.state_dict().items()}
        xt = torch.tensor(x_np, requires_grad=True)
        args: list[Any] = []
        ht, ct = torch.tensor(h_np, requires_grad=True), torch.tensor(c_np)
        if with_state:
            args.append((ht, ct) if kind == "LSTM" else ht)
        inp: Any = xt
        if lengths is not None:
            inp = torch.nn.utils.rnn.pack_padded_sequence(
                xt, lengths, batch_first=bf, enforce_sorted=False
            )
        t_out, t_state = theirs(inp, *args)
        if lengths is not None:
            t_out, _ = torch.nn.utils.rnn.pad_packed_sequence(
                t_out, batch_first=bf, total_length=steps
            )
        t_finals = list(t_state) if kind == "LSTM" else [t_state]
        pairs = zip((t_out, *t_finals), proj, strict=True)
        sum((t * torch.tensor(p)).sum() for t, p in pairs).backward()
        named = {k: v.grad for k, v in theirs.named_parameters()}
        return state, [t_out, *t_finals, xt.grad], named, ht.grad if with_state else 0.0

    state, want, named, h_grad = torch_reference(run, x_np, h_np, c_np, proj)
    ours.load_state_dict(state)
    got = compile([out, *finals, *grad(loss, wrt)])(feeds)
    want += [named[name] for name in params]
    if with_state:
        want.append(h_grad)
    assert len(got) == len(want)
    for have, expected in zip(got, want, strict=True):
        np.testing.assert_allclose(have, expected, rtol=1e-9, atol=1e-10)


@pytest.mark.parametrize("kind", ["RNN", "LSTM", "GRU"])
def test_one_layer_matches_pytorch(kind: str, torch_reference: Reference) -> None:
    _run(torch_reference, kind, {})


@pytest.mark.parametrize("kind", ["RNN", "LSTM", "GRU"])
def test_stacked_bidirectional_batch_first_with_initial_states(
    kind: str, torch_reference: Reference
) -> None:
    _run(
        torch_reference,
        kind,
        {"num_layers": 2, "bidirectional": True, "batch_first": True},
        with_state=True,
    )


@pytest.mark.parametrize("kind", ["LSTM", "GRU", "RNN"])
@pytest.mark.parametrize("batch_first", [False, True])
def test_mask_matches_packed_sequences(
    kind: str, batch_first: bool, torch_reference: Reference
) -> None:
    opts = {"num_layers": 2, "bidirectional": True, "batch_first": batch_first}
    _run(torch_reference, kind, opts, lengths=[5, 2, 4])


def test_relu_rnn_without_bias(torch_reference: Reference) -> None:
    _run(torch_reference, "RNN", {"nonlinearity": "relu", "bias": False})


@pytest.mark.parametrize("kind", ["RNNCell", "LSTMCell", "GRUCell"])
def test_cells_match_pytorch(kind: str, torch_reference: Reference) -> None:
    ours = {"RNNCell": RNNCell, "LSTMCell": LSTMCell, "GRUCell": GRUCell}[kind](
        4, 3, dtype="float64"
    )
    x_np, h_np, c_np = (
        RNG.standard_normal((2, 4)),
        RNG.standard_normal((2, 3)),
        RNG.standard_normal((2, 3)),
    )
    g = Graph()
    x, h, c = (g.input(n, a.shape, "float64") for n, a in (("x", x_np), ("h", h_np), ("c", c_np)))
    result = ours(x, (h, c)) if kind == "LSTMCell" else ours(x, h)
    outs = list(result) if kind == "LSTMCell" else [result]
    loss = sum((o.sum() for o in outs), start=x.sum() * 0.0)

    def run(torch: Any, x_np: Any, h_np: Any, c_np: Any) -> Any:
        theirs = getattr(torch.nn, kind)(4, 3).double()
        state = {k: v.detach().clone() for k, v in theirs.state_dict().items()}
        xt = torch.tensor(x_np, requires_grad=True)
        lstm = kind == "LSTMCell"
        t_state = (torch.tensor(h_np), torch.tensor(c_np)) if lstm else torch.tensor(h_np)
        t_res = theirs(xt, t_state)
        t_outs = list(t_res) if lstm else [t_res]
        sum(o.sum() for o in t_outs).backward()
        return state, [*t_outs, xt.grad, theirs.weight_hh.grad]

    state, want = torch_reference(run, x_np, h_np, c_np)
    ours.load_state_dict(state)
    got = compile([*outs, *grad(loss, [x, g.bind(ours.weight_hh)])])(
        {"x": x_np, "h": h_np, "c": c_np}
    )
    for have, expected in zip(got, want, strict=True):
        np.testing.assert_allclose(have, expected, rtol=1e-10, atol=1e-12)


def test_one_scan_per_layer_and_direction_and_dropout_between_layers() -> None:
    lstm = LSTM(4, 3, num_layers=3, bidirectional=True, dropout=0.5, rng=0)
    g = Graph()
    out, _ = lstm(g.input("x", (50, 2, 4)))
    prog = compile([out], g.updates)  # the updates advance the dropout seed
    assert sum(n.op == "scan" for n in prog.schedule.nodes) == 6
    assert sum(n.op == "dropout" for n in prog.schedule.nodes) == 2
    x = RNG.standard_normal((50, 2, 4)).astype(np.float32)
    a, b = prog({"x": x})[0], prog({"x": x})[0]
    assert not np.allclose(a, b)  # a fresh mask each run in training mode
    lstm.eval()
    c, d = prog({"x": x})[0], prog({"x": x})[0]
    np.testing.assert_array_equal(c, d)
    assert "dropout_seed" not in " ".join(lstm.state_dict())


def test_state_dict_keys_are_pytorchs(torch_reference: Reference) -> None:
    theirs = torch_reference(
        lambda torch: dict(torch.nn.GRU(4, 3, num_layers=2, bidirectional=True).state_dict())
    )
    ours = GRU(4, 3, num_layers=2, bidirectional=True)
    assert set(ours.state_dict()) == set(theirs)
    for k, v in theirs.items():
        assert ours.state_dict()[k].shape == v.shape


def test_bad_shapes_are_named() -> None:
    g = Graph()
    with pytest.raises(ShapeError, match="4 features"):
        LSTM(4, 3)(g.input("x", (5, 2, 6)))
    with pytest.raises(ShapeError, match="initial state"):
        GRU(4, 3, num_layers=2)(g.input("x2", (5, 2, 4)), g.input("h", (1, 2, 3)))
