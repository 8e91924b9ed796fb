"""PyTorch's module idioms, and weight tying.

Two models in one graph, a batch norm called twice, ``inplace`` flags, ``apply``,
``.double()`` / ``.to(dtype)``, and one Parameter shared by two modules.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from asgrad import nn
from asgrad.nn import init
from asgrad.tensor import (
    ArgumentError,
    Graph,
    NameConflictError,
    ShapeError,
    Tensor,
    evaluate,
)


class Net(nn.Module):
    def __init__(self, n_in: int, n_out: int, seed: int) -> None:
        super().__init__()
        self.main = nn.Sequential(nn.Linear(n_in, n_out, rng=seed), nn.BatchNorm1d(n_out))

    def forward(self, x: Tensor) -> Tensor:
        out = self.main(x)
        return out


# -- item 1: parameters of two modules never collide ----------------------------------------
def test_two_models_with_the_same_dotted_names_train_in_one_graph_and_one_optimizer() -> None:
    net_g, net_d = Net(4, 3, 0), Net(3, 1, 1)
    g = Graph()
    noise = g.input("noise", (8, 4))
    out = net_d(net_g(noise))
    names = [n.name for n in g.parameters]
    assert "main.0.weight" in names
    assert "main.0.weight_2" in names
    opt = nn.Adam(net_g.parameters() + net_d.parameters(), lr=0.01, betas=(0.5, 0.999))
    step = opt.compile((out * out).mean())
    before = net_d.main[0].weight.value.copy()
    step(noise=np.random.default_rng(0).normal(size=(8, 4)).astype("float32"))
    assert not np.array_equal(before, net_d.main[0].weight.value)
    state = opt.state_dict()  # keyed by order where names repeat, as PyTorch's by index
    assert "exp_avg.main.0.weight" in state
    assert "exp_avg.main.0.weight_2" in state
    np.testing.assert_array_equal(state["exp_avg.main.0.weight_2"].shape, (3, 1))
    assert set(net_d.state_dict()) == {
        "main.0.weight",
        "main.0.bias",
        "main.1.weight",
        "main.1.bias",
        "main.1.running_mean",
        "main.1.running_var",
        "main.1.num_batches_tracked",
    }


def test_a_user_chosen_name_twice_says_what_to_do() -> None:
    g = Graph()
    g.input("x", (2, 3))
    with pytest.raises(NameConflictError, match=r"pass another name, e\.g\. g\.input\('x_2'"):
        g.input("x", (2, 3))


# -- item 2: batch norm called twice in one graph ---------------------------------------------
def test_batch_norm_called_twice_updates_the_running_statistics_in_order(
    torch_reference: Callable[..., Any],
) -> None:
    rng = np.random.default_rng(0)
    real, fake = rng.normal(size=(6, 3)), rng.normal(2.0, 3.0, size=(6, 3))
    bn = nn.BatchNorm1d(3, dtype="float64")
    g = Graph()
    a, b = g.input("a", (6, 3), "float64"), g.input("b", (6, 3), "float64")
    loss = (bn(a) * bn(b)).mean()
    step = nn.SGD(bn.parameters(), lr=0.0).compile(loss)
    step(a=real, b=fake)

    def run(torch: Any, real: np.ndarray, fake: np.ndarray) -> Any:
        ref = torch.nn.BatchNorm1d(3).double()
        ref(torch.tensor(real)), ref(torch.tensor(fake))
        return ref.running_mean, ref.running_var

    running_mean, running_var = torch_reference(run, real, fake)
    np.testing.assert_allclose(bn.running_mean.value, running_mean, rtol=1e-12)
    np.testing.assert_allclose(bn.running_var.value, running_var, rtol=1e-12)
    assert int(bn.num_batches_tracked.value) == 2


def test_batch_norm_called_twice_with_cumulative_average_counts_both_batches() -> None:
    bn = nn.BatchNorm1d(2, momentum=None, dtype="float64")
    g = Graph()
    a, b = g.input("a", (4, 2), "float64"), g.input("b", (4, 2), "float64")
    step = nn.SGD(bn.parameters(), lr=0.0).compile((bn(a) + bn(b)).sum())
    xa, xb = np.arange(8.0).reshape(4, 2), 10.0 + np.arange(8.0).reshape(4, 2)
    step(a=xa, b=xb)
    np.testing.assert_allclose(bn.running_mean.value, (xa.mean(0) + xb.mean(0)) / 2)


# -- item 3: PyTorch's module conveniences ------------------------------------------------------
def test_inplace_is_accepted_and_changes_nothing() -> None:
    g = Graph()
    x = g.input("x", (2, 3))
    feed = {"x": np.array([[-1.0, 0.5, 2.0], [3.0, -4.0, 0.0]], "float32")}
    pairs = [
        (nn.ReLU(True), nn.ReLU()),
        (nn.LeakyReLU(0.2, inplace=True), nn.LeakyReLU(0.2)),
        (nn.ELU(1.0, True), nn.ELU(1.0)),
        (nn.SiLU(inplace=True), nn.SiLU()),
        (nn.Dropout(0.5, True).eval(), nn.Dropout(0.5).eval()),
    ]
    for with_flag, without in pairs:
        got, want = evaluate([with_flag(x), without(x)], feed)
        np.testing.assert_array_equal(got, want)
    assert repr(nn.LeakyReLU(0.2, inplace=True)) == "LeakyReLU(negative_slope=0.2, inplace=True)"


def test_apply_visits_children_first_then_the_module() -> None:
    net = nn.Sequential(nn.Linear(2, 3), nn.Sequential(nn.Linear(3, 3)), nn.BatchNorm1d(3))
    seen: list[str] = []
    net.apply(lambda m: seen.append(type(m).__name__))
    assert seen == ["Linear", "Linear", "Sequential", "BatchNorm1d", "Sequential"]

    def weights_init(m: nn.Module) -> None:  # DCGAN's, in asgrad
        if isinstance(m, nn.Linear):
            init.normal_(m.weight, 0.0, 0.02, rng=0)
        elif isinstance(m, nn.BatchNorm1d):
            init.normal_(m.weight, 1.0, 0.02, rng=1)
            init.zeros_(m.bias)

    assert net.apply(weights_init) is net
    assert abs(float(net[0].weight.value.std()) - 0.02) < 0.015
    assert abs(float(net[2].weight.value.mean()) - 1.0) < 0.05


def test_double_casts_in_place_and_keeps_identity() -> None:
    net = nn.Sequential(nn.Linear(2, 3, rng=0), nn.BatchNorm1d(3))
    weight = net[0].weight
    opt = nn.SGD(net.parameters(), lr=0.1)
    assert net.double() is net
    assert net[0].weight is weight
    assert opt.params[0] is weight
    assert {v.dtype for _, v in net.named_variables()} == {"float64", "int64"}
    g = Graph()
    out = net(g.input("x", (4, 2), "float64"))
    assert out.dtype == "float64"
    opt.compile(out.sum())(x=np.ones((4, 2)))
    assert net.to("float32", exact=False)[0].weight.dtype == "float32"


def test_a_lossy_cast_is_refused_unless_asked_and_devices_are_named() -> None:
    net = nn.Linear(2, 2, dtype="float64")
    net.weight.value = np.full((2, 2), 0.1)  # 0.1 is not a float32
    with pytest.raises(ArgumentError, match=r"exact=False"):
        net.float()
    assert net.weight.dtype == "float64"  # nothing changed
    with pytest.raises(ArgumentError, match="backend='gpu'"):
        net.to("cuda")
    with pytest.raises(ArgumentError, match="floating-point"):
        net.to("int32")
    net.float(exact=False)
    assert net.weight.value[0, 0] == np.float32(0.1)


# -- item 6: weight tying --------------------------------------------------------------------------
class Tied(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.encoder = nn.Embedding(10, 4, rng=0)
        self.decoder = nn.Linear(4, 10, rng=1)
        self.decoder.weight = self.encoder.weight  # as PyTorch's word language model

    def forward(self, ids: Tensor) -> Tensor:
        out = self.decoder(self.encoder(ids))
        return out


def test_tied_weights_are_one_parameter_held_once() -> None:
    model = Tied()
    assert [n for n, _ in model.named_parameters()] == ["encoder.weight", "decoder.bias"]
    assert set(model.state_dict()) == {"encoder.weight", "decoder.weight", "decoder.bias"}
    ids = np.array([[1, 2], [3, 9]])
    g = Graph()
    logits = model(g.input("ids", (2, 2), "int64"))
    w = model.encoder.weight.value
    want = w[ids] @ w.T + model.decoder.bias.value
    np.testing.assert_allclose(evaluate(logits, {"ids": ids})[0], want, rtol=1e-6)
    opt = nn.SGD(model.parameters(), lr=1.0)
    assert len(opt.params) == 2
    step = opt.compile(logits.sum())
    step(ids=ids)
    # d(sum)/dW: the embedding rows of the ids, plus every row from the decoder.
    grad = np.zeros_like(w)
    np.add.at(grad, ids, w.sum(axis=0))
    grad += w[ids].reshape(-1, 4).sum(axis=0)
    np.testing.assert_allclose(model.encoder.weight.value, w - grad, rtol=1e-5, atol=1e-5)
    model.load_state_dict(model.state_dict())


def test_a_square_tied_weight_must_say_its_layout() -> None:
    enc, dec = nn.Embedding(4, 4), nn.Linear(4, 4)
    with pytest.raises(ArgumentError, match="tie_weight"):
        dec.weight = enc.weight
    dec.tie_weight(enc.weight, transposed=True)
    assert dec.weight is enc.weight
    assert dec.weight_transposed
    with pytest.raises(ShapeError, match="must be"):
        nn.Linear(4, 3).tie_weight(enc.weight, transposed=True)


def test_a_weight_tied_before_registration_keeps_its_first_name() -> None:
    class Model(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            encoder, decoder = nn.Embedding(10, 4), nn.Linear(4, 10)
            decoder.weight = encoder.weight  # tied before either is registered
            self.encoder = encoder
            self.decoder = decoder

    model = Model()
    assert model.encoder.weight.name == "encoder.weight"
    opt = nn.SGD(model.parameters(), lr=0.1, momentum=0.9)
    opt.slot("momentum_buffer", model.encoder.weight)
    assert "momentum_buffer.encoder.weight" in opt.state_dict()
