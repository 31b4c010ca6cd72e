"""The README's configuration reference is generated from the config table and must match it."""

from __future__ import annotations

from pathlib import Path

from kafkad.config.docs import render_markdown

README = Path(__file__).resolve().parents[2] / "README.md"


def test_readme_config_reference_matches_the_table() -> None:
    text = README.read_text()
    start = text.index("\n", text.index("<!-- config-reference:start")) + 1
    end = text.index("<!-- config-reference:end")
    assert text[start:end].strip() == render_markdown().strip(), (
        "README's configuration reference is stale: regenerate with `kafkad --config-reference`"
    )
