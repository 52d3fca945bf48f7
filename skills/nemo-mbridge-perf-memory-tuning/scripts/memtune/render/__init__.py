"""The presentation layer: every command's text, Markdown, JSON and HTML is laid out here.

``labels`` reads the one label table (knowledge/ui.yaml, en and zh); one module per command lays its
result out (render.py for diagnose, estimate, plan, snapshot, compare, check, verify, messages for the
status lines); ``out`` is the only place output is written.  Nothing here computes or words advice.
"""
