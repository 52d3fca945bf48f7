#!/usr/bin/env python3
"""Launcher for the memtune CLI from an installed skill folder (no pip install of the project needed).

Puts this folder on sys.path, checks the four runtime dependencies, then hands
over to memtune.cli.  A missing dependency is one clear line, not a traceback.
"""

import gc
import importlib.util
import sys
from pathlib import Path

# Import name -> pip requirement.  The skill folder ships no requirements file: these four are the whole list
# (the repository's requirements.txt and pyproject.toml say the same, tests/test_cli.py checks it).
REQUIRED = {"yaml": "pyyaml>=6.0,<7", "jsonschema": "jsonschema>=4.18,<5", "jinja2": "jinja2>=3.1.6,<4",
            "markdown_it": "markdown-it-py>=3.0,<5"}


def main() -> int:
    if sys.version_info < (3, 10):  # noqa: UP036 - the launcher must run on old Pythons to say so
        print("memtune: error: Python >= 3.10 is required", file=sys.stderr)
        return 2
    missing = [pkg for mod, pkg in REQUIRED.items() if importlib.util.find_spec(mod) is None]
    if missing:
        names = " ".join(spec.split(">")[0].split("=")[0] for spec in missing)
        print(f"memtune: error: missing Python packages: {names} "
              f"(run: python3 -m pip install {' '.join(repr(spec) for spec in missing)})", file=sys.stderr)
        return 2
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    # One short run whose data holds no reference cycles to speak of (a 20 MB log, a 10^5-layout plan or a
    # 5 MB snapshot leaves a few hundred cyclic objects): the cycle collector would only re-scan the knowledge
    # base and the classes being built, ~6 ms of every start-up.
    gc.disable()
    from memtune.cli import main as cli_main

    return cli_main()


if __name__ == "__main__":
    sys.exit(main())
