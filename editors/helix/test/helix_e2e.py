#!/usr/bin/env python3
"""A real Helix (`hx`) in tmux against the real ghostline server and test model.

Each case starts its own `hx` in a fresh tmux server (120×36) on a copy of
fixtures/vscode/stats.py, with the repository's editors/helix/languages.toml as the user's
`languages.toml` (only `model.path` changed). Keys go in with `tmux send-keys` one at a time,
as a person types; the screen is read back with `tmux capture-pane` and polled until what the
case waits for appears (or a timeout says what never did). Every step's screen is saved to
$GHOSTLINE_UI_ARTIFACTS (default target/ui-artifacts/helix/) as `<case>-<nn>-<step>.txt`, with
Helix's log (`<case>-helix.log`, ghostline's stderr included).

    GHOSTLINE_HX=$(scripts/helix.sh) GHOSTLINE_MODEL=$(scripts/fetch-model.sh) \
        python3 editors/helix/test/helix_e2e.py [CASE...]

Prints `ok - …` / `not ok - …` per case and `N passed, M failed` last; exits 1 on a failure.
Standard library only.
"""

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import tomllib
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
HX = os.environ.get("GHOSTLINE_HX", "hx")
BIN = Path(os.environ.get("GHOSTLINE_BIN", ROOT / "target/release/ghostline"))
MODEL = os.environ.get("GHOSTLINE_MODEL", "")
ARTIFACTS = Path(os.environ.get("GHOSTLINE_UI_ARTIFACTS", ROOT / "target/ui-artifacts/helix"))
FIXTURE = ROOT / "fixtures/vscode/stats.py"
SNIPPET = ROOT / "editors/helix/languages.toml"
WIDTH, HEIGHT = 120, 36
# What the person types over `pass` in `stdev`'s body.
TYPED = "return math."


class Failure(Exception):
    pass


def check(condition, message):
    if not condition:
        raise Failure(message)


def languages_toml(model_path):
    """The repository's snippet with only the model path changed."""
    text = SNIPPET.read_text()
    changed, n = re.subn(r'(config = \{ model = \{ path = )"[^"]*"', lambda m: f'{m.group(1)}{json.dumps(str(model_path))}', text)
    check(n == 1, f"{SNIPPET}: no `config = {{ model = {{ path = \"…\"` line to point at the test model")
    return changed


def snippet_config():
    """The `config` table the snippet sends ghostline (maxTokens, threads)."""
    return tomllib.loads(SNIPPET.read_text())["language-server"]["ghostline"]["config"]


def word_char(c):
    return c.isalnum() or c == "_"


