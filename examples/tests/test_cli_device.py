"""The example CLIs: a device that cannot run is one line and status 1."""

from __future__ import annotations

import pytest

from asgrad.examples import _common, xor


class _NoAdapter:
    def available(self) -> bool:
        return False


def test_device_gpu_without_an_adapter_is_one_line_naming_the_flag(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(_common, "get_backend", lambda name: _NoAdapter())
    with pytest.raises(SystemExit) as info:
        xor.main(["--device", "gpu", "--steps", "1", "--quiet"])
    message = str(info.value.code)
    assert message.startswith("error: --device gpu: no gpu adapter")
    assert "run with --device cpu" in message
    assert "\n" not in message


def test_an_unknown_backend_in_the_environment_is_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ASGRAD_DEVICE", "tpu")
    with pytest.raises(SystemExit, match="unknown backend 'tpu'"):
        xor.main(["--steps", "1", "--quiet"])


def test_help_names_the_program_as_it_is_run(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        xor.main(["--help"])
    assert capsys.readouterr().out.startswith("usage: python -m asgrad.examples.xor")
