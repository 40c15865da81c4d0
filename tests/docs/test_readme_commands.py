"""Every command shown in README.md, examples/README.md and the site (docs/) runs, and its output matches what is shown.

The site's pages that hold what the README held (``README_PAGES``) are replayed after the README, in its
directory, as one document; every other page of the site is a document of its own.

The documents are read when the tests are collected, so an edit to them is picked up by the next run.
Their fenced code blocks are taken in document order:

* Shell blocks (```` ```bash ````, ```` ```console ````, ```` ```sh ````, ```` ```shell ```` or untagged).
  A leading ``$ `` is dropped; a line ending in ``\\`` continues on the next one; outside console blocks an
  indented line continues the ``ldp`` line above it (the wrapped synopses). Comment lines and trailing
  ``# …`` comments are ignored. A line chained with ``&&`` is split; its ``ldp …`` parts are used and the
  rest (``pip install …``, ``python -m pytest``, ``python benchmarks/…``) is not run: the package is
  installed already, and the suite and the benchmarks are not examples of the tool.
  An ``ldp …`` part is a **synopsis** when it contains ``[``, ``…`` or ``...``, a ``|`` next to a flag,
  or an upper-case placeholder word (``INPUT``, ``D``, ``PRIVATIZED...``). A synopsis is not run: every
  flag it names must appear in ``ldp SUBCOMMAND --help`` (asked in process: the help a user's ``ldp``
  prints). Any other ``ldp …`` part is a **command**, run as a subprocess, verbatim.
  In a console block, the lines after a ``$ ldp …`` line, up to the next ``$`` line, are its **shown
  output**.
* Python blocks (```` ```python ````) are run as scripts.

All the steps of one document run once, in order, in one temporary directory holding a copy of
``examples/`` (so ``examples/…`` paths resolve and outputs land in the copy, never in the repository);
paths under ``/tmp/`` are moved into that directory, and ``$TMPDIR`` too (the Python blocks' scratch
folders); after the last step the repository must hold what it held before the first. Each step is one
test, which runs the step (after any earlier command or Python block of its document not run yet, so a
test picked alone with ``-k`` runs its prerequisites first) and asserts on its result; under pytest-xdist every step of a document stays on one worker, in
order (``--dist loadgroup``, as the README's test command runs the suite). The assertions: exit status 0
and a non-empty stdout; stdout that parses as JSON where the command has
``--json``; the file named by ``-o`` exists; and, where output is shown, the same JSON shape (type,
keys; and, for ``ldp params``, which touches no data, the same values to a relative 1e-9) or, for shown
text, its first line found in stdout.
"""

from __future__ import annotations

import json
import math
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from helpers import files_under, ldp

ROOT = Path(__file__).resolve().parents[2]
#: The pages of the site that hold what the README held before the site (issue 38), in the README's old order:
#: replayed after the README, in its directory, as one document (a page may use what an earlier one wrote, as
#: the README's sections did).
README_PAGES = (
    "docs/how-to/params.md", "docs/how-to/privatize.md", "docs/how-to/dask.md", "docs/how-to/estimate-mean.md",
    "docs/how-to/audit.md", "docs/how-to/sweep-plot.md", "docs/how-to/risk-budget.md", "docs/how-to/signing.md",
    "docs/how-to/regression.md", "docs/how-to/queries.md", "docs/how-to/train.md", "docs/how-to/central.md",
    "docs/reference/sidecar.md", "docs/explanation/mechanisms.md", "docs/how-to/python-api.md",
    "docs/reference/errors.md", "docs/reference/benchmarks.md", "docs/explanation/threat-model.md",
)


def _site_pages() -> tuple[str, ...]:
    """Every other page of the site (docs/**/*.md), each replayed on its own."""
    pages = sorted(path.relative_to(ROOT).as_posix() for path in (ROOT / "docs").rglob("*.md"))
    return tuple(page for page in pages if page not in README_PAGES)


