"""YAML the benchmark reads from its own files (scenarios, labelled answers, grading vocabulary, recipes).

libyaml's safe loader when PyYAML was built with it: ~8x faster, the same data.  A file it refuses is parsed
again by PyYAML's pure-Python loader, so an error keeps the wording (problem and line) it always had.
"""

from __future__ import annotations

from typing import Any

import yaml


def safe_load(text: str) -> Any:
    """``yaml.safe_load(text)``, with libyaml's parser where PyYAML has it."""
    fast = getattr(yaml, "CSafeLoader", None)
    if fast is not None:
        try:
            return yaml.load(text, Loader=fast)
        except yaml.YAMLError:
            pass  # worded by the pure-Python parser below
    return yaml.safe_load(text)
