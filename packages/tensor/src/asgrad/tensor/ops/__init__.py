"""The built-in ops, one module per op family; importing this package registers them.

Each family module (``leaf``, ``elementwise``, ``reduction``, ``shape``, ``index``,
``linalg``, ``conv``, ``pool``, ``norm``, ``random``, ``optim``) holds its ops' shape
rules, numpy kernels, test cases, CPU fast paths and registrations; ``spatial`` holds
the window and size rules that conv and pool share (public, for other backends).
"""

from asgrad.tensor.ops import (
    conv,
    elementwise,
    index,
    index_along,
    leaf,
    linalg,
    linalg_einsum,
    norm,
    optim,
    pool,
    random,
    reduction,
    shape,
    shape_expand,
    shape_pad,
    shape_repeat,
    spatial,
)

__all__ = [
    "conv",
    "elementwise",
    "index",
    "index_along",
    "leaf",
    "linalg",
    "linalg_einsum",
    "norm",
    "optim",
    "pool",
    "random",
    "reduction",
    "shape",
    "shape_expand",
    "shape_pad",
    "shape_repeat",
    "spatial",
]
