"""Raw Wikipedia XML from gensim's wheel and three wiki-markup strippers (no gensim import).

The file ``enwiki-latest-pages-articles1.xml-p000000010p000030302-shortened.bz2`` (a 2016
English Wikipedia dump excerpt, 206 pages, CC-BY-SA) ships in gensim's test data; it is
located with :func:`importlib.util.find_spec` and read with :mod:`bz2` and
:mod:`xml.etree.ElementTree`, so gensim is never imported.

The strippers share the removal of comments, ``<ref>`` citations, ``{{templates}}``,
``{| tables |}``, HTML tags and entities, and differ in what they keep, as real HTML/markup
extractors do:

* :func:`strip_plain` — running text only: headings dropped, list markers removed, bold and
  italics removed, image captions dropped;
* :func:`strip_markdown` — Markdown-like structure: ``## headings``, ``- bullets``,
  ``1. numbered`` items, ``**bold**`` and ``*italic*``;
* :func:`strip_text` — headings and list items as plain lines, image captions kept.
"""

from __future__ import annotations

import bz2
import html
import re
import xml.etree.ElementTree as ET
from pathlib import Path

from .gensim_files import gensim_test_file

__all__ = [
    "WIKI_XML_FILE",
    "read_wiki_pages",
    "strip_markdown",
    "strip_plain",
    "strip_text",
    "wiki_xml_path",
]

#: File name of the Wikipedia excerpt in gensim's test data.
WIKI_XML_FILE = "enwiki-latest-pages-articles1.xml-p000000010p000030302-shortened.bz2"


def wiki_xml_path() -> Path:
    """Path of the Wikipedia XML excerpt inside the installed gensim package."""
    return gensim_test_file(WIKI_XML_FILE)


def read_wiki_pages(path: str | Path | None = None) -> list[tuple[str, str]]:
    """``(title, markup)`` of the article pages (namespace 0, redirects skipped), in file order."""
    path = Path(path) if path is not None else wiki_xml_path()
    pages = []
    with bz2.open(path, "rb") as fh:
        for _, elem in ET.iterparse(fh, events=("end",)):
            if not elem.tag.endswith("}page"):
                continue
            ns = next(iter(elem.iter()), None)
            title = text = None
            namespace = "0"
            for child in elem.iter():
                tag = child.tag.rsplit("}", 1)[-1]
                if tag == "title":
                    title = child.text or ""
                elif tag == "ns":
                    namespace = (child.text or "").strip()
                elif tag == "text":
                    text = child.text or ""
            del ns
            elem.clear()
            if namespace != "0" or not text or text.lstrip().upper().startswith("#REDIRECT"):
                continue
            pages.append((title, text))
    return pages


_COMMENT = re.compile(r"<!--.*?-->", re.DOTALL)
_REF = re.compile(r"<ref[^>]*/>|<ref[^>]*>.*?</ref>", re.DOTALL | re.IGNORECASE)
_TAG = re.compile(r"</?[a-zA-Z][^>]*>")
_EXTLINK = re.compile(r"\[(?:https?:)?//[^\s\]]+(?: ([^\]]*))?\]")
_FILE_PREFIX = re.compile(r"^\s*(file|image|category|media)\s*:", re.IGNORECASE)
_INTERWIKI = re.compile(r"^\s*[a-z]{2,3}(?:-[a-z]+)?\s*:", re.IGNORECASE)
_HEADING = re.compile(r"^(={2,6})\s*(.*?)\s*\1\s*$")
_LIST = re.compile(r"^([*#:;]+)\s*")
_BOLD = re.compile(r"'''(.+?)'''")
_ITALIC = re.compile(r"''(.+?)''")


def _top_level_spans(text: str, open_: str, close: str) -> list[tuple[int, int]]:
    """``(start, end)`` of the outermost balanced ``open_ ... close`` spans (unclosed: to end)."""
    pattern = re.compile(re.escape(open_) + "|" + re.escape(close))
    spans, depth, start = [], 0, 0
    for m in pattern.finditer(text):
        if m.group() == open_:
            if depth == 0:
                start = m.start()
            depth += 1
        elif depth:
            depth -= 1
            if depth == 0:
                spans.append((start, m.end()))
    if depth:
        spans.append((start, len(text)))
    return spans


