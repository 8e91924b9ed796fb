"""Choosing the GPU adapter: an explicit index, the environment, a rank's local index."""

from __future__ import annotations

import pytest

from asgrad.gpu import ADAPTER_VARIABLE, Device, GpuUnavailableError, adapters, select_adapter
from asgrad.gpu.device import _import_wgpu
from asgrad.gpu.device import adapters as adapter_selection
from asgrad.gpu.device.adapters import Selection, choose_adapter

pytestmark = pytest.mark.gpu


@pytest.fixture
def wgpu(device: Device, monkeypatch: pytest.MonkeyPatch) -> object:
    del device  # the fixture fails (or skips) without an adapter
    monkeypatch.delenv(ADAPTER_VARIABLE, raising=False)
    monkeypatch.setattr(adapter_selection, "_selection", None)
    wgpu_module: object = _import_wgpu()
    return wgpu_module


def test_no_selection_leaves_the_choice_to_wgpu(wgpu: object) -> None:
    assert choose_adapter(wgpu) is None


def test_an_index_from_the_environment_chooses_from_the_list(
    wgpu: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(ADAPTER_VARIABLE, "0")
    chosen = choose_adapter(wgpu)
    assert chosen is not None
    assert chosen.info["device"] == adapters(wgpu)[0].info["device"]


@pytest.mark.parametrize("raw", ["99", "first", "-1"])
def test_an_explicit_index_out_of_range_or_not_a_number_is_an_error(
    wgpu: object, monkeypatch: pytest.MonkeyPatch, raw: str
) -> None:
    monkeypatch.setenv(ADAPTER_VARIABLE, raw)
    with pytest.raises(GpuUnavailableError, match=ADAPTER_VARIABLE):
        choose_adapter(wgpu)


def test_a_local_rank_beyond_the_adapters_wraps_around_with_a_warning(
    wgpu: object, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    count = len(adapters(wgpu))
    monkeypatch.setattr(adapter_selection, "_selection", Selection(count + 1, True, "rank 9"))
    with pytest.warns(RuntimeWarning, match=f"local rank {count + 1} but {count} adapter"):
        chosen = choose_adapter(wgpu)
    assert chosen is not None
    assert chosen.info["device"] == adapters(wgpu)[1 % count].info["device"]
    line = capsys.readouterr().err
    assert f"asgrad.gpu: rank 9: adapter {1 % count} of {count}, " in line
    assert "wrapped around" in line


def test_the_environment_overrides_the_local_rank(
    wgpu: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(adapter_selection, "_selection", Selection(99, True, ""))
    monkeypatch.setenv(ADAPTER_VARIABLE, "99")
    with pytest.raises(GpuUnavailableError, match="asks for adapter 99"):
        choose_adapter(wgpu)


def test_an_adapter_cannot_be_chosen_once_the_device_is_open(wgpu: object) -> None:
    with pytest.raises(GpuUnavailableError, match="open already"):
        select_adapter(0)
