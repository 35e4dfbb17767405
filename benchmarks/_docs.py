"""What every benchmark script shares for its part of docs/benchmarks.md."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any


def replace_section(path: Path, start: str, end: str, block: str) -> None:
    """Put ``block`` (which begins with the ``start`` marker and ends with ``end``) in place of
    the text between those markers in ``path``, or append it when they are absent; the other
    sections stay byte for byte. The file is re-read right before writing and replaced
    atomically, so benchmarks writing other sections in turn do not lose each other's work."""
    block = block.rstrip("\n")
    if not (block.startswith(start) and block.endswith(end)):
        raise ValueError(f"the section must be wrapped in {start} ... {end}")
    path.parent.mkdir(parents=True, exist_ok=True)
    text = path.read_text(encoding="utf-8") if path.exists() else "# Benchmarks\n"
    if start in text and end in text and text.index(start) < text.index(end):
        before, rest = text.split(start, 1)
        text = before + block + rest.split(end, 1)[1]
    else:
        text = text.rstrip("\n") + "\n\n" + block + "\n"
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def table(header: Sequence[str], rows: Sequence[Sequence[Any]], text_columns: Sequence[int] = (0,)) -> list[str]:
    """A Markdown table: text columns left-aligned, the others right-aligned."""
    align = ["---" if i in text_columns else "---:" for i in range(len(header))]
    lines = ["| " + " | ".join(header) + " |", "| " + " | ".join(align) + " |"]
    lines += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return lines
