"""Render the report dict as an agent-ready Markdown answer.  Lays out; never computes or words advice."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..knowledge import Knowledge
from ..textfmt import human

TEMPLATES = Path(__file__).resolve().parent / "templates"


def _environment():
    import jinja2  # imported only when Markdown is asked for

    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(TEMPLATES)),
        autoescape=False,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        undefined=jinja2.StrictUndefined,
    )
    env.filters["human"] = human
    return env


def labels(kb: Knowledge, lang: str) -> dict[str, str]:
    return {row["id"]: row["text"][lang] for row in kb.entries("ui")}


def render_markdown(report: Mapping[str, Any], kb: Knowledge, template: str = "diagnosis.md.j2") -> str:
    tmpl = _environment().get_template(template)
    return tmpl.render(r=report, t=labels(kb, report["lang"])).strip() + "\n"
