"""PyTorch's transformer modules and checkpoints, checked against PyTorch.

Each test builds the PyTorch module, loads its ``state_dict`` into the asgrad module
of the same name with ``load_torch_state_dict``, and compares outputs in float64. The
PyTorch side runs in ``torch_reference`` (the root conftest): its state dicts and outputs
are saved as fixtures, so the comparisons run without PyTorch too; reading ``.pt`` files
needs PyTorch itself and is skipped without it.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from asgrad import nn
from asgrad.nn.errors import StateMismatchError, UnsafeCheckpointError
from asgrad.tensor import Graph, evaluate

# PyTorch's own advice about its fast paths, which these float64 comparisons do not use.
pytestmark = pytest.mark.filterwarnings("ignore:enable_nested_tensor is True:UserWarning")

RNG = np.random.default_rng(0)
Reference = Callable[..., Any]  # the torch_reference fixture


@pytest.fixture(autouse=True)
def _same_inputs_alone_or_together() -> None:
    """Each test draws from a fresh RNG: its inputs match PyTorch's saved answers whichever
    tests run with it."""
    global RNG
    RNG = np.random.default_rng(0)


def run(outputs: Any, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    return evaluate(outputs if isinstance(outputs, list) else [outputs], feeds)


def torch_eval(module: Any) -> Any:
    return module.double().eval()


def state(module: Any) -> dict[str, Any]:
    return {k: v.detach().clone() for k, v in module.state_dict().items()}


def seq_input(g: Graph, name: str, shape: tuple[int, ...], batch_axis: int = 1) -> Any:
    return g.input(name, shape, "float64", free=(batch_axis,))


def test_multihead_attention_sequence_first_with_masks_matches_torch(
    torch_reference: Reference,
) -> None:
    x = RNG.normal(size=(5, 3, 16))
    pad = np.zeros((3, 5), bool)
    pad[1, 3:] = True
    causal = np.triu(np.ones((5, 5), bool), k=1)

    def theirs(torch: Any, x: Any, pad: Any, causal: Any) -> Any:
        ref = torch_eval(torch.nn.MultiheadAttention(16, 4))
        tx = torch.tensor(x)
        out = ref(tx, tx, tx, key_padding_mask=torch.tensor(pad), attn_mask=torch.tensor(causal))
        return state(ref), out

    ref_state, (want, want_w) = torch_reference(theirs, x, pad, causal)
    mha = nn.MultiheadAttention(16, 4).double()
    nn.load_torch_state_dict(mha, ref_state)
    assert set(mha.state_dict()) >= {"in_proj_weight", "in_proj_bias", "out_proj.weight"}
    g = Graph()
    xt = seq_input(g, "x", (5, 3, 16))
    out, weights = mha(xt, xt, xt, key_padding_mask=pad, attn_mask=causal)
    got, got_w = run([out, weights], {"x": x})
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(got_w, want_w, rtol=1e-10, atol=1e-12)


def test_cross_attention_batch_first_per_head_weights_and_float_mask(
    torch_reference: Reference,
) -> None:
    q, kv = RNG.normal(size=(2, 3, 8)), RNG.normal(size=(2, 6, 8))
    bias = RNG.normal(size=(2 * 2, 3, 6))  # (N * heads, L, S), added

    def theirs(torch: Any, q: Any, kv: Any, bias: Any) -> Any:
        ref = torch_eval(torch.nn.MultiheadAttention(8, 2, batch_first=True))
        tq, tkv = torch.tensor(q), torch.tensor(kv)
        out = ref(tq, tkv, tkv, attn_mask=torch.tensor(bias), average_attn_weights=False)
        return state(ref), out

    ref_state, (want, want_w) = torch_reference(theirs, q, kv, bias)
    mha = nn.MultiheadAttention(8, 2, batch_first=True).double()
    nn.load_torch_state_dict(mha, ref_state)
    g = Graph()
    qt = g.input("q", (2, 3, 8), "float64")
    kt = g.input("kv", (2, 6, 8), "float64")
    out, w = mha(qt, kt, kt, attn_mask=bias, average_attn_weights=False)
    got, got_w = run([out, w], {"q": q, "kv": kv})
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(got_w, want_w, rtol=1e-10, atol=1e-12)


def test_asgrad_batch_first_attention_takes_torch_weights(torch_reference: Reference) -> None:
    x = RNG.normal(size=(2, 4, 8))

    def theirs(torch: Any, x: Any) -> Any:
        ref = torch_eval(torch.nn.MultiheadAttention(8, 2, batch_first=True))
        tx = torch.tensor(x)
        return state(ref), ref(tx, tx, tx)[0]

    ref_state, want = torch_reference(theirs, x)
    mha = nn.SelfAttention(8, 2).double()
    nn.load_torch_state_dict(mha, ref_state)
    (got,) = run(mha(Graph().input("x", (2, 4, 8), "float64")), {"x": x})
    np.testing.assert_allclose(got, want, rtol=1e-10)
    assert set(nn.torch_state_dict(mha)) == set(ref_state)


@pytest.mark.parametrize(
    ("norm_first", "activation"), [(False, "relu"), (True, "gelu"), (False, "gelu")]
)
def test_encoder_layer_matches_torch(
    norm_first: bool, activation: str, torch_reference: Reference
) -> None:
    kwargs = {"dim_feedforward": 32, "norm_first": norm_first, "activation": activation}
    src = RNG.normal(size=(6, 2, 16))
    pad = np.zeros((2, 6), bool)
    pad[0, 4:] = True
    mask = np.triu(np.ones((6, 6), bool), k=1)  # bool, as the padding mask

    def theirs(torch: Any, src: Any, pad: Any, mask: Any) -> Any:
        ref = torch_eval(torch.nn.TransformerEncoderLayer(16, 4, **kwargs))
        out = ref(
            torch.tensor(src),
            src_mask=torch.tensor(mask),
            src_key_padding_mask=torch.tensor(pad),
            is_causal=True,
        )
        return state(ref), out

    ref_state, want = torch_reference(theirs, src, pad, mask)
    layer = nn.TransformerEncoderLayer(16, 4, **kwargs).double().eval()
    nn.load_torch_state_dict(layer, ref_state)
    g = Graph()
    out = layer(
        seq_input(g, "src", (6, 2, 16)), src_mask=mask, src_key_padding_mask=pad, is_causal=True
    )
    (got,) = run(out, {"src": src})
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-10)


def test_pytorch_defaults(torch_reference: Reference) -> None:
    def theirs(torch: Any) -> Any:
        ref = torch.nn.TransformerEncoderLayer(16, 4)
        keys = sorted(ref.state_dict())
        full = sorted(torch.nn.Transformer(32, 4, 1, 1, 64).state_dict())
        return ref.linear1.out_features, ref.dropout.p, keys, full

    out_features, p, keys, full = torch_reference(theirs)
    layer = nn.TransformerEncoderLayer(16, 4)
    assert layer.linear1.out_features == out_features == 2048
    assert layer.dropout.p == p == 0.1
    assert not layer.norm_first
    assert not layer.batch_first
    assert isinstance(layer.activation, nn.ReLU)
    assert set(nn.torch_state_dict(layer)) == set(keys)
    model = nn.Transformer(32, 4, 1, 1, 64)
    assert set(nn.torch_state_dict(model)) == set(full)


def test_full_transformer_matches_torch(torch_reference: Reference) -> None:
    src, tgt = RNG.normal(size=(7, 2, 16)), RNG.normal(size=(5, 2, 16))
    mpad = np.zeros((2, 7), bool)
    mpad[1, 5:] = True
    tmask = nn.Transformer.generate_square_subsequent_mask(5, "float64")

    def theirs(torch: Any, src: Any, tgt: Any, mpad: Any, tmask: Any) -> Any:
        ref = torch_eval(torch.nn.Transformer(16, 4, 2, 2, 32))
        out = ref(
            torch.tensor(src),
            torch.tensor(tgt),
            tgt_mask=torch.tensor(tmask),
            src_key_padding_mask=torch.tensor(mpad),
            memory_key_padding_mask=torch.tensor(mpad),
        )
        return state(ref), out

    ref_state, want = torch_reference(theirs, src, tgt, mpad, tmask)
    model = nn.Transformer(16, 4, 2, 2, 32).double().eval()
    nn.load_torch_state_dict(model, ref_state)
    g = Graph()
    out = model(
        seq_input(g, "src", (7, 2, 16)),
        seq_input(g, "tgt", (5, 2, 16)),
        tgt_mask=tmask,
        src_key_padding_mask=mpad,
        memory_key_padding_mask=mpad,
    )
    (got,) = run(out, {"src": src, "tgt": tgt})
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-10)


def test_encoder_stack_copies_the_layer_and_trains() -> None:
    layer = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.1, rng=0)
    enc = nn.TransformerEncoder(layer, 2, norm=nn.LayerNorm(8))
    w0, w1 = enc.layers[0].linear1.weight, enc.layers[1].linear1.weight
    assert w0 is not w1
    np.testing.assert_array_equal(w0.value, w1.value)  # PyTorch's clones start equal
    assert enc.layers[0].dropout.seed.value != enc.layers[1].dropout.seed.value
    g = Graph()
    out = enc(g.input("src", (4, 3, 8), free=(1,)), is_causal=True)
    step = nn.Adam(enc.parameters(), lr=1e-2).compile((out * out).mean())
    x = RNG.normal(size=(4, 3, 8)).astype("float32")
    first = float(step(src=x)[0])
    for _ in range(5):
        last = float(step(src=x)[0])
    assert last < first


# -- load_torch_state_dict on convolutional and recurrent-free models ---------------------------
def torch_net_class(torch: Any) -> Any:
    """PyTorch's twin of :class:`Net` (a class made where PyTorch is imported)."""

    class TorchNet(torch.nn.Module):  # type: ignore[misc]
        def __init__(self) -> None:
            super().__init__()
            self.emb = torch.nn.Embedding(10, 4)
            self.conv = torch.nn.Conv2d(1, 3, 3, padding=1)
            self.bn = torch.nn.BatchNorm2d(3)
            self.up = torch.nn.ConvTranspose2d(3, 2, 2, stride=2)
            self.fc = torch.nn.Linear(2 * 8 * 8, 5)
            self.ln = torch.nn.LayerNorm(5)

    return TorchNet


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.emb = nn.Embedding(10, 4)
        self.conv = nn.Conv2d(1, 3, 3, padding=1)
        self.bn = nn.BatchNorm2d(3)
        self.up = nn.ConvTranspose2d(3, 2, 2, stride=2)
        self.fc = nn.Linear(2 * 8 * 8, 5)
        self.ln = nn.LayerNorm(5)
        self.drop = nn.Dropout(0.5)

    def forward(self, x: Any) -> Any:
        h = self.up(self.bn(self.conv(x)).relu())
        return self.ln(self.fc(self.drop(h.flatten(1))))


