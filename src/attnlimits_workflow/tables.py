"""Writers for the small result tables: CSV, Markdown, HTML and LaTeX, each atomically."""

from __future__ import annotations

from html import escape
from pathlib import Path

import polars as pl

from .atomic import atomic_path

TEX = {
    "\\": r"\textbackslash{}",
    "&": r"\&",
    "%": r"\%",
    "_": r"\_",
    "#": r"\#",
    "$": r"\$",
    "~": r"\textasciitilde{}",
    "^": r"\textasciicircum{}",
    "{": r"\{",
    "}": r"\}",
}


def tex_escape(s: str) -> str:
    return "".join(TEX.get(ch, ch) for ch in s)


def _cell(v) -> str:
    if v is None:
        return "n/a"
    if isinstance(v, float):
        return f"{v:.3g}"
    return str(v)


def write_csv(table: pl.DataFrame, path: str | Path) -> None:
    with atomic_path(path) as tmp:
        table.write_csv(tmp)


def markdown_table(columns: list[str], rows: list[list[str]]) -> str:
    """A Markdown table of text cells ("|" inside a cell escaped)."""
    md = [
        "| " + " | ".join(c.replace("|", "\\|") for c in columns) + " |",
        "|" + "---|" * len(columns),
    ]
    md += ["| " + " | ".join(c.replace("|", "\\|") for c in r) + " |" for r in rows]
    return "\n".join(md)


def html_table(columns: list[str], rows: list[list[str]]) -> str:
    """An HTML table of text cells (escaped), one line per row."""

    def line(tag: str, cells: list[str]) -> str:
        return "<tr>" + "".join(f"<{tag}>{escape(c)}</{tag}>" for c in cells) + "</tr>"

    body = [line("th", columns), *(line("td", r) for r in rows)]
    return "<table>\n" + "\n".join(body) + "\n</table>"


def write_markdown(table: pl.DataFrame, path: str | Path, header: str) -> None:
    rows = [[_cell(v) for v in r] for r in table.iter_rows()]
    with atomic_path(path) as tmp:
        Path(tmp).write_text(f"{header}\n\n{markdown_table(table.columns, rows)}\n")


def write_latex(table: pl.DataFrame, path: str | Path, header: str, columns: str) -> None:
    """``columns`` is the tabular column spec, e.g. "lrr"."""
    tex = [
        rf"\begin{{tabular}}{{{columns}}}",
        r"\hline",
        " & ".join(tex_escape(c.replace("_", " ")) for c in table.columns) + r" \\",
        r"\hline",
    ]
    tex += [" & ".join(tex_escape(_cell(v)) for v in r) + r" \\" for r in table.iter_rows()]
    tex += [r"\hline", r"\end{tabular}"]
    with atomic_path(path) as tmp:
        Path(tmp).write_text(f"% {tex_escape(header)}\n" + "\n".join(tex) + "\n")