class Helix:
    """One `hx` in its own tmux server, on a fresh project folder."""

    def __init__(self, case, model_path=None, source=None, extra_env=None, log_code=False):
        self.case = case
        self.step = 0
        self.tmp = Path(tempfile.mkdtemp(prefix=f"ghostline-hx-{case}-"))
        self.project = self.tmp / "project"
        self.project.mkdir()
        self.file = self.project / "stats.py"
        self.file.write_text(source or FIXTURE.read_text())
        self.source = self.file.read_text()
        config = self.tmp / "config/helix"
        config.mkdir(parents=True)
        toml = languages_toml(MODEL if model_path is None else model_path)
        if log_code:
            # ghostline may log code (the prompt's parts, at trace level): the case reads them.
            toml, n = re.subn(r'(privacy = "local-only")', r'\1, debug = { logCode = true }', toml)
            check(n == 1, f"{SNIPPET}: no `privacy = \"local-only\"` in the config to add debug.logCode beside")
        (config / "languages.toml").write_text(toml)
        self.log = self.tmp / "helix.log"
        self.socket = f"ghostline-hx-{os.getpid()}-{case}"
        env = {
            "PATH": f"{BIN.parent}:{os.environ['PATH']}",
            "HOME": str(self.tmp),
            "XDG_CONFIG_HOME": str(self.tmp / "config"),
            "XDG_DATA_HOME": str(self.tmp / "data"),
            "XDG_CACHE_HOME": str(self.tmp / "cache"),
            "XDG_STATE_HOME": str(self.tmp / "state"),
            "TERM": "xterm-256color",
            "COLORTERM": "truecolor",
            "LANG": "C.UTF-8",
            **(extra_env or {}),
        }
        # The environment ghostline sees comes from Helix: no GHOSTLINE_MODEL, so the model is
        # the one in languages.toml (or none).
        command = ["env", "-i", *(f"{k}={v}" for k, v in env.items()), HX, "-v", "--log", str(self.log), "stats.py"]
        self.tmux("-f", "/dev/null", "new-session", "-d", "-x", str(WIDTH), "-y", str(HEIGHT), "-s", "hx", "-c", str(self.project), *command)
        self.tmux("set-option", "-t", "hx", "remain-on-exit", "on")

    def tmux(self, *args):
        return subprocess.run(["tmux", "-u", "-L", self.socket, *args], check=True, capture_output=True, text=True).stdout

    def screen(self, escapes=False):
        return self.tmux("capture-pane", "-p", *(["-e"] if escapes else []), "-t", "hx")

    def shot(self, name):
        self.step += 1
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        screen = self.screen()
        (ARTIFACTS / f"{self.case}-{self.step:02d}-{name}.txt").write_text(screen)
        return screen

    def wait(self, predicate, what, timeout=60.0):
        """Polls the screen until predicate(screen) is truthy; returns its value."""
        deadline = time.monotonic() + timeout
        while True:
            screen = self.screen()
            got = predicate(screen)
            if got:
                return got
            if time.monotonic() > deadline:
                self.shot("timeout")
                raise Failure(f"{what}: not on screen after {timeout:.0f} s; the screen:\n{indent(screen)}")
            time.sleep(0.1)

    def wait_log(self, needle, what, timeout=120.0):
        deadline = time.monotonic() + timeout
        while needle not in self.log_text():
            if time.monotonic() > deadline:
                self.shot("timeout")
                raise Failure(f"{what}: {needle!r} not in Helix's log after {timeout:.0f} s:\n{indent(self.log_text()[-3000:])}")
            time.sleep(0.2)

    def log_text(self):
        try:
            return self.log.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def keys(self, *keys, pause=0.15):
        """Named keys (Escape, Enter, Tab, C-x, Space, Down…), each as its own key press."""
        for key in keys:
            self.tmux("send-keys", "-t", "hx", key)
            time.sleep(pause)

    def type(self, text, pause=0.08):
        """Types text one character at a time (sent as bytes: no tmux quoting)."""
        for ch in text:
            self.tmux("send-keys", "-t", "hx", "-H", *(f"{b:02x}" for b in ch.encode()))
            time.sleep(pause)

    def command(self, line):
        """A `:` command from normal mode."""
        self.keys("Escape")
        self.type(":" + line, pause=0.02)
        self.keys("Enter")

    def cursor_line(self, screen, prefix):
        """The buffer line that starts with `prefix` after its indentation, without the
        indentation and trailing blanks (None when no line does)."""
        for line in screen.splitlines():
            body = strip_gutter(line).strip()
            if body.startswith(prefix):
                return body
        return None

    def ghostline_pid(self):
        """ghostline's process (Helix's child), or None."""
        hx_pid = self.tmux("display-message", "-p", "-t", "hx", "#{pane_pid}").strip()
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                stat = (entry / "stat").read_text()
                cmdline = (entry / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            ppid = stat.rsplit(")", 1)[1].split()[1]
            if ppid == hx_pid and cmdline and cmdline[0].endswith(b"ghostline"):
                return int(entry.name)
        return None

    def close(self):
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        try:
            self.shot("last")
        except Exception:
            pass
        if self.log.exists():
            shutil.copy(self.log, ARTIFACTS / f"{self.case}-helix.log")
        subprocess.run(["tmux", "-L", self.socket, "kill-server"], capture_output=True)
        shutil.rmtree(self.tmp, ignore_errors=True)

    # --- steps shared by the cases ---------------------------------------------------------

    def ready(self):
        """Helix is up with stats.py open and ghostline has loaded the model."""
        self.wait(lambda s: "NOR" in s and "stats.py" in s, "Helix in normal mode with stats.py")
        self.wait_log("ghostline: model ready", "ghostline's model loaded")
        self.shot("opened")

    def change_pass(self):
        """Selects `pass` in stdev's body and replaces it (insert mode)."""
        self.type("/pass", pause=0.03)
        self.keys("Enter", "c")
        self.wait(lambda s: "INS" in s, "insert mode")


def strip_gutter(line):
    """A buffer line without Helix's gutter (diagnostic, spacer, line number, spacer, diff)."""
    return re.sub(r"^[^\d]*?\d+ .", "", line, count=1)


def indent(text):
    return "\n".join("    | " + l for l in text.rstrip("\n").splitlines())


def menu_row(screen, label):
    """The completion-menu row showing `label` (marked `snippet`, as ghostline's item is)."""
    for line in screen.splitlines():
        if label in line and re.search(r"\bsnippet\b", line[line.index(label) + len(label):]):
            return line
    return None


def expected_completion(text, line, character):
    """What `ghostline complete` suggests at (line, character) of `text`, with the snippet's
    settings."""
    config = snippet_config()
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "stats.py"
        path.write_text(text)
        args = [str(BIN), "complete", str(path), "--line", str(line), "--character", str(character), "--json", "--model", MODEL]
        if "maxTokens" in config.get("completion", {}):
            args += ["--max-tokens", str(config["completion"]["maxTokens"])]
        if "threads" in config.get("model", {}):
            args += ["--threads", str(config["model"]["threads"])]
        out = subprocess.run(args, capture_output=True, text=True, timeout=300)
        check(out.returncode == 0, f"ghostline complete failed: {out.stderr}")
        return json.loads(out.stdout)["text"]


_expected = None


def suggestion_over_pass(source, typed):
    """What `ghostline complete` suggests once `typed` replaces `pass` in `source`."""
    text = source.replace("    pass\n", f"    {typed}\n", 1)
    at = text.index(f"    {typed}\n") + len(f"    {typed}")
    line = text[:at].count("\n")
    character = len(text[:at].rsplit("\n", 1)[1])
    suggestion = expected_completion(text, line, character)
    print(f"# ghostline complete after {typed!r}: {suggestion!r}", flush=True)
    check(suggestion.strip() != "", "ghostline complete gave no suggestion to look for")
    return suggestion


def expected():
    """The suggestion after `return math.` in stdev's body (computed once)."""
    global _expected
    if _expected is None:
        _expected = suggestion_over_pass(FIXTURE.read_text(), TYPED)
    return _expected


# stdev without its docstring: at the start of its body the test model suggests two lines.
MULTI_LINE_SOURCE = FIXTURE.read_text().replace('    """Return the population standard deviation of values."""\n    pass\n', "    pass\n", 1)


def label_of(new_text):
    """The item's label as the server makes it: the first non-blank line, trimmed."""
    first = next((l for l in new_text.split("\n") if l.strip()), "").strip()
    return first[:80]


def expected_file(source, suggestion, typed=TYPED):
    return source.replace("    pass\n", f"    {typed}{suggestion}\n", 1)


def saved(hx, want, what):
    """`:w`, then waits for the file on disk to read `want`."""
    hx.command("w")
    deadline = time.monotonic() + 20
    while hx.file.read_text() != want:
        if time.monotonic() > deadline:
            hx.shot("not-saved")
            got = hx.file.read_text()
            raise Failure(f"{what}: the saved file differs:\n--- expected\n{indent(want)}\n--- saved\n{indent(got)}")
        time.sleep(0.1)


# --- the cases --------------------------------------------------------------------------------


def menu_for_typed(hx, want):
    """Types TYPED over `pass` and asks with C-x; returns the label of ghostline's item (`want`)
    once the menu shows it."""
    hx.change_pass()
    hx.type(TYPED)
    hx.keys("C-x")
    label = label_of(want)
    hx.wait(lambda s: menu_row(s, label), f"ghostline's item {label!r} in the completion menu")
    hx.shot("menu")
    return label


def case_complete(hx):
    """Type into a function body, ask with C-x: ghostline's item is in the menu; Tab + Enter
    puts exactly it into the buffer; :w writes it."""
    want = expected()
    hx.ready()
    label = menu_for_typed(hx, want)
    # Tab selects the first item (Helix previews it in the buffer): ghostline's, first.
    hx.keys("Tab")
    first_line = want.split("\n")[0]
    hx.wait(lambda s: hx.cursor_line(s, f"{TYPED}{first_line}"), "the selected item previewed in the buffer")
    hx.keys("Enter")
    hx.keys("Escape")
    screen = hx.wait(lambda s: "NOR" in s and s, "normal mode after accepting")
    hx.shot("accepted")
    check(menu_row(screen, label) is None, f"the menu closed after accepting:\n{indent(screen)}")
    saved(hx, expected_file(hx.source, want), "Tab, Enter, :w")
    hx.shot("saved")


def case_keep_typing(hx):
    """With the menu open, type the suggestion's first word: at each key Helix asks again (the
    list is incomplete) and its filter keeps ghostline's item; accepted, nothing is doubled."""
    want = expected()
    word = ""
    for c in want:
        if not word_char(c):
            break
        word += c
    check(len(word) >= 2, f"the suggestion {want!r} starts with no word of 2+ characters to type")
    word = word[: min(len(word), len(want.split("\n")[0]) - 1)]
    hx.ready()
    hx.change_pass()
    hx.type(TYPED)
    hx.keys("C-x")
    label = label_of(want)
    hx.wait(lambda s: menu_row(s, label), f"ghostline's item {label!r} in the completion menu")
    requests = hx.log_text().count('"method":"textDocument/completion"')
    for i in range(1, len(word) + 1):
        hx.type(word[i - 1])
        hx.wait(lambda s: menu_row(s, label), f"ghostline's item {label!r} still in the menu after typing {word[:i]!r}")
        # What was typed is in the buffer once: the item is not applied while typing.
        hx.wait(lambda s: hx.cursor_line(s, TYPED) == f"{TYPED}{word[:i]}", f"the buffer line {TYPED + word[:i]!r}")
        hx.shot(f"typed-{word[:i]}")
    # Helix asked ghostline again as the word grew (TRIGGER_FOR_INCOMPLETE_COMPLETIONS).
    asked = hx.log_text().count('"method":"textDocument/completion"') - requests
    check(hx.log_text().count('"triggerKind":3') >= 1 and asked >= 1, f"Helix asked again while typing ({asked} requests)")
    hx.keys("Tab")
    first_line = want.split("\n")[0]
    hx.wait(lambda s: hx.cursor_line(s, f"{TYPED}{first_line}"), "the selected item previewed in the buffer")
    hx.keys("Enter")
    hx.keys("Escape")
    hx.wait(lambda s: "NOR" in s, "normal mode after accepting")
    hx.shot("accepted")
    saved(hx, expected_file(hx.source, want), f"C-x, typed {word!r}, Tab, Enter, :w")


def case_multi_line(hx):
    """A suggestion of several lines at the start of a body: accepted, it keeps its own
    indentation (Helix indents a snippet's later lines like the cursor's line)."""
    want = suggestion_over_pass(hx.source, "")
    check("\n" in want.strip(), f"the test model's suggestion here is one line: {want!r}")
    hx.ready()
    hx.change_pass()
    hx.keys("C-x")
    label = label_of(want)
    hx.wait(lambda s: menu_row(s, label), f"ghostline's item {label!r} in the completion menu")
    hx.shot("menu")
    hx.keys("Tab")
    hx.wait(lambda s: hx.cursor_line(s, want.split("\n")[0].strip()), "the selected item previewed in the buffer")
    hx.keys("Enter")
    hx.keys("Escape")
    hx.wait(lambda s: "NOR" in s, "normal mode after accepting")
    hx.shot("accepted")
    saved(hx, expected_file(hx.source, want, typed=""), "C-x, Tab, Enter, :w")


def case_generate_tests(hx):
    """`space a` on stdev lists *Generate tests for `stdev`*; choosing it creates the test file."""
    hx.ready()
    hx.type("/stdev", pause=0.03)
    hx.keys("Enter", ";")
    hx.keys("Space", "a")
    title = "Generate tests for `stdev`"
    hx.wait(lambda s: title in s, f"{title!r} in the code-action menu", timeout=60)
    hx.shot("code-actions")
    select_menu_row(hx, title)
    hx.shot("selected")
    hx.keys("Enter")
    # ghostline asks Helix to create tests/test_stats.py and fill it in (workspace/applyEdit);
    # Helix creates the file and edits it in a buffer of its own, unsaved, in the background.
    candidates = [hx.project / "tests/test_stats.py", hx.project / "test/test_stats.py", hx.project / "test_stats.py"]
    deadline = time.monotonic() + 240
    while not any(p.exists() for p in candidates):
        if time.monotonic() > deadline:
            hx.shot("no-test-file")
            raise Failure(f"no test file after 240 s; the screen:\n{indent(hx.screen())}")
        time.sleep(0.2)
    test_file = next(p for p in candidates if p.exists())
    # `:wa` writes it (again until the edit has arrived).
    deadline = time.monotonic() + 120
    while "def test_" not in test_file.read_text():
        if time.monotonic() > deadline:
            raise Failure(f"{test_file.name} holds no test after :wa:\n{indent(test_file.read_text())}")
        hx.command("wa")
        time.sleep(1)
    content = test_file.read_text()
    check(hx.file.read_text() == hx.source, "stats.py itself is unchanged")
    check(re.search(r"^from stats import .*\bstdev\b", content, re.M) and "stdev(" in content, f"the test file:\n{indent(content)}")
    hx.command(f"open {test_file.relative_to(hx.project)}")
    hx.wait(lambda s: "def test_" in s and test_file.name in s, "the generated tests on screen")
    hx.shot("tests")
    print(f"# {test_file.relative_to(hx.project)}: {len(content.splitlines())} lines", flush=True)


def prompt_sections(hx):
    """The cross-file sections of the prompts ghostline built, as its trace lines (logged with
    debug.logCode only) show them in Helix's log: the Debug form of each section's text."""
    return [line for line in hx.log_text().splitlines() if "prompt parts" in line and "cross_file=" in line]


def case_two_files(hx):
    """A two-file workspace (fixtures/editors/two-files): in plan.py, which imports and calls
    rectangle_area from its sibling geometry.py (never opened in Helix), C-x asks ghostline, and
    the sibling's definition is in the prompt's cross-file section."""
    fixture = ROOT / "fixtures/editors/two-files"
    # Without a root marker Helix sends no workspace folder (rootUri null, workspaceFolders
    # []), and the server then has no workspace to index: a person's project is a repository.
    (hx.project / ".git").mkdir()
    for name in ("geometry.py", "plan.py"):
        shutil.copy(fixture / name, hx.project / name)
    hx.ready()
    hx.command("open plan.py")
    hx.wait(lambda s: "plan.py" in s and "def floor_area" in s, "plan.py open")
    # Under the call in floor_area's body: `o` opens a line (indented), then type and ask.
    hx.type("/area\\(width", pause=0.03)
    hx.keys("Enter", "o")
    hx.wait(lambda s: "INS" in s, "insert mode")
    hx.type("total = round(")
    hx.wait(lambda s: hx.cursor_line(s, "total = round("), "the typed line")
    hx.shot("typed")
    definition = "def rectangle_area(width: float, height: float) -> float"
    # The index is built in the background after `initialized`: ask again until it is there.
    deadline = time.monotonic() + 90
    while True:
        hx.keys("C-x")
        time.sleep(3)
        found = [line for line in prompt_sections(hx) if "# path: geometry.py" in line]
        if found:
            break
        if time.monotonic() > deadline:
            hx.shot("timeout")
            sections = prompt_sections(hx)
            raise Failure(f"geometry.py never in a prompt's cross-file section; the last of {len(sections)} prompts:\n{indent(sections[-1][-2000:] if sections else '(none)')}")
    hx.shot("asked")
    check(definition in found[-1], f"the definition with its signature in the section:\n{indent(found[-1][-2000:])}")
    check("# path: plan.py" in found[-1], f"the section ends with the file itself:\n{indent(found[-1][-2000:])}")


# A function whose parameter the next-edit case renames (the file is stats.py in that case too).
NEXT_EDIT_SOURCE = "def area(w, h):\n    s = w * h\n    return s + w\n\n\nx = area(3, 4)\n"
NEXT_EDIT_TITLE = "Apply next edit: rename `w` to `width` (2 places)"


def case_next_edit(hx):
    """Rename a parameter by typing (`w` → `width`): `space a` lists *Apply next edit: rename `w`
    to `width` (2 places)* first; choosing it renames the other uses (a `WorkspaceEdit`, made
    from the syntax tree), and :w writes exactly that."""
    hx.ready()
    # `w` in `def area(w, h):`: to the file's start, 9 to the right, change that one character.
    hx.keys("g", "g", "9", "l", "c")
    hx.wait(lambda s: "INS" in s, "insert mode")
    hx.type("width")
    hx.keys("Escape")
    hx.wait(lambda s: "NOR" in s and hx.cursor_line(s, "def area(width, h):"), "the typed rename")
    hx.shot("renamed")
    hx.keys("Space", "a")
    screen = hx.wait(lambda s: NEXT_EDIT_TITLE in s and s, f"{NEXT_EDIT_TITLE!r} in the code-action menu", timeout=60)
    hx.shot("code-actions")
    check(hx.cursor_line(screen, "s = w * h"), f"listed, not applied yet:\n{indent(screen)}")
    select_menu_row(hx, NEXT_EDIT_TITLE)
    hx.keys("Enter")
    hx.wait(lambda s: hx.cursor_line(s, "return s + width") and hx.cursor_line(s, "s = width * h"), "the other uses renamed")
    hx.shot("applied")
    saved(hx, "def area(width, h):\n    s = width * h\n    return s + width\n\n\nx = area(3, 4)\n", "rename, space a, Enter, :w")


# A module function the next-edit-across case renames, and a file that imports and calls it.
NEXT_EDIT_USER = "from stats import area\n\ny = area(1, 2)\n"
NEXT_EDIT_ACROSS_TITLE = "Apply next edit: rename `area` to `surface` (3 places in 2 files)"


def case_next_edit_across(hx):
    """Rename a module function at its definition by typing (`area` → `surface`) in a
    repository where user.py, never opened, imports and calls it: `space a` lists *Apply next
    edit: rename `area` to `surface` (3 places in 2 files)*; choosing it renames the call in
    stats.py and user.py's import and call (one `WorkspaceEdit` over both files: Helix loads
    user.py to edit it), and :wa writes exactly that to both."""
    (hx.project / ".git").mkdir()  # a root marker: Helix then sends the workspace to index
    user = hx.project / "user.py"
    user.write_text(NEXT_EDIT_USER)
    hx.ready()
    # `area` in `def area(w, h):`: to the file's start, 4 to the right, select the word, change it.
    hx.keys("g", "g", "4", "l", "m", "i", "w", "c")
    hx.wait(lambda s: "INS" in s, "insert mode")
    hx.type("surface")
    hx.keys("Escape")
    hx.wait(lambda s: "NOR" in s and hx.cursor_line(s, "def surface(w, h):"), "the typed rename")
    hx.shot("renamed")
    # The index is built in the background after `initialized`: until it has user.py, the action
    # names one file. Ask again until both are there.
    deadline = time.monotonic() + 60
    while True:
        hx.keys("Space", "a")
        try:
            screen = hx.wait(lambda s: NEXT_EDIT_ACROSS_TITLE in s and s, f"{NEXT_EDIT_ACROSS_TITLE!r} in the code-action menu", timeout=5)
            break
        except Failure:
            if time.monotonic() > deadline:
                raise
            hx.keys("Escape")
    hx.shot("code-actions")
    check(hx.cursor_line(screen, "x = area(3, 4)"), f"listed, not applied yet:\n{indent(screen)}")
    select_menu_row(hx, NEXT_EDIT_ACROSS_TITLE)
    hx.keys("Enter")
    hx.wait(lambda s: hx.cursor_line(s, "x = surface(3, 4)"), "the call in stats.py renamed")
    hx.shot("applied")
    check(user.read_text() == NEXT_EDIT_USER, "user.py is edited in Helix's buffer, not yet on disk")
    hx.command("wa")
    deadline = time.monotonic() + 20
    want = {hx.file: NEXT_EDIT_SOURCE.replace("area", "surface"), user: NEXT_EDIT_USER.replace("area", "surface")}
    while any(path.read_text() != text for path, text in want.items()):
        if time.monotonic() > deadline:
            hx.shot("not-saved")
            got = "\n".join(f"--- {path.name}\n{indent(path.read_text())}" for path in want)
            raise Failure(f"rename, space a, Enter, :wa: the saved files differ:\n{got}")
        time.sleep(0.1)


def case_missing_model(hx):
    """A model path that does not exist: Helix shows ghostline's message; the server stays up
    (its process runs and it still answers `space a`)."""
    hx.wait(lambda s: "NOR" in s and "stats.py" in s, "Helix in normal mode with stats.py")
    hx.wait(lambda s: "model file not found" in s, "ghostline's error in Helix's status line", timeout=60)
    screen = hx.shot("error")
    check("missing.gguf" in screen, f"the message names the path:\n{indent(screen)}")
    pid = hx.ghostline_pid()
    check(pid is not None, "ghostline's process is running after the error")
    hx.type("/stdev", pause=0.03)
    hx.keys("Enter", ";", "Space", "a")
    hx.wait(lambda s: "Generate tests for `stdev`" in s, "ghostline still answering: its code actions listed", timeout=60)
    hx.shot("still-up")
    hx.keys("Escape")
    check(hx.ghostline_pid() == pid, "the same ghostline process still runs")


def case_first_run(hx):
    """No model configured and none on the machine (an empty home): ghostline's first-run
    question appears in Helix's picker with its three choices; Enter on the first, *Download*,
    pulls the model from a loopback Hub (scripts/fake-hub.py) and loads it with no setting
    edited; then C-x lists ghostline's item for the typed text."""
    hx.wait(lambda s: "NOR" in s and "stats.py" in s, "Helix in normal mode with stats.py")
    screen = hx.wait(lambda s: "Download qwen2.5-coder-" in s and s, "the first-run question in Helix's picker", timeout=60)
    hx.shot("question")
    check("Choose a file" in screen and "Not now" in screen, f"the three choices:\n{indent(screen)}")
    hx.keys("Enter")
    hx.wait_log("ghostline: model ready", "the downloaded model loaded", timeout=180)
    hx.shot("downloaded")
    check("found in Hugging Face cache" in hx.log_text(), "discovery found the download in the Hugging Face cache")
    check(any(r.startswith("GET /cdn/") for r in FIRST_RUN["requests"]()), "the loopback Hub served the model")
    menu_for_typed(hx, expected())
    hx.keys("Escape", "Escape")


def start_fake_hub():
    """scripts/fake-hub.py serving the test model; the environment that points ghostline at it."""
    hub = subprocess.Popen([sys.executable, str(ROOT / "scripts/fake-hub.py"), MODEL], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    endpoint = hub.stdout.readline().strip()
    check(endpoint.startswith("http://"), f"fake-hub.py printed {endpoint!r}")
    requests = []

    def drain():
        for line in hub.stderr:
            requests.append(line.strip())

    threading.Thread(target=drain, daemon=True).start()
    FIRST_RUN.update(process=hub, requests=lambda: list(requests), env={"HF_ENDPOINT": endpoint})


FIRST_RUN = {}


def select_menu_row(hx, title):
    """Moves down the open menu (it starts on its first row) until `title`'s row is selected."""
    for _ in range(12):
        if selected_row_has(hx.screen(escapes=True), title):
            return
        hx.keys("Down")
    raise Failure(f"could not select {title!r} in the menu:\n{indent(hx.screen())}")


def selected_row_has(screen_with_escapes, text):
    """Whether the menu row showing `text` is the selected one: the menu's rows share one
    background, the selected row has another (read from `capture-pane -e`)."""
    grid = cells(screen_with_escapes)
    for r, row in enumerate(grid):
        plain = "".join(ch for ch, _ in row)
        c = plain.find(text)
        if c >= 0:
            break
    else:
        return False

    def bg(row, col):
        return grid[row][col][1] if col < len(grid[row]) else None

    # The menu: the rows around this one whose background at `c` differs from the editor's
    # (the gutter's, at column 0).
    block = [r]
    for step in (-1, 1):
        i = r + step
        while 0 <= i < len(grid) and bg(i, c) != bg(i, 0):
            block.append(i)
            i += step
    others = [bg(i, c) for i in block if i != r]
    return all(b != bg(r, c) for b in others)


SGR = re.compile(r"\x1b\[([0-9;:]*)m")


def cells(screen_with_escapes):
    """The screen as rows of (character, background) from `capture-pane -e` output, whose SGR
    state carries over from line to line."""
    grid, background = [], None
    for line in screen_with_escapes.split("\n"):
        row, i = [], 0
        while i < len(line):
            m = SGR.match(line, i)
            if m:
                codes = [int(x) if x.isdigit() else 0 for x in re.split("[;:]", m.group(1) or "0")]
                j = 0
                while j < len(codes):
                    code = codes[j]
                    if code in (0, 49):
                        background = None
                    elif code in (38, 48):
                        size = 4 if codes[j + 1 : j + 2] == [2] else 2
                        if code == 48:
                            background = tuple(codes[j + 1 : j + 1 + size])
                        j += size
                    elif 40 <= code <= 47 or 100 <= code <= 107:
                        background = (code,)
                    j += 1
                i = m.end()
                continue
            row.append((line[i], background))
            i += 1
        grid.append(row)
    return grid


# name: (case, model path (None: the test model), stats.py's text (None: the fixture's))
MISSING_MODEL = Path(tempfile.gettempdir()) / "ghostline-no-such-dir/missing.gguf"
CASES = {
    "complete": (case_complete, None, None),
    "keep-typing": (case_keep_typing, None, None),
    "multi-line": (case_multi_line, None, MULTI_LINE_SOURCE),
    "generate-tests": (case_generate_tests, None, None),
    "two-files": (case_two_files, None, None),
    "next-edit": (case_next_edit, None, NEXT_EDIT_SOURCE),
    "next-edit-across": (case_next_edit_across, None, NEXT_EDIT_SOURCE),
    "missing-model": (case_missing_model, MISSING_MODEL, None),
    # "": no model.path (the server discovers, finds nothing, and asks).
    "first-run": (case_first_run, "", None),
}


def main():
    names = sys.argv[1:] or list(CASES)
    unknown = [n for n in names if n not in CASES]
    if unknown:
        print(f"unknown case(s): {' '.join(unknown)}; known: {' '.join(CASES)}")
        return 2
    if not MODEL or not Path(MODEL).is_file():
        print("GHOSTLINE_MODEL must name the test model (scripts/fetch-model.sh)")
        return 2
    shutil.rmtree(ARTIFACTS, ignore_errors=True)
    version = subprocess.run([HX, "--version"], capture_output=True, text=True).stdout.strip()
    print(f"# {version}, tmux {subprocess.run(['tmux', '-V'], capture_output=True, text=True).stdout.strip()}", flush=True)
    passed = failed = 0
    for name in names:
        run, model_path, source = CASES[name]
        started = time.monotonic()
        hx = None
        try:
            extra_env = None
            if name == "first-run":
                if not FIRST_RUN:
                    start_fake_hub()
                extra_env = FIRST_RUN["env"]
            log_code = name == "two-files"
            if log_code:
                extra_env = {"GHOSTLINE_LOG": "ghostline=trace"}
            hx = Helix(name, model_path, source, extra_env, log_code)
            run(hx)
            passed += 1
            print(f"ok - {name}: {' '.join(run.__doc__.split())} ({time.monotonic() - started:.1f} s)", flush=True)
        except Exception as e:  # noqa: BLE001 - a case's failure of any kind is reported
            failed += 1
            detail = str(e) if isinstance(e, Failure) else traceback.format_exc()
            print(f"not ok - {name} ({time.monotonic() - started:.1f} s)\n{indent(detail)}", flush=True)
        finally:
            if hx is not None:
                hx.close()
    if FIRST_RUN:
        FIRST_RUN["process"].kill()
    print(f"# screens and Helix's logs in {ARTIFACTS}")
    print(f"{passed} passed, {failed} failed")
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
