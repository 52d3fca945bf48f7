"""``memtune apply FIX --to FILE`` and ``memtune rollback FILE``: show the diff; write only with --yes.

Before writing, the file is copied to ``FILE.memtune-backup-<UTC YYYYmmddTHHMMSS>`` beside
it and recorded (sizes and SHA-256 of the backup and of the text written) in a journal only
the user running apply can write (actions/journal.py); ``rollback`` puts the newest recorded
copy back byte for byte, and only while the file still holds what apply wrote (see
actions/safewrite.py for the crash-safety rules).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from .. import knowledge
from ..actions import apply as actions
from ..actions.verify import command_patterns
from ..errors import UserError
from ..render import messages, out

APPLY_EPILOG = """examples:
  memtune apply expandable-segments --to launch.sh            (shows the diff; writes nothing)
  memtune apply expandable-segments --to launch.sh --yes      (backs up launch.sh, then writes)
  memtune apply selective-recompute --to run_config.yaml --yes

A read-only file is refused unless --allow-read-only (its mode is kept). A file with hard
links, or owned by another user, is written in place (same inode) after the backup is verified.

exit codes: 0 done (or nothing to change), 2 bad input / file refused."""

ROLLBACK_EPILOG = """examples:
  memtune rollback launch.sh            (shows the diff; writes nothing)
  memtune rollback launch.sh --yes      (restores the newest backup, then removes it)
  memtune rollback launch.sh --yes --force   (also when launch.sh was edited after apply;
                                              the edited text is saved as launch.sh.memtune-saved-<stamp>)

Only a backup that apply made as this user is restored: it is recorded, with its SHA-256, in
$HOME/.local/state/memtune/journal (mode 0700). Files
beside FILE that merely look like backups (planted, tampered, truncated) are never restored,
and set-id or sticky bits are never written.

exit codes: 0 restored (or dry run), 2 refused."""


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("apply", help="write one fix into a launch script or config YAML (--yes writes)",
                            epilog=APPLY_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("fix", metavar="FIX_ID", help="fix id from knowledge/fixes.yaml (see memtune explain)")
    parser.add_argument("--to", type=Path, required=True, metavar="FILE",
                        help="launch shell script (export lines) or Bridge config YAML (section.key)")
    parser.add_argument("--yes", action="store_true", help="write the change (after saving a backup)")
    parser.add_argument("--allow-read-only", action="store_true", help="edit a read-only file (its mode is kept)")
    parser.add_argument("--lang", choices=["en", "zh"], default="en", help="language of the status lines")
    parser.set_defaults(func=run_apply)

    back = sub.add_parser("rollback", help="restore the newest memtune backup of a file (--yes writes)",
                          epilog=ROLLBACK_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    back.add_argument("file", type=Path, metavar="FILE")
    back.add_argument("--yes", action="store_true", help="restore it (the backup is removed once restored)")
    back.add_argument("--force", action="store_true",
                      help="restore even though FILE was edited after apply (the edit is saved beside it first)")
    back.add_argument("--allow-read-only", action="store_true", help="restore over a read-only file (mode kept)")
    back.add_argument("--lang", choices=["en", "zh"], default="en", help="language of the status lines")
    back.set_defaults(func=run_rollback)


def run_apply(args: argparse.Namespace) -> int:
    kb = knowledge.load()
    fixes = kb.by_id.get("fixes", {})
    if args.fix not in fixes:
        writable = sorted(i for i, f in fixes.items() if set(f.get("apply", {})) & {"env", "bridge_override"})
        raise UserError(f"unknown fix {args.fix!r}; fixes apply can write: {', '.join(writable)}")
    plan = actions.plan_apply(fixes[args.fix], args.to, command_patterns(kb))
    out.emit_lines(messages.notes(kb, args.lang, plan.notes))
    if not plan.changed:
        out.emit(messages.line(kb, args.lang, "apply-nothing", file=args.to, fix=args.fix))
        return 0
    out.emit(plan.diff())
    if not args.yes:
        out.emit("\n" + messages.line(kb, args.lang, "apply-dry-run", file=args.to))
        return 0
    backup, notes = actions.write_with_backup(plan, allow_read_only=args.allow_read_only)
    out.emit_lines(messages.notes(kb, args.lang, notes))
    out.emit("\n" + messages.line(kb, args.lang, "apply-wrote", file=args.to, backup=backup))
    return 0


def run_rollback(args: argparse.Namespace) -> int:
    kb = knowledge.load()
    plan, diff = actions.plan_rollback(args.file)
    out.emit(diff or messages.line(kb, args.lang, "rollback-same", file=args.file, backup=plan.backup.name))
    if plan.edited_since:
        out.emit(f"{messages.line(kb, args.lang, 'apply-note')}: "
                 + messages.line(kb, args.lang, "rollback-edited", file=args.file))
    if not args.yes:
        out.emit("\n" + messages.line(kb, args.lang, "rollback-dry-run", file=args.file, backup=plan.backup))
        return 0
    backup, notes = actions.rollback(args.file, force=args.force, allow_read_only=args.allow_read_only)
    out.emit_lines(messages.notes(kb, args.lang, notes))
    out.emit("\n" + messages.line(kb, args.lang, "rollback-restored", file=args.file, backup=backup.name))
    return 0
