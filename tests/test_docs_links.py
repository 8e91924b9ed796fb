"""The docs' link check: mkdocs.yml's htmlproofer settings fail a build on a broken link.

Each build test makes a two-page Material site with the link check, the validation
and the external-links hook exactly as mkdocs.yml configures them, and builds it
strictly in a subprocess whose proxy goes nowhere, so a link that got fetched would
fail the build too.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from mkdocs.utils.yaml import yaml_load

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))

import docs_external_links  # noqa: E402  # a script, importable once scripts/ is on the path

EXTERNAL = "https://example.invalid/reference"

OTHER_PAGE = """\
# Other

## Part two

<div id="pkg.module.Thing">an id like the ones mkdocstrings gives each API object</div>
"""

GOOD_LINKS = f"""\
# Home

[part two](other.md#part-two), [the API object](other.md#pkg.module.Thing),
[an external page]({EXTERNAL}), <a href="other/#part-two">raw HTML</a>,
<a href="#home">this page</a>.
"""

# Raw HTML, which mkdocs' own validation of Markdown links does not read.
BROKEN_LINKS = {
    "other/#no-such-part": "an anchor missing on another page",
    "other/#pkg.module.Missing": "an API cross-reference to an object with no anchor",
    "#nowhere": "an anchor missing on the page itself",
    "missing/": "a page that does not exist",
    "img/missing.png": "an image that does not exist",
}


def load_mkdocs_config() -> dict[str, Any]:
    # mkdocs' own loader, which resolves `!ENV` as a build does.
    with (ROOT / "mkdocs.yml").open("rb") as file:
        return yaml_load(file)


def plugin_config(config: dict[str, Any], name: str) -> dict[str, Any]:
    for entry in config["plugins"]:
        if isinstance(entry, dict) and name in entry:
            options: dict[str, Any] = entry[name]
            return options
    raise AssertionError(f"mkdocs.yml has no configured plugin {name!r}")


def build_site(tmp_path: Path, index: str) -> subprocess.CompletedProcess[str]:
    config = load_mkdocs_config()
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "index.md").write_text(index, encoding="utf-8")
    (docs / "other.md").write_text(OTHER_PAGE, encoding="utf-8")
    tiny = {
        "site_name": "link check test",
        "strict": True,
        "theme": {"name": config["theme"]["name"]},
        "nav": [{"Home": "index.md"}, {"Other": "other.md"}],
        "markdown_extensions": ["attr_list", "md_in_html", {"toc": {"permalink": True}}],
        "plugins": ["search", {"htmlproofer": plugin_config(config, "htmlproofer")}],
        "hooks": [str(ROOT / hook) for hook in config["hooks"]],
        "validation": config["validation"],
    }
    # JSON is YAML: no YAML writer needed.
    (tmp_path / "mkdocs.yml").write_text(json.dumps(tiny, indent=2), encoding="utf-8")
    env = {key: value for key, value in os.environ.items() if "proxy" not in key.lower()}
    env.update(HTTP_PROXY="http://127.0.0.1:9", HTTPS_PROXY="http://127.0.0.1:9")
    env.update(NO_MKDOCS_2_WARNING="1", ASGRAD_DOCS_LINK_CHECK="true")
    return subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(tmp_path / "mkdocs.yml")],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )


def test_mkdocs_yml_checks_links_offline(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ASGRAD_DOCS_LINK_CHECK", raising=False)
    config = load_mkdocs_config()
    options = plugin_config(config, "htmlproofer")
    assert options["enabled"] is True
    assert options["validate_external_urls"] is False
    assert options["validate_rendered_template"] is True
    assert options["strict_anchors"] is True
    assert options["raise_error_after_finish"] is True
    assert config["strict"] is True
    assert "scripts/docs_external_links.py" in config["hooks"]


def test_the_link_check_can_be_turned_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ASGRAD_DOCS_LINK_CHECK", "false")
    assert plugin_config(load_mkdocs_config(), "htmlproofer")["enabled"] is False


def test_good_links_pass_and_external_ones_are_listed(tmp_path: Path) -> None:
    result = build_site(tmp_path, GOOD_LINKS)
    assert result.returncode == 0, result.stderr
    assert "External links (listed, not fetched): 2" in result.stderr
    assert f"{EXTERNAL}  (1 page)" in result.stderr


def test_each_broken_link_is_reported_and_fails_the_build(tmp_path: Path) -> None:
    broken = " ".join(
        f'<img src="{url}">' if url.endswith(".png") else f'<a href="{url}">{why}</a>'
        for url, why in BROKEN_LINKS.items()
    )
    result = build_site(tmp_path, f"{GOOD_LINKS}\n{broken}\n")
    assert result.returncode != 0
    reported = [line for line in result.stderr.splitlines() if "invalid url" in line]
    for url, why in BROKEN_LINKS.items():
        assert any(f"invalid url - {url} " in line for line in reported), (why, result.stderr)
    assert len(reported) == len(BROKEN_LINKS), result.stderr


def test_external_links_of_a_page() -> None:
    html = """
    <a href="https://example.org/a">a</a> <a href=" mailto:team@example.org ">mail</a>
    <img src="//cdn.example.org/logo.png"> <a href="../api/tensor/#asgrad.tensor.Graph">api</a>
    <a href="#top">top</a> <a>no href</a> <link href="https://fonts.example.org/css">
    <img src="assets/logo.svg">
    """
    assert docs_external_links.external_links(html) == {
        "https://example.org/a",
        "mailto:team@example.org",
        "//cdn.example.org/logo.png",
    }


@pytest.mark.parametrize(
    ("url", "external"),
    [
        ("https://example.org", True),
        ("http://example.org/x#y", True),
        ("mailto:a@example.org", True),
        ("//example.org/x", True),
        ("../concepts/#graphs", False),
        ("#anchor", False),
        ("index.html", False),
        ("", False),
    ],
)
def test_is_external(url: str, external: bool) -> None:
    assert docs_external_links.is_external(url) is external
