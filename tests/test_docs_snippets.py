"""Every ```python block of the docs and READMEs runs, so the docs cannot rot.

The blocks of one page run in order in one namespace, as a reader would type
them. A block that must not run (it needs a GPU, downloads, takes minutes) is
preceded by an HTML comment that says why, which the rendered page hides:

    <!-- no-run: needs a GPU adapter -->
    ```python
    ...
    ```

Such a block is still compiled, so its syntax cannot rot either.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

PAGES = sorted(
    {
        *ROOT.glob("docs/**/*.md"),
        ROOT / "README.md",
        *ROOT.glob("packages/*/README.md"),
        ROOT / "examples" / "README.md",
    }
)

FENCE = re.compile(
    r"^(?P<marker><!--\s*no-run:?(?P<reason>[^>]*?)\s*-->\s*\n)?"
    r"(?P<indent>[ \t]*)```python[ \t]*\n(?P<code>.*?)^(?P=indent)```[ \t]*$",
    re.MULTILINE | re.DOTALL,
)


@dataclass(frozen=True)
class Snippet:
    page: Path
    line: int
    code: str
    runs: bool
    reason: str


def snippets_in_text(text: str, page: Path) -> list[Snippet]:
    found: list[Snippet] = []
    for match in FENCE.finditer(text):
        indent = match["indent"]
        lines = match["code"].splitlines()
        code = "\n".join(line.removeprefix(indent) for line in lines) + "\n"
        found.append(
            Snippet(
                page=page,
                line=text.count("\n", 0, match.start("code")) + 1,
                code=code,
                runs=match["marker"] is None,
                reason=(match["reason"] or "").strip(),
            )
        )
    return found


def snippets(page: Path) -> list[Snippet]:
    return snippets_in_text(page.read_text(encoding="utf-8"), page)


def page_id(page: Path) -> str:
    return page.relative_to(ROOT).as_posix()


PAGES_WITH_CODE = [page for page in PAGES if page.exists() and snippets(page)]


def test_the_extractor_finds_blocks_and_no_run_markers() -> None:
    page = "\n".join(
        [
            "text",
            "```python",
            "x = 1",
            "```",
            "<!-- no-run: needs a GPU -->",
            "```python",
            "y = 2",
            "```",
            "```bash",
            "echo not python",
            "```",
        ]
    )
    path = ROOT / "fake.md"
    assert snippets_in_text(page, path) == [
        Snippet(path, 3, "x = 1\n", runs=True, reason=""),
        Snippet(path, 7, "y = 2\n", runs=False, reason="needs a GPU"),
    ]


@pytest.mark.parametrize("page", PAGES_WITH_CODE, ids=page_id)
def test_page_code_runs(page: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # files a snippet writes land in a scratch folder
    namespace: dict[str, object] = {"__name__": "__docs__"}
    for snippet in snippets(page):
        where = f"{page_id(page)}:{snippet.line}"
        compiled = compile(snippet.code, where, "exec")
        if not snippet.runs:
            assert snippet.reason, f"{where}: say why a block does not run: <!-- no-run: why -->"
            continue
        try:
            exec(compiled, namespace)
        except Exception as error:
            pytest.fail(f"the code block at {where} raised {error!r}", pytrace=False)
