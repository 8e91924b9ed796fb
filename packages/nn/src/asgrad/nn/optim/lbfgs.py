"""L-BFGS with PyTorch's closure API, over a compiled program of loss and gradients."""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from asgrad.autograd import grad
from asgrad.nn.errors import StateMismatchError
from asgrad.nn.grad_scaler import refuse_scaled
from asgrad.nn.optim.line_search import strong_wolfe
from asgrad.nn.optim.optimizer import Optimizer
from asgrad.tensor import Program, Tensor, Variable, compile
from asgrad.tensor.api.precision import with_precision
from asgrad.tensor.errors import ArgumentError, ArgumentTypeError, GraphError

__all__ = ["LBFGS"]

Closure = Callable[[], Sequence[Any]]
_ARRAYS = ("d", "prev_flat_grad", "old_dirs", "old_stps", "ro")
_SCALARS = ("func_evals", "t", "H_diag", "prev_loss")


class LBFGS(Optimizer):
    """``torch.optim.LBFGS``: limited-memory BFGS, with an optional strong-Wolfe line search.

    L-BFGS evaluates the loss several times per step at points it chooses (its line
    search branches on the values), so its update is not one graph:
    [`compile`][asgrad.nn.LBFGS.compile] makes a program that returns the loss and every parameter's
    gradient without updating anything, and [`step`][asgrad.nn.LBFGS.step] calls a closure that runs
    it, as PyTorch's closure re-evaluates the model. The two-loop recursion and the line search run
    on the host in float64, writing the parameters between evaluations (a GPU
    program re-reads them). The arguments and their defaults are PyTorch's::

        evaluate = opt.compile(loss)               # [loss, *gradients]
        for _ in range(epochs):
            opt.step(lambda: evaluate(x=X, y=Y))   # PyTorch: opt.step(closure)

    >>> import numpy as np
    >>> from asgrad.tensor import Graph
    >>> from asgrad.nn import Linear, mse_loss
    >>> model = Linear(2, 1, dtype="float64", rng=0)
    >>> g = Graph()
    >>> x, y = g.input("x", (8, 2), "float64"), g.input("y", (8, 1), "float64")
    >>> opt = LBFGS(model.parameters(), line_search_fn="strong_wolfe")
    >>> evaluate = opt.compile(mse_loss(model(x), y))
    >>> X = np.random.default_rng(0).standard_normal((8, 2))
    >>> Y = X @ np.array([[2.0], [-1.0]]) + 0.5
    >>> first = opt.step(lambda: evaluate(x=X, y=Y))
    >>> bool(evaluate(x=X, y=Y)[0] < 1e-9 < first)  # solved in one step
    True
    """

    def __init__(
        self,
        params: Iterable[Variable],
        lr: float = 1.0,
        max_iter: int = 20,
        max_eval: int | None = None,
        tolerance_grad: float = 1e-7,
        tolerance_change: float = 1e-9,
        history_size: int = 100,
        line_search_fn: str | None = None,
    ) -> None:
        super().__init__(params, lr)
        if line_search_fn not in (None, "strong_wolfe"):
            raise ArgumentError(
                f"line_search_fn must be None or 'strong_wolfe', got {line_search_fn!r}"
            )
        if max_iter < 1 or history_size < 1:
            raise ArgumentError(
                f"max_iter and history_size must be >= 1, got {max_iter}, {history_size}"
            )
        self.max_iter, self.max_eval = int(max_iter), int(max_eval or max_iter * 5 // 4)
        self.tolerance_grad, self.tolerance_change = tolerance_grad, tolerance_change
        self.history_size, self.line_search_fn = int(history_size), line_search_fn
        self.lbfgs_state: dict[str, Any] = {"func_evals": 0, "n_iter": 0}

    # -- the program ------------------------------------------------------------------------
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
        """A program returning ``[loss, *gradients, *outputs]``; it updates no parameter.

        The gradients are of every parameter, in order (zero for one the loss does not
        use); the graph's own updates (a BatchNorm's statistics, a dropout seed) run on
        every evaluation, as a PyTorch closure's forward pass would. ``memory_budget``
        and ``precision``: as in [`Optimizer.compile`][asgrad.nn.Optimizer.compile].
        """
        refuse_scaled(loss, "LBFGS.compile")
        graph = loss.graph
        if not any(graph.uses(p) for p in self.params):
            raise GraphError("none of the optimizer's parameters appear in the loss's graph")
        [loss, *outputs], updates = with_precision([loss, *outputs], graph.updates, precision)
        grads = grad(loss, [graph.bind(p) for p in self.params])
        outs = [loss, *grads, *outputs]
        return compile(
            outs,
            updates,
            backend=backend,
            check_numerics=debug,
            memory_budget=memory_budget,
        )

    def update(self, param: Tensor, g: Tensor, var: Variable, step: Tensor) -> Tensor:
        raise GraphError("LBFGS updates on the host: use LBFGS.compile and LBFGS.step(closure)")

    # -- flat views -------------------------------------------------------------------------
    def _evaluate(self, closure: Closure) -> tuple[float, np.ndarray]:
        out = closure()
        if not isinstance(out, Sequence) or len(out) < 1 + len(self.params):  # type: ignore[redundant-expr]  # untyped callers
            raise ArgumentTypeError(
                "the LBFGS closure must return what LBFGS.compile's program returns"
                f" ([loss, *gradients]: {1 + len(self.params)} arrays or more), got"
                f" {type(out).__name__}"
            )
        grads = [np.asarray(g, np.float64).reshape(-1) for g in out[1 : 1 + len(self.params)]]
        return float(np.asarray(out[0])), np.concatenate(grads)

    def _get_flat(self) -> np.ndarray:
        return np.concatenate([np.asarray(p.value, np.float64).reshape(-1) for p in self.params])

    def _set_flat(self, flat: np.ndarray) -> None:
        offset = 0
        for p in self.params:
            size = int(np.prod(p.shape))
            chunk = flat[offset : offset + size].reshape(p.shape)
            p.value = chunk.astype(p.dtype)
            offset += size

    def _along(
        self, closure: Closure, x: np.ndarray, d: np.ndarray, t: float
    ) -> tuple[float, np.ndarray]:
        """Loss and gradient at ``x + t d``; the parameters are left at ``x``."""
        self._set_flat(x + t * d)
        try:
            return self._evaluate(closure)
        finally:
            self._set_flat(x)

    # -- the step ---------------------------------------------------------------------------
    def step(self, closure: Closure) -> float:  # PyTorch's loop
        """Run up to ``max_iter`` iterations; returns the loss of the first evaluation."""
        if not callable(closure):
            raise ArgumentTypeError("LBFGS.step needs a closure that runs the compiled program")
        lr, state = self.lr, self.lbfgs_state
        orig_loss, flat_grad = self._evaluate(closure)
        loss = orig_loss
        evals = 1
        state["func_evals"] += 1
        if np.abs(flat_grad).max() <= self.tolerance_grad:
            return orig_loss
        d, t = state.get("d"), state.get("t")
        old_dirs: list[np.ndarray] = list(state.get("old_dirs", []))
        old_stps: list[np.ndarray] = list(state.get("old_stps", []))
        ro: list[float] = list(state.get("ro", []))
        h_diag = state.get("H_diag", 1.0)
        prev_flat_grad, prev_loss = state.get("prev_flat_grad"), state.get("prev_loss")
        n_iter = 0
        while n_iter < self.max_iter:
            n_iter += 1
            state["n_iter"] += 1
            if state["n_iter"] == 1 or d is None or t is None or prev_flat_grad is None:
                d = -flat_grad
                old_dirs, old_stps, ro, h_diag = [], [], [], 1.0
            else:
                y = flat_grad - prev_flat_grad
                s = d * t
                ys = float(y @ s)
                if ys > 1e-10:  # update the memory
                    if len(old_dirs) == self.history_size:
                        del old_dirs[0], old_stps[0], ro[0]
                    old_dirs.append(y)
                    old_stps.append(s)
                    ro.append(1.0 / ys)
                    h_diag = ys / float(y @ y)
                # the two-loop recursion: d = -H g
                al = [0.0] * len(old_dirs)
                q = -flat_grad
                for i in range(len(old_dirs) - 1, -1, -1):
                    al[i] = float(old_stps[i] @ q) * ro[i]
                    q = q - al[i] * old_dirs[i]
                d = r = q * h_diag
                for i in range(len(old_dirs)):
                    be_i = float(old_dirs[i] @ r) * ro[i]
                    r += old_stps[i] * (al[i] - be_i)
            prev_flat_grad, prev_loss = flat_grad.copy(), loss
            t = min(1.0, 1.0 / float(np.abs(flat_grad).sum())) * lr if state["n_iter"] == 1 else lr
            gtd = float(flat_grad @ d)
            if gtd > -self.tolerance_change:  # not a descent direction
                break
            ls_evals = 0
            x = self._get_flat()
            if self.line_search_fn == "strong_wolfe":
                along = functools.partial(self._along, closure, x, d)
                loss, flat_grad, t, ls_evals = strong_wolfe(
                    along, t, d, loss, flat_grad, gtd, max_ls=self.max_eval - evals
                )
                self._set_flat(x + t * d)
                opt_cond = np.abs(flat_grad).max() <= self.tolerance_grad
            else:
                self._set_flat(x + t * d)
                opt_cond = False
                if n_iter != self.max_iter:
                    loss, flat_grad = self._evaluate(closure)
                    opt_cond = np.abs(flat_grad).max() <= self.tolerance_grad
                    ls_evals = 1
            evals += ls_evals
            state["func_evals"] += ls_evals
            if n_iter == self.max_iter or evals >= self.max_eval or opt_cond:
                break
            if np.abs(d * t).max() <= self.tolerance_change:
                break
            if abs(loss - prev_loss) < self.tolerance_change:
                break
        state.update(d=d, t=t, H_diag=h_diag, prev_flat_grad=prev_flat_grad, prev_loss=prev_loss)
        state.update(old_dirs=old_dirs, old_stps=old_stps, ro=ro)
        return orig_loss

    # -- state ------------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """``lr``, ``step`` (iterations so far), the evaluation count and the memory."""
        s = self.lbfgs_state
        out: dict[str, Any] = {"lr": self.lr, "step": int(s["n_iter"])}
        for key in _SCALARS:
            if s.get(key) is not None:
                out[key] = float(s[key])
        for key in _ARRAYS:
            if s.get(key) is not None:
                out[key] = np.array(s[key], dtype=np.float64)
        return out

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore [`state_dict`][asgrad.nn.LBFGS.state_dict]'s output; the next step continues
        identically."""
        unknown = sorted(set(state) - {"lr", "step", *_SCALARS, *_ARRAYS})
        missing = [k for k in ("lr", "step") if k not in state]
        if unknown or missing:
            raise StateMismatchError(
                f"not an LBFGS state (missing {missing}, unexpected {unknown}); load a state"
                " saved from LBFGS.state_dict",
                missing=missing,
                unexpected=unknown,
                mismatched=[],
            )
        self.lr = float(state["lr"])
        new: dict[str, Any] = {"n_iter": int(state["step"]), "func_evals": 0}
        for key in _SCALARS:
            if key in state:
                new[key] = float(state[key])
        new["func_evals"] = int(new["func_evals"])
        for key in ("d", "prev_flat_grad"):
            if key in state:
                new[key] = np.asarray(state[key], np.float64).copy()
        for key in ("old_dirs", "old_stps"):
            if key in state:
                new[key] = [row.copy() for row in np.asarray(state[key], np.float64)]
        if "ro" in state:
            new["ro"] = [float(v) for v in np.asarray(state["ro"])]
        self.lbfgs_state = new
