"""The data-parallel training step: local gradients, averaged in buckets, then the update.

One step is two compiled programs. The *gradient program* computes the loss, the
extra outputs and every gradient, flattened and concatenated into a few buckets (one
array each, so a GPU backend reads a bucket back in one piece); it also applies the
graph's own updates (batch-norm statistics, dropout seeds). The *update program*
takes the buckets as inputs, slices them back into gradients, clips them and applies
the optimizer's update ([`updates_for`][asgrad.nn.Optimizer.updates_for]), where the
parameters live. Between the two, the buckets are summed over the micro-batches of
an accumulation, all-reduced over the ranks (every bucket's ``MPI_Iallreduce`` is
started before the first is waited for) and scaled by ``1 / (ranks * micro-batches)``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from asgrad.autograd import grad
from asgrad.nn.distributed.comm import (
    Pending,
    all_gather_object,
    all_reduce_start,
    broadcast,
    world_size,
)
from asgrad.nn.errors import DistributedError
from asgrad.nn.grad_scaler import refuse_scaled
from asgrad.nn.optim.optimizer import Optimizer
from asgrad.tensor import Graph, Program, Tensor, Variable, compile, concat
from asgrad.tensor.errors import GraphError

__all__ = [
    "DEFAULT_BUCKET_BYTES",
    "DistributedStep",
    "broadcast_variables",
    "compile_step",
    "plan_buckets",
]

DEFAULT_BUCKET_BYTES = 4 * 2**20
"""Bytes of gradient per bucket (4 MiB): a model under that size makes one bucket.

