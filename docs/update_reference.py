"""Regenerate the configuration reference inside README.md from the config table (`make docs`)."""

from __future__ import annotations

import sys
from pathlib import Path

from kafkad.config.docs import render_markdown

START, END = "<!-- config-reference:start", "<!-- config-reference:end"


def main() -> int:
    readme = Path(sys.argv[1] if len(sys.argv) > 1 else "README.md")
    text = readme.read_text()
    start = text.index("\n", text.index(START)) + 1
    end = text.index(END)
    readme.write_text(text[:start] + render_markdown().rstrip("\n") + "\n" + text[end:])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
