"""Activation functions in PyTorch's names and signatures (``torch.nn.functional``).

Each is the Tensor method of the same name; ``inplace`` is accepted so that PyTorch
code runs unchanged, and ignored: a graph value is never overwritten (every op makes
a new value, and the compiled program reuses memory by itself).

>>> from asgrad.tensor import Graph, evaluate
>>> from asgrad.tensor.api.nn_activation import hardtanh, mish
>>> x = Graph().input("x", (3,))
>>> [round(float(v), 4) for v in evaluate([mish(x)], {"x": [-1.0, 0.0, 2.0]})[0]]
[-0.3034, 0.0, 1.944]
>>> evaluate([hardtanh(x, -0.5, 0.5)], {"x": [-1.0, 0.25, 2.0]})[0].tolist()
[-0.5, 0.25, 0.5]
"""

from __future__ import annotations

from asgrad.tensor.api.tensor import Tensor
from asgrad.tensor.errors import ArgumentError

__all__ = [
    "celu",
    "elu",
    "gelu",
    "glu",
    "hardshrink",
    "hardsigmoid",
    "hardswish",
    "hardtanh",
    "leaky_relu",
    "log_softmax",
    "logsigmoid",
    "mish",
    "prelu",
    "relu",
    "relu6",
    "selu",
    "sigmoid",
    "silu",
    "softmax",
    "softmin",
    "softplus",
    "softshrink",
    "softsign",
    "tanh",
    "tanhshrink",
    "threshold",
]


def relu(x: Tensor, inplace: bool = False) -> Tensor:
    """``max(x, 0)``.

    >>> from asgrad.tensor import Graph, evaluate
    >>> from asgrad.tensor.api.nn_activation import relu
    >>> x = Graph().input("x", (3,))
    >>> evaluate(relu(x), {"x": [-1.0, 0.0, 2.0]})[0].tolist()
    [0.0, 0.0, 2.0]
    """
    return x.relu()


def relu6(x: Tensor, inplace: bool = False) -> Tensor:
    """``min(max(x, 0), 6)``.

    >>> from asgrad.tensor import Graph, evaluate
    >>> from asgrad.tensor.api.nn_activation import relu6
    >>> x = Graph().input("x", (3,))
    >>> evaluate(relu6(x), {"x": [-1.0, 3.0, 8.0]})[0].tolist()
    [0.0, 3.0, 6.0]
    """
    return x.relu6()


def leaky_relu(x: Tensor, negative_slope: float = 0.01, inplace: bool = False) -> Tensor:
    """``x`` if ``x > 0`` else ``negative_slope * x``.

    >>> from asgrad.tensor import Graph, evaluate
    >>> from asgrad.tensor.api.nn_activation import leaky_relu
    >>> x = Graph().input("x", (3,))
    >>> evaluate(leaky_relu(x, 0.1), {"x": [-1.0, 0.0, 2.0]})[0].tolist()
    [-0.1..., 0.0, 2.0]
    """
    return x.leaky_relu(negative_slope)


def elu(x: Tensor, alpha: float = 1.0, inplace: bool = False) -> Tensor:
    """``x`` if ``x > 0`` else ``alpha * (exp(x) - 1)``.

    >>> from asgrad.tensor import Graph, evaluate
    >>> from asgrad.tensor.api.nn_activation import elu
    >>> x = Graph().input("x", (3,))
    >>> evaluate(elu(x), {"x": [-1.0, 0.0, 1.0]})[0].tolist()
    [-0.63212..., 0.0, 1.0]
    """
    return x.elu(alpha)


def selu(x: Tensor, inplace: bool = False) -> Tensor:
    """``scale * elu(x, alpha)`` with the self-normalising constants.

    >>> from asgrad.tensor import Graph, evaluate
    >>> from asgrad.tensor.api.nn_activation import selu
    >>> x = Graph().input("x", (3,))
    >>> evaluate(selu(x), {"x": [-1.0, 0.0, 2.0]})[0].tolist()
    [-1.11133..., 0.0, 2.10140...]
    """
    return x.selu()


def celu(x: Tensor, alpha: float = 1.0, inplace: bool = False) -> Tensor:
    """``max(0, x) + min(0, alpha * (exp(x / alpha) - 1))``.

    >>> from asgrad.tensor import Graph, evaluate
    >>> from asgrad.tensor.api.nn_activation import celu
    >>> x = Graph().input("x", (3,))
    >>> evaluate(celu(x), {"x": [-1.0, 0.0, 2.0]})[0].tolist()
    [-0.63212..., 0.0, 2.0]
    """
    return x.celu(alpha)


def gelu(x: Tensor, approximate: str = "none") -> Tensor:
    """``x * Phi(x)``; ``approximate="tanh"`` for the tanh form.

    >>> from asgrad.tensor import Graph, evaluate
    >>> from asgrad.tensor.api.nn_activation import gelu
    >>> x = Graph().input("x", (3,))
    >>> evaluate(gelu(x), {"x": [-1.0, 0.0, 1.0]})[0].tolist()
    [-0.15865..., 0.0, 0.84134...]
    """
    return x.gelu(approximate)