>>> from asgrad.nn.distributed import DEFAULT_BUCKET_BYTES
>>> DEFAULT_BUCKET_BYTES // 2**20
4
"""


def plan_buckets(params: Sequence[Variable], bucket_bytes: int) -> list[list[int]]:
    """Indices of ``params`` grouped into buckets of one dtype, at most ``bucket_bytes`` each.

    Parameters are taken last to first (the order in which a backward pass produces
    their gradients); a parameter larger than ``bucket_bytes`` gets a bucket of its own.

    >>> import numpy as np
    >>> from asgrad.nn.distributed import plan_buckets
    >>> from asgrad.tensor import Variable
    >>> params = [Variable(f"p{i}", np.zeros(256, np.float32)) for i in range(3)]
    >>> plan_buckets(params, bucket_bytes=2048)  # 1024 bytes each, last first
    [[2, 1], [0]]
    """
    if bucket_bytes < 1:
        raise DistributedError(f"bucket_bytes must be >= 1, got {bucket_bytes}")
    buckets: list[list[int]] = []
    open_: dict[str, tuple[list[int], int]] = {}
    for i in reversed(range(len(params))):
        p = params[i]
        nbytes = int(np.prod(p.shape, dtype=np.int64)) * np.dtype(p.dtype).itemsize
        current = open_.get(p.dtype)
        if current is not None and current[1] + nbytes <= bucket_bytes:
            current[0].append(i)
            open_[p.dtype] = (current[0], current[1] + nbytes)
            continue
        bucket = [i]
        buckets.append(bucket)
        open_[p.dtype] = (bucket, nbytes)
    return buckets


def broadcast_variables(variables: Iterable[Variable], root: int = 0) -> None:
    """Give every rank rank ``root``'s values of ``variables`` (same list on every rank).

    The names, shapes and dtypes are checked to agree on every rank first, so a rank
    that built another model gets a [`DistributedError`][asgrad.nn.distributed.DistributedError]
    naming the difference instead of a hang or garbage.

    >>> from asgrad.nn import Linear
    >>> model = Linear(2, 1, rng=0)
    >>> broadcast_variables(v for _, v in model.named_variables())  # one process: no-op
    """
    items = list(variables)
    layout = [(v.name, tuple(v.shape), v.dtype) for v in items]
    digest = hashlib.sha256(repr(layout).encode()).hexdigest()
    digests = all_gather_object(digest)
    if len(set(digests)) > 1:
        layouts = all_gather_object(layout)
        for r, other in enumerate(layouts):
            if other != layout:
                diff = [f"{a} != {b}" for a, b in zip(layout, other, strict=False) if a != b]
                diff = diff or [f"{len(layout)} variables here, {len(other)} on rank {r}"]
                raise DistributedError(
                    "the ranks hold different variables (name, shape, dtype): "
                    + "; ".join(diff[:3])
                    + f" (this rank vs rank {r}). Build the same model on every rank"
                )
    if world_size() == 1:
        return
    for v in items:
        v.value = broadcast(v.value, root)


def _check_same_start(params: Sequence[Variable]) -> None:
    """Raise unless every rank holds the same values of ``params`` (one digest each)."""
    if world_size() == 1:
        return
    digest = hashlib.sha256()
    for p in params:
        digest.update(p.name.encode())
        digest.update(np.ascontiguousarray(p.value).tobytes())
    digests = all_gather_object(digest.hexdigest())
    if len(set(digests)) > 1:
        differ = [r for r, d in enumerate(digests) if d != digests[0]]
        raise DistributedError(
            f"the ranks start from different parameter values (ranks {differ} differ from"
            " rank 0); call asgrad.nn.distributed.broadcast_variables(model.parameters())"
            " before compiling the step"
        )


class DistributedStep:
    """A compiled training step whose gradients are averaged over ranks and micro-batches.

    Call it like the [`Program`][asgrad.tensor.Program] that
    [`Optimizer.compile`][asgrad.nn.Optimizer.compile] returns: with one
    micro-batch's feeds; it returns ``[loss, *outputs]`` of that micro-batch. Every
    ``accumulate``-th call (the last micro-batch of an update) reduces the gradients
    and updates the parameters; `updated` says whether the last call did.

    With ``N`` ranks, micro-batches of ``B`` samples and a loss that is a mean over
    the batch, an update equals one process's step on the ``N * accumulate * B``
    samples together, to float32 round-off. The ranks must start from the same
    parameters ([`broadcast_variables`][asgrad.nn.distributed.broadcast_variables]); this is
    checked, by digest, here.

    In one process, [`compile_step`][asgrad.nn.distributed.compile_step] with ``accumulate``
    returns one, which updates every second call:

    >>> import numpy as np
    >>> from asgrad.tensor import Graph
    >>> from asgrad.nn import Linear, SGD, mse_loss
    >>> from asgrad.nn.distributed import DistributedStep, compile_step
    >>> model = Linear(2, 1, rng=0)
    >>> g = Graph()
    >>> x, y = g.input("x", (4, 2)), g.input("y", (4, 1))
    >>> step = compile_step(SGD(model.parameters(), lr=0.1), mse_loss(model(x), y), accumulate=2)
    >>> isinstance(step, DistributedStep)
    True
    >>> feeds = {"x": np.ones((4, 2), "float32"), "y": np.zeros((4, 1), "float32")}
    >>> _ = step(**feeds)
    >>> _ = step(**feeds)
    >>> step.updated
    True
    """

    def __init__(
        self,
        optimizer: Optimizer,
        loss: Tensor,
        outputs: Sequence[Tensor] = (),
        *,
        backend: str | None = None,
        accumulate: int = 1,
        bucket_bytes: int = DEFAULT_BUCKET_BYTES,
        debug: bool | None = None,
    ) -> None:
        if isinstance(accumulate, bool) or accumulate < 1:
            raise DistributedError(f"accumulate must be an int >= 1, got {accumulate!r}")
        refuse_scaled(loss, "DistributedStep")
        graph = loss.graph
        used = [p for p in optimizer.params if graph.uses(p)]
        if not used:
            raise GraphError("none of the optimizer's parameters appear in the loss's graph")
        _check_same_start(used)
        self.optimizer = optimizer
        self.accumulate = accumulate
        self.params = used
        self.buckets = plan_buckets(used, bucket_bytes)
        tensors = [graph.bind(p) for p in used]
        grads = grad(loss, tensors)
        flats = [concat([grads[i].reshape(-1) for i in bucket]) for bucket in self.buckets]
        self.outputs = 1 + len(outputs)
        self.gradients: Program = compile(
            [loss, *outputs, *flats], graph.updates, backend=backend, check_numerics=debug
        )
        self.update: Program = self._update_program(backend, debug)
        self.backend = self.gradients.backend
        self.sizes = [int(f.shape[0]) for f in flats]
        self._sums: list[np.ndarray] | None = None
        self._count = 0
        self.updated = False

    def _update_program(self, backend: str | None, debug: bool | None) -> Program:
        g = Graph("distributed-update")
        grads: dict[int, Tensor] = {}
        for k, bucket in enumerate(self.buckets):
            dtype = self.params[bucket[0]].dtype
            total = sum(int(np.prod(self.params[i].shape, dtype=np.int64)) for i in bucket)
            flat = g.input(f"bucket{k}", (total,), dtype, free=())
            offset = 0
            for i in bucket:
                shape = self.params[i].shape
                n = int(np.prod(shape, dtype=np.int64))
                piece = flat if len(bucket) == 1 else flat[offset : offset + n]
                grads[i] = piece.reshape(shape) if shape != (n,) else piece
                offset += n
        tensors = [g.bind(p) for p in self.params]
        ordered = [grads[i] for i in range(len(self.params))]
        updates = self.optimizer.updates_for(self.params, tensors, ordered)
        return compile([], updates, backend=backend, check_numerics=debug)

    @property
    def pending_micro_batches(self) -> int:
        """Micro-batches summed since the last update (0 right after one)."""
        return self._count

    def __call__(self, feeds: Mapping[str, Any] | None = None, **kwargs: Any) -> list[np.ndarray]:
        return self.run({**(feeds or {}), **kwargs})

    def run(self, feeds: Mapping[str, Any]) -> list[np.ndarray]:
        """One micro-batch: gradients summed locally; on the last, reduce and update."""
        results = self.gradients(feeds)
        buckets = results[self.outputs :]
        if self._sums is None:
            self._sums = [np.ascontiguousarray(b) for b in buckets]
        else:
            for total, b in zip(self._sums, buckets, strict=True):
                total += b
        self._count += 1
        self.updated = self._count == self.accumulate
        if self.updated:
            self._reduce_and_update()
        return results[: self.outputs]

    def _reduce_and_update(self) -> None:
        assert self._sums is not None
        sums, self._sums = self._sums, None
        self._count = 0
        pending: list[Pending] = [all_reduce_start(s) for s in sums]
        scale = 1.0 / (world_size() * self.accumulate)
        feeds: dict[str, np.ndarray] = {}
        for k, p in enumerate(pending):
            total = p.wait()
            if scale != 1.0:
                total *= total.dtype.type(scale)
            feeds[f"bucket{k}"] = total
        self.update(feeds)

    def __repr__(self) -> str:
        return (
            f"DistributedStep(ranks={world_size()}, accumulate={self.accumulate},"
            f" buckets={self.sizes}, backend={self.backend!r})"
        )


def compile_step(
    optimizer: Optimizer,
    loss: Tensor,
    outputs: Sequence[Tensor] = (),
    *,
    backend: str | None = None,
    accumulate: int = 1,
    bucket_bytes: int = DEFAULT_BUCKET_BYTES,
    debug: bool | None = None,
) -> Program | DistributedStep:
    """The training step for this process group.

    In a single process without accumulation this is exactly
    [`Optimizer.compile`][asgrad.nn.Optimizer.compile] (one program,
    no copies); otherwise a [`DistributedStep`][asgrad.nn.distributed.DistributedStep]. Either is
    called with feeds and returns ``[loss, *outputs]``.

    >>> import numpy as np
    >>> from asgrad.tensor import Graph
    >>> from asgrad.nn import Linear, SGD, mse_loss
    >>> model = Linear(2, 1, rng=0)
    >>> g = Graph()
    >>> x, y = g.input("x", (4, 2)), g.input("y", (4, 1))
    >>> opt = SGD(model.parameters(), lr=0.1)
    >>> step = compile_step(opt, mse_loss(model(x), y), accumulate=2)
    >>> _ = step(x=np.ones((4, 2), "float32"), y=np.zeros((4, 1), "float32"))
    >>> step.updated, opt.step_count.value.item()
    (False, 0.0)
    >>> _ = step(x=np.ones((4, 2), "float32"), y=np.zeros((4, 1), "float32"))
    >>> step.updated, opt.step_count.value.item()
    (True, 1.0)
    """
    if world_size() == 1 and accumulate == 1:
        return optimizer.compile(loss, outputs, backend=backend, debug=debug)
    return DistributedStep(
        optimizer,
        loss,
        outputs,
        backend=backend,
        accumulate=accumulate,
        bucket_bytes=bucket_bytes,
        debug=debug,
    )
