"""The built-in ops, one module per op family; importing this package registers them.

Each family module (``leaf``, ``elementwise``, ``reduction``, ``shape``, ``index``,
``linalg``, ``conv``, ``pool``, ``norm``, ``random``, ``optim``) holds its ops' shape
rules, numpy kernels, test cases, CPU fast paths and registrations; ``spatial`` holds
the window and size rules that conv and pool share (public, for other backends).
"""

from asgrad.tensor.ops import (
    _elementwise_math,
    conv,
    conv_1d,
    conv_3d,
    elementwise,
    elementwise_activation,
    index,
    leaf,
    linalg,
    linalg_attention,
    norm,
    norm_groups,
    optim,
    pool,
    pool_1d,
    pool_3d,
    pool_resize,
    pool_window,
    random,
    reduction,
    shape,
    shape_pixel,
    spatial,
)

__all__ = [
    "_elementwise_math",
    "conv",
    "conv_1d",
    "conv_3d",
    "elementwise",
    "elementwise_activation",
    "index",
    "leaf",
    "linalg",
    "linalg_attention",
    "norm",
    "norm_groups",
    "optim",
    "pool",
    "pool_1d",
    "pool_3d",
    "pool_resize",
    "pool_window",
    "random",
    "reduction",
    "shape",
    "shape_pixel",
    "spatial",
]
