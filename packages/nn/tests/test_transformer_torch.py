"""PyTorch's transformer modules and checkpoints, checked against PyTorch.

Each test builds the PyTorch module, loads its ``state_dict`` into the asgrad module
of the same name with ``load_torch_state_dict``, and compares outputs in float64.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from asgrad import nn
from asgrad.nn.errors import StateMismatchError, UnsafeCheckpointError
from asgrad.tensor import Graph, evaluate

torch = pytest.importorskip("torch")
# PyTorch's own advice about its fast paths, which these float64 comparisons do not use.
pytestmark = pytest.mark.filterwarnings("ignore:enable_nested_tensor is True:UserWarning")

RNG = np.random.default_rng(0)


def run(outputs: Any, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    return evaluate(outputs if isinstance(outputs, list) else [outputs], feeds)


def torch_eval(module: Any) -> Any:
    torch.manual_seed(0)
    return module.double().eval()


def seq_input(g: Graph, name: str, shape: tuple[int, ...], batch_axis: int = 1) -> Any:
    return g.input(name, shape, "float64", free=(batch_axis,))


def test_multihead_attention_sequence_first_with_masks_matches_torch() -> None:
    ref = torch_eval(torch.nn.MultiheadAttention(16, 4))
    mha = nn.MultiheadAttention(16, 4).double()
    nn.load_torch_state_dict(mha, ref.state_dict())
    assert set(mha.state_dict()) >= {"in_proj_weight", "in_proj_bias", "out_proj.weight"}
    x = RNG.normal(size=(5, 3, 16))
    pad = np.zeros((3, 5), bool)
    pad[1, 3:] = True
    causal = np.triu(np.ones((5, 5), bool), k=1)
    g = Graph()
    xt = seq_input(g, "x", (5, 3, 16))
    out, weights = mha(xt, xt, xt, key_padding_mask=pad, attn_mask=causal)
    got, got_w = run([out, weights], {"x": x})
    tx = torch.tensor(x)
    want, want_w = ref(
        tx, tx, tx, key_padding_mask=torch.tensor(pad), attn_mask=torch.tensor(causal)
    )
    np.testing.assert_allclose(got, want.detach().numpy(), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(got_w, want_w.detach().numpy(), rtol=1e-10, atol=1e-12)


def test_cross_attention_batch_first_per_head_weights_and_float_mask() -> None:
    ref = torch_eval(torch.nn.MultiheadAttention(8, 2, batch_first=True))
    mha = nn.MultiheadAttention(8, 2, batch_first=True).double()
    nn.load_torch_state_dict(mha, ref.state_dict())
    q, kv = RNG.normal(size=(2, 3, 8)), RNG.normal(size=(2, 6, 8))
    bias = RNG.normal(size=(2 * 2, 3, 6))  # (N * heads, L, S), added
    g = Graph()
    qt = g.input("q", (2, 3, 8), "float64")
    kt = g.input("kv", (2, 6, 8), "float64")
    out, w = mha(qt, kt, kt, attn_mask=bias, average_attn_weights=False)
    got, got_w = run([out, w], {"q": q, "kv": kv})
    tq, tkv = torch.tensor(q), torch.tensor(kv)
    want, want_w = ref(tq, tkv, tkv, attn_mask=torch.tensor(bias), average_attn_weights=False)
    np.testing.assert_allclose(got, want.detach().numpy(), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(got_w, want_w.detach().numpy(), rtol=1e-10, atol=1e-12)


def test_asgrad_batch_first_attention_takes_torch_weights() -> None:
    ref = torch_eval(torch.nn.MultiheadAttention(8, 2, batch_first=True))
    mha = nn.SelfAttention(8, 2).double()
    nn.load_torch_state_dict(mha, ref.state_dict())
    x = RNG.normal(size=(2, 4, 8))
    (got,) = run(mha(Graph().input("x", (2, 4, 8), "float64")), {"x": x})
    tx = torch.tensor(x)
    np.testing.assert_allclose(got, ref(tx, tx, tx)[0].detach().numpy(), rtol=1e-10)
    assert set(nn.torch_state_dict(mha)) == set(ref.state_dict())


@pytest.mark.parametrize(
    ("norm_first", "activation"), [(False, "relu"), (True, "gelu"), (False, "gelu")]
)
def test_encoder_layer_matches_torch(norm_first: bool, activation: str) -> None:
    kwargs = {"dim_feedforward": 32, "norm_first": norm_first, "activation": activation}
    ref = torch_eval(torch.nn.TransformerEncoderLayer(16, 4, **kwargs))
    layer = nn.TransformerEncoderLayer(16, 4, **kwargs).double().eval()
    nn.load_torch_state_dict(layer, ref.state_dict())
    src = RNG.normal(size=(6, 2, 16))
    pad = np.zeros((2, 6), bool)
    pad[0, 4:] = True
    mask = np.triu(np.ones((6, 6), bool), k=1)  # bool, as the padding mask
    g = Graph()
    out = layer(
        seq_input(g, "src", (6, 2, 16)), src_mask=mask, src_key_padding_mask=pad, is_causal=True
    )
    (got,) = run(out, {"src": src})
    want = ref(
        torch.tensor(src),
        src_mask=torch.tensor(mask),
        src_key_padding_mask=torch.tensor(pad),
        is_causal=True,
    )
    np.testing.assert_allclose(got, want.detach().numpy(), rtol=1e-9, atol=1e-10)


def test_pytorch_defaults() -> None:
    layer = nn.TransformerEncoderLayer(16, 4)
    ref = torch.nn.TransformerEncoderLayer(16, 4)
    assert layer.linear1.out_features == ref.linear1.out_features == 2048
    assert layer.dropout.p == ref.dropout.p == 0.1
    assert not layer.norm_first
    assert not layer.batch_first
    assert isinstance(layer.activation, nn.ReLU)
    assert set(nn.torch_state_dict(layer)) == set(ref.state_dict())
    model = nn.Transformer(32, 4, 1, 1, 64)
    assert set(nn.torch_state_dict(model)) == set(
        torch.nn.Transformer(32, 4, 1, 1, 64).state_dict()
    )


def test_full_transformer_matches_torch() -> None:
    ref = torch_eval(torch.nn.Transformer(16, 4, 2, 2, 32))
    model = nn.Transformer(16, 4, 2, 2, 32).double().eval()
    nn.load_torch_state_dict(model, ref.state_dict())
    src, tgt = RNG.normal(size=(7, 2, 16)), RNG.normal(size=(5, 2, 16))
    mpad = np.zeros((2, 7), bool)
    mpad[1, 5:] = True
    tmask = nn.Transformer.generate_square_subsequent_mask(5, "float64")
    g = Graph()
    out = model(
        seq_input(g, "src", (7, 2, 16)),
        seq_input(g, "tgt", (5, 2, 16)),
        tgt_mask=tmask,
        src_key_padding_mask=mpad,
        memory_key_padding_mask=mpad,
    )
    (got,) = run(out, {"src": src, "tgt": tgt})
    want = ref(
        torch.tensor(src),
        torch.tensor(tgt),
        tgt_mask=torch.tensor(tmask),
        src_key_padding_mask=torch.tensor(mpad),
        memory_key_padding_mask=torch.tensor(mpad),
    )
    np.testing.assert_allclose(got, want.detach().numpy(), rtol=1e-9, atol=1e-10)


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
class TorchNet(torch.nn.Module):  # type: ignore[misc]
    def __init__(self) -> None:
        super().__init__()
        self.emb = torch.nn.Embedding(10, 4)
        self.conv = torch.nn.Conv2d(1, 3, 3, padding=1)
        self.bn = torch.nn.BatchNorm2d(3)
        self.up = torch.nn.ConvTranspose2d(3, 2, 2, stride=2)
        self.fc = torch.nn.Linear(2 * 8 * 8, 5)
        self.ln = torch.nn.LayerNorm(5)


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


def torch_net() -> Any:
    ref = torch_eval(TorchNet())
    with torch.no_grad():
        ref.bn.running_mean.normal_()
        ref.bn.running_var.uniform_(0.5, 2.0)
        ref.bn.num_batches_tracked.fill_(7)
    return ref


def torch_forward(ref: Any, x: np.ndarray) -> np.ndarray:
    h = ref.up(ref.bn(ref.conv(torch.tensor(x))).relu())
    return ref.ln(ref.fc(h.flatten(1))).detach().numpy()  # type: ignore[no-any-return]


def check_net(net: Net, ref: Any) -> None:
    x = RNG.normal(size=(2, 1, 4, 4))
    net.eval()
    (got,) = run(net(Graph().input("x", (2, 1, 4, 4), "float64")), {"x": x})
    np.testing.assert_allclose(got, torch_forward(ref, x), rtol=1e-10, atol=1e-12)
    assert int(net.bn.num_batches_tracked.value) == 7
    np.testing.assert_array_equal(net.emb.weight.value, ref.emb.weight.detach().numpy())


def test_conv_batchnorm_linear_embedding_layernorm_state_matches_torch() -> None:
    ref, net = torch_net(), Net().double()
    seed = int(net.drop.seed.value)
    nn.load_torch_state_dict(net, ref.state_dict())
    check_net(net, ref)
    assert int(net.drop.seed.value) == seed  # asgrad's own buffer keeps its value
    exported = nn.torch_state_dict(net)
    assert set(exported) == set(ref.state_dict())
    again = TorchNet().double()
    again.load_state_dict({k: torch.from_numpy(v) for k, v in exported.items()})
    x = RNG.normal(size=(2, 1, 4, 4))
    np.testing.assert_allclose(torch_forward(again.eval(), x), torch_forward(ref, x), rtol=1e-12)


def test_files_are_read_through_safe_loaders(tmp_path: Path) -> None:
    from safetensors.torch import save_file

    ref = torch_net()
    pt, st = tmp_path / "net.pt", tmp_path / "net.safetensors"
    torch.save({"model": ref.state_dict(), "epoch": 3}, pt)
    save_file({k: v.contiguous() for k, v in ref.state_dict().items()}, str(st))
    for path, key in ((pt, "model"), (st, None)):
        net = Net().double()
        nn.load_torch_state_dict(net, path, key=key)
        check_net(net, ref)
    torch.save(ref, tmp_path / "whole.pt")  # a pickled module: refused by weights_only
    with pytest.raises(UnsafeCheckpointError, match="holds more than tensors"):
        nn.load_torch_state_dict(Net().double(), tmp_path / "whole.pt")


def test_mismatches_are_reported_in_pytorch_names() -> None:
    state = dict(torch_net().state_dict())
    del state["fc.bias"]
    state["extra.weight"] = torch.zeros(2)
    with pytest.raises(StateMismatchError, match=r"missing: fc\.bias.*unexpected: extra\.weight"):
        nn.load_torch_state_dict(Net().double(), state)
    net = Net().double()
    before = net.fc.bias.value.copy()
    nn.load_torch_state_dict(net, state, strict=False)
    np.testing.assert_array_equal(net.fc.bias.value, before)
    np.testing.assert_array_equal(net.fc.weight.value, state["fc.weight"].numpy().T)
    with pytest.raises(StateMismatchError, match="pass key='model'"):
        nn.load_torch_state_dict(Net().double(), {"model": state})


def test_tied_decoder_weight_loads_from_torch() -> None:
    class TorchTied(torch.nn.Module):  # type: ignore[misc]
        def __init__(self) -> None:
            super().__init__()
            self.encoder = torch.nn.Embedding(10, 4)
            self.decoder = torch.nn.Linear(4, 10)
            self.decoder.weight = self.encoder.weight

    class Tied(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.encoder = nn.Embedding(10, 4)
            self.decoder = nn.Linear(4, 10)
            self.decoder.weight = self.encoder.weight

    ref, model = torch_eval(TorchTied()), Tied().double()
    nn.load_torch_state_dict(model, ref.state_dict())
    ids = np.array([[1, 2, 9]])
    (got,) = run(model.decoder(model.encoder(Graph().input("ids", (1, 3), "int64"))), {"ids": ids})
    want = ref.decoder(ref.encoder(torch.tensor(ids))).detach().numpy()
    np.testing.assert_allclose(got, want, rtol=1e-12)
