"""Gradient accumulation across compiled programs: several backward passes, one update.

PyTorch's ``loss_a.backward(); loss_b.backward(); optimizer.step();
optimizer.zero_grad()`` sums the gradients of two losses (two graphs, two batches,
micro-batches of one large batch) before one update. In asgrad,
[`GradientAccumulator.compile`][asgrad.nn.GradientAccumulator.compile] makes a program that computes
a loss and adds its gradients into per-parameter accumulators (the ``.grad`` of PyTorch), and
[`GradientAccumulator.compile_step`][asgrad.nn.GradientAccumulator.compile_step] a program that
applies the optimizer's update from the sums and zeroes them.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from asgrad.autograd import grad
from asgrad.nn.grad_scaler import refuse_scaled
from asgrad.nn.optim.optimizer import Optimizer
from asgrad.tensor import Graph, Program, Tensor, Variable, compile
from asgrad.tensor.errors import GraphError

__all__ = ["GradientAccumulator"]


class GradientAccumulator:
    """Sums gradients over any number of compiled backward programs, then updates once.

    >>> import numpy as np
    >>> from asgrad.nn import Linear, SGD, mse_loss
    >>> model = Linear(2, 1, rng=0)
    >>> acc = GradientAccumulator(SGD(model.parameters(), lr=0.1))
    >>> g = Graph()
    >>> x, y = g.input("x", (4, 2)), g.input("y", (4, 1))
    >>> backward = acc.compile(mse_loss(model(x), y))   # loss.backward()
    >>> step = acc.compile_step()                       # optimizer.step(); zero_grad()
    >>> ones, zeros = np.ones((4, 2), "float32"), np.zeros((4, 1), "float32")
    >>> loss_a = backward(x=ones, y=zeros)[0]
    >>> loss_b = backward(x=-ones, y=zeros)[0]          # gradients add up
    >>> _ = step()
    >>> float(abs(acc.grad(model.weight).value).sum())  # zeroed for the next round
    0.0

    The update is the optimizer's own (its state, clipping, learning rate and step
    count), applied to the summed gradients, so accumulating ``loss_a`` and
    ``loss_b`` then stepping equals one ``optimizer.compile(loss_a + loss_b)`` step.
    ``compile_step(average=True)`` divides the sums by the number of backward runs
    since the last step (the mean over micro-batches of mean losses). Variable
    updates a graph asks for (batch norm's running statistics) happen in each
    backward program, as each PyTorch forward pass makes them.
    """

    def __init__(self, optimizer: Optimizer) -> None:
        self.optimizer = optimizer
        self._grads: dict[int, Variable] = {}
        self.count = Variable("accumulator.count", np.array(0.0), trainable=False)

    def grad(self, param: Variable) -> Variable:
        """The accumulated gradient of ``param`` (PyTorch's ``param.grad``), zeros at first."""
        var = self._grads.get(id(param))
        if var is None:
            if not any(p is param for p in self.optimizer.params):
                raise GraphError(f"parameter {param.name!r} is not one of the optimizer's")
            value = np.zeros(param.shape, dtype=param.dtype)
            var = Variable(f"grad.{param.name}", value, trainable=False)
            self._grads[id(param)] = var
        return var

    def compile(
        self,
        loss: Tensor,
        outputs: Sequence[Tensor] = (),
        *,
        backend: str | None = None,
        debug: bool | None = None,
    ) -> Program:
        """A program computing ``[loss, *outputs]`` that adds its gradients to the sums."""
        refuse_scaled(loss, "GradientAccumulator.compile")
        graph = loss.graph
        used = [p for p in self.optimizer.params if graph.uses(p)]
        if not used:
            raise GraphError("none of the optimizer's parameters appear in the loss's graph")
        grads = grad(loss, [graph.bind(p) for p in used])
        updates: dict[Variable, Tensor] = dict(graph.updates)
        for p, g in zip(used, grads, strict=True):
            acc = self.grad(p)
            updates[acc] = graph.bind(acc) + g
        updates[self.count] = graph.bind(self.count) + 1.0
        return compile([loss, *outputs], updates, backend=backend, check_numerics=debug)

    def compile_step(
        self, *, average: bool = False, backend: str | None = None, debug: bool | None = None
    ) -> Program:
        """A program applying the optimizer's update from the sums, then zeroing them.

        It returns the step number. Parameters no backward program has reached yet
        are left alone (PyTorch skips parameters whose ``.grad`` is None).
        """
        opt = self.optimizer
        used = [p for p in opt.params if id(p) in self._grads]
        if not used:
            raise GraphError(
                "compile a backward program first (accumulator.compile(loss)): no gradient"
                " is accumulated yet"
            )
        g = Graph("accumulated-step")
        tensors = [g.bind(p) for p in used]
        sums = [g.bind(self._grads[id(p)]) for p in used]
        if average:
            count = g.bind(self.count).maximum(1.0)
            sums = [s / count.cast(s.dtype) for s in sums]
        grads = opt.clip(sums)
        # The optimizer's protocol, as Optimizer.compile runs it: a step counter, the
        # per-step scalars shared by all parameters, and the updates it assigns.
        opt._pending, opt._shared = {}, {}
        step = g.bind(opt.step_count) + 1.0
        opt._step = step
        opt.assign(opt.step_count, step)
        try:
            for p, t, gr in zip(used, tensors, grads, strict=True):
                opt.assign(p, opt.update(t, gr, p, step))
        finally:
            opt._step = None
            opt._shared = {}
        updates = dict(opt._pending)
        for p in used:
            acc = self._grads[id(p)]
            updates[acc] = g.constant(0.0, acc.dtype).broadcast_to(acc.shape)
        updates[self.count] = g.constant(0.0, "float64")
        return compile([step], updates, backend=backend, check_numerics=debug)

    def zero_grad(self) -> None:
        """Reset the sums to zero without an update (PyTorch's ``optimizer.zero_grad()``)."""
        for var in self._grads.values():
            var.value = np.zeros(var.shape, dtype=var.dtype)
        self.count.value = np.array(0.0)