def torch_net(torch: Any) -> Any:
    ref = torch_eval(torch_net_class(torch)())
    with torch.no_grad():
        ref.bn.running_mean.normal_()
        ref.bn.running_var.uniform_(0.5, 2.0)
        ref.bn.num_batches_tracked.fill_(7)
    return ref


def torch_forward(torch: Any, ref: Any, x: np.ndarray) -> Any:
    h = ref.up(ref.bn(ref.conv(torch.tensor(x))).relu())
    return ref.ln(ref.fc(h.flatten(1))).detach()


def net_and_output(torch_reference: Reference) -> tuple[dict[str, Any], np.ndarray, Any]:
    """PyTorch's net (its state dict), an input and its output on it."""
    x = RNG.normal(size=(2, 1, 4, 4))

    def theirs(torch: Any, x: Any) -> Any:
        ref = torch_net(torch)
        return state(ref), torch_forward(torch, ref, x)

    ref_state, want = torch_reference(theirs, x)
    return ref_state, x, want


def check_net(net: Net, ref_state: dict[str, Any], x: np.ndarray, want: Any) -> None:
    net.eval()
    (got,) = run(net(Graph().input("x", (2, 1, 4, 4), "float64")), {"x": x})
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)
    assert int(net.bn.num_batches_tracked.value) == 7
    np.testing.assert_array_equal(net.emb.weight.value, ref_state["emb.weight"])