#: Each replayed document: its name → its files, replayed in order in one directory.
PARTS: dict[str, tuple[str, ...]] = {
    "README.md": ("README.md", *README_PAGES),
    "examples/README.md": ("examples/README.md",),
    **{page: (page,) for page in _site_pages()},
}
DOCUMENTS = tuple(PARTS)
#: Pages whose steps need an optional extra's package: replayed where it is installed (CI's federated step, which
#: also runs the page's blocks through tests/integrations/test_flower.py), skipped where it is not.
NEEDS_PACKAGE = {"docs/federated-flower.md": "flwr"}
TIMEOUT_S = 180
#: Subcommands whose output is a function of their arguments alone: shown values are compared.
DETERMINISTIC = {"params"}
REL_TOL = 1e-9

SHELL_LANGS = {"", "bash", "console", "sh", "shell", "shell-session", "zsh"}
PYTHON_LANGS = {"python", "py", "python3"}
FENCE = re.compile(r"^\s*(?P<fence>`{3,}|~{3,})\s*(?P<lang>[\w+.-]*)")
PLACEHOLDER = re.compile(r"^[A-Z][A-Z0-9_]*(?:\.\.\.|…)?,?$")
LONG_FLAG = re.compile(r"(?<![\w-])--[A-Za-z][\w-]*")
SHORT_FLAG = re.compile(r"(?<![\w-])-[A-Za-z](?![\w-])")
TMP_PATH = re.compile(r"(?<![\w./-])/tmp/")


# --------------------------------------------------------------------------------------------------------------
# Parsing


@dataclass(frozen=True)
class Block:
    lang: str
    first_line: int  # 1-based line number of the first line inside the fence
    lines: tuple[str, ...]


@dataclass
class Step:
    doc: str  # the file it is in
    line: int
    kind: str  # "command", "synopsis" or "python"
    text: str
    shown: list[str] | None = None  # console output shown under a command
    index: int = -1  # its place among the steps of its document (PARTS)
    document: str = ""  # the replayed document (PARTS) it belongs to

    @property
    def id(self) -> str:
        if self.kind == "command":
            label = self.text
        elif self.kind == "synopsis":
            label = " ".join(filter(None, ["ldp", _subcommand(self.text), "synopsis"]))
        else:
            label = "python block"
        return f"{self.doc}:L{self.line} {label}"


def code_blocks(text: str) -> list[Block]:
    """The fenced code blocks of a Markdown text, in order."""
    blocks: list[Block] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        match = FENCE.match(lines[i])
        if not match:
            i += 1
            continue
        fence = match["fence"]
        lang = match["lang"].lower()
        body: list[str] = []
        j = i + 1
        while j < len(lines) and not lines[j].strip().startswith(fence):
            body.append(lines[j])
            j += 1
        blocks.append(Block(lang, i + 2, tuple(body)))
        i = j + 1
    return blocks


def strip_comment(line: str) -> str:
    """``line`` without an unquoted trailing ``# …`` comment."""
    quote = None
    for k, char in enumerate(line):
        if quote:
            if char == quote:
                quote = None
        elif char in "'\"":
            quote = char
        elif char == "#" and (k == 0 or line[k - 1].isspace()):
            return line[:k].rstrip()
    return line.rstrip()


def is_synopsis(command: str) -> bool:
    if "[" in command or "…" in command or "..." in command:
        return True
    if re.search(r"\|\s*-|-[\w-]*\s*\|", command):
        return True
    return any(PLACEHOLDER.match(word) for word in command.split()[1:])


#: Subcommands that are groups: their synopses name the group and the command (``queries encode``).
GROUPS = ("queries", "keys")


def _subcommand(command: str) -> str | None:
    words = [word for word in command.split()[1:] if not word.startswith("-")]
    if not words:
        return None
    return " ".join(words[:2]) if words[0] in GROUPS and len(words) > 1 else words[0]


