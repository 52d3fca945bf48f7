"""Where answers come from: our own diagnose, a folder of saved answers, or any agent command.

Each producer turns one scenario into an ``Answer`` (or an error string) and keeps the raw
text it read, so a run can save answers and be re-scored later with ``--answers``.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import shlex
import signal
import subprocess
import tempfile
import threading
import time
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import dataclass, field
from pathlib import Path

import yaml
from memtune.errors import UserError

from .answer import Answer
from .scenario import Scenario, env_items
from .score import Scorer


@dataclass
class Produced:
    answer: Answer | None
    error: str | None = None
    raw: dict[str, str] = field(default_factory=dict)  # file suffix -> text, e.g. {".md": ..., ".json": ...}


def diagnose_argv(scenario: Scenario, workdir: Path, fmt: str) -> list[str]:
    """``memtune diagnose`` arguments for a scenario; log and config go through files like a user's would."""
    inputs = scenario.inputs
    argv = ["diagnose", "--format", fmt, "--question", scenario.question]
    if inputs.get("log"):
        log = workdir / "train.log"
        log.write_text(inputs["log"], encoding="utf-8")
        argv += ["--log", str(log)]
    if inputs.get("config"):
        cfg = workdir / "config.yaml"
        cfg.write_text(yaml.safe_dump(inputs["config"], sort_keys=False, allow_unicode=True), encoding="utf-8")
        argv += ["--config", str(cfg)]
    for item in inputs.get("overrides") or []:
        argv += ["--set", item]
    for key, value in env_items(inputs):
        argv += ["--env", f"{key}={value}"]
    if inputs.get("gpu"):
        argv += ["--gpu", inputs["gpu"]]
    if RANKING:
        argv += ["--ranking", RANKING]
    return argv


RANKING: str | None = None  # benchmarks/run.py --ranking: compare the rules' and the ledger's cause ranking


def _run_memtune(argv: list[str]) -> tuple[int, str, str]:
    """Call memtune in-process (the KB is loaded once for the whole run); never raise."""
    from memtune import cli

    out, err = io.StringIO(), io.StringIO()
    try:
        with redirect_stdout(out), redirect_stderr(err):
            rc = cli.main(argv)
    except SystemExit as exc:  # argparse rejects an option
        rc = exc.code if isinstance(exc.code, int) else 2
    except Exception as exc:  # a crash in diagnose is one scenario's error, not the whole run's
        return 99, out.getvalue(), f"{type(exc).__name__}: {exc}"
    return int(rc or 0), out.getvalue(), err.getvalue()


Run = tuple[int, str, str]  # exit code, stdout, stderr


def diagnose_runs(scenario: Scenario) -> tuple[Run, Run]:
    """``memtune diagnose`` on a scenario, in-process: ``--format json``, and the Markdown answer of the same run.

    ``--format markdown`` renders the very report ``--format json`` prints (commands/diagnose.py), so the Markdown
    comes from rendering that JSON rather than from a second diagnosis of the same inputs (half the benchmark's
    time); where the JSON run failed, ``--format markdown`` runs itself and reports its own failure."""
    with tempfile.TemporaryDirectory(prefix="memtune-bench-") as tmp:
        json_run = _run_memtune(diagnose_argv(scenario, Path(tmp), "json"))
        markdown = _markdown_of(json_run)
        return json_run, markdown or _run_memtune(diagnose_argv(scenario, Path(tmp), "markdown"))


def _markdown_of(json_run: Run) -> Run | None:
    """The Markdown answer ``--format markdown`` prints for the report a JSON run printed; None if it printed none."""
    rc, out, err = json_run
    if rc not in (0, 1):
        return None
    try:
        report = json.loads(out)
    except json.JSONDecodeError:
        return None
    from memtune import knowledge
    from memtune.render.render import render_markdown

    text = render_markdown(report, knowledge.load(), detail=False)
    return rc, text if text.endswith("\n") else text + "\n", err


