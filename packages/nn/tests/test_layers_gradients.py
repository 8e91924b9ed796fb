"""Every layer's parameters (and inputs) pass ``gradient_check`` in float64.

``gradient_check`` differentiates with respect to graph inputs, so the helper feeds
each parameter as an input: it pre-binds the parameter's Variable to that input
node, and the layer's ``graph.bind(parameter)`` returns it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from asgrad.autograd import gradient_check
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
    LearnedPositionalEncoding,
    MaxPool2d,
    Module,
    RoPE,
    SelfAttention,
    SinusoidalPositionalEncoding,
    TransformerBlock,
)
from asgrad.tensor import Tensor

F64 = "float64"


def check_layer(
    layer: Module,
    inputs: list[np.ndarray],
    call: Callable[..., Tensor] | None = None,
    **tolerances: Any,
) -> None:
    """gradient_check of ``call(layer, *inputs)`` w.r.t. float inputs and all parameters."""
    params = layer.parameters()
    assert all(p.dtype == F64 for p in params)
    n = len(inputs)

    def build(*ts: Tensor) -> Tensor:
        g = ts[0].graph
        for p, t in zip(params, ts[n:], strict=True):
            g._variables[id(p)] = t.node  # the layer reads this input as the parameter
        out = call(layer, *ts[:n]) if call is not None else layer(*ts[:n])
        assert isinstance(out, Tensor)
        return out

    gradient_check(build, [*inputs, *(p.value for p in params)], **tolerances)


def rand(*shape: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape)


@pytest.mark.parametrize(
    "layer",
    [
        Conv2d(2, 4, 3, padding=1, dtype=F64, rng=0),
        Conv2d(4, 4, 3, stride=2, dilation=1, groups=2, bias=False, dtype=F64, rng=1),
        Conv2d(2, 3, (2, 3), stride=(1, 2), padding=(1, 0), dilation=(2, 1), dtype=F64, rng=2),
    ],
    ids=["basic", "groups-stride", "rect-dilated"],
)
def test_conv2d_gradients(layer: Conv2d) -> None:
    check_layer(layer, [rand(2, layer.in_channels, 5, 5)])


def test_conv_transpose2d_gradients() -> None:
    layer = ConvTranspose2d(4, 2, 3, stride=2, padding=1, output_padding=1, groups=2, dtype=F64)
    check_layer(layer, [rand(2, 4, 3, 3)])


@pytest.mark.parametrize(
    "layer",
    [
        MaxPool2d(2),
        MaxPool2d(3, stride=2, padding=1),
        AvgPool2d(3, stride=2, padding=1, count_include_pad=False),
        AdaptiveAvgPool2d((2, 3)),
        GlobalAvgPool2d(),
    ],
    ids=["max", "max-padded", "avg", "adaptive", "global"],
)
def test_pooling_gradients(layer: Module) -> None:
    check_layer(layer, [rand(2, 3, 6, 7)])


def test_layer_norm_gradients() -> None:
    layer = LayerNorm(6, dtype=F64)
    assert layer.weight is not None
    assert layer.bias is not None
    layer.weight.value = 1.0 + 0.1 * rand(6, seed=1)
    layer.bias.value = 0.1 * rand(6, seed=2)
    check_layer(layer, [rand(3, 4, 6)])


def test_layer_norm_over_two_axes_gradients() -> None:
    check_layer(LayerNorm((3, 4), dtype=F64), [rand(2, 3, 4)])


@pytest.mark.parametrize("training", [True, False])
def test_batch_norm_gradients(training: bool) -> None:
    bn2 = BatchNorm2d(3, dtype=F64)
    bn2.train(training)
    assert bn2.running_mean is not None
    bn2.running_mean.value = rand(3, seed=3)
    check_layer(bn2, [rand(4, 3, 3, 3)])
    check_layer(BatchNorm1d(3, dtype=F64).train(training), [rand(5, 3)])
    check_layer(BatchNorm1d(2, dtype=F64).train(training), [rand(4, 2, 3)])


def test_dropout_gradient_in_training() -> None:
    check_layer(Dropout(0.3, seed=7), [rand(4, 5)])


def test_embedding_gradients() -> None:
    ids = np.array([[0, 3, 3], [4, 1, 0]])
    check_layer(Embedding(5, 3, dtype=F64, rng=0), [ids])


def test_feed_forward_gradients() -> None:
    check_layer(FeedForward(4, 6, activation="tanh", dtype=F64, rng=0), [rand(2, 3, 4)])
    check_layer(FeedForward(4, 6, dtype=F64, rng=1), [rand(2, 3, 4)])


def test_positional_encoding_gradients() -> None:
    check_layer(LearnedPositionalEncoding(6, 4, dtype=F64, rng=0), [rand(2, 3, 4)])
    check_layer(
        LearnedPositionalEncoding(6, 4, dtype=F64, rng=0),
        [rand(2, 3, 4)],
        call=lambda layer, x: layer(x, offset=2),
    )
    check_layer(SinusoidalPositionalEncoding(4, max_len=8), [rand(2, 3, 4)])
    check_layer(RoPE(4, max_len=8), [rand(2, 2, 3, 4)], call=lambda layer, x: layer(x, offset=1))


@pytest.mark.parametrize(
    "kwargs",
    [{}, {"causal": True, "position": "rope"}, {"causal": True, "position": "alibi"}],
    ids=["plain", "rope", "alibi"],
)
def test_attention_gradients(kwargs: dict[str, Any]) -> None:
    mha = SelfAttention(4, 2, dtype=F64, rng=0, **kwargs)
    check_layer(mha, [rand(2, 3, 4)], rtol=1e-4, atol=1e-6)


def test_attention_gradients_with_padding_and_cross_attention() -> None:
    mha = SelfAttention(4, 2, dtype=F64, rng=0)
    pad = np.array([[False, False, True], [False, False, False]])
    check_layer(
        mha,
        [rand(2, 2, 4), rand(2, 3, 4, seed=1), pad],
        call=lambda layer, q, kv, m: layer(q, kv, kv, key_padding_mask=m),
        rtol=1e-4,
        atol=1e-6,
    )


def test_transformer_block_gradients() -> None:
    block = TransformerBlock(4, 2, hidden_dim=6, causal=True, dtype=F64, rng=0)
    check_layer(block, [rand(2, 3, 4)], rtol=1e-4, atol=1e-6)
