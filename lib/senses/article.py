"""The title and main text of an HTML page, as Markdown (trafilatura).

trafilatura keeps the article and drops navigation, footers and cookie banners, so the model
reads the page rather than its chrome. It runs in the parser process (lib/senses/parsing.py):
some pages take it minutes (about 25 s per MB of small tables here), and lxml under it is C code
reading a stranger's bytes. It is imported on first use (it pulls in lxml and more).
"""

from __future__ import annotations

from dataclasses import dataclass

from lib.senses.pdf import UnreadableDocument


@dataclass(frozen=True)
class Article:
    title: str
    text: str


def html_article(data: bytes, *, url: str, charset: str | None) -> Article:
    """The title and main text of an HTML page, as Markdown (headings and lists kept).

    Raises UnreadableDocument for a page with nothing to read."""
    import trafilatura
    from trafilatura.metadata import extract_metadata

    # Without a declared charset trafilatura detects it (meta tags, then a guess).
    tree = trafilatura.load_html(data.decode(charset, errors="replace") if charset else data)
    if tree is None:
        raise UnreadableDocument("the page is empty or not HTML that can be read")
    metadata = extract_metadata(tree, default_url=url)
    title = (metadata.title or "").strip() if metadata else ""
    text = trafilatura.extract(
        tree, url=url, output_format="markdown", include_comments=False, include_tables=True, deduplicate=True
    )
    if not text:
        # No block looked like an article (a short page, a listing): all visible text is better
        # than nothing.
        text = trafilatura.html2txt(tree)
    if not text or not text.strip():
        raise UnreadableDocument("the page has no readable text (it may build its content with JavaScript)")
    return Article(title, text.strip())