def _remove_nested(text: str, open_: str, close: str) -> str:
    out, i = [], 0
    for a, b in _top_level_spans(text, open_, close):
        out.append(text[i:a])
        i = b
    out.append(text[i:])
    return "".join(out)


def _links(text: str, keep_captions: bool) -> str:
    """Resolve ``[[target|label]]`` links (nested ones inside file captions too)."""
    out, i = [], 0
    for a, b in _top_level_spans(text, "[[", "]]"):
        out.append(text[i:a])
        i = b
        inner = text[a + 2 : b - 2] if text.endswith("]]", 0, b) else text[a + 2 : b]
        if _FILE_PREFIX.match(inner):
            if keep_captions and not inner.lower().lstrip().startswith("category"):
                caption = _links(inner, keep_captions).split("|")[-1].strip()
                if caption and not re.fullmatch(r"[\w ]*px|thumb|left|right|center", caption):
                    out.append("\n" + caption + "\n")
        elif _INTERWIKI.match(inner) and "|" not in inner:
            continue
        elif "[[" in inner:
            out.append(_links(inner, keep_captions).split("|")[-1])
        else:
            out.append(inner.split("|")[-1])
    out.append(text[i:])
    return "".join(out)


def _common(markup: str, keep_captions: bool) -> str:
    t = _COMMENT.sub("", markup)
    t = _REF.sub("", t)
    t = _remove_nested(t, "{{", "}}")
    t = _remove_nested(t, "{|", "|}")
    t = _links(t, keep_captions)
    t = _EXTLINK.sub(lambda m: m.group(1) or "", t)
    t = _TAG.sub("", t)
    return html.unescape(t)


def strip_plain(markup: str) -> str:
    """Running text: headings dropped, list markers, bold/italic quotes and captions removed."""
    lines = []
    for line in _common(markup, keep_captions=False).split("\n"):
        if _HEADING.match(line.strip()):
            continue
        line = _LIST.sub("", line)
        line = _ITALIC.sub(r"\1", _BOLD.sub(r"\1", line)).replace("'''", "").replace("''", "")
        lines.append(re.sub(r"[ \t]+", " ", line).strip())
    return "\n".join(ln for ln in lines if ln)


def strip_markdown(markup: str) -> str:
    """Markdown-like text: ``## heading``, ``- item``, numbered items, ``**bold**``, ``*italic*``.

    Paragraphs are separated by one blank line.
    """
    blocks: list[str] = []
    for line in _common(markup, keep_captions=False).split("\n"):
        s = line.strip()
        h = _HEADING.match(s)
        if h:
            title = h.group(2).replace("'''", "").replace("''", "")
            if title:
                blocks.append("#" * len(h.group(1)) + " " + title)
            continue
        m = _LIST.match(s)
        if m:
            mark = "1." if m.group(1).endswith("#") else "-"
            s = "  " * (len(m.group(1)) - 1) + mark + " " + s[m.end() :]
        s = _ITALIC.sub(r"*\1*", _BOLD.sub(r"**\1**", s))
        s = re.sub(r"[ \t]+", " ", s).rstrip()
        blocks.append(s)
    text = "\n".join(blocks)
    return re.sub(r"\n{3,}", "\n\n", text).strip()


def strip_text(markup: str) -> str:
    """Plain lines: headings and list items kept as text, image captions kept."""
    lines = []
    for line in _common(markup, keep_captions=True).split("\n"):
        s = line.strip()
        h = _HEADING.match(s)
        if h:
            s = h.group(2)
        s = _LIST.sub("", s)
        s = _ITALIC.sub(r"\1", _BOLD.sub(r"\1", s)).replace("'''", "").replace("''", "")
        lines.append(s)
    return "\n".join(lines)
