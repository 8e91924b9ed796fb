"""Data sets on the device: batches sliced on the GPU, so an epoch uploads no data.

[`GpuBackend`][asgrad.gpu.GpuBackend] is a `DataBackend`
(`asgrad.tensor.runtime.backends`): ``asgrad.nn.data.DataLoader(..., device="gpu")``
places an in-memory data set on the device once with [`to_gpu`][asgrad.gpu.to_gpu] and
takes each batch's rows there with `take_rows`: a copy of the batch's row numbers out of
the epoch's order (uploaded once per epoch) and one gather per array.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from asgrad.gpu.device.array import GpuArray
from asgrad.gpu.errors import GpuUnsupportedError
from asgrad.gpu.lowering.index import gather

__all__ = ["take_rows"]


def take_rows(
    arrays: Sequence[GpuArray], order: GpuArray, start: int, stop: int
) -> tuple[GpuArray, ...]:
    """``a[order[start:stop]]`` for each of ``arrays``: rows along axis 0, gathered on
    the device.

    ``order`` holds row numbers (int32, or int64 stored as int32); nothing is uploaded:
    the row numbers are copied out of ``order`` once, then each array is one gather. A
    row number outside ``[0, len(a))`` gives a zero row and raises
    [`OutOfRangeError`][asgrad.tensor.OutOfRangeError] at the next readback.

    >>> import numpy as np  # doctest: +REQUIRES_GPU
    >>> from asgrad.gpu import to_gpu
    >>> from asgrad.gpu.data import take_rows
    >>> data = to_gpu(np.arange(8, dtype=np.float32).reshape(4, 2))
    >>> labels = to_gpu(np.array([10, 11, 12, 13]))
    >>> order = to_gpu(np.array([3, 1, 0, 2], np.int32))
    >>> x, y = take_rows([data, labels], order, 1, 3)
    >>> x.numpy(), y.numpy()
    (array([[2., 3.],
           [0., 1.]], dtype=float32), array([11, 10]))
    """
    if order.storage_dtype.itemsize != 4 or order.dtype.kind not in "iu" or order.ndim != 1:
        raise GpuUnsupportedError(
            f"row numbers must be a 1-D integer GpuArray, got {order.dtype} {order.shape}"
        )
    if not 0 <= start <= stop <= order.size:
        raise GpuUnsupportedError(
            f"rows {start}:{stop} are outside the {order.size} row numbers given"
        )
    device = order.device
    rows = GpuArray.empty((stop - start,), np.int32, device)
    if stop > start:
        device.copy(order.buffer, rows.buffer, 4 * (stop - start), src_offset=4 * start)
    return tuple(gather(a, rows, 0) for a in arrays)
