"""BLAS thread limits for the examples (``--threads``).

The examples' matrix products are small (a 2048 x 64 activation times a 64 x 256
weight): a second BLAS thread saves little on an idle machine and costs a lot on a
busy one, where OpenBLAS's threads spin waiting for each other. Measured on this
project's 2-core machine under load: the transformer example ran 17.9 steps/s on one
BLAS thread and 4 steps/s on two. So the examples default to one.
"""

from __future__ import annotations

import contextlib
import importlib
from collections.abc import Iterator
from typing import Any


@contextlib.contextmanager
def blas_threads(n: int | None) -> Iterator[None]:
    """Limit BLAS (OpenBLAS, MKL...) to ``n`` threads inside the block; ``None``: no limit."""
    if n is None:
        yield
        return
    try:
        threadpoolctl: Any = importlib.import_module("threadpoolctl")  # comes with sklearn
    except ImportError:  # pragma: no cover - scikit-learn is a dependency of the examples
        yield
        return
    with threadpoolctl.threadpool_limits(limits=n, user_api="blas"):
        yield
