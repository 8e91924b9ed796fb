"""The errors of asgrad.viz."""

from __future__ import annotations

from asgrad.tensor.errors import AsgradError


class VizError(AsgradError, ValueError):
    """The viewer was given something it cannot draw, or a file it cannot write.

    >>> from asgrad.viz import VizError
    >>> [c.__name__ for c in VizError.__bases__]
    ['AsgradError', 'ValueError']
    """
