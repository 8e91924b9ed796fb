"""``SyncBatchNorm``: batch normalisation whose statistics are taken over every rank's batch.

In training mode the per-channel sum and count, then the sum of squared deviations,
are summed over the ranks (`asgrad.nn.distributed.stages.cross_rank_sum`), so each
rank normalises by the statistics of the global batch, as PyTorch's
``nn.SyncBatchNorm``; the gradient sums the matching terms over the ranks. The sums
take place inside a [`DistributedStep`][asgrad.nn.distributed.DistributedStep], which
splits its gradient program at them; in any other program (one process) they are the
local values and the layer is a batch norm.
"""

from __future__ import annotations

from asgrad.nn.layers.normalization import _BatchNorm
from asgrad.nn.module import Module
from asgrad.tensor import Tensor, concat, where
from asgrad.tensor.api.functional import size_ratio
from asgrad.tensor.api.nn_functional import batch_norm

__all__ = ["SyncBatchNorm"]


class SyncBatchNorm(_BatchNorm):
    """Batch normalisation over the global batch of all ranks (PyTorch's ``nn.SyncBatchNorm``).

    Takes ``(N, C, ...)`` inputs of rank 2 to 5. In training mode it normalises with
    the mean and (biased) variance of every rank's batch together and updates the
    running mean and the unbiased running variance from them; evaluation mode uses
    the running statistics (without them, ``track_running_stats=False``, the global
    batch's). The statistics are reduced over the ranks inside a
    [`DistributedStep`][asgrad.nn.distributed.DistributedStep]; in one process it
    computes what ``BatchNorm1d``/``2d`` compute.
    [`convert_sync_batchnorm`][asgrad.nn.SyncBatchNorm.convert_sync_batchnorm] turns a
    model's batch norms into these.

    >>> import numpy as np
    >>> from asgrad.tensor import Graph, evaluate
    >>> from asgrad.nn import SyncBatchNorm
    >>> bn = SyncBatchNorm(2)
    >>> x = Graph().input("x", (4, 2))
    >>> data = np.array([[1, 10], [2, 20], [3, 30], [4, 40]], np.float32)
    >>> (y,) = evaluate(bn(x), {"x": data})  # one process: the batch's own statistics
    >>> [round(float(v), 3) for v in y[:, 1]]
    [-1.342, -0.447, 0.447, 1.342]
    """

    _ranks = (2, 3, 4, 5)

    def forward(self, x: Tensor) -> Tensor:
        self._check(x)
        from asgrad.nn.distributed.stages import cross_rank_sum  # the package imports nn

        g = x.graph
        channels = self.num_features
        axes = (0, *range(2, x.ndim))
        shape = (-1,) + (1,) * (x.ndim - 2)  # a (C,) vector against (N, C, ...)
        weight = None if self.weight is None else g.bind(self.weight).reshape(shape)
        bias = None if self.bias is None else g.bind(self.bias).reshape(shape)
        tracked = self.running_mean is not None and self.running_var is not None
        if tracked and not self.training:  # traced in evaluation mode: running statistics
            assert self.running_mean is not None
            assert self.running_var is not None
            running_mean, running_var = g.bind(self.running_mean), g.bind(self.running_var)
            w = None if self.weight is None else g.bind(self.weight)
            b = None if self.bias is None else g.bind(self.bias)
            return batch_norm(x, running_mean, running_var, w, b, eps=self.eps).y
        sums = x.sum(axis=axes)
        count = size_ratio(x, sums).reshape(1)
        total = cross_rank_sum(concat([sums, count]))
        n = total[channels : channels + 1]
        mean = total[:channels] / n
        centred = x - mean.reshape(shape)
        var = cross_rank_sum((centred * centred).sum(axis=axes)) / n
        x_hat = centred / (var + self.eps).sqrt().reshape(shape)
        if tracked:
            assert self.running_mean is not None
            assert self.running_var is not None
            # Traced in training mode: the mode is read when the graph runs.
            active = self.mode_flag(g)
            running_mean, running_var = g.bind(self.running_mean), g.bind(self.running_var)
            centred_running = x - running_mean.reshape(shape)
            running_hat = centred_running / (running_var + self.eps).sqrt().reshape(shape)
            x_hat = where(active, x_hat, running_hat)
            self._update_running(mean, var, n, active)  # from the global batch
        y = x_hat if weight is None else x_hat * weight
        return y if bias is None else y + bias

    @classmethod
    def convert_sync_batchnorm(cls, module: Module) -> Module:
        """``module`` with every ``BatchNorm1d``/``BatchNorm2d`` in it replaced by a
        ``SyncBatchNorm`` holding the same parameters and running statistics (the same
        variables); ``module`` itself when it is one. As PyTorch's.

        >>> from asgrad.nn import BatchNorm1d, Linear, Sequential, SyncBatchNorm
        >>> model = Sequential(Linear(3, 4, rng=0), BatchNorm1d(4))
        >>> synced = SyncBatchNorm.convert_sync_batchnorm(model)
        >>> type(synced[1]).__name__, synced[1].weight is model[1].weight
        ('SyncBatchNorm', True)
        """
        if isinstance(module, _BatchNorm) and not isinstance(module, cls):
            synced = cls(
                module.num_features,
                module.eps,
                module.momentum,
                affine=module.weight is not None,
                track_running_stats=module.running_mean is not None,
            )
            for name in ("weight", "bias", "running_mean", "running_var", "num_batches_tracked"):
                value = getattr(module, name)
                if value is not None:
                    setattr(synced, name, value)
            synced.train(module.training)
            return synced
        children = module._modules
        order = list(children)
        for name in order:
            converted = cls.convert_sync_batchnorm(children[name])
            if converted is not children[name]:
                setattr(module, name, converted)  # names its variables as the child's were
        reordered = {name: children[name] for name in order}  # setattr moved it last
        children.clear()
        children.update(reordered)
        return module
