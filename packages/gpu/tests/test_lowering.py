"""The lowering tables: one module per op family, and the kernel files each names."""

from __future__ import annotations

from importlib import resources

import pytest

from asgrad.gpu import GpuUnsupportedError
from asgrad.gpu.lowering import (
    FAMILY_MODULES,
    LEAVES,
    LOWERINGS,
    attention,
    attention_half,
    kernel_files,
)
from asgrad.tensor import all_ops

KERNELS = resources.files("asgrad.gpu").joinpath("kernels")


def test_every_lowering_is_defined_in_its_family_module() -> None:
    misplaced = []
    for op in all_ops():
        if op.family == "leaf":
            assert op.name in LEAVES
            assert op.name not in LOWERINGS
            continue
        if not op.primitive:  # graphs hold only the ops it expands into
            assert op.name not in LOWERINGS
            continue
        module = LOWERINGS[op.name].__module__
        if module != f"asgrad.gpu.lowering.{op.family}":
            misplaced.append(f"{op.name} ({op.family}) lowered in {module}")
    assert misplaced == []


def test_the_table_is_the_union_of_the_family_tables() -> None:
    tables = [m.LOWERINGS for name, m in FAMILY_MODULES.items() if name != "leaf"]
    assert sum(len(t) for t in tables) == len(LOWERINGS)  # no op in two families
    assert set(FAMILY_MODULES) == {op.family for op in all_ops()}


def test_kernel_files_name_shipped_kernels() -> None:
    for op in all_ops():
        if not op.primitive:  # no kernels of its own: those of its expansion
            continue
        files = kernel_files(op.name)
        assert bool(files) == (op.family != "leaf"), op.name
        for name in files:
            assert KERNELS.joinpath(name).is_file(), f"{op.name}: no kernels/{name}"


def test_every_kernel_file_is_named_by_a_family() -> None:
    named = {name for m in FAMILY_MODULES.values() for name in m.WGSL_FILES}
    # launched by the plan's attention groups, not by an op
    named |= set(attention.WGSL_FILES) | set(attention_half.WGSL_FILES)
    shipped = {p.name for p in KERNELS.iterdir() if p.name.endswith(".wgsl")}
    # copy.wgsl is launched by asgrad.gpu.device.copy, not by an op; checks.wgsl is pasted into
    # the kernels that check (asgrad.gpu.device.checks) of several families, prelude_f16.wgsl
    # into every kernel of float16 values that pastes the prelude (asgrad.gpu.device.source)
    assert shipped - named == {"copy.wgsl", "checks.wgsl", "prelude_f16.wgsl"}


def test_kernel_files_of_an_unknown_op_raise() -> None:
    with pytest.raises(GpuUnsupportedError, match="no_such_op"):
        kernel_files("no_such_op")


def test_each_family_names_its_own_kernel_files() -> None:
    for path in KERNELS.iterdir():
        stem = path.name.removesuffix(".wgsl")
        for family, module in FAMILY_MODULES.items():
            if stem == family or stem.startswith(family + "_"):
                assert path.name in module.WGSL_FILES, f"{path.name} not in {family}.WGSL_FILES"