def _logical_lines(block: Block) -> list[tuple[int, str, list[str] | None]]:
    """(line number, logical line, shown output or None) for the command lines of a shell block."""
    console = block.lang == "console"
    found: list[tuple[int, str, list[str] | None]] = []
    pending: tuple[int, str] | None = None  # a line continued with a backslash
    current_output: list[str] | None = None
    for offset, raw in enumerate(block.lines):
        number = block.first_line + offset
        if pending is not None:
            start, text = pending
            text = f"{text} {raw.strip()}"
            if text.endswith("\\"):
                pending = (start, text[:-1].rstrip())
            else:
                pending = None
                found.append((start, text, current_output))
            continue
        stripped = raw.strip()
        if console:
            if not stripped.startswith("$"):
                if current_output is not None:
                    current_output.append(raw)
                continue
            current_output = []
            stripped = stripped[1:].strip()
        else:
            if stripped.startswith("$ "):
                stripped = stripped[2:].strip()
            elif raw[:1].isspace() and stripped and found and not stripped.startswith("#"):
                # An indented line continues the wrapped line above it (a synopsis).
                start, text, output = found[-1]
                found[-1] = (start, f"{text} {stripped}", output)
                continue
        if not stripped or stripped.startswith("#"):
            continue
        if stripped.endswith("\\"):
            pending = (number, stripped[:-1].rstrip())
            continue
        found.append((number, stripped, current_output))
    if pending is not None:
        found.append((pending[0], pending[1], current_output))
    return found


def parse_document(doc: str, text: str) -> list[Step]:
    """The steps of one document, in order."""
    steps: list[Step] = []
    for block in code_blocks(text):
        if block.lang in PYTHON_LANGS:
            steps.append(Step(doc, block.first_line, "python", "\n".join(block.lines)))
            continue
        if block.lang not in SHELL_LANGS:
            continue
        for number, line, output in _logical_lines(block):
            line = strip_comment(line)
            for part in re.split(r"\s*&&\s*", line):
                part = " ".join(part.split())
                if not (part == "ldp" or part.startswith("ldp ")):
                    continue  # pip install …, python -m pytest, python benchmarks/…: not run
                kind = "synopsis" if is_synopsis(part) else "command"
                shown = output if kind == "command" else None
                steps.append(Step(doc, number, kind, part, shown))
    for k, step in enumerate(steps):
        step.index = k
    return steps


def document_steps(doc: str) -> list[Step]:
    """The steps of a replayed document (its files' steps, in order), numbered across its files."""
    steps: list[Step] = []
    for part in PARTS.get(doc, (doc,)):
        path = ROOT / part
        if path.is_file():
            steps += parse_document(part, path.read_text(encoding="utf-8"))
    for k, step in enumerate(steps):
        step.index, step.document = k, doc
    return steps


STEPS: list[Step] = [step for doc in DOCUMENTS for step in document_steps(doc)]


# --------------------------------------------------------------------------------------------------------------
# Running


@dataclass
class Result:
    argv: list[str]
    returncode: int | None  # None: timed out
    stdout: str
    stderr: str
    seconds: float
    workdir: Path
    help_text: str = ""  # synopsis steps: the subcommand's --help
    notes: list[str] = field(default_factory=list)


def _env() -> dict[str, str]:
    env = dict(os.environ)
    for name in ("FORCE_COLOR", "CLICOLOR_FORCE", "PY_COLORS"):
        env.pop(name, None)
    env.update(COLUMNS="200", LINES="50", NO_COLOR="1", TERM="dumb", PYTHONIOENCODING="utf-8")
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH", "")) if p)
    return env