def from_diagnose(scenario: Scenario) -> Produced:
    """Our diagnose, scored on its JSON; ``mentions`` are also looked for in its Markdown answer."""
    return from_diagnose_runs(*diagnose_runs(scenario))


def from_diagnose_runs(json_run: Run, markdown_run: Run) -> Produced:
    """The answer in diagnose's two outputs (``diagnose_runs``), or what went wrong, JSON first."""
    rc, out, err = json_run
    if rc not in (0, 1):
        return Produced(None, f"diagnose --format json exited {rc}: {last_line(err)}")
    try:
        diagnosis = json.loads(out)
    except json.JSONDecodeError as exc:
        return Produced(None, f"diagnose --format json printed invalid JSON ({exc.msg} at line {exc.lineno})")
    md_rc, markdown, md_err = markdown_run
    if md_rc not in (0, 1):
        return Produced(None, f"diagnose --format markdown exited {md_rc}: {last_line(md_err)}")
    return Produced(Scorer.read_json(diagnosis, markdown), raw={".json": out, ".md": markdown})


def from_directory(scenario: Scenario, directory: Path, scorer: Scorer) -> Produced:
    """``DIR/<id>.md`` (any agent's answer) or ``DIR/<id>.json`` (diagnose-shaped JSON)."""
    md, js = directory / f"{scenario.id}.md", directory / f"{scenario.id}.json"
    if md.is_file():
        text = md.read_text(encoding="utf-8")
        return Produced(scorer.read_markdown(text, scenario.inputs), raw={".md": text})
    if js.is_file():
        text = js.read_text(encoding="utf-8")
        try:
            return Produced(Scorer.read_json(json.loads(text)), raw={".json": text})
        except json.JSONDecodeError as exc:
            return Produced(None, f"{js}:{exc.lineno}: invalid JSON ({exc.msg})")
    return Produced(None, f"no answer file {md} (or .json)")


def agent_prompt(scenario: Scenario) -> str:
    """What a user would paste to an agent: the question, then each input in its own block."""
    inputs = scenario.inputs
    parts = [scenario.question.strip()]
    if inputs.get("log"):
        parts.append("Log:\n```text\n" + inputs["log"].rstrip("\n") + "\n```")
    if inputs.get("config"):
        dump = yaml.safe_dump(inputs["config"], sort_keys=False, allow_unicode=True)
        parts.append("Config (Megatron Bridge ConfigContainer):\n```yaml\n" + dump.rstrip("\n") + "\n```")
    if inputs.get("overrides"):
        parts.append("Overrides:\n```text\n" + "\n".join(inputs["overrides"]) + "\n```")
    if inputs.get("env"):
        env = "\n".join(f"{k}={v}" for k, v in env_items(inputs))
        parts.append("Environment:\n```text\n" + env + "\n```")
    if inputs.get("gpu"):
        parts.append(f"GPU: {inputs['gpu']}")
    return "\n\n".join(parts) + "\n"


# The only variables an agent command inherits, besides MEMTUNE_SCENARIO and MEMTUNE_SCENARIO_ID: enough to find
# programs, a home directory and a locale. Anything else it needs (an API key, a proxy) it sets up itself, e.g. in a
# wrapper script given as CMD, so a benchmark run hands the agent nothing it was not asked for.
AGENT_ENV_PASSED = ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR")


def agent_argv(command: str) -> list[str]:
    """``command`` split the way a shell would, but never run by one: no pipes, redirects or expansions."""
    try:
        argv = shlex.split(command)
    except ValueError as exc:
        raise UserError(f"--agent-cmd: {exc}") from None
    if not argv:
        raise UserError("--agent-cmd: empty command")
    return argv


