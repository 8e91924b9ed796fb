"""The built-in ops; importing this package registers them."""

from asgrad.tensor.ops import elementwise, leaf, linalg, reduction, shape

__all__ = ["elementwise", "leaf", "linalg", "reduction", "shape"]