def _run(argv: list[str], workdir: Path) -> Result:
    start = time.perf_counter()
    try:
        # One privacy-budget ledger per document, beside its copy of examples/ (never the user's), and the
        # temporary files (the Python blocks' tempfile.mkdtemp() folders) in its temp/ (never the user's).
        env = {**_env(), "LDP_LEDGER": str(workdir / "ledger.json"), "TMPDIR": str(workdir / "temp")}
        proc = subprocess.run(
            argv, cwd=workdir, env=env, capture_output=True, text=True, timeout=TIMEOUT_S, stdin=subprocess.DEVNULL
        )
    except subprocess.TimeoutExpired as exc:
        out = exc.stdout.decode(errors="replace") if isinstance(exc.stdout, bytes) else exc.stdout or ""
        err = exc.stderr.decode(errors="replace") if isinstance(exc.stderr, bytes) else exc.stderr or ""
        return Result(argv, None, out, err, time.perf_counter() - start, workdir)
    return Result(argv, proc.returncode, proc.stdout, proc.stderr, time.perf_counter() - start, workdir)


def _help(sub: str, workdir: Path) -> Result:
    """``ldp SUB --help`` in process: a synopsis is not run, only its flags are looked up, and the
    text is the one a user's ``ldp`` prints (a subprocess's usage line says ``python -m …``)."""
    argv = ["ldp", *sub.split(), "--help"]
    start = time.perf_counter()
    shown = ldp(*argv[1:], env={"COLUMNS": "200", "LINES": "50", "NO_COLOR": "1", "TERM": "dumb"})
    return Result(argv, shown.exit_code, shown.stdout, shown.stderr, time.perf_counter() - start, workdir)


def ldp_argv(command: str, workdir: Path) -> list[str]:
    words = shlex.split(command, comments=True)
    assert words and words[0] == "ldp", command
    args = [TMP_PATH.sub(f"{workdir.as_posix()}/", word) for word in words[1:]]
    return [sys.executable, "-m", "ldpcli.cli.app", *args]


class DocumentRun:
    """One document's steps, replayed in order in one temporary directory holding a copy of ``examples/``.

    Each step runs when its test first asks for its result (:meth:`result`), after every earlier command
    and Python block of the document that has not run yet: run in document order, every test runs
    exactly its own step, so its duration is that step's; run alone (``-k``), a test runs the commands
    before it first.
    """

    def __init__(self, doc: str, workdir: Path) -> None:
        shutil.copytree(
            ROOT / "examples",
            workdir / "examples",
            ignore=shutil.ignore_patterns("*.privatized.*", "__pycache__", "*.npy", "*.ldp.json"),
        )
        (workdir / "temp").mkdir()
        self.doc = doc
        self.workdir = workdir
        self.repository = files_under(ROOT, depth=2)  # before the first step: what the replay must leave as is
        self.steps = document_steps(doc)
        self.results: dict[int, Result] = {}
        self._help: dict[str, Result] = {}

    def result(self, index: int) -> Result:
        """The result of step ``index``, running it now, after every earlier command and Python block
        not run yet (a synopsis changes nothing that a later step sees: it runs only for its own test)."""
        for step in self.steps[:index]:
            if step.index not in self.results and step.kind != "synopsis":
                self.results[step.index] = self._run_step(step)
        if index not in self.results:
            self.results[index] = self._run_step(self.steps[index])
        return self.results[index]

    def _run_step(self, step: Step) -> Result:
        if step.kind == "command":
            return _run(ldp_argv(step.text, self.workdir), self.workdir)
        if step.kind == "synopsis":
            sub = _subcommand(step.text) or ""
            if sub not in self._help:
                self._help[sub] = _help(sub, self.workdir)
            found = self._help[sub]
            return Result(found.argv, found.returncode, found.stdout, found.stderr, found.seconds, self.workdir,
                          found.stdout)
        code = TMP_PATH.sub(f"{self.workdir.as_posix()}/", step.text)
        return _run([sys.executable, "-c", code], self.workdir)


@pytest.fixture(scope="session")
def documents(tmp_path_factory: pytest.TempPathFactory):
    """doc -> its :class:`DocumentRun`, in its own temporary directory (made when first asked for)."""
    runs: dict[str, DocumentRun] = {}

    def get(doc: str) -> DocumentRun:
        if doc not in runs:
            runs[doc] = DocumentRun(doc, tmp_path_factory.mktemp("doc-" + re.sub(r"\W+", "-", doc)))
        return runs[doc]

    return get


