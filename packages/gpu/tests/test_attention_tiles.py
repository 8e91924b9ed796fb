"""The attention kernels' workgroup tiles and their shared block loads.

The tiles are nested arrays (``[row][vec4]``, ``[row][key]``) so that the inner loops'
constant indices need no run-time bounds clamp, and every kernel loads its blocks
through functions rendered by `load_block`, not a copy of the loop of its own. The
kernels' results are pinned by the parity tests (``tests/test_gpu_attention*.py``).
"""

from __future__ import annotations

import re
from dataclasses import replace
from importlib import resources

import pytest

from asgrad.gpu.lowering import attention, attention_half
from asgrad.gpu.lowering.attention import K_TILE, Q_TILE, V_TILE, load_block

KERNELS = resources.files("asgrad.gpu").joinpath("kernels")
FILES = [
    name for name in (*attention.WGSL_FILES, *attention_half.WGSL_FILES) if "attention" in name
]


@pytest.mark.parametrize("name", FILES)
def test_attention_tiles_are_nested_arrays(name: str) -> None:
    text = KERNELS.joinpath(name).read_text()
    tiles = re.findall(r"var<workgroup> (\w+): (array<.*>);", text)
    assert tiles
    for tile, declared in tiles:
        if declared.count("array<") == 1:  # a per-row value: indexed once by the thread
            assert re.fullmatch(r"array<f32, (BM|BN|\$\{BLOCK\})>", declared), tile
        else:
            assert declared.startswith("array<array<"), tile


@pytest.mark.parametrize("name", FILES)
def test_attention_kernels_load_blocks_through_the_shared_loader(name: str) -> None:
    text = KERNELS.joinpath(name).read_text()
    assert "${LOADS}" in text
    assert "x += 256u" not in text  # no block-loading loop of its own


def test_an_optional_tile_is_read_and_stored_only_when_asked() -> None:
    text = load_block("load_kv", "BN", "mu(1u)", [K_TILE, replace(V_TILE, optional=True)])
    assert text.startswith("fn load_kv(t: u32, r0: u32, values: bool) {")
    assert "if (row < n && values && e < Ev) {" in text
    assert "if (values) {\n            vs[r][e / 4u][e % 4u] = a1;" in text
    plain = load_block("load_q", "BM", "mu(0u)", [Q_TILE])
    assert plain.startswith("fn load_q(t: u32, r0: u32) {")
    assert "values" not in plain
