"""The versioned docs publish: what each ref publishes, and the rehearsal's checks.

The publish itself (mike, git) runs in `hatch run docs-rehearse` (.ci/run); these
tests cover its decisions and the checks it makes on a gh-pages tree, on small
trees written here in the shape mike writes them.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))

import docs_publish  # noqa: E402  # a script, importable once scripts/ is on the path
import docs_rehearsal  # noqa: E402
from docs_publish import Plan, PublishError, plan  # noqa: E402

RELEASED = [{"version": "0.1.0", "title": "0.1.0", "aliases": ["latest"]}]


def entries(*versions: str, latest: str | None = None) -> list[dict[str, Any]]:
    return [
        {"version": v, "title": v, "aliases": ["latest"] if v == latest else []} for v in versions
    ]


# --- what a ref publishes ---------------------------------------------------------


def test_main_publishes_dev_and_is_the_default_until_a_release() -> None:
    assert plan("refs/heads/main", []) == Plan("dev", "dev", (), "dev")
    assert plan("refs/heads/main", entries("dev")) == Plan("dev", "dev", (), "dev")


def test_main_leaves_latest_and_the_default_alone_after_a_release() -> None:
    assert plan("refs/heads/main", RELEASED) == Plan("dev", "dev", (), None)


def test_a_release_tag_publishes_its_version_and_moves_latest() -> None:
    assert plan("refs/tags/v0.1.0", []) == Plan("0.1.0", "0.1.0", ("latest",), "latest")
    assert plan("refs/tags/v0.2.0", RELEASED) == Plan("0.2.0", "0.2.0", ("latest",), "latest")
    assert plan("refs/tags/v0.1.0.post1", RELEASED).aliases == ("latest",)


def test_republishing_the_latest_release_keeps_latest() -> None:
    assert plan("refs/tags/v0.1.0", RELEASED).aliases == ("latest",)


def test_a_pre_release_moves_nothing() -> None:
    for tag in ("v0.2.0rc1", "v0.2.0b2", "v0.2.0.dev3"):
        chosen = plan(f"refs/tags/{tag}", RELEASED)
        assert chosen == Plan(tag[1:], tag[1:], (), None)


def test_a_fix_of_an_older_line_leaves_latest_on_the_newest_release() -> None:
    published = entries("0.1.0", "0.2.0", "dev", latest="0.2.0")
    assert plan("refs/tags/v0.1.1", published) == Plan("0.1.1", "0.1.1", (), None)
    assert plan("refs/tags/v0.2.1", published).aliases == ("latest",)
    assert plan("refs/tags/v0.10.0", published).aliases == ("latest",)  # not compared as text


@pytest.mark.parametrize(
    "ref", ["refs/heads/feature", "refs/heads/gh-pages", "refs/tags/v1.2", "refs/tags/x1.0.0", ""]
)
def test_other_refs_publish_nothing(ref: str) -> None:
    with pytest.raises(PublishError):
        plan(ref, [])


def test_main_refuses_a_ref_before_touching_anything(capsys: pytest.CaptureFixture[str]) -> None:
    assert docs_publish.main(["--ref", "refs/heads/feature", "--remote", "/nonexistent"]) == 1
    assert "error:" in capsys.readouterr().err


# --- the rehearsal's checks of a gh-pages tree ----------------------------------------

PAGES = ("index.html", "api/tensor/index.html", "404.html")
SITE_PAGE = (
    '<html><head><script id="__config" type="application/json">'
    '{"base": ".", "version": {"alias": true, "provider": "mike"}}</script></head>'
    "<body>asgrad</body></html>"
)


def redirect(href: str) -> str:
    """A redirect page as mike writes it (templates/redirect.html)."""
    return (
        '<!DOCTYPE html><html><head><meta charset="utf-8"><title>Redirecting</title>'
        f'<noscript><meta http-equiv="refresh" content="1; url={href}" /></noscript>'
        f'<script>window.location.replace("{href}" + window.location.search);</script>'
        f'</head><body>Redirecting to <a href="{href}">{href}</a>...</body></html>'
    )


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def alias_href(page: str, version: str) -> str:
    """mike's href from the alias's copy of PAGE to VERSION's."""
    depth = page.count("/") + 1
    target = page.removesuffix("index.html")
    return "../" * depth + f"{version}/{target}"


