"""Every distribution's version and internal pins stay in step."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPTS = ROOT / "scripts"
sys.path.insert(0, str(SCRIPTS))

from workspace import DISTRIBUTION_DIRS  # noqa: E402  # a script, importable once on the path


def run_script(name: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(SCRIPTS / name), *args],
        capture_output=True,
        text=True,
        check=False,
    )


def copy_release_files(destination: Path) -> Path:
    """The files the release scripts read, copied so a test may change them."""
    for relative in ("pyproject.toml", "LICENSE", "CHANGELOG.md"):
        shutil.copy(ROOT / relative, destination / relative)
    for pyproject in [
        *ROOT.glob("packages/*/pyproject.toml"),
        ROOT / "examples/pyproject.toml",
    ]:
        target = destination / pyproject.parent.relative_to(ROOT)
        target.mkdir(parents=True)
        shutil.copy(pyproject, target / "pyproject.toml")
        shutil.copy(pyproject.parent / "LICENSE", target / "LICENSE")
        for marker in pyproject.parent.glob("src/asgrad/*/py.typed"):
            copied = destination / marker.relative_to(ROOT)
            copied.parent.mkdir(parents=True)
            copied.touch()
    return destination


def test_versions_and_pins_are_in_step() -> None:
    result = run_script("check_versions.py")
    assert result.returncode == 0, result.stderr
    assert f"{len(DISTRIBUTION_DIRS)} distributions" in result.stdout


def test_check_fails_on_a_loose_internal_pin(tmp_path: Path) -> None:
    root = copy_release_files(tmp_path)
    nn = root / "packages/nn/pyproject.toml"
    nn.write_text(nn.read_text().replace('"asgrad-tensor==', '"asgrad-tensor>='))
    result = run_script("check_versions.py", "--root", str(root))
    assert result.returncode == 1
    assert "asgrad-nn: requirement 'asgrad-tensor>=" in result.stderr


def test_check_fails_on_a_version_out_of_step(tmp_path: Path) -> None:
    root = copy_release_files(tmp_path)
    gpu = root / "packages/gpu/pyproject.toml"
    text = gpu.read_text()
    gpu.write_text(text.replace('\nversion = "', '\nversion = "9', 1))
    result = run_script("check_versions.py", "--root", str(root))
    assert result.returncode == 1
    assert "versions differ" in result.stderr


def test_bump_rewrites_every_version_and_pin(tmp_path: Path) -> None:
    root = copy_release_files(tmp_path)
    result = run_script("bump_version.py", "7.8.9rc1", "--root", str(root))
    assert result.returncode == 0, result.stderr
    texts = [p.read_text() for p in root.glob("**/pyproject.toml") if p.parent != root]
    assert len(texts) == len(DISTRIBUTION_DIRS)
    for text in texts:
        assert 'version = "7.8.9rc1"' in text
        assert "0.1.0" not in text.replace(">=0.1.0", "")
    meta = (root / "packages/asgrad/pyproject.toml").read_text()
    assert '"asgrad-examples==7.8.9rc1"' in meta
    assert 'gpu = ["asgrad-gpu==7.8.9rc1"]' in meta


def test_bump_refuses_a_malformed_version(tmp_path: Path) -> None:
    root = copy_release_files(tmp_path)
    result = run_script("bump_version.py", "1.2", "--root", str(root))
    assert result.returncode == 2
    assert "is not a version" in result.stderr


@pytest.mark.parametrize("bad_tag", ["v9.9.9", "0.1.0", "version-0.1.0"])
def test_release_check_refuses_a_tag_that_differs_from_the_version(
    tmp_path: Path, bad_tag: str
) -> None:
    root = copy_release_files(tmp_path)
    result = run_script("release.py", "--root", str(root), "check", "--tag", bad_tag)
    assert result.returncode == 1
    assert "differs from the distributions' version" in result.stderr


def test_prepare_then_check_then_refuse_an_empty_unreleased(tmp_path: Path) -> None:
    root = copy_release_files(tmp_path)
    prepared = run_script(
        "release.py", "--root", str(root), "prepare", "99.0.0", "--date", "2030-01-01"
    )
    assert prepared.returncode == 0, prepared.stderr
    changelog = (root / "CHANGELOG.md").read_text()
    assert "## [Unreleased]\n\n## [99.0.0] - 2030-01-01\n" in changelog

    checked = run_script("release.py", "--root", str(root), "check", "--tag", "v99.0.0")
    assert checked.returncode == 0, checked.stderr

    notes = run_script("release_notes.py", "v99.0.0", "--changelog", str(root / "CHANGELOG.md"))
    assert notes.returncode == 0, notes.stderr
    assert notes.stdout.startswith("### Added")

    again = run_script("release.py", "--root", str(root), "prepare", "99.0.1")
    assert again.returncode == 1
    assert "`## [Unreleased]` section lists no change" in again.stderr


def test_release_notes_refuse_an_unknown_version() -> None:
    result = run_script("release_notes.py", "0.0.0-nope")
    assert result.returncode == 1
    assert "no `## [0.0.0-nope]` section" in result.stderr
