"""Dynamic loss scaling (PyTorch's ``GradScaler``), inside the compiled training step.

PyTorch's loop ``scaler.scale(loss).backward(); scaler.step(optimizer);
scaler.update()`` becomes one compiled program in asgrad:
``step = optimizer.compile(scaler.scale(loss))``. The scale and the growth tracker are
variables that program reads and updates, so a step costs no host synchronisation:

1. the loss is multiplied by the scale (float32, as PyTorch's) before differentiation;
2. each gradient is multiplied by ``1 / scale`` (unscaled);
3. ``found_inf`` is true when any unscaled gradient element is an infinity or a NaN;
4. the optimizer's update (clipping included, on the unscaled gradients) is computed,
   and every variable it assigns (parameters, optimizer state, the step counter) takes
   ``where(found_inf, old, new)``: on a skipped step nothing changes, as when PyTorch's
   ``scaler.step`` skips ``optimizer.step()``;
5. the scale is updated as ``torch.amp.GradScaler.update``: times ``backoff_factor``
   on ``found_inf`` (and the tracker reset to 0), otherwise the tracker counts clean
   steps and at ``growth_interval`` of them the scale is multiplied by
   ``growth_factor`` (kept unchanged if that product is not finite) and the tracker
   reset to 0.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, NoReturn

import numpy as np

from asgrad.tensor import Tensor, Variable, where
from asgrad.tensor.errors import ArgumentError, DefineByRunError

__all__ = ["GradScaler", "ScaledLoss"]

_FLOAT_DTYPES = ("float16", "float32", "float64")
_FLOAT32_MAX = float(np.finfo(np.float32).max)


class ScaledLoss(Tensor):
    """A loss multiplied by a [`GradScaler`][asgrad.nn.GradScaler]'s scale.

    Made by [`GradScaler.scale`][asgrad.nn.GradScaler.scale]; an optimizer's ``compile``
    recognises it and builds the scaled step. ``unscaled`` is the loss itself (what the
    step returns first), ``scaler`` the scaler.

    >>> from asgrad.tensor import Graph
    >>> loss = Graph().input("x", (3,)).sum()
    >>> scaled = GradScaler().scale(loss)
    >>> scaled.unscaled is loss, scaled.node.op
    (True, 'mul')
    """

    __slots__ = ("scaler", "unscaled")

    def __init__(self, node: Tensor, unscaled: Tensor, scaler: GradScaler) -> None:
        super().__init__(node.node)
        self.unscaled = unscaled
        self.scaler = scaler


class GradScaler:
    """Dynamic loss scaling with ``torch.amp.GradScaler``'s settings and update rule.

    ``step = optimizer.compile(scaler.scale(loss))`` compiles a step that scales the
    loss, unscales the gradients, skips the whole update when any gradient is not
    finite, and backs the scale off or grows it (see the module docs for the exact
    rule). The step returns the unscaled loss first. With ``enabled=False``,
    ``scale(loss)`` returns ``loss`` and the step is the optimizer's usual one.

    >>> import numpy as np
    >>> from asgrad.tensor import Graph
    >>> from asgrad.nn import Linear, SGD, mse_loss
    >>> model = Linear(2, 1, rng=0)
    >>> g = Graph()
    >>> x, y = g.input("x", (4, 2)), g.input("y", (4, 1))
    >>> scaler = GradScaler(init_scale=2.0**10, growth_interval=2)
    >>> step = SGD(model.parameters(), lr=0.1).compile(scaler.scale(mse_loss(model(x), y)))
    >>> ones = np.ones((4, 2), "float32")
    >>> for _ in range(2):
    ...     _ = step(x=ones, y=np.zeros((4, 1), "float32"))
    >>> scaler.get_scale()  # two clean steps: grown once
    2048.0
    >>> before = model.weight.value.copy()
    >>> _ = step(x=ones, y=np.full((4, 1), np.nan, "float32"))  # NaN gradients
    >>> scaler.get_scale(), bool((model.weight.value == before).all())  # skipped, backed off
    (1024.0, True)
    """

    def __init__(
        self,
        init_scale: float = 2.0**16,
        growth_factor: float = 2.0,
        backoff_factor: float = 0.5,
        growth_interval: int = 2000,
        enabled: bool = True,
    ) -> None:
        if not 0.0 < init_scale <= _FLOAT32_MAX:
            raise ArgumentError(f"init_scale must be a finite float32 > 0, got {init_scale!r}")
        if not 1.0 < growth_factor <= _FLOAT32_MAX:
            raise ArgumentError(
                f"growth_factor must be > 1.0 and a finite float32, got {growth_factor!r}"
            )
        if not 0.0 < backoff_factor < 1.0:
            raise ArgumentError(f"backoff_factor must be in (0, 1), got {backoff_factor!r}")
        interval: object = growth_interval  # checked at run time: a float or a bool slips in
        if isinstance(interval, bool) or not (isinstance(interval, int) and interval > 0):
            raise ArgumentError(f"growth_interval must be an int > 0, got {growth_interval!r}")
        self.growth_factor = float(growth_factor)
        self.backoff_factor = float(backoff_factor)
        self.growth_interval = int(growth_interval)
        self.enabled = bool(enabled)
        self._scale = Variable(
            "grad_scaler.scale", np.array(init_scale, dtype=np.float32), trainable=False
        )
        self._growth_tracker = Variable(
            "grad_scaler.growth_tracker", np.array(0.0, dtype=np.float32), trainable=False
        )

    # -- the PyTorch spelling --------------------------------------------------------------
    def scale(self, loss: Tensor) -> Tensor:
        """``loss`` times the scale, as a [`ScaledLoss`][asgrad.nn.ScaledLoss] an optimizer's
        ``compile`` turns into the scaled step (``loss`` itself when disabled).

        >>> from asgrad.tensor import Graph
        >>> loss = Graph().input("x", (2,)).sum()
        >>> type(GradScaler().scale(loss)).__name__, GradScaler(enabled=False).scale(loss) is loss
        ('ScaledLoss', True)
        """
        if not isinstance(loss, Tensor):
            raise ArgumentError(
                f"GradScaler.scale takes the loss Tensor, got {type(loss).__name__}"
            )
        if not self.enabled:
            return loss
        if loss.shape != () or loss.dtype not in _FLOAT_DTYPES:
            raise ArgumentError(
                f"GradScaler.scale takes a scalar float loss, got shape {loss.shape} dtype"
                f" {loss.dtype}; reduce it first (loss.mean() or loss.sum())"
            )
        scale = loss.graph.bind(self._scale)
        if loss.dtype != "float32":
            scale = scale.cast(loss.dtype)
        return ScaledLoss(loss * scale, loss, self)

    def step(self, optimizer: object, *args: object, **kwargs: object) -> NoReturn:
        """Refused with the asgrad way: the compiled step already gates the update.

        >>> from asgrad.tensor.errors import DefineByRunError
        >>> try:
        ...     GradScaler().step(None)
        ... except DefineByRunError as e:
        ...     print("compile" in str(e))
        True
        """
        raise DefineByRunError(
            "GradScaler.step(optimizer): in asgrad the scaled, gated update is part of the"
            " compiled step; step = optimizer.compile(scaler.scale(loss)) once, then"
            " step(x=..., y=...) per batch unscales, skips non-finite steps and updates"
            " the scale"
        )

    def update(self, new_scale: float | None = None) -> None:
        """Set the scale to ``new_scale`` (PyTorch's ``update(new_scale)``).

        Without ``new_scale`` this is refused: the compiled step updates the scale
        itself after every run, so there is nothing left to do per step.

        >>> scaler = GradScaler()
        >>> scaler.update(128.0)
        >>> scaler.get_scale()
        128.0
        """
        if new_scale is None:
            raise DefineByRunError(
                "GradScaler.update(): the compiled step (optimizer.compile(scaler.scale(loss)))"
                " already backs the scale off or grows it on every run; drop this call, or"
                " pass new_scale to set the scale"
            )
        if not 0.0 < new_scale <= _FLOAT32_MAX:
            raise ArgumentError(f"new_scale must be a finite float32 > 0, got {new_scale!r}")
        self._scale.value = np.array(new_scale, dtype=np.float32)

    def get_scale(self) -> float:
        """The scale the next step multiplies the loss by (1.0 when disabled).

        >>> GradScaler(init_scale=8.0).get_scale(), GradScaler(enabled=False).get_scale()
        (8.0, 1.0)
        """
        return float(self._scale.value) if self.enabled else 1.0

    def get_growth_tracker(self) -> int:
        """Clean steps since the scale last changed (PyTorch's ``_get_growth_tracker``).

        >>> GradScaler().get_growth_tracker()
        0
        """
        return int(self._growth_tracker.value) if self.enabled else 0

    def is_enabled(self) -> bool:
        """Whether the scaler scales (``enabled``).

        >>> GradScaler(enabled=False).is_enabled()
        False
        """
        return self.enabled

    def state_dict(self) -> dict[str, Any]:
        """PyTorch's keys: ``scale``, ``growth_factor``, ``backoff_factor``,
        ``growth_interval``, ``_growth_tracker`` (empty when disabled).

        >>> GradScaler(init_scale=4.0).state_dict()["scale"]
        4.0
        """
        if not self.enabled:
            return {}
        return {
            "scale": self.get_scale(),
            "growth_factor": self.growth_factor,
            "backoff_factor": self.backoff_factor,
            "growth_interval": self.growth_interval,
            "_growth_tracker": self.get_growth_tracker(),
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore what [`state_dict`][asgrad.nn.GradScaler.state_dict] returned (also
        PyTorch's); the next step continues identically.

        >>> a, b = GradScaler(init_scale=4.0), GradScaler()
        >>> b.load_state_dict(a.state_dict())
        >>> b.get_scale()
        4.0
        """
        if not self.enabled:
            raise ArgumentError("GradScaler.load_state_dict: this scaler is disabled")
        if not state:
            raise ArgumentError(
                "GradScaler.load_state_dict: the state is empty (saved from a disabled scaler)"
            )
        missing = [
            k
            for k in ("scale", "growth_factor", "backoff_factor", "growth_interval")
            if k not in state
        ]
        if missing:
            raise ArgumentError(f"GradScaler.load_state_dict: missing {', '.join(missing)}")
        self.growth_factor = float(state["growth_factor"])
        self.backoff_factor = float(state["backoff_factor"])
        self.growth_interval = int(state["growth_interval"])
        self._scale.value = np.array(float(np.asarray(state["scale"])), dtype=np.float32)
        tracker = float(np.asarray(state.get("_growth_tracker", 0)))
        self._growth_tracker.value = np.array(tracker, dtype=np.float32)

    def __repr__(self) -> str:
        return (
            f"GradScaler(scale={self.get_scale()}, growth_interval={self.growth_interval},"
            f" enabled={self.enabled})"
        )

    # -- inside the compiled step ----------------------------------------------------------
    def settings(self) -> tuple[float, float, int]:
        """The numbers the compiled step bakes in (part of an optimizer's program key)."""
        return (self.growth_factor, self.backoff_factor, self.growth_interval)

    def unscale(self, grads: Sequence[Tensor]) -> tuple[list[Tensor], Tensor]:
        """The gradients times ``1 / scale`` and ``found_inf`` (a bool scalar: some
        element of them is an infinity or a NaN), as graph ops."""
        graph = grads[0].graph
        inv = 1.0 / graph.bind(self._scale)
        inv_by_dtype: dict[str, Tensor] = {}
        out: list[Tensor] = []
        finite: Tensor | None = None
        for g in grads:
            if g.dtype not in inv_by_dtype:
                inv_by_dtype[g.dtype] = inv if g.dtype == "float32" else inv.cast(g.dtype)
            u = g * inv_by_dtype[g.dtype]
            out.append(u)
            ok = u.isfinite().all()
            finite = ok if finite is None else finite & ok
        assert finite is not None
        return out, ~finite

    def scale_updates(self, found_inf: Tensor) -> dict[Variable, Tensor]:
        """The scale's and the growth tracker's new values after a step (PyTorch's
        ``update`` rule; ``found_inf`` from [`unscale`][asgrad.nn.GradScaler.unscale])."""
        graph = found_inf.graph
        scale = graph.bind(self._scale)
        tracker = graph.bind(self._growth_tracker)
        successful = tracker + 1.0
        grow = successful >= float(self.growth_interval)
        # PyTorch keeps the scale when scale * growth_factor is not finite; that is when
        # the scale exceeds `_growth_limit`, and then the factor is 1 (no overflow made)
        limit = _growth_limit(self.growth_factor)
        factor = where(
            scale <= limit,
            graph.constant(self.growth_factor, "float32"),
            graph.constant(1.0, "float32"),
        )
        grown = scale * factor
        zero = graph.constant(0.0, "float32")
        return {
            self._scale: where(found_inf, scale * self.backoff_factor, where(grow, grown, scale)),
            self._growth_tracker: where(found_inf, zero, where(grow, zero, successful)),
        }

    # -- checkpointing with the optimizer ----------------------------------------------------
    STATE_KEYS = ("grad_scaler.scale", "grad_scaler.growth_tracker")

    def optimizer_entries(self) -> dict[str, Any]:
        """The entries an optimizer's ``state_dict`` carries for this scaler."""
        return {
            "grad_scaler.scale": self.get_scale(),
            "grad_scaler.growth_tracker": self.get_growth_tracker(),
        }

    def load_optimizer_entries(self, state: Mapping[str, Any]) -> None:
        """Restore what [`optimizer_entries`][asgrad.nn.GradScaler.optimizer_entries] gave."""
        scale = float(np.asarray(state["grad_scaler.scale"]))
        self._scale.value = np.array(scale, dtype=np.float32)
        tracker = float(np.asarray(state["grad_scaler.growth_tracker"]))
        self._growth_tracker.value = np.array(tracker, dtype=np.float32)


def _growth_limit(growth_factor: float) -> float:
    """The largest float32 ``s`` whose float32 product with ``growth_factor`` is finite."""
    g = np.float32(growth_factor)
    inf = np.float32(np.inf)
    with np.errstate(over="ignore"):
        s = np.float32(np.finfo(np.float32).max / np.float64(g))
        while np.isfinite(np.nextafter(s, inf) * g):
            s = np.nextafter(s, inf)
        while not np.isfinite(s * g):
            s = np.nextafter(s, np.float32(0))
    return float(s)


def refuse_scaled(loss: Tensor, where_: str) -> None:
    """Raise when ``loss`` is a scaled loss that ``where_`` would not unscale."""
    if isinstance(loss, ScaledLoss):
        raise ArgumentError(
            f"{where_} does not unscale gradients: it got a GradScaler-scaled loss, whose"
            " gradients would be off by the scale; pass the loss itself, or train with"
            " optimizer.compile(scaler.scale(loss))"
        )
