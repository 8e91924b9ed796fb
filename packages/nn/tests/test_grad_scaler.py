"""GradScaler: dynamic loss scaling inside the compiled step, against a hand-computed
PyTorch sequence (``torch.amp.GradScaler``'s update rule) and an unscaled twin run.

The loss scale is a power of two, so scaling the loss and multiplying the gradients by
``1 / scale`` is exact: on every step it does not skip, the scaled run's parameters and
optimizer state are bit-identical to those of an unscaled run that is simply not
called on the skipped steps. Non-finite gradients are injected through a feed: an
infinite input (elementwise model) or a NaN target.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from asgrad import nn
from asgrad.nn.serialization import load_checkpoint, save_checkpoint
from asgrad.tensor import Graph, Program, Variable
from asgrad.tensor.cpu import jit
from asgrad.tensor.cpu.jit.tier import step_counter
from asgrad.tensor.errors import ArgumentError, DefineByRunError

# Clean (c), infinite (inf) and NaN (nan) steps, and the scale and growth tracker after
# each with init_scale=4, growth_factor=2, backoff_factor=0.5, growth_interval=3,
# worked by hand from torch.amp.GradScaler.update (torch._amp_update_scale_):
# on inf/NaN scale *= 0.5, tracker = 0; otherwise tracker += 1 and at 3 the scale
# doubles and the tracker resets.
PATTERN = ["c", "c", "c", "c", "inf", "c", "nan", "c", "c", "c", "c"]
SCALES = [4.0, 4.0, 8.0, 8.0, 4.0, 4.0, 2.0, 2.0, 2.0, 4.0, 4.0]
TRACKERS = [1, 2, 0, 1, 0, 1, 0, 1, 2, 0, 1]


@pytest.fixture(params=["numpy", "compiled"])
def cpu_path(request: pytest.FixtureRequest) -> Iterator[str]:
    """The CPU backend's numpy path, or its compiled (Numba) path from the first step."""
    if request.param == "compiled":
        pytest.importorskip("numba")
    jit.set_enabled(request.param == "compiled")
    yield str(request.param)
    jit.set_enabled(None)


def _elementwise_model() -> tuple[Variable, Variable]:
    w = Variable("w", np.array([0.5, -1.25, 2.0], np.float32))
    b = Variable("b", np.array([0.25, 0.75, -0.5], np.float32))
    return w, b


def _elementwise_step(
    opt_factory: Callable[[list[Variable]], nn.Optimizer],
    scaler: nn.GradScaler | None,
    backend: str = "cpu",
) -> tuple[list[Variable], nn.Optimizer, Program]:
    w, b = _elementwise_model()
    g = Graph()
    x, y = g.input("x", (3,)), g.input("y", (3,))
    loss = ((w * x + b - y) ** 2).mean()
    opt = opt_factory([w, b])
    step = opt.compile(loss if scaler is None else scaler.scale(loss), backend=backend)
    return [w, b], opt, step


def _feeds(kind: str, k: int) -> dict[str, np.ndarray]:
    x = np.array([1.0, 0.5 + 0.125 * k, -2.0], np.float32)
    y = np.array([0.5, -0.25 * k, 1.0], np.float32)
    if kind == "inf":
        x = np.array([np.inf, 1.0, -np.inf], np.float32)
    if kind == "nan":
        y = np.array([np.nan, 0.0, 0.0], np.float32)
    return {"x": x, "y": y}