def silu(x: Tensor, inplace: bool = False) -> Tensor:
    """``x * sigmoid(x)``.

    >>> from asgrad.tensor import Graph, evaluate
    >>> from asgrad.tensor.api.nn_activation import silu
    >>> x = Graph().input("x", (3,))
    >>> evaluate(silu(x), {"x": [-1.0, 0.0, 1.0]})[0].tolist()
    [-0.26894..., 0.0, 0.73105...]
    """
    return x.silu()


def mish(x: Tensor, inplace: bool = False) -> Tensor:
    """``x * tanh(softplus(x))``.

    >>> from asgrad.tensor import Graph, evaluate
    >>> from asgrad.tensor.api.nn_activation import mish
    >>> x = Graph().input("x", (3,))
    >>> evaluate(mish(x), {"x": [-1.0, 0.0, 2.0]})[0].tolist()
    [-0.30340..., 0.0, 1.94395...]
    """
    return x.mish()


def hardswish(x: Tensor, inplace: bool = False) -> Tensor:
    """``x * relu6(x + 3) / 6``.

    >>> from asgrad.tensor import Graph, evaluate
    >>> from asgrad.tensor.api.nn_activation import hardswish
    >>> x = Graph().input("x", (3,))
    >>> evaluate(hardswish(x), {"x": [-4.0, 0.0, 1.0]})[0].tolist()
    [-0.0, 0.0, 0.66666...]
    """
    return x.hardswish()


def hardsigmoid(x: Tensor, inplace: bool = False) -> Tensor:
    """``relu6(x + 3) / 6``.

    >>> from asgrad.tensor import Graph, evaluate
    >>> from asgrad.tensor.api.nn_activation import hardsigmoid
    >>> x = Graph().input("x", (3,))
    >>> evaluate(hardsigmoid(x), {"x": [-4.0, 0.0, 3.0]})[0].tolist()
    [0.0, 0.5, 1.0]
    """
    return x.hardsigmoid()


def hardtanh(
    x: Tensor, min_val: float = -1.0, max_val: float = 1.0, inplace: bool = False
) -> Tensor:
    """``x`` clamped to ``[min_val, max_val]``.

    >>> from asgrad.tensor import Graph, evaluate
    >>> from asgrad.tensor.api.nn_activation import hardtanh
    >>> x = Graph().input("x", (3,))
    >>> evaluate(hardtanh(x), {"x": [-2.0, 0.5, 3.0]})[0].tolist()
    [-1.0, 0.5, 1.0]
    """
    return x.hardtanh(min_val, max_val)


def sigmoid(x: Tensor) -> Tensor:
    """``1 / (1 + exp(-x))``.

    >>> from asgrad.tensor import Graph, evaluate
    >>> from asgrad.tensor.api.nn_activation import sigmoid
    >>> x = Graph().input("x", (3,))
    >>> evaluate(sigmoid(x), {"x": [-1.0, 0.0, 1.0]})[0].tolist()
    [0.26894..., 0.5, 0.73105...]
    """
    return x.sigmoid()


def logsigmoid(x: Tensor) -> Tensor:
    """``log(sigmoid(x))``.

    >>> from asgrad.tensor import Graph, evaluate
    >>> from asgrad.tensor.api.nn_activation import logsigmoid
    >>> x = Graph().input("x", (3,))
    >>> evaluate(logsigmoid(x), {"x": [-1.0, 0.0, 2.0]})[0].tolist()
    [-1.31326..., -0.69314..., -0.12692...]
    """
    return x.logsigmoid()


def tanh(x: Tensor) -> Tensor:
    """``tanh(x)``.

    >>> from asgrad.tensor import Graph, evaluate
    >>> from asgrad.tensor.api.nn_activation import tanh
    >>> x = Graph().input("x", (3,))
    >>> evaluate(tanh(x), {"x": [-1.0, 0.0, 1.0]})[0].tolist()
    [-0.76159..., 0.0, 0.76159...]
    """
    return x.tanh()


def tanhshrink(x: Tensor) -> Tensor:
    """``x - tanh(x)``.

    >>> from asgrad.tensor import Graph, evaluate
    >>> from asgrad.tensor.api.nn_activation import tanhshrink
    >>> x = Graph().input("x", (3,))
    >>> evaluate(tanhshrink(x), {"x": [0.0, 1.0, 2.0]})[0].tolist()
    [0.0, 0.23840..., 1.03597...]
    """
    return x.tanhshrink()


def softsign(x: Tensor) -> Tensor:
    """``x / (1 + |x|)``.

    >>> from asgrad.tensor import Graph, evaluate
    >>> from asgrad.tensor.api.nn_activation import softsign
    >>> x = Graph().input("x", (3,))
    >>> evaluate(softsign(x), {"x": [-1.0, 0.0, 2.0]})[0].tolist()
    [-0.5, 0.0, 0.66666...]
    """
    return x.softsign()


