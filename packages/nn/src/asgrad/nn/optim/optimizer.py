"""The optimizer base: updates written as graph ops, compiled into one training step."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import numpy as np

from asgrad.autograd import grad
from asgrad.tensor import Program, Tensor, Variable, compile
from asgrad.tensor.errors import GraphError


class Optimizer:
    """Base class: holds the parameters, the learning rate and per-parameter state.

    The update rule is written in graph ops by :meth:`update`, so a backend runs
    it where the parameters live. :meth:`compile` builds one program that computes
    the loss, its gradients and every update: a whole training step. The learning
    rate is a variable read by that program, so schedulers change it without
    recompiling.
    """

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
        if lr < 0:
            raise ValueError(f"learning rate must be >= 0, got {lr}")
        self._lr = Variable("optimizer.lr", np.array(lr, dtype=np.float64), trainable=False)
        self.clip_grad_norm = clip_grad_norm
        self.clip_grad_value = clip_grad_value
        # Per-parameter state variables, by slot name then parameter identity.
        self.state: dict[str, dict[int, Variable]] = {}
        self.step_count = Variable("optimizer.step", np.array(0.0), trainable=False)

    # -- learning rate -----------------------------------------------------------------------------
    @property
    def lr(self) -> float:
        return float(self._lr.value)

    @lr.setter
    def lr(self, value: float) -> None:
        self._lr.value = np.array(value, dtype=np.float64)

    def lr_tensor(self, like: Tensor) -> Tensor:
        """The learning rate in ``like``'s graph and dtype."""
        return like.graph.bind(self._lr).cast(like.dtype)

    # -- state -------------------------------------------------------------------------------------
    def slot(self, name: str, param: Variable, fill: float = 0.0) -> Variable:
        """The state variable ``name`` of ``param`` (made zero-filled on first use)."""
        slots = self.state.setdefault(name, {})
        var = slots.get(id(param))
        if var is None:
            var = Variable(
                f"{name}", np.full(param.shape, fill, dtype=param.dtype), trainable=False
            )
            slots[id(param)] = var
        var.name = f"optimizer.{name}.{param.name}"
        return var

    def state_dict(self) -> dict[str, np.ndarray]:
        """Learning rate, step and every state slot, keyed ``slot.param_name``."""
        out: dict[str, np.ndarray] = {
            "lr": np.array(self._lr.value),
            "step": np.array(self.step_count.value),
        }
        for slot, by_param in self.state.items():
            for p in self.params:
                if id(p) in by_param:
                    out[f"{slot}.{p.name}"] = np.array(by_param[id(p)].value)
        return out

    def load_state_dict(self, state: Mapping[str, np.ndarray]) -> None:
        """Restore what :meth:`state_dict` returned (parameters must have the same names)."""
        self._lr.value = np.asarray(state["lr"], dtype=np.float64)
        self.step_count.value = np.asarray(state["step"], dtype=self.step_count.dtype)
        by_name = {p.name: p for p in self.params}
        for key, value in state.items():
            if key in ("lr", "step"):
                continue
            slot, _, pname = key.partition(".")
            if pname not in by_name:
                raise GraphError(f"optimizer state {key!r} names no parameter of this optimizer")
            self.slot(slot, by_name[pname]).value = np.asarray(value, dtype=by_name[pname].dtype)

    # -- the step ----------------------------------------------------------------------------------
    def update(self, param: Tensor, g: Tensor, var: Variable, step: Tensor) -> Tensor:
        """The parameter's new value, in graph ops (and state updates via ``self.assign``)."""
        raise NotImplementedError

    def assign(self, var: Variable, value: Tensor) -> None:
        """Set ``var`` to ``value`` after the step (used by :meth:`update` for state)."""
        self._pending[var] = value

    def compile(
        self,
        loss: Tensor,
        outputs: Sequence[Tensor] = (),
        *,
        backend: str | None = None,
    ) -> Program:
        """One program computing ``[loss, *outputs]`` and applying every update.

        >>> import numpy as np
        >>> from asgrad.tensor import Graph
        >>> from asgrad.nn import Linear, SGD, mse_loss
        >>> model = Linear(2, 1, rng=0)
        >>> g = Graph()
        >>> x, y = g.input("x", (4, 2)), g.input("y", (4, 1))
        >>> step = SGD(model.parameters(), lr=0.1).compile(mse_loss(model(x), y))
        >>> first = step(x=np.ones((4, 2)), y=np.zeros((4, 1)))[0]
        >>> second = step(x=np.ones((4, 2)), y=np.zeros((4, 1)))[0]
        >>> bool(second < first)
        True
        """
        graph = loss.graph
        used = [p for p in self.params if id(p) in graph._variables]
        if not used:
            raise GraphError("none of the optimizer's parameters appear in the loss's graph")
        tensors = [graph.bind(p) for p in used]
        grads = self.clip(grad(loss, tensors))
        self._pending: dict[Variable, Tensor] = {}
        step = graph.bind(self.step_count) + 1.0
        self.assign(self.step_count, step)
        for p, t, g in zip(used, tensors, grads, strict=True):
            self.assign(p, self.update(t, g, p, step))
        updates = {**graph.updates, **self._pending}
        return compile([loss, *outputs], updates, backend=backend)

    def clip(self, grads: list[Tensor]) -> list[Tensor]:
        """Clip by value, then by global norm, as configured (inside the step)."""
        if self.clip_grad_value is not None:
            v = float(self.clip_grad_value)
            grads = [g.clamp(-v, v) for g in grads]
        if self.clip_grad_norm is not None:
            total = grads[0].graph.constant(0.0, grads[0].dtype)
            for g in grads:
                total = total + (g * g).sum().cast(total.dtype)
            norm = total.sqrt()
            scale = (float(self.clip_grad_norm) / (norm + 1e-6)).minimum(1.0)
            grads = [g * scale.cast(g.dtype) for g in grads]
        return grads

    def __repr__(self) -> str:
        return f"{type(self).__name__}(lr={self.lr}, params={len(self.params)})"
