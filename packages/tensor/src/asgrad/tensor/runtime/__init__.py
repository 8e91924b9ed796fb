"""Compiling schedules and running them on a backend.

Holds ``executor`` (``compile``, ``Program``, ``evaluate``), ``backends`` (choosing and
registering backends), ``device_values`` (values a launched run leaves on its device),
``numerics`` (stop at the first NaN or infinity) and ``progress`` (progress of long
compiles).

May import: `errors`, `ir`,
`api` (the ``Tensor`` values a user compiles) and itself; the CPU
backend (`asgrad.tensor.cpu`) only when a program asks for it.
"""
