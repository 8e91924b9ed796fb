"""Data-parallel training over MPI (mpi4py): one process per device, the same script on each.

Launch with ``mpirun -n N python train.py``; outside a launcher every function here
is a no-op (rank 0 of 1), so one script runs both ways. A training script adds:

* [`init`][asgrad.nn.distributed.init] at the start, then
  [`broadcast_variables`][asgrad.nn.distributed.broadcast_variables] of the model's variables, so
  every rank starts from rank 0's values;
* a [`DistributedSampler`][asgrad.nn.distributed.DistributedSampler] in its ``DataLoader``, so each
  rank reads its shard;
* [`compile_step`][asgrad.nn.distributed.compile_step] instead of ``optimizer.compile``: gradients
  are averaged over the ranks (and over ``accumulate`` micro-batches) before the update;
* [`all_reduce`][asgrad.nn.distributed.all_reduce] for metrics, [`save`][asgrad.nn.distributed.save]
  / [`load`][asgrad.nn.distributed.load] for checkpoints.

mpi4py is optional: ``pip install 'asgrad-nn[mpi]'`` brings it with MPICH's wheels.
See the user guide, docs/distributed.md.

In one process:

>>> from asgrad.nn import distributed as dist
>>> dist.init()
>>> dist.rank(), dist.world_size(), dist.all_reduce(3.0, "mean").item()
(0, 1, 3.0)
"""

from asgrad.nn.distributed.checkpoint import load, save
from asgrad.nn.distributed.comm import (
    DEFAULT_TIMEOUT,
    TIMEOUT_VARIABLE,
    Pending,
    abort,
    all_gather_object,
    all_reduce,
    all_reduce_start,
    barrier,
    broadcast,
    broadcast_object,
    init,
    is_distributed,
    launched_by_mpi,
    local_rank,
    local_size,
    rank,
    timeout,
    world_size,
)
from asgrad.nn.distributed.sampler import DistributedSampler
from asgrad.nn.distributed.step import (
    DEFAULT_BUCKET_BYTES,
    DEFAULT_FIRST_BUCKET_BYTES,
    DistributedStep,
    broadcast_variables,
    compile_step,
    plan_buckets,
)
from asgrad.nn.errors import DistributedError, DistributedTimeoutError

__all__ = [
    "DEFAULT_BUCKET_BYTES",
    "DEFAULT_FIRST_BUCKET_BYTES",
    "DEFAULT_TIMEOUT",
    "TIMEOUT_VARIABLE",
    "DistributedError",
    "DistributedSampler",
    "DistributedStep",
    "DistributedTimeoutError",
    "Pending",
    "abort",
    "all_gather_object",
    "all_reduce",
    "all_reduce_start",
    "barrier",
    "broadcast",
    "broadcast_object",
    "broadcast_variables",
    "compile_step",
    "init",
    "is_distributed",
    "launched_by_mpi",
    "load",
    "local_rank",
    "local_size",
    "plan_buckets",
    "rank",
    "save",
    "timeout",
    "world_size",
]
