"""The built-in ops; importing this package registers them."""

from asgrad.tensor.ops import conv, elementwise, leaf, linalg, nn, pool, reduction, shape

__all__ = ["conv", "elementwise", "leaf", "linalg", "nn", "pool", "reduction", "shape"]
