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
from asgrad.nn.layers.attention import MultiHeadAttention
from asgrad.nn.layers.container import ModuleList, Sequential
from asgrad.nn.layers.conv import Conv2d, ConvTranspose2d
from asgrad.nn.layers.dropout import Dropout
from asgrad.nn.layers.embedding import Embedding
from asgrad.nn.layers.feedforward import FeedForward
from asgrad.nn.layers.linear import Linear
from asgrad.nn.layers.normalization import BatchNorm1d, BatchNorm2d, LayerNorm
from asgrad.nn.layers.pooling import AdaptiveAvgPool2d, AvgPool2d, GlobalAvgPool2d, MaxPool2d
from asgrad.nn.layers.positional import (
    ALiBi,
    LearnedPositionalEncoding,
    RoPE,
    SinusoidalPositionalEncoding,
)
from asgrad.nn.layers.recurrent import GRU, LSTM, RNN
from asgrad.nn.layers.recurrent_cells import GRUCell, LSTMCell, RNNCell
from asgrad.nn.layers.transformer import TransformerBlock

__all__ = [
    "ELU",
    "GELU",
    "GRU",
    "LSTM",
    "RNN",
    "ALiBi",
    "AdaptiveAvgPool2d",
    "AvgPool2d",
    "BatchNorm1d",
    "BatchNorm2d",
    "Conv2d",
    "ConvTranspose2d",
    "Dropout",
    "Embedding",
    "FeedForward",
    "Flatten",
    "GRUCell",
    "GlobalAvgPool2d",
    "Identity",
    "LSTMCell",
    "LayerNorm",
    "LeakyReLU",
    "LearnedPositionalEncoding",
    "Linear",
    "LogSoftmax",
    "MaxPool2d",
    "ModuleList",
    "MultiHeadAttention",
    "RNNCell",
    "ReLU",
    "RoPE",
    "Sequential",
    "SiLU",
    "Sigmoid",
    "SinusoidalPositionalEncoding",
    "Softmax",
    "Softplus",
    "Tanh",
    "TransformerBlock",
]
