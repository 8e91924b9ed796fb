"""The built-in ops; importing this package registers them."""

from asgrad.tensor.ops import conv, elementwise, fused, leaf, linalg, nn, pool, reduction, shape

__all__ = ["conv", "elementwise", "fused", "leaf", "linalg", "nn", "pool", "reduction", "shape"]