def test_conv_batchnorm_linear_embedding_layernorm_state_matches_torch(
    torch_reference: Reference,
) -> None:
    ref_state, x, want = net_and_output(torch_reference)
    net = Net().double()
    seed = int(net.drop.seed.value)
    nn.load_torch_state_dict(net, ref_state)
    check_net(net, ref_state, x, want)
    assert int(net.drop.seed.value) == seed  # asgrad's own buffer keeps its value
    exported = nn.torch_state_dict(net)
    assert set(exported) == set(ref_state)
    x2 = RNG.normal(size=(2, 1, 4, 4))

    def theirs(torch: Any, exported: dict[str, Any], ref_state: dict[str, Any], x: Any) -> Any:
        again = torch_eval(torch_net_class(torch)())
        again.load_state_dict({k: torch.from_numpy(v) for k, v in exported.items()})
        ref = torch_eval(torch_net_class(torch)())
        ref.load_state_dict({k: torch.from_numpy(v) for k, v in ref_state.items()})
        return torch_forward(torch, again, x), torch_forward(torch, ref, x)

    from_exported, from_torch = torch_reference(theirs, exported, ref_state, x2)
    np.testing.assert_allclose(from_exported, from_torch, rtol=1e-12)


def test_files_are_read_through_safe_loaders(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")  # reading .pt files needs PyTorch itself
    from safetensors.torch import save_file

    ref = torch_net(torch)
    x = RNG.normal(size=(2, 1, 4, 4))
    want = torch_forward(torch, ref, x).numpy()
    ref_state = {k: v.numpy() for k, v in state(ref).items()}
    pt, st = tmp_path / "net.pt", tmp_path / "net.safetensors"
    torch.save({"model": ref.state_dict(), "epoch": 3}, pt)
    save_file({k: v.contiguous() for k, v in ref.state_dict().items()}, str(st))
    for path, key in ((pt, "model"), (st, None)):
        net = Net().double()
        nn.load_torch_state_dict(net, path, key=key)
        check_net(net, ref_state, x, want)
    torch.save(ref, tmp_path / "whole.pt")  # a pickled module: refused by weights_only
    with pytest.raises(UnsafeCheckpointError, match="holds more than tensors"):
        nn.load_torch_state_dict(Net().double(), tmp_path / "whole.pt")


def test_mismatches_are_reported_in_pytorch_names(torch_reference: Reference) -> None:
    loaded, _, _ = net_and_output(torch_reference)
    partial = dict(loaded)
    del partial["fc.bias"]
    partial["extra.weight"] = np.zeros(2)
    with pytest.raises(StateMismatchError, match=r"missing: fc\.bias.*unexpected: extra\.weight"):
        nn.load_torch_state_dict(Net().double(), partial)
    net = Net().double()
    before = net.fc.bias.value.copy()
    nn.load_torch_state_dict(net, partial, strict=False)
    np.testing.assert_array_equal(net.fc.bias.value, before)
    np.testing.assert_array_equal(net.fc.weight.value, partial["fc.weight"].T)
    with pytest.raises(StateMismatchError, match="pass key='model'"):
        nn.load_torch_state_dict(Net().double(), {"model": partial})


def test_tied_decoder_weight_loads_from_torch(torch_reference: Reference) -> None:
    ids = np.array([[1, 2, 9]])

    def theirs(torch: Any, ids: Any) -> Any:
        class TorchTied(torch.nn.Module):  # type: ignore[misc]
            def __init__(self) -> None:
                super().__init__()
                self.encoder = torch.nn.Embedding(10, 4)
                self.decoder = torch.nn.Linear(4, 10)
                self.decoder.weight = self.encoder.weight

        ref = torch_eval(TorchTied())
        return state(ref), ref.decoder(ref.encoder(torch.tensor(ids))).detach()

    class Tied(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.encoder = nn.Embedding(10, 4)
            self.decoder = nn.Linear(4, 10)
            self.decoder.weight = self.encoder.weight

    ref_state, want = torch_reference(theirs, ids)
    model = Tied().double()
    nn.load_torch_state_dict(model, ref_state)
    (got,) = run(model.decoder(model.encoder(Graph().input("ids", (1, 3), "int64"))), {"ids": ids})
    np.testing.assert_allclose(got, want, rtol=1e-12)