def make_pages(root: Path, release: str = "0.1.0") -> Path:
    """The gh-pages tree that publishing RELEASE, then dev, leaves."""
    versions = [
        {"version": "dev", "title": "dev", "aliases": []},
        {"version": release, "title": release, "aliases": ["latest"]},
    ]
    write(root / "versions.json", json.dumps(versions))
    write(root / ".nojekyll", "")
    write(root / "index.html", redirect("latest/"))
    for page in PAGES:
        write(root / release / page, SITE_PAGE)
        write(root / "dev" / page, SITE_PAGE)
        write(root / "latest" / page, redirect(alias_href(page, release)))
    return root


def test_the_tree_mike_leaves_passes(tmp_path: Path) -> None:
    assert alias_href("api/tensor/index.html", "0.1.0") == "../../../0.1.0/api/tensor/"
    assert alias_href("404.html", "0.1.0") == "../0.1.0/404.html"
    assert docs_rehearsal.check_published(make_pages(tmp_path), "0.1.0") == []


def test_follow_walks_redirects_to_the_page_shown(tmp_path: Path) -> None:
    pages = make_pages(tmp_path)
    assert docs_rehearsal.follow(pages, "index.html") == "0.1.0/index.html"
    assert docs_rehearsal.follow(pages, "latest/api/tensor/index.html") == (
        "0.1.0/api/tensor/index.html"
    )
    assert docs_rehearsal.follow(pages, "dev/index.html") == "dev/index.html"


def test_follow_refuses_loops_missing_pages_and_leaving_the_site(tmp_path: Path) -> None:
    write(tmp_path / "a/index.html", redirect("../b/"))
    write(tmp_path / "b/index.html", redirect("../a/"))
    write(tmp_path / "up/index.html", redirect("../../elsewhere/"))
    write(tmp_path / "away/index.html", redirect("https://example.org/"))
    write(tmp_path / "gone/index.html", redirect("../nothing/"))
    for start, message in [
        ("a/index.html", "redirects"),
        ("up/index.html", "above the site"),
        ("away/index.html", "off the site"),
        ("gone/index.html", "no such file"),
        ("absent.html", "no such file"),
    ]:
        with pytest.raises(ValueError, match=message):
            docs_rehearsal.follow(tmp_path, start)


def test_latest_on_the_wrong_version_is_reported(tmp_path: Path) -> None:
    pages = make_pages(tmp_path)
    write(pages / "latest/api/tensor/index.html", redirect("../../../dev/api/tensor/"))
    versions = json.loads((pages / "versions.json").read_text())
    versions[0]["aliases"], versions[1]["aliases"] = ["latest"], []
    write(pages / "versions.json", json.dumps(versions))
    problems = docs_rehearsal.check_published(pages, "0.1.0")
    assert any(p.startswith("versions.json:") for p in problems), problems
    assert any("latest/api/tensor/index.html shows dev/" in p for p in problems), problems


def test_a_root_that_redirects_elsewhere_is_reported(tmp_path: Path) -> None:
    pages = make_pages(tmp_path)
    write(pages / "index.html", redirect("dev/"))
    assert docs_rehearsal.check_published(pages, "0.1.0") == [
        "the root shows dev/index.html, expected 0.1.0/index.html"
    ]


def test_a_missing_alias_page_or_version_is_reported(tmp_path: Path) -> None:
    pages = make_pages(tmp_path)
    (pages / "latest/404.html").unlink()
    (pages / "dev/index.html").unlink()
    problems = docs_rehearsal.check_published(pages, "0.1.0")
    assert "dev/index.html is missing" in problems
    assert any(p.startswith("latest/404.html: no such file") for p in problems), problems


def test_a_version_without_the_selector_or_as_a_redirect_is_reported(tmp_path: Path) -> None:
    pages = make_pages(tmp_path)
    write(pages / "dev/index.html", "<html><body>no config</body></html>")
    write(pages / "0.1.0/index.html", redirect("../dev/"))
    problems = docs_rehearsal.check_published(pages, "0.1.0")
    assert "dev/index.html: the version selector (mike) is not enabled" in problems
    assert "0.1.0/index.html is a redirect, not the site" in problems


def test_stray_files_and_an_unreadable_version_list_are_reported(tmp_path: Path) -> None:
    pages = make_pages(tmp_path)
    write(pages / "stray.txt", "")
    assert any("the root holds" in p for p in docs_rehearsal.check_published(pages, "0.1.0"))
    write(pages / "versions.json", "{not json")
    [problem] = docs_rehearsal.check_published(pages, "0.1.0")
    assert problem.startswith("versions.json: cannot read")
