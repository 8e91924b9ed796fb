"""Layers."""

from asgrad.nn.layers.activation import (
    ELU,
    GELU,
    Flatten,
    Identity,
    LeakyReLU,
    LogSoftmax,
    ReLU,
    Sigmoid,
    SiLU,
    Softmax,
    Softplus,
    Tanh,
)
from asgrad.nn.layers.activation_more import (
    CELU,
    GLU,
    SELU,
    Hardshrink,
    Hardsigmoid,
    Hardswish,
    Hardtanh,
    LogSigmoid,
    Mish,
    PReLU,
    ReLU6,
    Softmin,
    Softshrink,
    Softsign,
    Tanhshrink,
    Threshold,
)
from asgrad.nn.layers.attention import MultiHeadAttention
from asgrad.nn.layers.container import ModuleList, Sequential
from asgrad.nn.layers.conv import Conv2d, ConvTranspose2d
from asgrad.nn.layers.dropout import Dropout
from asgrad.nn.layers.embedding import Embedding
from asgrad.nn.layers.feedforward import FeedForward
from asgrad.nn.layers.linear import Linear
from asgrad.nn.layers.normalization import BatchNorm1d, BatchNorm2d, LayerNorm
from asgrad.nn.layers.normalization_more import (
    CosineSimilarity,
    GroupNorm,
    InstanceNorm1d,
    InstanceNorm2d,
    InstanceNorm3d,
    PairwiseDistance,
    RMSNorm,
)
from asgrad.nn.layers.pooling import AdaptiveAvgPool2d, AvgPool2d, GlobalAvgPool2d, MaxPool2d
from asgrad.nn.layers.positional import (
    ALiBi,
    LearnedPositionalEncoding,
    RoPE,
    SinusoidalPositionalEncoding,
)
from asgrad.nn.layers.transformer import TransformerBlock

__all__ = [
    "CELU",
    "ELU",
    "GELU",
    "GLU",
    "SELU",
    "ALiBi",
    "AdaptiveAvgPool2d",
    "AvgPool2d",
    "BatchNorm1d",
    "BatchNorm2d",
    "Conv2d",
    "ConvTranspose2d",
    "CosineSimilarity",
    "Dropout",
    "Embedding",
    "FeedForward",
    "Flatten",
    "GlobalAvgPool2d",
    "GroupNorm",
    "Hardshrink",
    "Hardsigmoid",
    "Hardswish",
    "Hardtanh",
    "Identity",
    "InstanceNorm1d",
    "InstanceNorm2d",
    "InstanceNorm3d",
    "LayerNorm",
    "LeakyReLU",
    "LearnedPositionalEncoding",
    "Linear",
    "LogSigmoid",
    "LogSoftmax",
    "MaxPool2d",
    "Mish",
    "ModuleList",
    "MultiHeadAttention",
    "PReLU",
    "PairwiseDistance",
    "RMSNorm",
    "ReLU",
    "ReLU6",
    "RoPE",
    "Sequential",
    "SiLU",
    "Sigmoid",
    "SinusoidalPositionalEncoding",
    "Softmax",
    "Softmin",
    "Softplus",
    "Softshrink",
    "Softsign",
    "Tanh",
    "Tanhshrink",
    "Threshold",
    "TransformerBlock",
]
