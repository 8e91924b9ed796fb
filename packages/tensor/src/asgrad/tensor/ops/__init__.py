"""The built-in ops, one module per op family; importing this package registers them.

Each family module (``leaf``, ``elementwise``, ``reduction``, ``shape``, ``index``,
``linalg``, ``conv``, ``pool``, ``norm``, ``random``, ``optim``, ``control``) holds its ops' shape
rules, numpy kernels, test cases, CPU fast paths and registrations; ``spatial`` holds
the window and size rules that conv and pool share (public, for other backends).
"""

from asgrad.tensor.ops import (
    control,
    conv,
    elementwise,
    index,
    leaf,
    linalg,
    norm,
    optim,
    pool,
    random,
    reduction,
    shape,
    spatial,
)

__all__ = [
    "control",
    "conv",
    "elementwise",
    "index",
    "leaf",
    "linalg",
    "norm",
    "optim",
    "pool",
    "random",
    "reduction",
    "shape",
    "spatial",
]