# --------------------------------------------------------------------------------------------------------------
# Checking


def _tail(text: str, lines: int = 15) -> str:
    kept = text.rstrip().splitlines()[-lines:]
    return "\n".join("    " + line for line in kept) if kept else "    (empty)"


def _report(step: Step, result: Result, problem: str) -> str:
    status = "timed out" if result.returncode is None else f"exit status {result.returncode}"
    shown_cmd = step.text if step.kind != "python" else "python block:\n" + step.text
    return (
        f"{step.doc}:L{step.line}: {problem}\n"
        f"  command: {shown_cmd}\n  ran: {shlex.join(result.argv[:2] + ['…'] if step.kind == 'python' else result.argv)}"
        f"\n  {status} after {result.seconds:.1f} s\n  stderr (tail):\n{_tail(result.stderr)}\n"
        f"  stdout (tail):\n{_tail(result.stdout, 8)}"
    )


def _kind(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if value is None:
        return "null"
    if isinstance(value, list):
        return "list"
    return "object"


def describe(value: Any) -> str:
    kind = _kind(value)
    if kind == "object":
        return f"one JSON object ({len(value)} keys)"
    if kind == "list":
        inner = sorted({_kind(v) for v in value})
        what = "/".join(k + "s" for k in inner) or "items"
        return f"a list of {len(value)} {what}"
    return f"a JSON {kind} ({json.dumps(value)})"


def compare_json(shown: Any, actual: Any, exact: bool, path: str = "$") -> list[str]:
    """The differences between the shown and the actual JSON: shape always, values where ``exact``."""
    if _kind(shown) != _kind(actual):
        return [f"{path}: the document shows {describe(shown)}; the tool prints {describe(actual)}"]
    problems: list[str] = []
    if isinstance(shown, dict):
        missing = [k for k in shown if k not in actual]
        extra = [k for k in actual if k not in shown]
        if missing:
            problems.append(f"{path}: keys shown but not printed: {missing}")
        if extra:
            problems.append(f"{path}: keys printed but not shown: {extra}")
        for key in shown:
            if key in actual:
                problems += compare_json(shown[key], actual[key], exact, f"{path}.{key}")
    elif isinstance(shown, list):
        if exact and len(shown) != len(actual):
            problems.append(f"{path}: the document shows {len(shown)} items; the tool prints {len(actual)}")
        for k, (a, b) in enumerate(zip(shown, actual)):
            problems += compare_json(a, b, exact, f"{path}[{k}]")
    elif exact and _kind(shown) == "number":
        if not math.isclose(shown, actual, rel_tol=REL_TOL, abs_tol=0.0):
            problems.append(f"{path}: the document shows {shown!r}; the tool prints {actual!r}")
    elif exact and shown != actual:
        problems.append(f"{path}: the document shows {shown!r}; the tool prints {actual!r}")
    return problems


def parse_json(text: str) -> tuple[bool, Any]:
    for candidate in (text, " ".join(line.strip() for line in text.splitlines())):
        try:
            return True, json.loads(candidate)
        except ValueError:
            continue
    return False, None


def _normalise(text: str) -> str:
    return " ".join(text.split())


def _option_value(args: list[str], names: tuple[str, ...]) -> str | None:
    for k, arg in enumerate(args):
        for name in names:
            if arg == name and k + 1 < len(args):
                return args[k + 1]
            if name.startswith("--") and arg.startswith(name + "="):
                return arg[len(name) + 1 :]
    return None


def check_command(step: Step, result: Result) -> None:
    if result.returncode != 0:
        pytest.fail(_report(step, result, "the command shown in the document fails"), pytrace=False)
    if not result.stdout.strip():
        pytest.fail(_report(step, result, "the command prints nothing on stdout"), pytrace=False)
    args = result.argv[3:]
    if "--json" in args:
        ok, _ = parse_json(result.stdout)
        if not ok:
            pytest.fail(_report(step, result, "the command has --json but stdout is not JSON"), pytrace=False)
    target = _option_value(args, ("-o", "--output"))
    if target is not None and not (result.workdir / target).exists():
        pytest.fail(_report(step, result, f"the command names -o {target} but wrote no such file"), pytrace=False)
    shown = "\n".join(step.shown or []).strip()
    if not shown:
        return
    shown_is_json, shown_value = parse_json(shown)
    if shown_is_json:
        ok, actual = parse_json(result.stdout)
        if not ok:
            pytest.fail(_report(step, result, "the document shows JSON output; the tool's stdout is not JSON"),
                        pytrace=False)
        exact = _subcommand(step.text) in DETERMINISTIC
        problems = compare_json(shown_value, actual, exact)
        if problems:
            listed = "\n".join("    " + p for p in problems[:25])
            more = f"\n    … and {len(problems) - 25} more" if len(problems) > 25 else ""
            pytest.fail(
                f"{step.doc}:L{step.line}: the output shown under `{step.text}` differs from what the tool prints "
                f"({'values compared to rel. 1e-9' if exact else 'random output: keys and types compared'}):\n"
                f"{listed}{more}\n  stdout (head): {result.stdout[:400]}",
                pytrace=False,
            )
        return
    first = next(line for line in shown.splitlines() if line.strip())
    if _normalise(first) not in _normalise(result.stdout):
        pytest.fail(_report(step, result, f"the shown output's first line {first.strip()!r} is not in stdout"),
                    pytrace=False)


def check_synopsis(step: Step, result: Result) -> None:
    if result.returncode != 0 or not result.help_text.strip():
        pytest.fail(_report(step, result, "`--help` of the synopsis' subcommand fails"), pytrace=False)
    known = set(LONG_FLAG.findall(result.help_text)) | set(SHORT_FLAG.findall(result.help_text))
    named = LONG_FLAG.findall(step.text) + SHORT_FLAG.findall(step.text)
    unknown = sorted(dict.fromkeys(flag for flag in named if flag not in known))
    if unknown:
        pytest.fail(
            f"{step.doc}:L{step.line}: the synopsis `{step.text}` names flags that "
            f"`ldp {_subcommand(step.text) or ''} --help` does not list: {unknown}",
            pytrace=False,
        )


@pytest.mark.slow
@pytest.mark.parametrize(
    "step", [pytest.param(step, id=step.id, marks=pytest.mark.xdist_group(f"replay {step.document}")) for step in STEPS]
)
def test_documented_step(step: Step, documents) -> None:
    if step.document in NEEDS_PACKAGE:
        pytest.importorskip(NEEDS_PACKAGE[step.document])
    result = documents(step.document).result(step.index)
    if step.kind == "command":
        check_command(step, result)
    elif step.kind == "synopsis":
        check_synopsis(step, result)
    elif result.returncode != 0:
        pytest.fail(_report(step, result, "the Python block fails"), pytrace=False)


@pytest.mark.slow
@pytest.mark.parametrize(
    "doc", [pytest.param(doc, marks=pytest.mark.xdist_group(f"replay {doc}"))
            for doc in DOCUMENTS if any(step.document == doc for step in STEPS)]
)
def test_the_replay_leaves_the_repository_as_it_was(doc: str, documents) -> None:
    """After every step of the document (run now if no test ran them yet), the repository holds what it held
    before the first: the steps' outputs are in the document's temporary directory, not in the checkout."""
    if doc in NEEDS_PACKAGE:
        pytest.importorskip(NEEDS_PACKAGE[doc])
    run = documents(doc)
    run.result(len(run.steps) - 1)
    assert files_under(ROOT, depth=2) == run.repository


@pytest.mark.parametrize("doc", ("README.md", "examples/README.md", "docs/tutorials/quick-start.md",
                                 "docs/tutorials/release-embeddings.md"))
def test_document_shows_commands(doc: str) -> None:
    assert (ROOT / doc).is_file(), f"{doc} is missing"
    commands = [s for s in document_steps(doc) if s.kind == "command"]
    assert commands, f"no `ldp …` command found in the code blocks of {doc}"


def test_ci_runs_the_test_command_the_readme_gives() -> None:
    """The README's test line (install the test extra, run the suite) is what .ci/run runs, word for word."""
    blocks = code_blocks((ROOT / "README.md").read_text(encoding="utf-8"))
    lines = [strip_comment(line.strip()) for block in blocks if block.lang in SHELL_LANGS for line in block.lines]
    (test_line,) = [line for line in lines if "python -m pytest" in line]
    ci_lines = [line.strip() for line in (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()]
    for part in re.split(r"\s*&&\s*", test_line):
        assert part in ci_lines, f".ci/run does not run the README's `{part}`"


# --------------------------------------------------------------------------------------------------------------
# The parser itself, on a made-up document


SAMPLE = """\
Intro `ldp params --d D` in prose is not a block.

```bash
pip install . && ldp params --d 3 --eps 1 && python -m pytest -q
```

```
ldp privatize INPUT --eps E [--seed S]
              [--overwrite]
ldp estimate-mean out.parquet --json   # -> prints JSON
#  -> a comment line
```

```console
$ ldp params --d 3 \\
    --eps 1 --json
{"a": 1,
 "b": [1, 2]}
$ ldp params --d 4 --eps 1
```

```json
{"not": "run"}
```

```python
print("hi")
```
"""


def test_parser_classifies_commands_synopses_and_output() -> None:
    steps = parse_document("SAMPLE.md", SAMPLE)
    got = [(s.line, s.kind, s.text, s.shown) for s in steps]
    assert got == [
        (4, "command", "ldp params --d 3 --eps 1", None),
        (8, "synopsis", "ldp privatize INPUT --eps E [--seed S] [--overwrite]", None),
        (10, "command", "ldp estimate-mean out.parquet --json", None),
        (15, "command", "ldp params --d 3 --eps 1 --json", ['{"a": 1,', ' "b": [1, 2]}']),
        (19, "command", "ldp params --d 4 --eps 1", []),
        (27, "python", 'print("hi")', None),
    ]
    assert [s.id for s in steps][:2] == ["SAMPLE.md:L4 ldp params --d 3 --eps 1", "SAMPLE.md:L8 ldp privatize synopsis"]


def test_compare_json_reports_shape_and_values() -> None:
    assert compare_json({"a": 1.0}, [{"a": 1.0}] * 8, exact=True) == [
        "$: the document shows one JSON object (1 keys); the tool prints a list of 8 objects"
    ]
    assert compare_json({"a": 1.0, "b": "x"}, {"a": 1.0 + 1e-12, "b": "x"}, exact=True) == []
    assert compare_json({"a": 1.0}, {"a": 1.1}, exact=True) == ["$.a: the document shows 1.0; the tool prints 1.1"]
    assert compare_json({"a": 1.0}, {"a": 1.1, "c": 0}, exact=False) == ["$: keys printed but not shown: ['c']"]


def test_synopsis_check_names_unknown_flags(tmp_path: Path) -> None:
    step = Step("SAMPLE.md", 8, "synopsis", "ldp privatize INPUT --eps E [-o OUT] [--seed S | --no-such-flag]")
    help_text = "│ *  --eps  <float> │\n│ --output -o <path> │\n│ --seed <int> │"
    result = Result(["ldp", "privatize", "--help"], 0, help_text, "", 0.0, tmp_path, help_text)
    with pytest.raises(pytest.fail.Exception, match=r"\['--no-such-flag'\]"):
        check_synopsis(step, result)
    check_synopsis(Step("SAMPLE.md", 8, "synopsis", "ldp privatize INPUT --eps E [-o OUT]"), result)
