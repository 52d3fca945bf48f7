#!/usr/bin/env python3
"""Launcher for the memtune CLI from an installed skill folder (no pip install of the project needed).

Puts this folder on sys.path, checks the four runtime dependencies, then hands
over to memtune.cli.  A missing dependency is one clear line, not a traceback.
"""

import importlib.util
import sys
from pathlib import Path

REQUIRED = {"yaml": "pyyaml", "jsonschema": "jsonschema", "jinja2": "jinja2", "markdown_it": "markdown-it-py"}


def main() -> int:
    if sys.version_info < (3, 10):  # noqa: UP036 - the launcher must run on old Pythons to say so
        print("memtune: error: Python >= 3.10 is required", file=sys.stderr)
        return 2
    missing = [pkg for mod, pkg in REQUIRED.items() if importlib.util.find_spec(mod) is None]
    if missing:
        req = Path(__file__).resolve().parent.parent / "requirements.txt"
        print(f"memtune: error: missing Python packages: {' '.join(missing)} "
              f"(run: python3 -m pip install -r {req})", file=sys.stderr)
        return 2
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from memtune.cli import main as cli_main

    return cli_main()


if __name__ == "__main__":
    sys.exit(main())
