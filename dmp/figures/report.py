"""HTML views of the tables for the Snakemake report (which shows HTML and images in the page, and offers other
files only as downloads): the Markdown that :mod:`dmp.tables` writes (headings, pipe tables with ``**bold**``
cells, bullet lists, paragraphs) turned into one self-contained page, the table and its comparison view."""
from __future__ import annotations

import html
import re
from pathlib import Path

from dmp.io import write_text

STYLE = """body{font-family:system-ui,sans-serif;font-size:13px;margin:1em;color:#222}
table{border-collapse:collapse;margin:.5em 0 1em}th,td{border:1px solid #ccc;padding:2px 6px;text-align:right}
th:first-child,td:first-child{text-align:left}thead th{background:#f0f0f0}h1{font-size:16px}h2{font-size:14px}
li,p{max-width:70em}"""


def _inline(text: str) -> str:
    text = html.escape(text.strip())
    return re.sub(r"\*\*(.+?)\*\*", r"<b>\1</b>", text)


def markdown_to_html(text: str) -> str:
    """The subset of Markdown the table code writes, as HTML (no external package)."""
    out, lines, i = [], text.splitlines(), 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("#"):
            level = min(len(line) - len(line.lstrip("#")), 6)
            out.append(f"<h{level}>{_inline(line.lstrip('#'))}</h{level}>")
        elif line.startswith("|"):
            block = []
            while i < len(lines) and lines[i].startswith("|"):
                block.append([c for c in lines[i].strip().strip("|").split("|")])
                i += 1
            i -= 1
            head, body = block[0], [r for r in block[1:] if not all(re.fullmatch(r"\s*:?-+:?\s*", c) for c in r)]
            out.append("<table><thead><tr>" + "".join(f"<th>{_inline(c)}</th>" for c in head) + "</tr></thead><tbody>"
                       + "".join("<tr>" + "".join(f"<td>{_inline(c)}</td>" for c in r) + "</tr>" for r in body)
                       + "</tbody></table>")
        elif line.startswith(("- ", "* ")):
            items = []
            while i < len(lines) and lines[i].startswith(("- ", "* ")):
                items.append(f"<li>{_inline(lines[i][2:])}</li>")
                i += 1
            i -= 1
            out.append("<ul>" + "".join(items) + "</ul>")
        elif line.strip():
            out.append(f"<p>{_inline(line)}</p>")
        i += 1
    return "\n".join(out)


def table_page(markdown_files, out) -> Path:
    """One HTML page of the given Markdown files (a table, then its comparison view)."""
    parts = [markdown_to_html(Path(f).read_text()) for f in markdown_files]
    title = html.escape(Path(markdown_files[0]).stem)
    page = (f"<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>{title}</title><style>{STYLE}</style>"
            f"</head><body>\n" + "\n<hr>\n".join(parts) + "\n</body></html>\n")
    write_text(out, page)
    return Path(out)
