"""The user's API: the symbolic ``Tensor`` and its methods, the numpy-style and
PyTorch-style functions over tensors, and the checks of their arguments.

Holds ``tensor`` (``Tensor``), ``methods_*`` (its method mixins by op family),
``functional*`` (module functions), ``nn_*`` (``torch.nn.functional``-style functions),
``numpy_interop``, ``arguments`` and ``located`` (errors that name the user's line).

May import: `errors`, `ir`, `ops`
and itself. Nothing below imports it at import time (``ir`` and ``ops`` name ``Tensor`` in
annotations only).
"""
