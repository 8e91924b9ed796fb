"""A printable record of what the GPU adapter is and what asgrad asked of it."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field

__all__ = ["Capabilities"]


@dataclass(frozen=True)
class Capabilities:
    """Adapter identity, backend, limits and features, as seen by ``asgrad.gpu``.

    ``limits`` are the limits the device was created with (what kernels may rely on);
    ``adapter_limits`` what the adapter could have offered.

    >>> from asgrad.gpu import Capabilities, get_device  # doctest: +REQUIRES_GPU
    >>> caps = get_device().capabilities
    >>> isinstance(caps, Capabilities), caps.backend in ("Vulkan", "Metal", "D3D12", "OpenGL")
    (True, True)
    """

    adapter: str
    vendor: str
    backend: str
    adapter_type: str
    description: str
    limits: dict[str, int] = field(default_factory=dict)
    adapter_limits: dict[str, int] = field(default_factory=dict)
    features: tuple[str, ...] = ()
    adapter_features: tuple[str, ...] = ()

    @property
    def subgroups(self) -> bool:
        """Whether the device was created with the ``subgroup`` feature: kernels may
        use WGSL's subgroup operations (``enable subgroups;``).

        >>> from asgrad.gpu import Capabilities
        >>> Capabilities("gpu", "", "Vulkan", "DiscreteGPU", "", features=("subgroup",)).subgroups
        True
        """
        return "subgroup" in self.features

    def to_json(self) -> str:
        """The record as indented JSON."""
        return json.dumps(asdict(self), indent=2, sort_keys=True)

    def format(self) -> str:
        """A human-readable multi-line summary."""
        lines = [
            f"adapter:      {self.adapter}",
            f"vendor:       {self.vendor}",
            f"backend:      {self.backend}",
            f"type:         {self.adapter_type}",
            f"description:  {self.description}",
            "features:     " + (", ".join(self.features) or "(none requested)"),
            "adapter has:  " + ", ".join(self.adapter_features),
            "limits (requested / adapter):",
        ]
        width = max((len(k) for k in self.limits), default=0)
        for name in sorted(self.limits):
            have = self.adapter_limits.get(name, "?")
            lines.append(f"  {name:<{width}}  {self.limits[name]:>12} / {have}")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.format()