def _quiet(step: Program, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    # numpy warns about the infinities and NaNs a skipped step computes
    with np.errstate(all="ignore"):
        return step(feeds)


OPTIMIZERS: dict[str, Callable[[list[Variable]], nn.Optimizer]] = {
    "sgd-momentum": lambda ps: nn.SGD(ps, lr=0.125, momentum=0.5),
    "adam": lambda ps: nn.Adam(ps, lr=0.0625),
    "adamw-amsgrad-clip": lambda ps: nn.AdamW(
        ps, lr=0.0625, amsgrad=True, clip_grad_norm=0.5, weight_decay=0.1
    ),
    "rmsprop-centered-momentum": lambda ps: nn.RMSprop(ps, lr=0.01, centered=True, momentum=0.9),
    "nadam": lambda ps: nn.NAdam(ps, lr=0.05),
    "adagrad": lambda ps: nn.Adagrad(ps, lr=0.1),
}


def _state(opt: nn.Optimizer) -> dict[str, Any]:
    return {k: v for k, v in opt.state_dict().items() if not k.startswith("grad_scaler.")}


@pytest.mark.parametrize("name", list(OPTIMIZERS))
def test_scaled_steps_follow_torchs_scale_sequence_and_match_an_unscaled_run_bit_for_bit(
    cpu_path: str, name: str
) -> None:
    factory = OPTIMIZERS[name]
    scaler = nn.GradScaler(init_scale=4.0, growth_interval=3)
    params, opt, step = _elementwise_step(factory, scaler)
    twin_params, twin_opt, twin = _elementwise_step(factory, None)
    start = [p.value.copy() for p in params]
    clean = 0
    for k, (kind, scale, tracker) in enumerate(zip(PATTERN, SCALES, TRACKERS, strict=True)):
        before = [p.value.copy() for p in params]
        before_state = _state(opt)
        loss = _quiet(step, _feeds(kind, k))[0]
        assert scaler.get_scale() == scale, k
        assert scaler.get_growth_tracker() == tracker, k
        if kind == "c":
            clean += 1
            twin_loss = twin(_feeds(kind, k))[0]
            assert loss.tobytes() == twin_loss.tobytes(), k  # the unscaled loss is returned
        else:
            assert not np.isfinite(loss)
            for p, old in zip(params, before, strict=True):  # skipped: nothing changed
                assert p.value.tobytes() == old.tobytes(), k
            after_state = _state(opt)
            assert after_state.keys() == before_state.keys()
            for key, value in before_state.items():
                assert np.array_equal(after_state[key], value), (k, key)
        for p, q in zip(params, twin_params, strict=True):
            assert p.value.tobytes() == q.value.tobytes(), (k, p.name)
    assert int(opt.step_count.value) == clean == int(twin_opt.step_count.value)
    twin_state = _state(twin_opt)
    for key, value in _state(opt).items():
        if cpu_path == "compiled" and key == "mu_product":
            # NAdam's float64 running product: the compiled path fuses its rule into the
            # gated one, and Numba rounds that kernel's float64 product an ulp apart
            np.testing.assert_array_max_ulp(value, twin_state[key], maxulp=1)
            continue
        assert np.asarray(value).tobytes() == np.asarray(twin_state[key]).tobytes(), key
    assert all(not np.array_equal(p.value, s) for p, s in zip(params, start, strict=True))


def _mlp_step(
    scaler: nn.GradScaler | None, backend: str = "cpu"
) -> tuple[nn.Module, nn.Optimizer, Program]:
    model = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 3))
    model.initialize(0)
    g = Graph()
    x, y = g.input("x", (16, 4)), g.input("y", (16, 3))
    loss = nn.mse_loss(model(x), y)
    opt = nn.Adam(model.parameters(), lr=0.01)
    step = opt.compile(loss if scaler is None else scaler.scale(loss), backend=backend)
    return model, opt, step


def _mlp_feeds(k: int, poison: bool) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(k)
    x = rng.standard_normal((16, 4)).astype(np.float32)
    y = rng.standard_normal((16, 3)).astype(np.float32)
    if poison:
        y[3, 1] = np.nan
    return {"x": x, "y": y}


