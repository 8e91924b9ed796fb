"""What a PyTorch user types on parameters, modules and optimizers: a Parameter used
directly in ``forward`` joins the graph of the Tensor it meets; the define-by-run habits
(``p.grad``, ``opt.zero_grad()``, ``model.cuda()``) raise typed errors naming asgrad's way;
``register_buffer`` and ``nn.functional`` work as in PyTorch."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

import asgrad.nn.functional as F  # PyTorch's conventional alias
from asgrad import nn
from asgrad.nn import init
from asgrad.nn.errors import StateMismatchError
from asgrad.tensor import Graph, Tensor, Variable, cat, einsum, evaluate, where
from asgrad.tensor.errors import ArgumentError, ArgumentTypeError, DefineByRunError

P = np.arange(6.0, dtype=np.float32).reshape(2, 3)
X = np.ones((2, 3), np.float32)


@pytest.mark.parametrize(
    ("build", "want"),
    [
        (lambda p, x: p + x, P + X),
        (lambda p, x: x - p, X - P),
        (lambda p, x: p * x, P * X),
        (lambda p, x: x / (p + x), X / (P + X)),
        (lambda p, x: x.matmul(p.T if isinstance(p, Tensor) else x.graph.bind(p).T), X @ P.T),
        (lambda p, x: p @ x.T, P @ X.T),
        (lambda p, x: cat([p, x], dim=0), np.concatenate([P, X])),
        (lambda p, x: einsum("ij,ij->i", x, p), (X * P).sum(1)),
        (lambda p, x: x.mm(p.T if isinstance(p, Tensor) else x.graph.bind(p).T), X @ P.T),
    ],
)
def test_a_parameter_joins_the_graph_of_the_tensor_it_meets(
    build: Callable[[nn.Parameter, Tensor], Tensor], want: np.ndarray
) -> None:
    p = nn.Parameter(P)
    g = Graph()
    x = g.input("x", (2, 3))
    np.testing.assert_allclose(evaluate(build(p, x), {"x": X})[0], want)


@pytest.mark.parametrize(
    "use",
    [
        lambda p: p[:, :2],
        lambda p: p * 2,
        lambda p: p.matmul(p),
        lambda p: p.sum(),
        lambda p: cat([p, p]),
        lambda p: einsum("ij->i", p),
    ],
)
def test_a_parameter_without_a_tensor_names_graph_bind(
    use: Callable[[nn.Parameter], object],
) -> None:
    with pytest.raises((ArgumentTypeError, DefineByRunError), match=r"bind"):
        use(nn.Parameter(P))


@pytest.mark.parametrize(
    ("habit", "names"),
    [
        (lambda: nn.Parameter(P).grad, "asgrad.autograd.grad"),
        (lambda: nn.Parameter(P).data, "p.value"),
        (lambda: nn.Linear(2, 3).cuda(), "backend='gpu'"),
        (lambda: nn.Linear(2, 3).zero_grad(), "opt.compile"),
        (lambda: nn.SGD(nn.Linear(2, 3).parameters(), lr=0.1).zero_grad(), "opt.compile"),
    ],
)
def test_define_by_run_habits_raise_typed_errors_naming_the_asgrad_way(
    habit: Callable[[], object], names: str
) -> None:
    with pytest.raises(DefineByRunError, match=names.replace("(", r"\(")):
        habit()


def test_parameter_numel_and_module_cpu() -> None:
    layer = nn.Linear(2, 3)
    assert sum(p.numel() for p in layer.parameters()) == 9
    assert layer.cpu() is layer


def test_register_buffer_is_saved_state_usable_in_forward() -> None:
    class Masked(nn.Module):
        mask: Variable

        def __init__(self) -> None:
            super().__init__()
            self.register_buffer("mask", np.array([1.0, 0.0, 1.0], np.float32))

        def forward(self, x: Tensor) -> Tensor:
            return x * self.mask

    m = Masked()
    assert list(m.state_dict()) == ["mask"]
    assert m.parameters() == []
    g = Graph()
    x = g.input("x", (2, 3))
    np.testing.assert_allclose(evaluate(m(x), {"x": X})[0], X * [1.0, 0.0, 1.0])
    with pytest.raises(ArgumentError, match="persistent"):
        m.register_buffer("other", np.zeros(2), persistent=False)


def test_nn_functional_is_reachable_from_nn() -> None:
    import asgrad.nn.functional as F  # PyTorch's conventional alias

    assert nn.functional is F


def test_load_state_dict_names_the_transposed_pytorch_layout() -> None:
    layer = nn.Linear(4, 3)
    state = {"weight": np.zeros((3, 4), np.float32), "bias": np.zeros(3, np.float32)}
    with pytest.raises(StateMismatchError, match=r"transposed\? .*load_torch_state_dict"):
        layer.load_state_dict(state)


def test_weight_torch_is_pytorchs_layout_and_transposing_a_parameter_names_it() -> None:
    layer = nn.Linear(3, 3)
    g = Graph()
    x = g.input("x", (2, 3))
    ours, torchs = evaluate([layer(x), x @ layer.weight_torch(x).T + layer.bias], {"x": P})
    np.testing.assert_allclose(ours, torchs, rtol=1e-6)
    with pytest.raises(DefineByRunError, match=r"weight_torch"):
        _ = layer.weight.T


def test_where_with_two_number_branches_takes_pytorchs_dtypes() -> None:
    g = Graph()
    x = g.input("x", (4,))
    m = x > 0.0
    outs = evaluate(
        [where(m, 1.0, 0.0), where(m, 2, -1), where(m, True, False)],
        {"x": np.array([1, -1, 1, -1], np.float32)},
    )
    np.testing.assert_array_equal(outs[0], np.array([1.0, 0.0, 1.0, 0.0], np.float32))
    assert outs[0].dtype == np.float32
    np.testing.assert_array_equal(outs[1], [2, -1, 2, -1])
    assert outs[1].dtype == np.int64
    assert outs[2].dtype == np.bool_


@pytest.mark.parametrize("shape", [(3, 8, 2, 2), (8, 3, 3)])
def test_dropout2d_zeroes_whole_channels_and_scales_the_rest(shape: tuple[int, ...]) -> None:
    g = Graph()
    x = g.input("x", shape)
    v = np.random.default_rng(0).uniform(1.0, 2.0, shape).astype(np.float32)
    (out,) = evaluate(nn.Dropout2d(0.5, seed=1)(x), {"x": v})
    per_channel = out.reshape(*shape[:-2], -1) / v.reshape(*shape[:-2], -1)
    dropped = np.all(per_channel == 0.0, axis=-1)
    kept = np.all(np.isclose(per_channel, 2.0), axis=-1)
    assert np.all(dropped | kept)
    assert dropped.any()
    assert kept.any()
    assert nn.Dropout2d(0.5).eval()(x) is x
    np.testing.assert_array_equal(evaluate(F.dropout2d(x, 0.5, 1, training=False), {"x": v})[0], v)


def test_orthogonal_xavier_normal_and_kaiming_normal_in_place() -> None:
    p = nn.Parameter((4, 6), init.zeros, dtype="float64")
    init.orthogonal_(p, gain=2.0, rng=0)
    np.testing.assert_allclose(p.value @ p.value.T, 4.0 * np.eye(4), atol=1e-12)
    big = nn.Parameter((300, 500), init.zeros)
    init.xavier_normal_(big, rng=0)
    assert abs(big.value.std() - np.sqrt(2.0 / 800)) < 2e-3
    init.kaiming_normal_(big, mode="fan_out", nonlinearity="relu", rng=0)
    assert abs(big.value.std() - np.sqrt(2.0 / 500)) < 2e-3


def test_flatten_module_takes_pytorchs_start_and_end_dim() -> None:
    g = Graph()
    x = g.input("x", (2, 3, 4, 5))
    assert nn.Flatten()(x).shape == (2, 60)
    assert nn.Flatten(start_dim=1, end_dim=2)(x).shape == (2, 12, 5)
    assert nn.Flatten(0, 1)(x).shape == (6, 4, 5)
