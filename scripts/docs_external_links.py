"""MkDocs hook (mkdocs.yml, `hooks:`): list the site's external links, never fetch them.

The htmlproofer plugin checks every internal link and anchor of the rendered pages
(API cross-references included) and fails the build on a broken one; it leaves
external links alone so that a build needs no network. This hook lists those
external links at the end of the build (log level INFO), once each, with the number
of pages that link to it, for a person to review. It reads the same elements the
check does: `<a href>` and `<img src>` of each page as written, theme included.
"""

from __future__ import annotations

import logging
from html.parser import HTMLParser
from urllib.parse import urlsplit

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.structure.pages import Page

log = logging.getLogger("mkdocs.hooks.external_links")

# The attribute that holds a link, per element.
LINK_ATTRIBUTES = {"a": "href", "img": "src"}

# External link -> the source paths of the pages that hold it; filled page by page.
_found: dict[str, set[str]] = {}


class _LinkParser(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.links: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        wanted = LINK_ATTRIBUTES.get(tag)
        self.links.extend(value for name, value in attrs if name == wanted and value)


def is_external(url: str) -> bool:
    """A link with a scheme (`https:`, `mailto:`) or a host (`//host/path`)."""
    parts = urlsplit(url.strip())
    return bool(parts.scheme or parts.netloc)


def external_links(html: str) -> set[str]:
    """The external links of one HTML page."""
    parser = _LinkParser()
    parser.feed(html)
    parser.close()
    return {link.strip() for link in parser.links if is_external(link)}


def on_pre_build(config: MkDocsConfig) -> None:
    # `mkdocs serve` rebuilds in the same process: start every build afresh.
    _found.clear()


def on_post_page(output: str, page: Page, config: MkDocsConfig) -> str:
    for link in external_links(output):
        _found.setdefault(link, set()).add(page.file.src_uri)
    return output


def on_post_build(config: MkDocsConfig) -> None:
    log.info("External links (listed, not fetched): %d", len(_found))
    for link in sorted(_found):
        count = len(_found[link])
        log.info("  %s  (%d page%s)", link, count, "" if count == 1 else "s")