def test_a_scaled_mlp_trains_bit_identically_to_an_unscaled_one(cpu_path: str) -> None:
    scaler = nn.GradScaler(init_scale=2.0**16, growth_interval=2)
    model, opt, step = _mlp_step(scaler)
    twin_model, twin_opt, twin = _mlp_step(None)
    poisoned = {2, 5, 6}
    for k in range(9):
        step(_mlp_feeds(k, k in poisoned))
        if k not in poisoned:
            twin(_mlp_feeds(k, False))
        for p, q in zip(model.parameters(), twin_model.parameters(), strict=True):
            if cpu_path == "compiled":
                # The compiled path writes the two steps' weight-gradient products as
                # different kernels (the scaled one fuses the unscaling), which round a
                # few ulps apart (measured: at most 12 ulps after 9 steps); the biases
                # and the whole numpy path are bit-identical.
                np.testing.assert_array_max_ulp(p.value, q.value, maxulp=64)
            else:
                assert p.value.tobytes() == q.value.tobytes(), (k, p.name)
    # 2 clean (x2), NaN (/2), 2 clean (x2), NaN, NaN (/4), 2 clean (x2)
    assert scaler.get_scale() == 2.0**16
    assert int(opt.step_count.value) == 6 == int(twin_opt.step_count.value)


def test_growth_that_would_overflow_keeps_the_scale() -> None:
    scaler = nn.GradScaler(init_scale=2.0**60, growth_factor=2.0**100, growth_interval=1)
    _, _, step = _elementwise_step(OPTIMIZERS["sgd-momentum"], scaler)
    step(_feeds("c", 0))
    assert scaler.get_scale() == 2.0**60  # 2**160 is not a float32: PyTorch keeps the scale
    assert scaler.get_growth_tracker() == 0


def test_the_compiled_step_is_gated_on_the_unscaled_gradients() -> None:
    """The scale below 1 (after backoffs): gradients finite when scaled overflow when
    unscaled, and the step is skipped, as PyTorch checks the unscaled ones."""
    scaler = nn.GradScaler(init_scale=2.0**-100)
    params, _, step = _elementwise_step(OPTIMIZERS["sgd-momentum"], scaler)
    before = [p.value.copy() for p in params]
    feeds = {"x": np.full(3, 2.0**70, np.float32), "y": np.zeros(3, np.float32)}
    _quiet(step, feeds)
    assert scaler.get_scale() == 2.0**-101
    for p, old in zip(params, before, strict=True):
        assert p.value.tobytes() == old.tobytes()


def test_scaler_state_rides_in_the_optimizer_state_and_resumes_identically(
    tmp_path: Path,
) -> None:
    def run(steps: range, state: dict[str, Any] | None) -> tuple[nn.Module, nn.Optimizer]:
        scaler = nn.GradScaler(init_scale=2.0**10, growth_interval=2)
        model = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 3))
        model.initialize(0)
        opt = nn.Adam(model.parameters(), lr=0.01)
        if state is not None:  # loaded before compiling: held, then given to the scaler
            model.load_state_dict(state["model"])
            opt.load_state_dict(state["optimizer"])
            assert opt.state_dict()["grad_scaler.scale"] == state["optimizer"]["grad_scaler.scale"]
        g = Graph()
        x, y = g.input("x", (16, 4)), g.input("y", (16, 3))
        step = opt.compile(scaler.scale(nn.mse_loss(model(x), y)))
        for k in steps:
            step(_mlp_feeds(k, k in (1, 4)))
        return model, opt

    whole_model, whole_opt = run(range(7), None)
    first_model, first_opt = run(range(4), None)
    saved = first_opt.state_dict()
    assert saved["grad_scaler.scale"] == 2.0**10  # clean, NaN (/2), 2 clean (x2)
    assert saved["grad_scaler.growth_tracker"] == 0
    save_checkpoint(tmp_path / "ckpt", first_model.state_dict(), step=4, optimizer_state=saved)
    data = load_checkpoint(tmp_path / "ckpt")
    assert data.optimizer_state is not None
    state = {"model": data.model_state, "optimizer": data.optimizer_state}
    resumed_model, resumed_opt = run(range(4, 7), state)
    for p, q in zip(resumed_model.parameters(), whole_model.parameters(), strict=True):
        assert p.value.tobytes() == q.value.tobytes()
    assert (
        resumed_opt.state_dict()["grad_scaler.scale"] == whole_opt.state_dict()["grad_scaler.scale"]
    )
    assert resumed_opt.scaler is not None
    assert (
        resumed_opt.scaler.get_growth_tracker()
        == whole_opt.state_dict()["grad_scaler.growth_tracker"]
    )


