"""Layer outputs against independent numpy references and PyTorch; train/eval; errors."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from asgrad.nn import (
    AdaptiveAvgPool2d,
    AvgPool2d,
    BatchNorm1d,
    BatchNorm2d,
    Conv2d,
    ConvTranspose2d,
    Dropout,
    Embedding,
    FeedForward,
    GlobalAvgPool2d,
    LayerNorm,
    Linear,
    MaxPool2d,
    Module,
    ReLU,
    Sequential,
)
from asgrad.tensor import Graph, Tensor, Variable, compile, evaluate
from asgrad.tensor.errors import DTypeError, ShapeError


def rand(*shape: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape)


def run(layer: Module, x: np.ndarray, dtype: str = "float64", **kwargs: Any) -> np.ndarray:
    g = Graph()
    t = g.input("x", x.shape, dtype)
    return evaluate(layer(t, **kwargs), {"x": x})[0]


def value(v: Variable | None) -> np.ndarray:
    assert v is not None
    return v.value


# -- numpy references ---------------------------------------------------------------------
def conv2d_ref(
    x: np.ndarray, w: np.ndarray, b: np.ndarray | None, stride: int, padding: int, groups: int
) -> np.ndarray:
    n, _, h, wd = x.shape
    o, cg, kh, kw = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (padding, padding), (padding, padding)))
    oh, ow = (h + 2 * padding - kh) // stride + 1, (wd + 2 * padding - kw) // stride + 1
    out = np.zeros((n, o, oh, ow))
    og = o // groups
    for oc in range(o):
        grp = oc // og
        for i in range(oh):
            for j in range(ow):
                patch = xp[:, grp * cg : (grp + 1) * cg, i * stride : i * stride + kh,
                           j * stride : j * stride + kw]  # fmt: skip
                out[:, oc, i, j] = (patch * w[oc]).sum(axis=(1, 2, 3))
    return out if b is None else out + b[None, :, None, None]


def pool_ref(x: np.ndarray, k: int, stride: int, fn: Any) -> np.ndarray:
    n, c, h, w = x.shape
    oh, ow = (h - k) // stride + 1, (w - k) // stride + 1
    out = np.zeros((n, c, oh, ow))
    for i in range(oh):
        for j in range(ow):
            out[:, :, i, j] = fn(x[:, :, i * stride : i * stride + k, j * stride : j * stride + k])
    return out


# -- convolution ----------------------------------------------------------------------------
@pytest.mark.parametrize(("stride", "padding", "groups"), [(1, 0, 1), (2, 1, 1), (1, 1, 2)])
def test_conv2d_matches_numpy_reference(stride: int, padding: int, groups: int) -> None:
    conv = Conv2d(4, 6, 3, stride=stride, padding=padding, groups=groups, dtype="float64", rng=0)
    x = rand(2, 4, 7, 6)
    expected = conv2d_ref(x, conv.weight.value, conv.bias.value if conv.bias else None,
                          stride, padding, groups)  # fmt: skip
    np.testing.assert_allclose(run(conv, x), expected, rtol=1e-10, atol=1e-12)


def test_conv2d_default_init_is_pytorchs() -> None:
    conv = Conv2d(8, 16, 3, rng=0)
    bound = 1 / math.sqrt(8 * 9)
    assert conv.weight.shape == (16, 8, 3, 3)
    assert conv.bias is not None
    assert conv.bias.shape == (16,)
    assert np.abs(conv.weight.value).max() <= bound
    assert np.abs(conv.weight.value).max() > 0.9 * bound
    assert np.abs(conv.bias.value).max() <= bound
    tconv = ConvTranspose2d(8, 4, 3, groups=2, rng=0)
    assert tconv.weight.shape == (8, 2, 3, 3)
    assert np.abs(tconv.weight.value).max() <= 1 / math.sqrt(2 * 9)


def test_conv_transpose2d_is_the_adjoint_of_conv2d() -> None:
    # <conv(x), y> == <x, conv_transpose(y)> for the same weight and no bias.
    conv = Conv2d(3, 4, 3, stride=2, padding=1, bias=False, dtype="float64", rng=0)
    tconv = ConvTranspose2d(4, 3, 3, stride=2, padding=1, bias=False, dtype="float64")
    tconv.weight.value = conv.weight.value
    x, y = rand(2, 3, 7, 7), rand(2, 4, 4, 4, seed=1)
    assert run(conv, x).shape == y.shape
    np.testing.assert_allclose((run(conv, x) * y).sum(), (x * run(tconv, y)).sum(), rtol=1e-10)


def test_conv_layers_match_torch(torch_reference: Callable[..., Any]) -> None:
    conv = Conv2d(4, 6, 3, stride=2, padding=1, dilation=2, groups=2, dtype="float64", rng=0)
    tconv = ConvTranspose2d(4, 6, 3, stride=2, padding=1, output_padding=1, groups=2,
                            dtype="float64", rng=1)  # fmt: skip
    x = rand(2, 4, 9, 8)
    for layer, fn, kw in (
        (conv, "conv2d", {"dilation": 2}),
        (tconv, "conv_transpose2d", {"output_padding": 1}),
    ):
        assert layer.bias is not None

        def theirs(torch: Any, x: Any, w: Any, b: Any, fn: str = fn, kw: Any = kw) -> Any:
            return getattr(torch.nn.functional, fn)(
                torch.tensor(x),
                torch.tensor(w),
                torch.tensor(b),
                stride=2,
                padding=1,
                groups=2,
                **kw,
            )

        ref = torch_reference(theirs, x, layer.weight.value, layer.bias.value)
        np.testing.assert_allclose(run(layer, x), ref, rtol=1e-10, atol=1e-12)


def test_conv_shape_errors_name_the_layer_and_the_fix() -> None:
    g = Graph()
    with pytest.raises(ShapeError, match=r"Conv2d\(3, 8\) expects \(N, 3, H, W\).*\[2, 4, 8, 8\]"):
        Conv2d(3, 8, 3)(g.input("x", (2, 4, 8, 8)))
    with pytest.raises(ShapeError, match="expand_dims"):
        Conv2d(3, 8, 3)(g.input("y", (3, 8, 8)))
    with pytest.raises(ShapeError, match="groups=2 must divide"):
        Conv2d(3, 8, 3, groups=2)


# -- pooling ------------------------------------------------------------------------------------
def test_pooling_matches_numpy_reference() -> None:
    x = rand(2, 3, 8, 7)
    np.testing.assert_allclose(run(MaxPool2d(2), x), pool_ref(x, 2, 2, lambda w: w.max((2, 3))))
    np.testing.assert_allclose(
        run(AvgPool2d(3, stride=2), x), pool_ref(x, 3, 2, lambda w: w.mean((2, 3))), rtol=1e-12
    )
    np.testing.assert_allclose(run(GlobalAvgPool2d(), x), x.mean((2, 3)), rtol=1e-12)
    assert run(GlobalAvgPool2d(keepdims=True), x).shape == (2, 3, 1, 1)
    # Adaptive bins as PyTorch: start floor(i H / oh), end ceil((i + 1) H / oh).
    out = run(AdaptiveAvgPool2d((3, 2)), x)
    for i in range(3):
        for j in range(2):
            hs, he = (i * 8) // 3, -((-(i + 1) * 8) // 3)
            ws, we = (j * 7) // 2, -((-(j + 1) * 7) // 2)
            np.testing.assert_allclose(out[:, :, i, j], x[:, :, hs:he, ws:we].mean((2, 3)))


def test_pooling_matches_torch(torch_reference: Callable[..., Any]) -> None:
    x = rand(2, 3, 9, 8)

    def theirs(torch: Any, x: Any) -> list[Any]:
        F = torch.nn.functional
        tx = torch.tensor(x)
        return [
            F.max_pool2d(tx, 3, 2, 1),
            F.avg_pool2d(tx, 3, 2, 1),
            F.avg_pool2d(tx, 3, 2, 1, count_include_pad=False),
            F.adaptive_avg_pool2d(tx, (4, 3)),
        ]

    layers: list[Module] = [
        MaxPool2d(3, stride=2, padding=1),
        AvgPool2d(3, 2, 1),
        AvgPool2d(3, 2, 1, count_include_pad=False),
        AdaptiveAvgPool2d((4, 3)),
    ]
    for layer, ref in zip(layers, torch_reference(theirs, x), strict=True):
        np.testing.assert_allclose(run(layer, x), ref, rtol=1e-12, err_msg=repr(layer))


def test_pooling_errors_and_repr() -> None:
    with pytest.raises(ShapeError, match="at most half the kernel size"):
        MaxPool2d(2, padding=2)
    with pytest.raises(ShapeError, match=r"MaxPool2d expects \(N, C, H, W\)"):
        MaxPool2d(2)(Graph().input("x", (4, 4)))
    assert repr(MaxPool2d(2)) == "MaxPool2d(kernel_size=(2, 2), stride=(2, 2), padding=(0, 0))"


# -- layer norm -------------------------------------------------------------------------------
def test_layer_norm_matches_numpy_and_torch(torch_reference: Callable[..., Any]) -> None:
    ln = LayerNorm(5, eps=1e-5, dtype="float64")
    assert ln.weight is not None
    assert ln.bias is not None
    ln.weight.value, ln.bias.value = rand(5, seed=1), rand(5, seed=2)
    x = rand(2, 3, 5) * 3 + 1
    mean, var = x.mean(-1, keepdims=True), x.var(-1, keepdims=True)
    expected = (x - mean) / np.sqrt(var + 1e-5) * ln.weight.value + ln.bias.value
    np.testing.assert_allclose(run(ln, x), expected, rtol=1e-10, atol=1e-12)
    ref = torch_reference(
        lambda torch, x, w, b: torch.nn.functional.layer_norm(
            torch.tensor(x), (5,), torch.tensor(w), torch.tensor(b)
        ),
        x,
        ln.weight.value,
        ln.bias.value,
    )
    np.testing.assert_allclose(run(ln, x), ref, rtol=1e-10, atol=1e-12)


def test_layer_norm_variants() -> None:
    x = rand(2, 3, 4)
    plain = run(LayerNorm((3, 4), elementwise_affine=False, dtype="float64"), x)
    flat = x.reshape(2, -1)
    expected = (flat - flat.mean(1, keepdims=True)) / np.sqrt(flat.var(1, keepdims=True) + 1e-5)
    np.testing.assert_allclose(plain, expected.reshape(x.shape), rtol=1e-10)
    no_bias = LayerNorm(4, bias=False, dtype="float64")
    assert [n for n, _ in no_bias.named_parameters()] == ["weight"]
    assert run(no_bias, x).shape == x.shape
    with pytest.raises(ShapeError, match=r"LayerNorm\(\[4\]\) got input of shape \[2, 3, 5\]"):
        LayerNorm(4)(Graph().input("x", (2, 3, 5)))


# -- batch norm -----------------------------------------------------------------------------
def bn_train_step(bn: Module, x: np.ndarray) -> np.ndarray:
    g = Graph()
    t = g.input("x", x.shape, "float64")
    y = bn(t)
    return compile([y], g.updates)(x=x)[0]


@pytest.mark.parametrize("momentum", [0.1, 0.3, None])
def test_batch_norm_running_stats_follow_pytorchs_formula(momentum: float | None) -> None:
    bn = BatchNorm2d(3, momentum=momentum, dtype="float64")
    mean, var = np.zeros(3), np.ones(3)
    g = Graph()
    t = g.input("x", (4, 3, 5, 5), "float64")
    step = compile([bn(t)], g.updates)  # one program, several batch sizes
    for i, n in enumerate((4, 2, 6)):
        x = rand(n, 3, 5, 5, seed=i) * (i + 1) + i
        y = step(x=x)[0]
        batch_mean, batch_var = x.mean((0, 2, 3)), x.var((0, 2, 3))
        np.testing.assert_allclose(
            y, (x - batch_mean[:, None, None]) / np.sqrt(batch_var[:, None, None] + 1e-5),
            rtol=1e-9, atol=1e-10,
        )  # fmt: skip
        factor = 1 / (i + 1) if momentum is None else momentum
        unbiased = x.var((0, 2, 3), ddof=1)
        mean = (1 - factor) * mean + factor * batch_mean
        var = (1 - factor) * var + factor * unbiased
    np.testing.assert_allclose(value(bn.running_mean), mean, rtol=1e-12)
    np.testing.assert_allclose(value(bn.running_var), var, rtol=1e-12)
    assert int(value(bn.num_batches_tracked)) == 3


def test_batch_norm_matches_torch_in_train_and_eval(torch_reference: Callable[..., Any]) -> None:
    bn = BatchNorm1d(4, momentum=0.2, dtype="float64")
    assert bn.weight is not None
    assert bn.bias is not None
    bn.weight.value, bn.bias.value = rand(4, seed=5), rand(4, seed=6)
    batches = [rand(8, 4, 3, seed=i) * 2 + 1 for i in range(3)]
    x_eval = rand(5, 4, 3, seed=9)

    def theirs(torch: Any, w: Any, b: Any, batches: list[Any], x_eval: Any) -> Any:
        ref = torch.nn.BatchNorm1d(4, momentum=0.2, dtype=torch.float64)
        with torch.no_grad():
            ref.weight.copy_(torch.tensor(w))
            ref.bias.copy_(torch.tensor(b))
        train = [ref(torch.tensor(x)).detach() for x in batches]
        stats = (ref.running_mean.clone(), ref.running_var.clone())
        ref.eval()
        return train, stats, ref(torch.tensor(x_eval)).detach()

    train, (running_mean, running_var), evaluated = torch_reference(
        theirs, bn.weight.value, bn.bias.value, batches, x_eval
    )
    for x, want in zip(batches, train, strict=True):
        np.testing.assert_allclose(bn_train_step(bn, x), want, rtol=1e-9, atol=1e-10)
    np.testing.assert_allclose(value(bn.running_mean), running_mean, rtol=1e-12)
    np.testing.assert_allclose(value(bn.running_var), running_var, rtol=1e-12)
    bn.eval()
    np.testing.assert_allclose(run(bn, x_eval), evaluated, rtol=1e-9)


def test_batch_norm_eval_uses_running_stats_and_records_no_update() -> None:
    bn = BatchNorm2d(2, dtype="float64")
    bn.eval()
    assert bn.running_mean is not None
    assert bn.running_var is not None
    bn.running_mean.value = np.array([1.0, -2.0])
    bn.running_var.value = np.array([4.0, 0.25])
    x = rand(3, 2, 2, 2)
    g = Graph()
    y = bn(g.input("x", x.shape, "float64"))
    assert not g.updates
    mean = np.array([1.0, -2.0])[:, None, None]
    var = np.array([4.0, 0.25])[:, None, None]
    np.testing.assert_allclose(
        evaluate(y, {"x": x})[0], (x - mean) / np.sqrt(var + 1e-5), rtol=1e-12
    )


def test_batch_norm_without_running_stats_always_uses_the_batch() -> None:
    bn = BatchNorm1d(3, affine=False, track_running_stats=False, dtype="float64").eval()
    assert not list(bn.named_variables())
    x = rand(6, 3)
    np.testing.assert_allclose(run(bn, x), (x - x.mean(0)) / np.sqrt(x.var(0) + 1e-5), rtol=1e-10)


def test_batch_norm_shape_errors() -> None:
    with pytest.raises(ShapeError, match=r"BatchNorm2d\(3\) expects an input of rank 4"):
        BatchNorm2d(3)(Graph().input("x", (2, 3)))
    with pytest.raises(ShapeError, match=r"axis 1 \(channels\) must be 3"):
        BatchNorm1d(3)(Graph().input("x", (2, 4)))


# -- dropout -------------------------------------------------------------------------------------
def test_dropout_training_fresh_mask_every_step() -> None:
    drop = Dropout(0.25, seed=3)
    g = Graph()
    x = g.input("x", (200, 50))
    step = compile([drop(x)], g.updates)
    ones = np.ones((200, 50), np.float32)
    first, second = step(x=ones)[0], step(x=ones)[0]
    for out in (first, second):
        kept = out != 0
        assert abs(kept.mean() - 0.75) < 0.02
        np.testing.assert_allclose(out[kept], 1 / 0.75, rtol=1e-6)
    assert (first != second).any()
    assert int(drop.seed.value) == 5
    # Without the update the mask is a pure function of the seed: reproducible.
    again = evaluate(Dropout(0.25, seed=3)(Graph().input("x", (200, 50))), {"x": ones})[0]
    np.testing.assert_array_equal(again, first)


def test_dropout_eval_and_zero_p_are_identity() -> None:
    x = Graph().input("x", (3, 4))
    assert Dropout(0.5).eval()(x) is x
    assert Dropout(0.0)(x) is x
    assert not x.graph.updates
    with pytest.raises(ValueError, match=r"in \[0, 1\)"):
        Dropout(1.0)


def test_dropout_layers_get_different_masks() -> None:
    model = Sequential(Dropout(0.5), Dropout(0.5))
    g = Graph()
    x = g.input("x", (64, 64))
    a, b = model[0](x), model[1](x)
    ma, mb = evaluate([a, b], {"x": np.ones((64, 64), np.float32)})
    assert (ma != mb).any()


def test_train_eval_switch_dropout_and_batch_norm_in_a_model() -> None:
    model = Sequential(
        Linear(4, 8, rng=0), BatchNorm1d(8), ReLU(), Dropout(0.5), Linear(8, 2, rng=1)
    )
    x = rand(16, 4).astype(np.float32)

    def outputs() -> tuple[np.ndarray, dict[Any, Tensor]]:
        g = Graph()
        y = model(g.input("x", x.shape))
        return evaluate(y, {"x": x})[0], dict(g.updates)

    train_out, train_updates = outputs()
    assert len(train_updates) == 4  # running mean, var, count and the dropout seed
    model.eval()
    assert not any(m.training for _, m in model.named_modules())
    eval_out, eval_updates = outputs()
    assert not eval_updates
    np.testing.assert_array_equal(outputs()[0], eval_out)  # deterministic
    assert not np.allclose(train_out, eval_out)
    model.train()
    assert all(m.training for _, m in model.named_modules())


# -- embedding and feed-forward ----------------------------------------------------------------
def test_embedding_lookup_and_init() -> None:
    emb = Embedding(50, 400, rng=0)
    assert abs(emb.weight.value.std() - 1.0) < 0.02
    assert abs(Embedding(50, 400, std=0.02, rng=0).weight.value.std() - 0.02) < 0.001
    ids = np.array([[1, 4, 4], [0, 49, 2]])
    g = Graph()
    out = evaluate(emb(g.input("ids", ids.shape, "int64")), {"ids": ids})[0]
    np.testing.assert_array_equal(out, emb.weight.value[ids])
    with pytest.raises(DTypeError, match="integer ids"):
        emb(Graph().input("x", (2, 3)))


def test_embedding_matches_torch(torch_reference: Callable[..., Any]) -> None:
    emb = Embedding(10, 3, dtype="float64", rng=0)
    ids = np.array([[1, 2, 9]])
    ref = torch_reference(
        lambda torch, ids, w: torch.nn.functional.embedding(torch.tensor(ids), torch.tensor(w)),
        ids,
        emb.weight.value,
    )
    out = evaluate(emb(Graph().input("ids", ids.shape, "int64")), {"ids": ids})[0]
    np.testing.assert_array_equal(out, ref)


@pytest.mark.parametrize("activation", ["gelu", "relu", "silu", "tanh"])
def test_feed_forward_matches_numpy(activation: str) -> None:
    erf = np.vectorize(math.erf)
    acts: dict[str, Any] = {
        "gelu": lambda h: 0.5 * h * (1 + erf(h / np.sqrt(2))),
        "relu": lambda h: np.maximum(h, 0),
        "silu": lambda h: h / (1 + np.exp(-h)),
        "tanh": np.tanh,
    }
    ff = FeedForward(4, activation=activation, dtype="float64", rng=0)
    assert ff.fc1.weight.shape == (4, 16)
    x = rand(2, 3, 4)
    h = acts[activation](x @ ff.fc1.weight.value + value(ff.fc1.bias))
    expected = h @ ff.fc2.weight.value + value(ff.fc2.bias)
    np.testing.assert_allclose(run(ff, x), expected, rtol=1e-9, atol=1e-12)


def test_feed_forward_rejects_unknown_activation() -> None:
    with pytest.raises(ValueError, match=r"unknown activation 'swish'.*gelu"):
        FeedForward(4, activation="swish")
