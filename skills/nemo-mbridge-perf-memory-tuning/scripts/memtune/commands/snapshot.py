"""``memtune snapshot FILE.pickle``: what a PyTorch memory snapshot says about reserved vs allocated memory."""

from __future__ import annotations

import argparse
from pathlib import Path

from ..errors import UserError
from ..inputs.snapshot import analyze_snapshot
from . import argtypes, htmlopt

EPILOG = """The pickle is read with an unpickler that imports nothing, so a file that is not
plain data is refused without running any of it. Numbers are for one device:
the one with an OOM entry in device_traces, else the one with most memory reserved.

exit codes: 0 report printed, 2 unreadable or refused file."""



def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("snapshot", help="analyse a torch.cuda.memory._dump_snapshot() pickle",
                            epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("file", type=Path, metavar="FILE.pickle")
    parser.add_argument("--top", type=argtypes.count(1, 100_000), default=10,
                        help="allocation sites to list (default 10)")
    parser.add_argument("--format", choices=["text", "json"], default="text")
    parser.add_argument("--lang", choices=["en", "zh"], default="en", help="language of the text and the --html page")
    htmlopt.add_argument(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from .. import knowledge
    from ..render import out

    if not args.file.is_file():
        raise UserError(f"{args.file}: no such file")
    kb = knowledge.load()
    if args.html:  # the page needs the trace's events; load_trace reads the file once and summarizes it too
        from ..inputs.snapshot_trace import load_trace
        from ..render import html

        trace = load_trace(args.file, top=max(args.top, 0))
        summary = trace.summary
        htmlopt.write(args.html, html.snapshot_page(summary, trace, kb, args.lang))
    else:
        summary = analyze_snapshot(args.file, top=max(args.top, 0))
    if args.format == "json":
        out.emit(out.json_text(summary))
    else:
        from ..render.snapshot import render_text

        out.emit(render_text(summary, kb, args.lang))
    return 0
