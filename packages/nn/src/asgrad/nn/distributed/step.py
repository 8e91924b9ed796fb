"""The data-parallel training step: local gradients, averaged in buckets, then the update.

One step is two compiled programs. The *gradient program* computes the loss, the
extra outputs and every gradient, flattened and concatenated into a few buckets (one
array each, so a GPU backend reads a bucket back in one piece); it also applies the
graph's own updates (batch-norm statistics, dropout seeds). The *update program*
takes the buckets as inputs, slices them back into gradients, clips them and applies
the optimizer's update ([`updates_for`][asgrad.nn.Optimizer.updates_for]), where the
parameters live. Between the two, the buckets are summed over the micro-batches of
an accumulation, all-reduced over the ranks (``MPI_Iallreduce``) and scaled by
``1 / (ranks * micro-batches)``.

With *overlap* the gradient program is split into one stage per bucket
(`asgrad.nn.distributed.stages`): on the last micro-batch of an update, each bucket's
all-reduce starts as soon as its stage returns, while the later stages compute the
rest of the backward pass; every reduction is waited for before the update.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from asgrad.autograd import grad
from asgrad.nn.distributed.comm import (
    Pending,
    all_gather_object,
    all_reduce,
    all_reduce_start,
    broadcast,
    world_size,
)
from asgrad.nn.distributed.stages import (
    Stage,
    SumStage,
    has_sums,
    split_at_sums,
    split_gradients,
)
from asgrad.nn.errors import DistributedError
from asgrad.nn.grad_scaler import refuse_scaled
from asgrad.nn.optim.optimizer import Optimizer
from asgrad.tensor import Graph, Program, Tensor, Variable, compile, concat
from asgrad.tensor.errors import GraphError
from asgrad.tensor.runtime.backends import resolve_backend_name

__all__ = [
    "DEFAULT_BUCKET_BYTES",
    "DEFAULT_FIRST_BUCKET_BYTES",
    "DistributedStep",
    "broadcast_variables",
    "compile_step",
    "plan_buckets",
]

DEFAULT_BUCKET_BYTES = 25 * 2**20
"""Bytes of gradient per bucket: 25 MiB, PyTorch DDP's ``bucket_cap_mb=25``.