def agent_env(scenario: Scenario, pass_env: tuple[str, ...] = ()) -> dict[str, str]:
    """The agent's whole environment: AGENT_ENV_PASSED, the names the user passes with --agent-env
    (e.g. an API key), and the scenario's path and id. Nothing else of ours leaks to the agent."""
    env = {name: os.environ[name] for name in (*AGENT_ENV_PASSED, *pass_env) if name in os.environ}
    env["MEMTUNE_SCENARIO"] = str(scenario.path)
    env["MEMTUNE_SCENARIO_ID"] = scenario.id
    return env


MAX_ANSWER_BYTES = 512 * 1024  # a real answer is 2-20 KB; more is a runaway agent, and scoring time grows with it
_STDERR_TAIL_BYTES = 4096


def _drain(stream, cap: int, keep_tail: bool, out: list[bytes], over: threading.Event) -> None:
    """Read ``stream`` to EOF keeping at most ``cap`` bytes (its head, or with ``keep_tail`` its tail)."""
    held = 0
    for chunk in iter(lambda: stream.read(65536), b""):
        if keep_tail:
            out.append(chunk)
            while sum(map(len, out)) > cap and len(out) > 1:
                out.pop(0)
            continue
        if held + len(chunk) > cap:
            out.append(chunk[: cap - held])
            over.set()
            return  # the caller kills the agent; reading on would only fill memory
        out.append(chunk)
        held += len(chunk)


def _kill_group(proc: subprocess.Popen) -> None:
    """SIGKILL the agent's whole process group (its children and grandchildren too)."""
    with contextlib.suppress(ProcessLookupError, PermissionError, OSError):
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(Exception):
        proc.kill()


def run_agent(argv: list[str], prompt: str, env: dict[str, str], timeout: float,
              cap: int = MAX_ANSWER_BYTES) -> tuple[int | None, bytes, str, str | None]:
    """``(returncode, stdout head, stderr tail, error)`` of one agent run in its own process group.

    The group is killed at the timeout, when stdout passes ``cap``, and after the agent exits
    (a grandchild it left behind does not outlive the run).
    """
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
                            start_new_session=True)
    out: list[bytes] = []
    err: list[bytes] = []
    over = threading.Event()
    readers = [threading.Thread(target=_drain, args=(proc.stdout, cap, False, out, over), daemon=True),
               threading.Thread(target=_drain, args=(proc.stderr, _STDERR_TAIL_BYTES, True, err, threading.Event()),
                                daemon=True)]
    for t in readers:
        t.start()

    def feed() -> None:
        with contextlib.suppress(OSError):
            proc.stdin.write(prompt.encode("utf-8"))
        with contextlib.suppress(OSError):
            proc.stdin.close()

    threading.Thread(target=feed, daemon=True).start()
    deadline = time.monotonic() + timeout
    error = None
    while proc.poll() is None:
        if over.is_set():
            error = f"agent answer passed {cap // 1024} KiB; agent stopped"
            break
        if time.monotonic() >= deadline:
            error = f"agent command timed out after {timeout:g} s"
            break
        time.sleep(0.05)
    _kill_group(proc)
    proc.wait()
    for t in readers:
        t.join(2)
    if over.is_set() and error is None:
        error = f"agent answer passed {cap // 1024} KiB"
    return (None if error else proc.returncode), b"".join(out), b"".join(err).decode("utf-8", "replace"), error


def from_agent(scenario: Scenario, command: str, scorer: Scorer, timeout: float,
               pass_env: tuple[str, ...] = ()) -> Produced:
    """Run ``command`` (no shell, own process group) with the prompt on stdin; its stdout is the Markdown answer."""
    try:
        code, stdout, stderr, error = run_agent(agent_argv(command), agent_prompt(scenario),
                                                agent_env(scenario, pass_env), timeout)
    except OSError as exc:
        return Produced(None, f"agent command could not start: {exc}")
    if error:
        return Produced(None, error)
    if code != 0:
        return Produced(None, f"agent command exited {code}: {last_line(stderr)}")
    text = stdout.decode("utf-8", "replace")
    return Produced(scorer.read_markdown(text, scenario.inputs), raw={".md": text})


def last_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1][:300] if lines else "(no message)"
