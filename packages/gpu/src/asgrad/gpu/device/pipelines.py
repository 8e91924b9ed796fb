"""Compiled compute pipelines, their bind group layouts and bind groups, cached."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from asgrad.gpu.device.buffers import GpuBuffer
from asgrad.gpu.device.modules import checks_setting, create_shader_module
from asgrad.gpu.device.source import enable_f16, uses_f16
from asgrad.gpu.errors import GpuError, GpuFloat16Error
from asgrad.tensor.runtime.progress import current

__all__ = ["Binding", "Pipeline", "PipelineCache"]

Binding = str  # "uniform" | "read" | "write" | "checks" (the device's check slots)

# Bind groups kept (least recently used dropped first).
MAX_BIND_GROUPS = 16384


@dataclass(frozen=True)
class Pipeline:
    """A compiled compute pipeline and the explicit bind group layout it uses."""

    name: str
    handle: Any
    layout: Any
    bindings: tuple[Binding, ...]
    label: str = ""  # the cache key, shortened: what a profile reports

    @property
    def checked(self) -> bool:
        """Whether the kernel records faults in the device's check slots."""
        return "checks" in self.bindings


class PipelineCache:
    """Pipelines by key (compiled once), layouts by bindings, bind groups by buffers."""

    def __init__(self, wgpu: Any, device: Any) -> None:
        self.wgpu = wgpu
        self.device = device  # the wgpu device handle
        self._layouts: dict[tuple[Binding, ...], tuple[Any, Any]] = {}
        self._pipelines: dict[tuple[Any, ...], Pipeline] = {}
        self._bind_groups: OrderedDict[tuple[int, ...], Any] = OrderedDict()
        self.checks = checks_setting()

    def _layout(self, bindings: tuple[Binding, ...]) -> tuple[Any, Any]:
        cached = self._layouts.get(bindings)
        if cached is not None:
            return cached
        wgpu = self.wgpu
        kinds = {
            "uniform": wgpu.BufferBindingType.uniform,
            "read": wgpu.BufferBindingType.read_only_storage,
            "write": wgpu.BufferBindingType.storage,
            "checks": wgpu.BufferBindingType.storage,
        }
        entries = [
            {
                "binding": i,
                "visibility": wgpu.ShaderStage.COMPUTE,
                "buffer": {"type": kinds[kind]},
            }
            for i, kind in enumerate(bindings)
        ]
        bgl = self.device.create_bind_group_layout(entries=entries)
        layout = self.device.create_pipeline_layout(bind_group_layouts=[bgl])
        self._layouts[bindings] = (bgl, layout)
        return bgl, layout

    def get(
        self,
        key: tuple[Any, ...],
        source: Callable[[], str],
        bindings: Sequence[Binding],
        constants: dict[str, float | int] | None = None,
    ) -> Pipeline:
        """The pipeline for ``key`` (kernel, dtype, constants...), compiled once.

        ``source()`` is called only on a cache miss; ``bindings`` gives the kind of
        each ``@binding(i)`` of group 0 for the explicit layout.
        """
        full_key = (key, tuple(sorted((constants or {}).items())))
        pipe = self._pipelines.get(full_key)
        if pipe is not None:
            return pipe
        current().bump("pipelines built")
        binds = tuple(bindings)
        bgl, layout = self._layout(binds)
        code = source()
        if uses_f16(code):
            if "shader-f16" not in self.device.features:
                raise GpuFloat16Error(
                    f"kernel {key[0]!r} computes in float16, but this device was not granted"
                    " the shader-f16 feature (its adapter lacks it); cast float16 values to"
                    " float32 for this device, or run on the CPU backend"
                )
            code = enable_f16(code)
        try:
            module = create_shader_module(self.device, code, str(key[0]), self.checks)
            compute: dict[str, Any] = {"module": module, "entry_point": "main"}
            if constants:
                compute["constants"] = dict(constants)
            handle = self.device.create_compute_pipeline(layout=layout, compute=compute)
        except Exception as exc:
            raise GpuError(
                f"compiling kernel {key!r} failed: {exc}\n--- source ---\n{code}"
            ) from exc
        label = " ".join(str(part) for part in key if not isinstance(part, tuple))
        pipe = Pipeline(str(key[0]), handle, bgl, binds, label[:100])
        self._pipelines[full_key] = pipe
        return pipe

    def bind_group(self, pipe: Pipeline, buffers: Sequence[GpuBuffer]) -> Any:
        """The bind group of ``buffers`` for ``pipe`` (created once per buffer set)."""
        key = (id(pipe.layout), *(b.serial for b in buffers))
        group = self._bind_groups.get(key)
        if group is not None:
            self._bind_groups.move_to_end(key)
            return group
        entries = [
            {
                "binding": i,
                "resource": {"buffer": b.handle, "offset": 0, "size": b.size},
            }
            for i, b in enumerate(buffers)
        ]
        group = self.device.create_bind_group(layout=pipe.layout, entries=entries)
        self._bind_groups[key] = group
        if len(self._bind_groups) > MAX_BIND_GROUPS:
            self._bind_groups.popitem(last=False)
        return group
