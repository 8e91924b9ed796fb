"""The optimizer base: updates written as graph ops, compiled into one training step."""

from __future__ import annotations

import itertools
import warnings
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from typing import Any, NoReturn

import numpy as np

from asgrad.autograd import grad, recompute_loop_steps
from asgrad.nn.errors import RecompileWarning, StateMismatchError
from asgrad.nn.grad_scaler import GradScaler, ScaledLoss
from asgrad.tensor import Program, Tensor, Variable, compile, where
from asgrad.tensor.api.precision import PRECISIONS, with_precision
from asgrad.tensor.errors import ArgumentError, DefineByRunError, GraphError, MemoryBudgetError
from asgrad.tensor.ir.scopes import node_meta, scope
from asgrad.tensor.ir.structure import structure_key


def _hashable(value: object) -> bool:
    try:
        hash(value)
    except TypeError:
        return False
    return True


class Optimizer:
    """Base class: holds the parameters, the learning rate and per-parameter state.

    The update rule is written in graph ops by [`update`][asgrad.nn.Optimizer.update], so a backend
    runs it where the parameters live. [`compile`][asgrad.nn.Optimizer.compile] builds one program
    that computes the loss, its gradients and every update: a whole training step. The learning
    rate is a variable read by that program, so schedulers change it without
    recompiling.

    Gradient clipping happens inside the step, before the update: first by value
    (``clip_grad_value``: each element clamped to ``[-v, v]``, as
    ``torch.nn.utils.clip_grad_value_``), then by global norm (``clip_grad_norm``:
    every gradient scaled by ``min(1, max_norm / (norm + 1e-6))`` where ``norm`` is
    the L2 norm of all gradients together, as ``torch.nn.utils.clip_grad_norm_``).

    Subclasses write [`update`][asgrad.nn.Optimizer.update]. Scalars that depend only on the step
    (bias corrections, the learning rate in the parameter's dtype) are made with
    [`per_step`][asgrad.nn.Optimizer.per_step], which builds each one once per compiled program and
    shares it between all parameters, so the per-parameter part of the update stays a handful
    of elementwise ops.

    A subclass (signSGD with momentum; docs/training.md works through Lion)::

    >>> import numpy as np
    >>> from asgrad.tensor import Graph
    >>> from asgrad.nn import Linear, mse_loss
    >>> class SignSGD(Optimizer):
    ...     def update(self, param, g, var, step):
    ...         m_var = self.slot("momentum", var)
    ...         m = param.graph.bind(m_var) * 0.9 + g
    ...         self.assign(m_var, m)
    ...         return param - self.lr_tensor(param) * m.sign()
    >>> model = Linear(2, 1, rng=0)
    >>> g = Graph()
    >>> x = g.input("x", (4, 2))
    >>> step = SignSGD(model.parameters(), lr=0.01).compile((model(x) ** 2).mean())
    >>> before = model.weight.value.copy()
    >>> _ = step(x=np.ones((4, 2), "float32"))
    >>> np.allclose(np.abs(model.weight.value - before), 0.01)  # lr * |sign|
    True
    """

    # Programs kept by compile() for graphs rebuilt with the same structure.
    MAX_PROGRAMS = 8

    def __init__(
        self,
        params: Iterable[Variable],
        lr: float,
        *,
        clip_grad_norm: float | None = None,
        clip_grad_value: float | None = None,
    ) -> None:
        self.params = [p for p in params if p.trainable]
        if not self.params:
            raise GraphError("the optimizer got no trainable parameters")
        _check_nonnegative("learning rate", lr)
        if clip_grad_norm is not None and not clip_grad_norm > 0:
            raise ArgumentError(f"clip_grad_norm must be > 0, got {clip_grad_norm}")
        if clip_grad_value is not None and not clip_grad_value > 0:
            raise ArgumentError(f"clip_grad_value must be > 0, got {clip_grad_value}")
        self._lr = Variable("optimizer.lr", np.array(lr, dtype=np.float64), trainable=False)
        self.clip_grad_norm = clip_grad_norm
        self.clip_grad_value = clip_grad_value
        # Per-parameter state variables, by slot name then parameter identity.
        self.state: dict[str, dict[int, Variable]] = {}
        self._fills: dict[str, float] = {}
        self.step_count = Variable("optimizer.step", np.array(0.0), trainable=False)
        self._pending: dict[Variable, Tensor] = {}
        self._shared: dict[tuple[str, str], Tensor] = {}
        self._step: Tensor | None = None
        self._found_inf: Tensor | None = None  # while a scaled step's updates are built
        # Programs compiled by compile(), by graph structure (see structure_key).
        self._programs: OrderedDict[Hashable, Program] = OrderedDict()
        self._compiles_without_key = 0
        # The GradScaler of the last scaled step compiled (its state rides in state_dict).
        self.scaler: GradScaler | None = None
        self._held_scaler_state: dict[str, Any] | None = None

    # -- learning rate -----------------------------------------------------------------------
    @property
    def lr(self) -> float:
        """The learning rate the next step uses; setting it needs no recompiling."""
        return float(self._lr.value)

    @lr.setter
    def lr(self, value: float) -> None:
        _check_nonnegative("learning rate", value)
        self._lr.value = np.array(value, dtype=np.float64)

    def lr_tensor(self, like: Tensor) -> Tensor:
        """The learning rate in ``like``'s graph and dtype (shared by all parameters)."""
        return self.per_step("lr", lambda: like.graph.bind(self._lr), like.dtype)

    def per_step(self, key: str, build: Callable[[], Tensor], dtype: str) -> Tensor:
        """A scalar that depends only on the step, built once per compiled program.

        ``build`` returns it in float64 (the dtype of the step counter and the learning
        rate) and is called once per [`compile`][asgrad.nn.Optimizer.compile]; the value is cast
        once per parameter dtype. Every parameter's update then reads the same node.
        """
        base = self._shared.get((key, "float64"))
        if base is None:
            base = self._shared[(key, "float64")] = build().cast("float64")
        cast = self._shared.get((key, dtype))
        if cast is None:
            cast = self._shared[(key, dtype)] = base.cast(dtype)
        return cast

    @property
    def step_tensor(self) -> Tensor:
        """The number of the step being compiled (1 on the first run), float64."""
        if self._step is None:
            raise GraphError("step_tensor is only defined while Optimizer.compile runs")
        return self._step

    # -- state ------------------------------------------------------------------------------------
    def slot(self, name: str, param: Variable, fill: float = 0.0) -> Variable:
        """The state variable ``name`` of ``param`` (made ``fill``-filled on first use)."""
        if "." in name:
            raise ArgumentError(f"slot names cannot contain '.', got {name!r}")
        slots = self.state.setdefault(name, {})
        self._fills.setdefault(name, fill)
        var = slots.get(id(param))
        if var is None:
            var = Variable(name, np.full(param.shape, fill, dtype=param.dtype), trainable=False)
            slots[id(param)] = var
        var.name = f"optimizer.{name}.{param.name}"
        return var

    def _names(self) -> dict[str, Variable]:
        """Each parameter's key in [`state_dict`][asgrad.nn.Optimizer.state_dict]: its name, made
        unique by order.

        Parameters of two models can share a dotted name (``main.0.weight`` of a
        generator and of a discriminator); as ``Graph.bind`` does, the second gets
        ``main.0.weight_2``, the third ``_3``, in the order the optimizer was given
        them, so the state of an optimizer built the same way loads back (PyTorch's
        optimizer state is keyed by that order too).
        """
        by_name: dict[str, Variable] = {}
        for p in self.params:
            name = p.name
            for k in itertools.count(2):
                if name not in by_name:
                    break
                name = f"{p.name}_{k}"
            by_name[name] = p
        return by_name

    def state_dict(self) -> dict[str, Any]:
        """Learning rate (float), step (int) and every state slot, keyed ``slot.param_name``.

        Arrays are copies. Parameter names must be unique (a model's dotted names are).
        After a step with a [`GradScaler`][asgrad.nn.GradScaler] is compiled, the scaler's
        scale (float) and growth tracker (int) are here too, as ``grad_scaler.scale``
        and ``grad_scaler.growth_tracker``, so a checkpoint of the optimizer state
        carries them.
        """
        by_name = self._names()
        out: dict[str, Any] = {"lr": self.lr, "step": int(self.step_count.value)}
        if self.scaler is not None:
            out.update(self.scaler.optimizer_entries())
        elif self._held_scaler_state is not None:
            out.update(self._held_scaler_state)
        for slot, by_param in self.state.items():
            for name, p in by_name.items():
                if id(p) in by_param:
                    out[f"{slot}.{name}"] = np.array(by_param[id(p)].value)
        return out

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore what [`state_dict`][asgrad.nn.Optimizer.state_dict] returned; the next step
        continues identically.

        As in PyTorch, the loaded state replaces the current one: slots the state
        does not hold are reset to their initial value. Unknown parameter names and
        shape or dtype mismatches are all reported in one
        [`StateMismatchError`][asgrad.nn.StateMismatchError], and nothing is changed.
        The ``grad_scaler.*`` entries go to the optimizer's scaler; loaded before a
        scaled step is compiled, they are held and given to the scaler when it is
        (replacing its scale and growth tracker), and ``state_dict`` returns them
        meanwhile. A state without them leaves the scaler as it is.
        """
        by_name = self._names()
        missing = [k for k in ("lr", "step") if k not in state]
        scaler_keys = [k for k in GradScaler.STATE_KEYS if k in state]
        if scaler_keys and len(scaler_keys) != len(GradScaler.STATE_KEYS):
            missing += [k for k in GradScaler.STATE_KEYS if k not in state]
        unexpected: list[str] = []
        mismatched: list[str] = []
        arrays: dict[tuple[str, str], np.ndarray] = {}
        for key, value in state.items():
            if key in ("lr", "step", *GradScaler.STATE_KEYS):
                continue
            slot, _, pname = key.partition(".")
            if pname not in by_name or not slot:
                unexpected.append(key)
                continue
            p = by_name[pname]
            array = np.asarray(value)
            if array.shape != p.shape:
                mismatched.append(f"{key}: expected {list(p.shape)}, got {list(array.shape)}")
                continue
            arrays[(slot, pname)] = array.astype(p.dtype, copy=True)
        if missing or unexpected or mismatched:
            parts = []
            if missing:
                parts.append("missing: " + ", ".join(missing))
            if unexpected:
                parts.append("unexpected (no such parameter): " + ", ".join(unexpected))
            if mismatched:
                parts.append("mismatched: " + "; ".join(mismatched))
            raise StateMismatchError(
                "optimizer state does not fit this optimizer (" + " | ".join(parts) + ");"
                " load a state saved from the same model and optimizer",
                missing=missing,
                unexpected=unexpected,
                mismatched=mismatched,
            )
        self.lr = float(np.asarray(state["lr"]))
        self.step_count.value = np.array(float(np.asarray(state["step"])))
        held = {k: state[k] for k in GradScaler.STATE_KEYS} if scaler_keys else None
        if held is not None and self.scaler is not None:
            self.scaler.load_optimizer_entries(held)
            held = None
        self._held_scaler_state = held
        for slot, by_param in self.state.items():
            fill = self._fills.get(slot, 0.0)
            for pname, p in by_name.items():
                if id(p) in by_param and (slot, pname) not in arrays:
                    by_param[id(p)].value = np.full(p.shape, fill, dtype=p.dtype)
        for (slot, pname), array in arrays.items():
            self.slot(slot, by_name[pname]).value = array

    # -- the step ---------------------------------------------------------------------------
    def update(self, param: Tensor, g: Tensor, var: Variable, step: Tensor) -> Tensor:
        """The parameter's new value, in graph ops (and state updates via ``self.assign``)."""
        raise NotImplementedError

    def assign(self, var: Variable, value: Tensor) -> Tensor:
        """Set ``var`` to ``value`` after the step (used by [`update`][asgrad.nn.Optimizer.update]
        for state); returns the value ``var`` takes.

        That is ``value``, or, in a step compiled with a [`GradScaler`][asgrad.nn.GradScaler],
        ``where(found_inf, old, value)``: the variable keeps its value on a skipped
        step. An update that reads the state it assigned (Adam's parameter step reads
        both new moments) should read the returned tensor: the values are the same
        whenever the step is not skipped, and each gated rule then reads only other
        gated rules, so a backend fuses them as it fuses the ungated ones.
        """
        if self._found_inf is not None:
            value = where(self._found_inf, value.graph.bind(var), value)
        self._pending[var] = value
        return value

    def compile(
        self,
        loss: Tensor,
        outputs: Sequence[Tensor] = (),
        *,
        backend: str | None = None,
        debug: bool | None = None,
        memory_budget: int | None = None,
        precision: str = "float32",
    ) -> Program:
        """One program computing ``[loss, *outputs]`` and applying every update.

        ``precision="mixed"`` rebuilds the loss's graph (and ``outputs``, and the
        graph's own updates) with float16 matrix products and the casts around them
        before differentiating (`asgrad.tensor.api.precision`): the backward pass
        follows the same dtypes, the parameters stay float32 master weights, and
        their gradients, the optimizer's state and its update are float32. Pair it
        with a [`GradScaler`][asgrad.nn.GradScaler] so small float16 gradients do not
        flush to zero.

        ``memory_budget`` (bytes) makes the step's planned peak fit by recomputing
        chosen activations in the backward pass (see [`compile`][asgrad.tensor.compile]);
        the losses and gradients are bit-identical to the unbudgeted step's. Where no
        choice fits, the step is built again with loops whose gradients compute each
        forward step again instead of saving its values
        ([`recompute_loop_steps`][asgrad.autograd.recompute_loop_steps]).
        ``step.memory()`` gives the planned peak by category.

        ``debug=True`` checks numerics: a step stops at the first op that makes a NaN
        or an infinity and raises [`NumericsError`][asgrad.tensor.NumericsError] naming it,
        its inputs' ranges and the source line that made it, without updating any
        variable (the default comes from ``ASGRAD_CHECK_NUMERICS``).

        ``loss`` may be a [`GradScaler`][asgrad.nn.GradScaler]'s ``scaler.scale(loss)``:
        the step then differentiates the scaled loss, unscales the gradients, applies
        the update only when they are all finite (every assigned variable otherwise
        keeps its value) and updates the scale; it returns the unscaled loss first.

        >>> import numpy as np
        >>> from asgrad.tensor import Graph
        >>> from asgrad.nn import Linear, SGD, mse_loss
        >>> model = Linear(2, 1, rng=0)
        >>> g = Graph()
        >>> x, y = g.input("x", (4, 2)), g.input("y", (4, 1))
        >>> step = SGD(model.parameters(), lr=0.1).compile(mse_loss(model(x), y))
        >>> first = step(x=np.ones((4, 2), "float32"), y=np.zeros((4, 1), "float32"))[0]
        >>> second = step(x=np.ones((4, 2), "float32"), y=np.zeros((4, 1), "float32"))[0]
        >>> bool(second < first)
        True
        """
        graph = loss.graph
        used = [p for p in self.params if graph.uses(p)]
        if not used:
            raise GraphError("none of the optimizer's parameters appear in the loss's graph")
        scaler = loss.scaler if isinstance(loss, ScaledLoss) else None
        if precision not in PRECISIONS:
            raise ArgumentError(
                f"precision must be one of {', '.join(map(repr, PRECISIONS))}, got {precision!r}"
            )
        # A graph rebuilt in the training loop (PyTorch's habit) that is the same as one
        # compiled before gets that program back: the cost of a key, not of a compile.
        key = structure_key([loss, *outputs], graph.updates)
        if key is not None:
            scaling = None if scaler is None else (id(scaler), scaler.settings())
            key = (key, backend, debug, memory_budget, self._settings(), scaling, precision)
            cached = self._programs.get(key)
            if cached is not None:
                self._programs.move_to_end(key)
                return cached
        graph_updates: dict[Variable, Tensor] = dict(graph.updates)
        first = loss.unscaled if isinstance(loss, ScaledLoss) else loss
        if precision != "float32":
            [first, *outs], graph_updates = with_precision(
                [first, *outputs], graph_updates, precision
            )
            outputs = outs
            loss = first if scaler is None else scaler.scale(first)
        tensors = [graph.bind(p) for p in used]

        def build() -> Program:
            grads = grad(loss, tensors)
            if scaler is not None:
                self._attach(scaler)
            with node_meta(role="optimizer", scope="optimizer"):  # for the graph viewer
                pending = self.updates_for(used, tensors, grads, scaler=scaler)
            updates = {**graph_updates, **pending}
            return compile(
                [first, *outputs],
                updates,
                backend=backend,
                check_numerics=debug,
                memory_budget=memory_budget,
            )

        try:
            program = build()
        except MemoryBudgetError:
            if memory_budget is None:
                raise
            # a loop's saved forward values (an LSTM's gates) are one node's: the
            # budget cannot recompute them one by one, but the gradient can do without
            with recompute_loop_steps():
                program = build()
        if key is not None:
            self._programs[key] = program
            while len(self._programs) > self.MAX_PROGRAMS:
                self._programs.popitem(last=False)
        else:
            self._compiles_without_key += 1
            if self._compiles_without_key == 10:
                warnings.warn(
                    f"{type(self).__name__}.compile ran 10 times on graphs it cannot match"
                    " (loop bodies); build the graph and compile once, outside the training"
                    " loop, then call the step per batch: step = opt.compile(loss);"
                    " step(x=..., y=...)",
                    RecompileWarning,
                    stacklevel=2,
                )
        return program

    def _attach(self, scaler: GradScaler) -> None:
        """Make ``scaler`` the one whose state rides in ``state_dict`` (held state first)."""
        self.scaler = scaler
        if self._held_scaler_state is not None:
            scaler.load_optimizer_entries(self._held_scaler_state)
            self._held_scaler_state = None

    def _settings(self) -> tuple[tuple[str, Hashable], ...]:
        """The Python-number settings an update bakes into its graph (betas, momentum...)."""
        return tuple(
            sorted(
                (k, v)
                for k, v in vars(self).items()
                if not k.startswith("_")
                and isinstance(v, bool | int | float | str | tuple)
                and _hashable(v)
            )
        )

    def updates_for(
        self,
        used: Sequence[Variable],
        tensors: Sequence[Tensor],
        grads: Sequence[Tensor],
        *,
        scaler: GradScaler | None = None,
    ) -> dict[Variable, Tensor]:
        """The variable updates of one step, given each parameter's gradient tensor.

        ``tensors[i]`` is ``used[i]`` bound in the gradients' graph. The gradients are
        clipped here ([`clip`][asgrad.nn.Optimizer.clip]); the step counter's update is included.
        This is what [`compile`][asgrad.nn.Optimizer.compile] applies;
        [`asgrad.nn.distributed`][asgrad.nn.distributed] builds its update program from it, with the
        gradients fed as inputs.

        With ``scaler``, ``grads`` are of the scaled loss: they are unscaled before
        clipping, every update is gated on their being finite and the scaler's own
        updates are included ([`GradScaler`][asgrad.nn.GradScaler]).
        """
        found_inf: Tensor | None = None
        if scaler is not None:
            with node_meta(role="grad_scaler"):
                grads, found_inf = scaler.unscale(grads)
        clipped = self.clip(list(grads))
        self._found_inf = found_inf
        graph = tensors[0].graph
        self._pending = {}
        self._shared = {}
        step = graph.bind(self.step_count) + 1.0
        self._step = step
        self.assign(self.step_count, step)
        try:
            for p, t, g in zip(used, tensors, clipped, strict=True):
                with scope(p.name):
                    self.assign(p, self.update(t, g, p, step))
        finally:
            self._step = None
            self._shared = {}
            self._found_inf = None
        pending, self._pending = self._pending, {}
        if scaler is not None and found_inf is not None:
            with node_meta(role="grad_scaler"):
                pending.update(scaler.scale_updates(found_inf))
        return pending

    def clip(self, grads: list[Tensor]) -> list[Tensor]:
        """Clip by value, then by global norm, as configured (inside the step)."""
        if self.clip_grad_value is not None:
            v = float(self.clip_grad_value)
            grads = [g.clamp(-v, v) for g in grads]
        if self.clip_grad_norm is not None:
            total = grads[0].graph.constant(0.0, "float64")
            for g in grads:
                total = total + (g * g).sum().cast("float64")
            norm = total.sqrt()
            scale = (float(self.clip_grad_norm) / (norm + 1e-6)).minimum(1.0)
            scales: dict[str, Tensor] = {}
            for g in grads:
                if g.dtype not in scales:
                    scales[g.dtype] = scale.cast(g.dtype)
            grads = [g * scales[g.dtype] for g in grads]
        return grads

    def zero_grad(self, set_to_none: bool = True) -> NoReturn:
        """Refused with the asgrad way: a compiled step computes fresh gradients each run."""
        raise DefineByRunError(
            f"{type(self).__name__}.zero_grad(): asgrad accumulates no gradients between"
            " steps; step = opt.compile(loss) once, then step(x=..., y=...) per batch computes"
            " fresh gradients and the update (nn.GradientAccumulator to sum them over batches)"
        )

    def __repr__(self) -> str:
        return f"{type(self).__name__}(lr={self.lr}, params={len(self.params)})"


def _check_nonnegative(what: str, value: float) -> None:
    if not value >= 0:  # also rejects NaN
        raise ArgumentError(f"{what} must be a number >= 0, got {value!r}")
