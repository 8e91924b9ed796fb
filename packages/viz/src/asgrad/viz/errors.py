"""The errors of asgrad.viz."""

from __future__ import annotations

from asgrad.tensor.errors import AsgradError


class VizError(AsgradError, ValueError):
    """The viewer was given something it cannot draw, or a file it cannot write."""