def softplus(x: Tensor, beta: float = 1.0, threshold: float = 20.0) -> Tensor:
    """``log(1 + exp(beta * x)) / beta``; ``x`` where ``beta * x > 20``.

    Only PyTorch's default ``threshold`` of 20 is supported.

    >>> from asgrad.tensor import Graph, evaluate
    >>> from asgrad.tensor.api.nn_activation import softplus
    >>> x = Graph().input("x", (3,))
    >>> evaluate(softplus(x), {"x": [-1.0, 0.0, 1.0]})[0].tolist()
    [0.31326..., 0.69314..., 1.31326...]
    """
    if threshold != 20.0:
        raise ArgumentError(f"softplus supports threshold=20 (PyTorch's default), got {threshold}")
    return x.softplus(beta)


def softshrink(x: Tensor, lambd: float = 0.5) -> Tensor:
    """``x`` moved ``lambd`` towards 0, and 0 within ``[-lambd, lambd]``.

    >>> from asgrad.tensor import Graph, evaluate
    >>> from asgrad.tensor.api.nn_activation import softshrink
    >>> x = Graph().input("x", (3,))
    >>> evaluate(softshrink(x), {"x": [-2.0, 0.25, 1.0]})[0].tolist()
    [-1.5, 0.0, 0.5]
    """
    return x.softshrink(lambd)


def hardshrink(x: Tensor, lambd: float = 0.5) -> Tensor:
    """``x`` where ``|x| > lambd``, else 0.

    >>> from asgrad.tensor import Graph, evaluate
    >>> from asgrad.tensor.api.nn_activation import hardshrink
    >>> x = Graph().input("x", (3,))
    >>> evaluate(hardshrink(x), {"x": [-2.0, 0.25, 1.0]})[0].tolist()
    [-2.0, 0.0, 1.0]
    """
    return x.hardshrink(lambd)


def threshold(x: Tensor, threshold: float, value: float, inplace: bool = False) -> Tensor:
    """``x`` where ``x > threshold``, else ``value``.

    >>> from asgrad.tensor import Graph, evaluate
    >>> from asgrad.tensor.api.nn_activation import threshold
    >>> x = Graph().input("x", (3,))
    >>> evaluate(threshold(x, 0.5, -1.0), {"x": [0.0, 0.5, 2.0]})[0].tolist()
    [-1.0, -1.0, 2.0]
    """
    return x.threshold(threshold, value)


def glu(x: Tensor, dim: int | None = None, *, axis: int | None = None) -> Tensor:
    """``a * sigmoid(b)``, ``a`` and ``b`` the two halves of ``x`` along ``dim``.

    >>> from asgrad.tensor import Graph, evaluate
    >>> from asgrad.tensor.api.nn_activation import glu
    >>> g = Graph()
    >>> x = g.input("x", (1, 2))
    >>> evaluate(glu(x, dim=1), {"x": [[3.0, 0.0]]})[0].tolist()
    [[1.5]]
    """
    return x.glu(axis, dim=dim)


def prelu(x: Tensor, weight: Tensor) -> Tensor:
    """``x`` if ``x >= 0`` else ``weight * x``; ``weight`` has one value per channel
    (axis 1) or one in all.

    >>> from asgrad.tensor import Graph, evaluate
    >>> from asgrad.tensor.api.nn_activation import prelu
    >>> g = Graph()
    >>> x = g.input("x", (3,))
    >>> evaluate(prelu(x, g.constant([0.25])), {"x": [-4.0, 0.0, 2.0]})[0].tolist()
    [-1.0, 0.0, 2.0]
    """
    return x.graph.apply("prelu", (x, weight), {})


def softmax(x: Tensor, dim: int | None = None, *, axis: int | None = None) -> Tensor:
    """``exp(x) / sum(exp(x))`` along ``dim``.

    >>> from asgrad.tensor import Graph, evaluate
    >>> from asgrad.tensor.api.nn_activation import softmax
    >>> g = Graph()
    >>> x = g.input("x", (2,))
    >>> evaluate(softmax(x, dim=0), {"x": [0.0, 0.0]})[0].tolist()
    [0.5, 0.5]
    """
    return x.softmax(axis, dim=dim)


def softmin(x: Tensor, dim: int | None = None, *, axis: int | None = None) -> Tensor:
    """``softmax(-x)`` along ``dim``.

    >>> from asgrad.tensor import Graph, evaluate
    >>> from asgrad.tensor.api.nn_activation import softmin
    >>> g = Graph()
    >>> x = g.input("x", (2,))
    >>> evaluate(softmin(x, dim=0), {"x": [1.0, 1.0]})[0].tolist()
    [0.5, 0.5]
    """
    return x.softmin(axis, dim=dim)


def log_softmax(x: Tensor, dim: int | None = None, *, axis: int | None = None) -> Tensor:
    """``log(softmax(x))`` along ``dim``, computed stably.

    >>> from asgrad.tensor import Graph, evaluate
    >>> from asgrad.tensor.api.nn_activation import log_softmax
    >>> g = Graph()
    >>> x = g.input("x", (2,))
    >>> [round(v, 4) for v in evaluate(log_softmax(x, dim=0), {"x": [0.0, 0.0]})[0].tolist()]
    [-0.6931, -0.6931]
    """
    return x.log_softmax(axis, dim=dim)