>>> from asgrad.nn.distributed import DEFAULT_BUCKET_BYTES
>>> DEFAULT_BUCKET_BYTES // 2**20
25
"""

DEFAULT_FIRST_BUCKET_BYTES = 2**20
"""Bytes of the first bucket (the last layers'): 1 MiB, as DDP's, so the first
all-reduce starts early in the backward pass.

>>> from asgrad.nn.distributed import DEFAULT_FIRST_BUCKET_BYTES
>>> DEFAULT_FIRST_BUCKET_BYTES // 2**20
1
"""


def plan_buckets(
    params: Sequence[Variable], bucket_bytes: int, first_bucket_bytes: int | None = None
) -> list[list[int]]:
    """Indices of ``params`` grouped into buckets of one dtype, at most ``bucket_bytes`` each.

    Parameters are taken last to first (the order in which a backward pass produces
    their gradients); a parameter larger than ``bucket_bytes`` gets a bucket of its own.
    The first bucket holds at most ``first_bucket_bytes`` (default: the smaller of
    ``bucket_bytes`` and
    [`DEFAULT_FIRST_BUCKET_BYTES`][asgrad.nn.distributed.DEFAULT_FIRST_BUCKET_BYTES]).

    >>> import numpy as np
    >>> from asgrad.nn.distributed import plan_buckets
    >>> from asgrad.tensor import Variable
    >>> params = [Variable(f"p{i}", np.zeros(256, np.float32)) for i in range(3)]
    >>> plan_buckets(params, bucket_bytes=2048)  # 1024 bytes each, last first
    [[2, 1], [0]]
    >>> plan_buckets(params, bucket_bytes=2048, first_bucket_bytes=1024)
    [[2], [1, 0]]
    """
    if bucket_bytes < 1:
        raise DistributedError(f"bucket_bytes must be >= 1, got {bucket_bytes}")
    if first_bucket_bytes is None:
        first_bucket_bytes = min(bucket_bytes, DEFAULT_FIRST_BUCKET_BYTES)
    if first_bucket_bytes < 1:
        raise DistributedError(f"first_bucket_bytes must be >= 1, got {first_bucket_bytes}")
    buckets: list[list[int]] = []
    open_: dict[str, tuple[list[int], int]] = {}
    for i in reversed(range(len(params))):
        p = params[i]
        nbytes = int(np.prod(p.shape, dtype=np.int64)) * np.dtype(p.dtype).itemsize
        current = open_.get(p.dtype)
        cap = (
            first_bucket_bytes if current is not None and current[0] is buckets[0] else bucket_bytes
        )
        if current is not None and current[1] + nbytes <= cap:
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

    Gradients travel in buckets of at most ``bucket_bytes`` (the first, the last
    layers', of at most ``first_bucket_bytes``; see
    [`plan_buckets`][asgrad.nn.distributed.plan_buckets]). With ``overlap`` the gradient
    program is split into one stage per bucket and each bucket's all-reduce starts as
    soon as its stage returns, while the rest of the backward pass runs; the results
    are bit-identical to ``overlap=False``. The default (``None``) overlaps on the CPU
    backend with more than one rank; on the GPU the values that cross between stages
    are read back to the host, so it is off unless asked for. Feeds of other than the
    declared sizes run the unsplit program.

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
        first_bucket_bytes: int | None = None,
        overlap: bool | None = None,
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
        self.buckets = plan_buckets(used, bucket_bytes, first_bucket_bytes)
        tensors = [graph.bind(p) for p in used]
        grads = grad(loss, tensors)
        flats = [concat([grads[i].reshape(-1) for i in bucket]) for bucket in self.buckets]
        self.outputs = 1 + len(outputs)
        self._whole_args = ([loss, *outputs, *flats], dict(graph.updates), backend, debug)
        self._whole: Program | None = None
        self.backend = resolve_backend_name(backend)
        wanted = self.backend == "cpu" and world_size() > 1 if overlap is None else overlap
        self.stages: list[Stage] | None = None
        # SyncBatchNorm's statistics: the program split at its cross-rank sums instead.
        self.phases: list[SumStage] | None = None
        if has_sums([loss, *outputs, *flats, *graph.updates.values()]):
            if overlap:
                raise DistributedError(
                    "overlap=True: a graph with SyncBatchNorm is split at its statistics'"
                    " reductions, not at the buckets; pass overlap=False or None"
                )
            wanted = False
            self.phases = split_at_sums(
                [loss, *outputs, *flats], graph.updates, backend=backend, debug=debug
            )
        if wanted:
            self.stages = split_gradients(
                [loss, *outputs], flats, graph.updates, backend=backend, debug=debug
            )
            if self.stages is None and overlap and len(flats) > 1:
                raise DistributedError(
                    "overlap=True: this graph cannot be split at its buckets (its expansions"
                    " are specialised to the declared sizes, or it nests loop bodies);"
                    " pass overlap=False"
                )
        self.overlap = self.stages is not None
        """Whether each bucket's all-reduce starts while the backward pass goes on."""
        self._declared: dict[str, tuple[int, ...]] = {}
        for stage in self.stages or ():
            self._declared.update(stage.shapes)
        for phase in self.phases or ():
            self._declared.update(phase.stage.shapes)
        if self.stages is None and self.phases is None:
            self._whole = self.gradients
        self.update: Program = self._update_program(backend, debug)
        self.sizes = [int(f.shape[0]) for f in flats]
        self._sums: list[np.ndarray] = []
        self._count = 0
        self.updated = False
        self.reduce_seconds = 0.0
        """Seconds the last update waited for the all-reduces after the gradients were done."""

    @property
    def gradients(self) -> Program:
        """The unsplit gradient program: ``[loss, *outputs, *buckets]`` (compiled on first use
        when the step overlaps, for feeds at other than the declared sizes)."""
        if self._whole is None:
            outputs, updates, backend, debug = self._whole_args
            self._whole = compile(outputs, updates, backend=backend, check_numerics=debug)
        return self._whole

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

    def _add(self, k: int, bucket: np.ndarray) -> np.ndarray:
        """Sum bucket ``k`` of this micro-batch into the accumulation; return the sum."""
        if self._count == 0:
            self._sums.append(np.ascontiguousarray(bucket))
        else:
            self._sums[k] += bucket
        return self._sums[k]

    def _at_declared_sizes(self, feeds: Mapping[str, Any]) -> bool:
        """Whether ``feeds`` are the stages' inputs, no more, at their declared shapes (else
        the unsplit program runs, and names what is wrong)."""
        if len(feeds) != len(self._declared):
            return False
        for name, shape in self._declared.items():
            if name not in feeds or np.shape(feeds[name]) != shape:
                return False
        return True

    def run(self, feeds: Mapping[str, Any]) -> list[np.ndarray]:
        """One micro-batch: gradients summed locally; on the last, reduce and update."""
        last = self._count + 1 == self.accumulate
        if self._count == 0:
            self._sums = []
        pending: list[Pending] | None = None
        if self.phases is not None:
            results = self._run_phases(self.phases, feeds)
            heads = results[: self.outputs]
            for k, bucket in enumerate(results[self.outputs :]):
                self._add(k, bucket)
        elif self.stages is not None and self._at_declared_sizes(feeds):
            heads, pending = self._run_stages(self.stages, feeds, reduce=last)
        else:
            results = self.gradients(feeds)
            heads = results[: self.outputs]
            for k, bucket in enumerate(results[self.outputs :]):
                self._add(k, bucket)
        self._count += 1
        self.updated = last
        if last:
            self._reduce_and_update(pending)
        return heads

    def _run_phases(self, phases: Sequence[SumStage], feeds: Mapping[str, Any]) -> list[np.ndarray]:
        """Run the stages of a graph with cross-rank sums, reducing the sums between them."""
        if not self._at_declared_sizes(feeds):
            missing = sorted(set(self._declared) - set(feeds))
            unknown = sorted(set(feeds) - set(self._declared))
            if missing or unknown:
                raise DistributedError(
                    f"the step's inputs are {sorted(self._declared)}; missing {missing},"
                    f" not inputs {unknown}"
                )
            fed = {name: np.shape(feeds[name]) for name in self._declared}
            raise DistributedError(
                f"a step with SyncBatchNorm runs at the declared sizes {self._declared},"
                f" fed {fed}; give every rank full batches (DataLoader(..., drop_last=True))"
            )
        boundary: dict[str, np.ndarray] = {}
        results: list[np.ndarray] = []
        for phase in phases:
            results = phase.stage.run(feeds, boundary)
            for name in phase.sums:
                boundary[name] = all_reduce(boundary[name])
        return results

    def _run_stages(
        self, stages: Sequence[Stage], feeds: Mapping[str, Any], *, reduce: bool
    ) -> tuple[list[np.ndarray], list[Pending] | None]:
        """Run the stages in order; when ``reduce``, start each bucket's all-reduce as soon
        as its stage returns (and let MPI progress between stages)."""
        boundary: dict[str, np.ndarray] = {}
        heads: list[np.ndarray] = []
        pending: list[Pending] = []
        for k, stage in enumerate(stages):
            results = stage.run(feeds, boundary)
            if k == 0:
                heads = results[: stage.heads]
            total = self._add(k, results[stage.heads])
            if reduce:
                pending.append(all_reduce_start(total))
                for p in pending:
                    p.test()
        return heads, pending if reduce else None

    def _reduce_and_update(self, pending: list[Pending] | None) -> None:
        sums, self._sums = self._sums, []
        self._count = 0
        if pending is None:
            pending = [all_reduce_start(s) for s in sums]
        scale = 1.0 / (world_size() * self.accumulate)
        feeds: dict[str, np.ndarray] = {}
        began = time.perf_counter()
        for k, p in enumerate(pending):
            total = p.wait()
            if scale != 1.0:
                total *= total.dtype.type(scale)
            feeds[f"bucket{k}"] = total
        self.reduce_seconds = time.perf_counter() - began
        self.update(feeds)

    def __repr__(self) -> str:
        return (
            f"DistributedStep(ranks={world_size()}, accumulate={self.accumulate},"
            f" buckets={self.sizes}, overlap={self.overlap}, backend={self.backend!r})"
        )


def compile_step(
    optimizer: Optimizer,
    loss: Tensor,
    outputs: Sequence[Tensor] = (),
    *,
    backend: str | None = None,
    accumulate: int = 1,
    bucket_bytes: int = DEFAULT_BUCKET_BYTES,
    first_bucket_bytes: int | None = None,
    overlap: bool | None = None,
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
        first_bucket_bytes=first_bucket_bytes,
        overlap=overlap,
        debug=debug,
    )