def test_an_optimizer_state_with_half_the_scaler_entries_is_refused() -> None:
    w, b = _elementwise_model()
    opt = nn.SGD([w, b], lr=0.1)
    state = {**opt.state_dict(), "grad_scaler.scale": 8.0}
    with pytest.raises(nn.StateMismatchError, match=r"grad_scaler\.growth_tracker"):
        opt.load_state_dict(state)


def test_state_dict_has_torchs_keys_and_loads_back() -> None:
    scaler = nn.GradScaler(init_scale=2.0**10, growth_interval=2)
    _, _, step = _elementwise_step(OPTIMIZERS["adam"], scaler)
    step(_feeds("c", 0))
    state = scaler.state_dict()
    assert state == {
        "scale": 2.0**10,
        "growth_factor": 2.0,
        "backoff_factor": 0.5,
        "growth_interval": 2,
        "_growth_tracker": 1,
    }
    other = nn.GradScaler()
    other.load_state_dict(state)
    assert other.state_dict() == state
    with pytest.raises(ArgumentError, match="missing"):
        other.load_state_dict({"scale": 1.0})


def test_a_disabled_scaler_leaves_the_loss_and_the_step_alone() -> None:
    scaler = nn.GradScaler(enabled=False)
    g = Graph()
    loss = g.input("x", (3,)).sum()
    assert scaler.scale(loss) is loss
    assert scaler.get_scale() == 1.0
    assert scaler.state_dict() == {}
    assert not scaler.is_enabled()


def test_define_by_run_calls_name_the_compiled_step() -> None:
    scaler = nn.GradScaler()
    w, b = _elementwise_model()
    with pytest.raises(DefineByRunError, match=r"optimizer\.compile\(scaler\.scale\(loss\)\)"):
        scaler.step(nn.SGD([w, b], lr=0.1))
    with pytest.raises(DefineByRunError, match="already backs the scale off"):
        scaler.update()
    scaler.update(256.0)
    assert scaler.get_scale() == 256.0


def test_programs_that_would_not_unscale_refuse_a_scaled_loss() -> None:
    w, b = _elementwise_model()
    g = Graph()
    scaled = nn.GradScaler().scale(((w * g.input("x", (3,)) + b) ** 2).sum())
    with pytest.raises(ArgumentError, match="does not unscale"):
        nn.GradientAccumulator(nn.SGD([w, b], lr=0.1)).compile(scaled)
    with pytest.raises(ArgumentError, match="does not unscale"):
        nn.LBFGS([w, b]).compile(scaled)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"init_scale": 0.0}, "init_scale"),
        ({"init_scale": float("inf")}, "init_scale"),
        ({"growth_factor": 1.0}, "growth_factor"),
        ({"growth_factor": 1e39}, "growth_factor"),
        ({"backoff_factor": 1.0}, "backoff_factor"),
        ({"growth_interval": 0}, "growth_interval"),
        ({"growth_interval": 2.5}, "growth_interval"),
    ],
)
def test_bad_settings_are_refused(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ArgumentError, match=message):
        nn.GradScaler(**kwargs)


def test_scale_takes_a_scalar_float_loss() -> None:
    g = Graph()
    with pytest.raises(ArgumentError, match="scalar float loss"):
        nn.GradScaler().scale(g.input("x", (3,)))


def test_the_cpu_tier_counts_a_scaled_steps_taken_steps() -> None:
    """The tiered CPU function switches at a step count read from the optimizer's
    counter, which a scaled step updates as where(skip, step, step + 1)."""
    scaler = nn.GradScaler()
    _, opt, step = _elementwise_step(OPTIMIZERS["adam"], scaler)
    assert step_counter(step.schedule) is opt.step_count
