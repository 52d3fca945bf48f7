"""``memtune apply FIX --to FILE`` and ``memtune rollback FILE``: show the diff; write only with --yes.

Before writing, the file is copied to ``FILE.memtune-backup-<UTC YYYYmmddTHHMMSS>``
beside it; ``rollback`` puts the newest such copy back byte for byte.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .. import knowledge
from ..actions import apply as actions
from ..actions.verify import command_patterns
from ..errors import UserError

APPLY_EPILOG = """examples:
  memtune apply expandable-segments --to launch.sh            (shows the diff; writes nothing)
  memtune apply expandable-segments --to launch.sh --yes      (backs up launch.sh, then writes)
  memtune apply selective-recompute --to run_config.yaml --yes

exit codes: 0 done (or nothing to change), 2 bad input / file refused."""


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("apply", help="write one fix into a launch script or config YAML (--yes writes)",
                            epilog=APPLY_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("fix", metavar="FIX_ID", help="fix id from knowledge/fixes.yaml (see memtune explain)")
    parser.add_argument("--to", type=Path, required=True, metavar="FILE",
                        help="launch shell script (export lines) or Bridge config YAML (section.key)")
    parser.add_argument("--yes", action="store_true", help="write the change (after saving a backup)")
    parser.set_defaults(func=run_apply)

    back = sub.add_parser("rollback", help="restore the newest memtune backup of a file (--yes writes)")
    back.add_argument("file", type=Path, metavar="FILE")
    back.add_argument("--yes", action="store_true", help="restore it (the backup is removed once restored)")
    back.set_defaults(func=run_rollback)


def run_apply(args: argparse.Namespace) -> int:
    kb = knowledge.load()
    fixes = kb.by_id.get("fixes", {})
    if args.fix not in fixes:
        writable = sorted(i for i, f in fixes.items() if set(f.get("apply", {})) & {"env", "bridge_override"})
        raise UserError(f"unknown fix {args.fix!r}; fixes apply can write: {', '.join(writable)}")
    plan = actions.plan_apply(fixes[args.fix], args.to, command_patterns(kb))
    for note in plan.notes:
        print(f"note: {note}")
    if not plan.changed:
        print(f"{args.to}: nothing to change for {args.fix}")
        return 0
    sys.stdout.write(plan.diff())
    if not args.yes:
        print(f"\ndry run: {args.to} not changed; add --yes to write it (a backup is saved first).")
        return 0
    backup = actions.write_with_backup(plan)
    print(f"\nwrote {args.to}; backup {backup}; undo with: memtune rollback {args.to} --yes")
    return 0


def run_rollback(args: argparse.Namespace) -> int:
    backup, diff = actions.plan_rollback(args.file)
    sys.stdout.write(diff or f"{args.file} already matches {backup.name}\n")
    if not args.yes:
        print(f"\ndry run: would restore {args.file} from {backup}; add --yes to do it.")
        return 0
    actions.rollback(args.file)
    print(f"\nrestored {args.file} from {backup.name} (backup removed)")
    return 0
