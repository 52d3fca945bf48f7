"""The presentation layer: every command's text, Markdown, JSON and HTML is laid out here.

``labels`` reads the one label table (knowledge/ui.yaml, en and zh); one module per command lays its
result out (render.py the diagnosis, then estimate, plan, snapshot, compare, check and verify, messages the
status lines of kb / apply / rollback / explain, html every page); ``out`` is the only place output is
written.  Nothing here computes or words advice.
"""
