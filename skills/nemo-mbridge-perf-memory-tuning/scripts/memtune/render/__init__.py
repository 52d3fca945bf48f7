"""Markdown rendering of a report dict (Jinja2 templates; labels from knowledge/ui.yaml)."""
