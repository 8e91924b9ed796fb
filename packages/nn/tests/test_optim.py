"""Optimizer steps against hand-written numpy references of PyTorch's update rules.

The model is a float64 linear regression, whose gradients have a closed form, so
the numpy reference needs no autograd: ``loss = mean((x @ W + b - y)**2)``. Each
test runs several compiled steps on fresh batches and compares every parameter
with the reference to 1e-6 (in practice they agree to ~1e-15).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from asgrad.nn import SGD, Adam, AdamW, Linear, Optimizer, RMSprop, mse_loss
from asgrad.tensor import Graph, Program

IN, OUT, BATCH, STEPS = 3, 2, 5, 8


def make_model(seed: int = 0) -> Linear:
    return Linear(IN, OUT, dtype="float64", rng=seed)


def batches(n: int = STEPS, seed: int = 1) -> list[tuple[np.ndarray, np.ndarray]]:
    rng = np.random.default_rng(seed)
    return [(rng.standard_normal((BATCH, IN)), rng.standard_normal((BATCH, OUT))) for _ in range(n)]


def compile_step(model: Linear, opt: Optimizer) -> Program:
    g = Graph()
    x, y = g.input("x", (BATCH, IN), "float64"), g.input("y", (BATCH, OUT), "float64")
    return opt.compile(mse_loss(model(x), y))


def grads(params: list[np.ndarray], x: np.ndarray, y: np.ndarray) -> list[np.ndarray]:
    w, b = params
    r = x @ w + b - y
    scale = 2.0 / r.size
    return [scale * x.T @ r, scale * r.sum(axis=0)]


def clip(gs: list[np.ndarray], norm: float | None, value: float | None) -> list[np.ndarray]:
    if value is not None:
        gs = [np.clip(g, -value, value) for g in gs]
    if norm is not None:
        total = np.sqrt(sum(float((g * g).sum()) for g in gs))
        coef = min(1.0, norm / (total + 1e-6))
        gs = [g * coef for g in gs]
    return gs


# -- numpy references of torch.optim's single-tensor update rules -------------------------------
def ref_sgd(
    lr: float,
    momentum: float = 0.0,
    dampening: float = 0.0,
    weight_decay: float = 0.0,
    nesterov: bool = False,
) -> Callable[[int, list[np.ndarray], list[np.ndarray], dict[int, Any]], None]:
    def step(t: int, ps: list[np.ndarray], gs: list[np.ndarray], state: dict[int, Any]) -> None:
        for i, (p, g) in enumerate(zip(ps, gs, strict=True)):
            d = g + weight_decay * p if weight_decay else g
            if momentum:
                # torch starts the buffer at the first gradient, undampened
                buf = d.copy() if t == 1 else momentum * state[i] + (1 - dampening) * d
                state[i] = buf
                d = d + momentum * buf if nesterov else buf
            p -= lr * d

    return step


def ref_adam(
    lr: float,
    betas: tuple[float, float] = (0.9, 0.999),
    eps: float = 1e-8,
    weight_decay: float = 0.0,
    decoupled: bool = False,
    amsgrad: bool = False,
) -> Callable[[int, list[np.ndarray], list[np.ndarray], dict[int, Any]], None]:
    b1, b2 = betas

    def step(t: int, ps: list[np.ndarray], gs: list[np.ndarray], state: dict[int, Any]) -> None:
        for i, (p, g) in enumerate(zip(ps, gs, strict=True)):
            m, v, vmax = state.get(i, (np.zeros_like(p), np.zeros_like(p), np.zeros_like(p)))
            if weight_decay and decoupled:
                p *= 1 - lr * weight_decay
            elif weight_decay:
                g = g + weight_decay * p
            m = b1 * m + (1 - b1) * g
            v = b2 * v + (1 - b2) * g * g
            vmax = np.maximum(vmax, v)
            state[i] = (m, v, vmax)
            bc1, bc2 = 1 - b1**t, 1 - b2**t
            denom = np.sqrt(vmax if amsgrad else v) / np.sqrt(bc2) + eps
            p -= lr / bc1 * m / denom

    return step


def ref_rmsprop(
    lr: float,
    alpha: float = 0.99,
    eps: float = 1e-8,
    weight_decay: float = 0.0,
    momentum: float = 0.0,
    centered: bool = False,
) -> Callable[[int, list[np.ndarray], list[np.ndarray], dict[int, Any]], None]:
    def step(t: int, ps: list[np.ndarray], gs: list[np.ndarray], state: dict[int, Any]) -> None:
        for i, (p, g) in enumerate(zip(ps, gs, strict=True)):
            sq, ga, buf = state.get(i, (np.zeros_like(p), np.zeros_like(p), np.zeros_like(p)))
            if weight_decay:
                g = g + weight_decay * p
            sq = alpha * sq + (1 - alpha) * g * g
            if centered:
                ga = alpha * ga + (1 - alpha) * g
                avg = np.sqrt(sq - ga * ga) + eps
            else:
                avg = np.sqrt(sq) + eps
            if momentum:
                buf = momentum * buf + g / avg
                p -= lr * buf
            else:
                p -= lr * g / avg
            state[i] = (sq, ga, buf)

    return step


CASES: list[tuple[str, Callable[[list[Any]], Optimizer], Callable[..., Any], dict[str, Any]]] = [
    ("sgd", lambda ps: SGD(ps, lr=0.1), ref_sgd, {"lr": 0.1}),
    (
        "sgd-momentum",
        lambda ps: SGD(ps, lr=0.1, momentum=0.9),
        ref_sgd,
        {"lr": 0.1, "momentum": 0.9},
    ),
    (
        "sgd-dampening-wd",
        lambda ps: SGD(ps, lr=0.05, momentum=0.8, dampening=0.3, weight_decay=0.01),
        ref_sgd,
        {"lr": 0.05, "momentum": 0.8, "dampening": 0.3, "weight_decay": 0.01},
    ),
    (
        "sgd-nesterov",
        lambda ps: SGD(ps, lr=0.1, momentum=0.9, nesterov=True, weight_decay=1e-3),
        ref_sgd,
        {"lr": 0.1, "momentum": 0.9, "nesterov": True, "weight_decay": 1e-3},
    ),
    ("adam", lambda ps: Adam(ps, lr=0.01), ref_adam, {"lr": 0.01}),
    (
        "adam-l2",
        lambda ps: Adam(ps, lr=0.02, betas=(0.8, 0.99), eps=1e-6, weight_decay=0.1),
        ref_adam,
        {"lr": 0.02, "betas": (0.8, 0.99), "eps": 1e-6, "weight_decay": 0.1},
    ),
    (
        "adam-amsgrad",
        lambda ps: Adam(ps, lr=0.01, amsgrad=True),
        ref_adam,
        {"lr": 0.01, "amsgrad": True},
    ),
    (
        "adamw",
        lambda ps: AdamW(ps, lr=0.01),
        ref_adam,
        {"lr": 0.01, "weight_decay": 0.01, "decoupled": True},
    ),
    (
        "adamw-amsgrad",
        lambda ps: AdamW(ps, lr=0.03, weight_decay=0.2, amsgrad=True),
        ref_adam,
        {"lr": 0.03, "weight_decay": 0.2, "decoupled": True, "amsgrad": True},
    ),
    ("rmsprop", lambda ps: RMSprop(ps, lr=0.01), ref_rmsprop, {"lr": 0.01}),
    (
        "rmsprop-all",
        lambda ps: RMSprop(
            ps, lr=0.01, alpha=0.9, eps=1e-6, weight_decay=0.05, momentum=0.5, centered=True
        ),
        ref_rmsprop,
        {
            "lr": 0.01,
            "alpha": 0.9,
            "eps": 1e-6,
            "weight_decay": 0.05,
            "momentum": 0.5,
            "centered": True,
        },
    ),
    (
        "rmsprop-centered",
        lambda ps: RMSprop(ps, lr=0.01, centered=True),
        ref_rmsprop,
        {"lr": 0.01, "centered": True},
    ),
    (
        "rmsprop-momentum",
        lambda ps: RMSprop(ps, lr=0.01, momentum=0.9),
        ref_rmsprop,
        {"lr": 0.01, "momentum": 0.9},
    ),
]
IDS = [c[0] for c in CASES]


def run_reference(
    ref: Callable[..., Any],
    kwargs: dict[str, Any],
    data: list[tuple[np.ndarray, np.ndarray]],
    norm: float | None = None,
    value: float | None = None,
) -> list[np.ndarray]:
    model = make_model()
    ps = [np.array(p.value) for p in model.parameters()]
    update = ref(**kwargs)
    state: dict[int, Any] = {}
    for t, (x, y) in enumerate(data, start=1):
        update(t, ps, clip(grads(ps, x, y), norm, value), state)
    return ps


def run_asgrad(
    make: Callable[[list[Any]], Optimizer],
    data: list[tuple[np.ndarray, np.ndarray]],
    **clip_kw: float,
) -> list[np.ndarray]:
    model = make_model()
    opt = make(model.parameters())
    opt.clip_grad_norm = clip_kw.get("clip_grad_norm")
    opt.clip_grad_value = clip_kw.get("clip_grad_value")
    step = compile_step(model, opt)
    for x, y in data:
        step(x=x, y=y)
    return [np.array(p.value) for p in model.parameters()]


@pytest.mark.parametrize(("name", "make", "ref", "kwargs"), CASES, ids=IDS)
def test_steps_match_the_numpy_reference(
    name: str, make: Any, ref: Any, kwargs: dict[str, Any]
) -> None:
    data = batches()
    got = run_asgrad(make, data)
    want = run_reference(ref, kwargs, data)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-6, atol=1e-9)
    # the parameters did move
    assert not np.allclose(got[0], make_model().parameters()[0].value)


@pytest.mark.parametrize(("name", "make", "ref", "kwargs"), CASES, ids=IDS)
@pytest.mark.parametrize(
    ("norm", "value"),
    [(0.05, None), (None, 0.02), (0.05, 0.02)],
    ids=["norm", "value", "value-then-norm"],
)
def test_clipping_happens_inside_the_step(
    name: str, make: Any, ref: Any, kwargs: dict[str, Any], norm: float | None, value: float | None
) -> None:
    data = batches()
    clip_kw = {
        k: v for k, v in (("clip_grad_norm", norm), ("clip_grad_value", value)) if v is not None
    }
    got = run_asgrad(make, data, **clip_kw)
    want = run_reference(ref, kwargs, data, norm, value)
    unclipped = run_reference(ref, kwargs, data)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-6, atol=1e-9)
    assert not all(np.allclose(g, u) for g, u in zip(got, unclipped, strict=True))


def test_clip_grad_norm_scales_the_gradient_to_the_norm() -> None:
    model = make_model()
    before = [np.array(p.value) for p in model.parameters()]
    step = compile_step(model, SGD(model.parameters(), lr=1.0, clip_grad_norm=0.01))
    x, y = batches(1)[0]
    step(x=x, y=y)
    delta = [b - np.array(p.value) for b, p in zip(before, model.parameters(), strict=True)]
    norm = np.sqrt(sum(float((d * d).sum()) for d in delta))
    assert norm == pytest.approx(0.01, rel=1e-4)  # lr 1: the step is the clipped gradient


def test_clip_grad_value_bounds_every_element() -> None:
    model = make_model()
    before = [np.array(p.value) for p in model.parameters()]
    step = compile_step(model, SGD(model.parameters(), lr=1.0, clip_grad_value=1e-3))
    x, y = batches(1)[0]
    step(x=x, y=y * 100)
    for b, p in zip(before, model.parameters(), strict=True):
        d = np.abs(b - p.value)
        assert d.max() <= 1e-3 + 1e-15
        assert np.isclose(d.max(), 1e-3)


def test_bad_hyperparameters_raise() -> None:
    ps = make_model().parameters()
    with pytest.raises(ValueError, match="learning rate"):
        SGD(ps, lr=-1.0)
    with pytest.raises(ValueError, match="Nesterov"):
        SGD(ps, lr=0.1, nesterov=True)
    with pytest.raises(ValueError, match="betas"):
        Adam(ps, betas=(1.0, 0.9))
    with pytest.raises(ValueError, match="alpha"):
        RMSprop(ps, alpha=1.5)
    with pytest.raises(ValueError, match="clip_grad_norm"):
        SGD(ps, clip_grad_norm=0.0)
    opt = SGD(ps, lr=0.1)
    with pytest.raises(ValueError, match="learning rate"):
        opt.lr = float("nan")


def test_float32_training_lowers_the_loss() -> None:
    model = Linear(IN, OUT, rng=0)
    g = Graph()
    x, y = g.input("x", (BATCH, IN)), g.input("y", (BATCH, OUT))
    step = RMSprop(model.parameters(), lr=0.01, momentum=0.5).compile(mse_loss(model(x), y))
    xb, yb = (a.astype(np.float32) for a in batches(1)[0])
    losses = [float(step(x=xb, y=yb)[0]) for _ in range(30)]
    assert model.weight.value.dtype == np.float32
    assert losses[-1] < 0.5 * losses[0]


# -- state, learning rate, graph size -----------------------------------------------------------
@pytest.mark.parametrize(("name", "make", "ref", "kwargs"), CASES, ids=IDS)
def test_state_dict_round_trips_and_training_continues_identically(
    name: str, make: Any, ref: Any, kwargs: dict[str, Any]
) -> None:
    data = batches(10)
    model = make_model()
    opt = make(model.parameters())
    step = compile_step(model, opt)
    for x, y in data[:5]:
        step(x=x, y=y)
    saved_model, saved_opt = model.state_dict(), opt.state_dict()
    assert saved_opt["step"] == 5
    assert isinstance(saved_opt["lr"], float)
    for x, y in data[5:]:
        step(x=x, y=y)

    resumed = make_model(seed=7)  # different initial values, overwritten by the load
    resumed.load_state_dict(saved_model)
    opt2 = make(resumed.parameters())
    step2 = compile_step(resumed, opt2)  # compiled before loading: the load still applies
    opt2.load_state_dict(saved_opt)
    for x, y in data[5:]:
        step2(x=x, y=y)
    for a, b in zip(model.parameters(), resumed.parameters(), strict=True):
        np.testing.assert_array_equal(a.value, b.value)
    assert opt2.state_dict().keys() == opt.state_dict().keys()


def test_load_state_dict_reports_every_problem_at_once() -> None:
    from asgrad.nn.errors import StateMismatchError

    model = make_model()
    opt = Adam(model.parameters())
    compile_step(model, opt)
    state = opt.state_dict()
    state["exp_avg.weight"] = np.zeros((9, 9))
    state["exp_avg.nonexistent"] = np.zeros(2)
    del state["step"]
    with pytest.raises(StateMismatchError) as info:
        opt.load_state_dict(state)
    message = str(info.value)
    assert "missing: step" in message
    assert "exp_avg.nonexistent" in message
    assert "exp_avg.weight: expected [3, 2], got [9, 9]" in message


def test_state_of_parameters_with_the_same_name_is_keyed_by_order() -> None:
    # Two models' "weight"s: the second is saved as "weight_2", and the
    # state loads back into an optimizer built the same way.
    a, b = make_model(), make_model(1)  # both have "weight" and "bias"
    opt = SGD(a.parameters() + b.parameters(), lr=0.1, momentum=0.9)
    opt.slot("momentum_buffer", a.weight)
    opt.slot("momentum_buffer", b.weight).value = np.full(b.weight.shape, 7.0, b.weight.dtype)
    state = opt.state_dict()
    assert {"momentum_buffer.weight", "momentum_buffer.weight_2"} <= set(state)
    assert (state["momentum_buffer.weight_2"] == 7.0).all()
    again = SGD(a.parameters() + b.parameters(), lr=0.1, momentum=0.9)
    again.slot("momentum_buffer", a.weight).value = np.ones(a.weight.shape, a.weight.dtype)
    again.load_state_dict(state)
    assert (again.slot("momentum_buffer", b.weight).value == 7.0).all()
    assert (again.slot("momentum_buffer", a.weight).value == 0.0).all()


def test_changing_lr_needs_no_recompile_and_scales_the_step() -> None:
    model = make_model()
    opt = SGD(model.parameters(), lr=0.1)
    step = compile_step(model, opt)
    x, y = batches(1)[0]
    w0 = np.array(model.weight.value)
    g = grads([w0, np.array(model.parameters()[1].value)], x, y)[0]
    step(x=x, y=y)
    np.testing.assert_allclose(w0 - model.weight.value, 0.1 * g, rtol=1e-12)
    opt.lr = 0.025
    w1 = np.array(model.weight.value)
    g1 = grads([w1, np.array(model.parameters()[1].value)], x, y)[0]
    step(x=x, y=y)
    np.testing.assert_allclose(w1 - model.weight.value, 0.025 * g1, rtol=1e-12)


def count_ops(program: Program, op: str) -> int:
    return sum(n.op == op for n in program.schedule.nodes)


def test_per_step_scalars_are_built_once_for_all_parameters() -> None:
    def program(layers: int) -> Program:
        from asgrad.nn import Sequential

        model = Sequential(*(Linear(4, 4, dtype="float64", rng=i) for i in range(layers)))
        g = Graph()
        x = g.input("x", (2, 4), "float64")
        return AdamW(model.parameters(), weight_decay=0.1).compile(mse_loss(model(x), x))

    small, big = program(1), program(4)
    # bias corrections (beta1**t, beta2**t) once, whatever the number of parameters
    assert count_ops(small, "pow") == count_ops(big, "pow") == 2
    assert count_ops(big, "sqrt") == 1  # sqrt(1 - beta2**t) once
    assert count_ops(big, "adam_update") == 8  # one fused step per parameter
    assert count_ops(big, "adam_ema") == 16  # and one per moment
    extra_per_param = (len(big.schedule.nodes) - len(small.schedule.nodes)) / 6
    forward_backward = 12  # matmul, add, their gradients... (an upper bound for one layer)
    assert extra_per_param <= forward_backward + 14


def test_optimizers_refuse_graphs_without_their_parameters() -> None:
    opt = SGD(make_model().parameters(), lr=0.1)
    g = Graph()
    x = g.input("x", (2,), "float64")
    with pytest.raises(Exception, match="none of the optimizer's parameters"):
        opt.compile((x * x).sum())


# -- cross-check against torch.optim itself (its answers saved: torch_reference) -----------
TORCH_CONFIGS: list[tuple[type[Optimizer], str, dict[str, Any]]] = [
    (SGD, "SGD", {"lr": 0.1}),
    (SGD, "SGD", {"lr": 0.1, "momentum": 0.9, "dampening": 0.2, "weight_decay": 0.01}),
    (SGD, "SGD", {"lr": 0.1, "momentum": 0.9, "nesterov": True}),
    (Adam, "Adam", {"lr": 0.01, "weight_decay": 0.05}),
    (Adam, "Adam", {"lr": 0.01, "betas": (0.8, 0.95), "amsgrad": True}),
    (AdamW, "AdamW", {"lr": 0.01}),
    (AdamW, "AdamW", {"lr": 0.02, "weight_decay": 0.3, "amsgrad": True}),
    (RMSprop, "RMSprop", {"lr": 0.01}),
    (
        RMSprop,
        "RMSprop",
        {"lr": 0.01, "alpha": 0.9, "momentum": 0.5, "centered": True, "weight_decay": 0.1},
    ),
]


@pytest.mark.parametrize(
    ("ours", "theirs", "kwargs"),
    TORCH_CONFIGS,
    ids=[f"{c[0].__name__}-{i}" for i, c in enumerate(TORCH_CONFIGS)],
)
@pytest.mark.parametrize("clip", [None, "norm", "value"])
def test_matches_torch_optim(
    ours: type[Optimizer],
    theirs: Any,
    kwargs: dict[str, Any],
    clip: str | None,
    torch_reference: Callable[..., Any],
) -> None:
    data = batches(10)
    model = make_model()

    def run(torch: Any, w0: Any, b0: Any, data: list[tuple[Any, Any]]) -> Any:
        w = torch.tensor(w0, requires_grad=True)
        b = torch.tensor(b0, requires_grad=True)
        topt = getattr(torch.optim, theirs)([w, b], **kwargs)
        for x, y in data:
            topt.zero_grad()
            loss = ((torch.tensor(x) @ w + b - torch.tensor(y)) ** 2).mean()
            loss.backward()
            if clip == "norm":
                torch.nn.utils.clip_grad_norm_([w, b], 0.05)
            elif clip == "value":
                torch.nn.utils.clip_grad_value_([w, b], 0.02)
            topt.step()
        return w, b

    want_w, want_b = torch_reference(
        run, model.weight.value.copy(), model.parameters()[1].value.copy(), data
    )
    clip_kw = {"norm": {"clip_grad_norm": 0.05}, "value": {"clip_grad_value": 0.02}}.get(
        clip or "", {}
    )
    opt = ours(model.parameters(), **kwargs, **clip_kw)
    step = compile_step(model, opt)
    for x, y in data:
        step(x=x, y=y)
    np.testing.assert_allclose(model.weight.value, want_w, rtol=1e-6, atol=1e-12)
    np.testing.assert_allclose(model.parameters()[1].value, want_b, rtol=1e-6, atol=1e-12)
