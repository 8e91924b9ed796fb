"""ONNX's ``Resize`` (and the older ``Upsample``) as asgrad's ``interpolate``.

asgrad resamples as PyTorch's ``F.interpolate`` does, so the forms PyTorch's exporter
writes are the ones imported, each onto the mode with the same coordinates:

- ``nearest`` with ``asymmetric`` coordinates and ``floor`` rounding: ``nearest``;
- ``nearest`` with ``half_pixel`` (or ``pytorch_half_pixel``) coordinates and
  ``round_prefer_ceil``: ``nearest-exact``;
- ``linear`` (1 to 3 spatial axes) and ``cubic`` (2, with ``cubic_coeff_a=-0.75``) with
  ``align_corners``, ``half_pixel`` or ``pytorch_half_pixel`` coordinates.

Only the spatial axes (after batch and channels) may change size. Another form
(another rounding, a region of interest, antialiasing) is refused with the reason.
"""

from __future__ import annotations

import math

import onnx

from asgrad.onnx.errors import OnnxImportError
from asgrad.onnx.import_context import ImportContext, Importer, Value, attributes

__all__ = ["RESIZE_IMPORTERS"]

_LINEAR = {1: "linear", 2: "bilinear", 3: "trilinear"}
_HALF_PIXEL = ("half_pixel", "pytorch_half_pixel")


def _mode(a: dict[str, object], spatial: int, sizes: tuple[int, ...]) -> tuple[str, bool]:
    """asgrad's mode and ``align_corners`` for the node's attributes."""
    mode = str(a.get("mode", "nearest"))
    coords = str(a.get("coordinate_transformation_mode", "half_pixel"))
    if int(a.get("antialias", 0)):  # type: ignore[call-overload]  # an int attribute
        raise OnnxImportError("Resize with antialias=1 is not supported")
    if coords in ("pytorch_half_pixel", "align_corners") and any(n == 1 for n in sizes):
        raise OnnxImportError(f"Resize with {coords} to a size of 1 is not supported")
    if mode == "nearest":
        rounding = str(a.get("nearest_mode", "round_prefer_floor"))
        if coords == "asymmetric" and rounding == "floor":
            return "nearest", False
        if coords in _HALF_PIXEL and rounding == "round_prefer_ceil":
            return "nearest-exact", False
        raise OnnxImportError(
            f"Resize nearest with {coords} coordinates and {rounding} rounding is not"
            " supported (PyTorch's forms are asymmetric+floor and half_pixel+round_prefer_ceil)"
        )
    if coords not in (*_HALF_PIXEL, "align_corners"):
        raise OnnxImportError(f"Resize {mode} with {coords} coordinates is not supported")
    align = coords == "align_corners"
    if mode == "linear" and spatial in _LINEAR:
        return _LINEAR[spatial], align
    if mode == "cubic" and spatial == 2:
        a_coeff = float(a.get("cubic_coeff_a", -0.75))  # type: ignore[arg-type]  # a float attribute
        if a_coeff != -0.75 or int(a.get("exclude_outside", 0)):  # type: ignore[call-overload]  # an int attribute
            raise OnnxImportError(
                "Resize cubic is supported with cubic_coeff_a=-0.75 and exclude_outside=0"
                " (PyTorch's bicubic)"
            )
        return "bicubic", align
    raise OnnxImportError(f"Resize {mode} over {spatial} spatial axes is not supported")


def _resize(ctx: ImportContext, node: onnx.NodeProto, xs: list[Value]) -> list[Value]:
    a = attributes(node)
    x = ctx.tensor(xs[0])
    rank = len(x.shape)
    if rank < 3:
        raise OnnxImportError(f"Resize of a rank-{rank} input; asgrad resizes (N, C, *spatial)")
    if node.op_type == "Upsample":  # nearest here is PyTorch's: asymmetric and floor
        a = {"coordinate_transformation_mode": "asymmetric", "nearest_mode": "floor", **a}
        scale_input = xs[1] if len(xs) > 1 else None
        raw_scales = (
            [float(s) for s in ctx.static(scale_input, "Upsample's scales").reshape(-1)]
            if scale_input is not None
            else [float(s) for s in a.get("scales", [])]
        )
        raw_sizes: list[int] = []
    else:
        if a.get("coordinate_transformation_mode") == "tf_crop_and_resize":
            raise OnnxImportError("Resize with tf_crop_and_resize is not supported")
        raw_scales = (
            [float(s) for s in ctx.static(xs[2], "Resize's scales").reshape(-1)]
            if len(xs) > 2 and node.input[2]
            else []
        )
        size_input = xs[3] if len(xs) > 3 and node.input[3] else None
        raw_sizes = (
            [int(s) for s in ctx.static(size_input, "Resize's sizes").reshape(-1)]
            if size_input is not None
            else []
        )
    if a.get("keep_aspect_ratio_policy", "stretch") != "stretch":
        raise OnnxImportError("Resize with keep_aspect_ratio_policy other than stretch")
    axes = [int(v) % rank for v in a.get("axes", range(rank))]
    scales = [1.0] * rank
    sizes = list(x.shape)
    for i, axis in enumerate(axes):
        if raw_scales:
            scales[axis] = raw_scales[i]
            sizes[axis] = math.floor(x.shape[axis] * raw_scales[i])
        elif raw_sizes:
            sizes[axis] = raw_sizes[i]
    if tuple(sizes[:2]) != tuple(x.shape[:2]):
        raise OnnxImportError("Resize changes the batch or channel axis; asgrad resizes spatially")
    spatial = rank - 2
    mode, align = _mode(a, spatial, tuple(sizes[2:]))
    if align and any(x.shape[i] * scales[i] != sizes[i] for i in range(2, rank)):
        # ONNX then steps by (in - 1) / (in * scale - 1), unrounded: asgrad cannot
        raise OnnxImportError("Resize with align_corners and scales that give a fractional size")
    attrs: dict[str, object] = {
        "size": tuple(sizes[2:]),
        "mode": mode,
        "align_corners": align if mode not in ("nearest", "nearest-exact") else None,
        "scales": tuple(scales[2:]) if raw_scales else None,
    }
    return [ctx.graph.apply("interpolate", [x], attrs)]


RESIZE_IMPORTERS: dict[str, Importer] = {"Resize": _resize, "Upsample": _resize}
"""The importers of this module, by ONNX op type."""
