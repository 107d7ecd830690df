#!/usr/bin/env python3
"""Check that the manual pages (man/*.scd) agree with the programs they describe.

Usage:

    check_man.py --man-dir DIR --rdmamsgd PATH --rdmamsg PATH \\
                 --softrdma-run PATH --softrdma-ctl PATH [--source-dir DIR]

DIR holds rdmamsgd.8.scd, rdmamsg.1.scd, rdmamsgd.yaml.5.scd,
softrdma-run.1.scd and softrdma-ctl.1.scd. The programs are run only for
their help (PROGRAM --help, and for rdmamsg every subcommand's --help,
recursively) and, for the configuration keys, `rdmamsgd --check-config` on
two temporary files with an unknown key (its "(allowed: ...)" message lists
the keys). Exit status: 0 when everything agrees, 1 with one line per
mismatch, "PAGE: problem", 2 when the arguments are wrong or a program
cannot be run. Run by ctest as man.in_sync (man/CMakeLists.txt).

What is compared, for each program's page:

- options: every option a help text lists (long and short) is documented in
  the page, and every option the page documents exists. An option is
  written in bold, *--name* or *-n*; it is documented by an entry, a line
  that starts with it: at column 0 in the OPTIONS section for a global
  option (*-c*, *--config* _FILE_), indented once inside its command's entry
  for a subcommand's option. A command's entry, in the COMMANDS section,
  starts with a line at column 0 of the form *status* ... or
  *bench throughput* ...; an option written anywhere inside it must belong
  to that command, one of its parents or one of its subcommands. --help
  (and -h, if it gives the same text) exists when it exits 0, listed or not.
- defaults: the default a help shows (CLI11's "--window ...=4096", or
  "(default 1000000)" in the description) is stated in the option's entry
  ("Default: 4096"). RDMAMSG_SOCKET is removed from the programs'
  environment, since rdmamsg shows it as the default of --socket.
- commands: every subcommand the help lists (rdmamsg's "Subcommands:", or
  a "commands: a, b [ARG], c" line of a usage message) has an entry, and
  every entry is a command.
- exit status: every "  N  text" line under "Exit codes:" has an entry *N*
  in EXIT STATUS whose text contains the help's text, and the page lists no
  other code; every status a help mentions ("exit 0, 69 (host) or 78") has
  an entry.
- environment: every $VARIABLE a help names appears in ENVIRONMENT.
- rdmamsgd.yaml.5: every key the daemon allows has an entry (a line at
  column 0 starting with *key*, followed by indented text), every entry is
  an allowed key, and the per-peer keys are entries indented once inside
  the entry of *peers*. Each key's entry says "Changed by a reload",
  "Changed only by a restart" or "Cannot change while the daemon runs".
  With the source tree (--source-dir, by default the parent of DIR when it
  holds config/reload.h) the keys that need a restart must be
  config/reload.h's kRestartKeys, both in the entries and in the RELOADING
  paragraph "Kept until the daemon restarts: ...", and each default written
  in config/rdmamsgd.yaml must be the entry's "Default: VALUE".
- rendering: each page converts with scdoc without a message, and the
  result passes `groff -man -ww -z` without a warning; skipped, with a
  note, when scdoc or groff is not on PATH.
"""

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile

PAGES = {
    "rdmamsgd": "rdmamsgd.8.scd",
    "rdmamsg": "rdmamsg.1.scd",
    "softrdma-run": "softrdma-run.1.scd",
    "softrdma-ctl": "softrdma-ctl.1.scd",
}
CONFIG_PAGE = "rdmamsgd.yaml.5.scd"
RELOAD_MARKERS = {
    "Changed by a reload": "live",
    "Changed only by a restart": "restart",
    "Cannot change while the daemon runs": "fixed",
}
HELP_OPTIONS = {"--help", "-h"}
TIMEOUT = 20

BOLD_OPTION = re.compile(r"(?<![\\\w*])\*(--?[A-Za-z0-9][\w-]*)\*")
COMMAND_HEADER = re.compile(r"^\*([a-z][a-z0-9-]*(?: [a-z][a-z0-9-]*)*)\*")
KEY_HEADER = re.compile(r"^\*([a-z][a-z0-9_]*)\*(?:\s.*)?$")
PEER_KEY_HEADER = re.compile(r"^\t\*([a-z][a-z0-9_]*)\*(?:\s.*)?$")
EXIT_HEADER = re.compile(r"^\*(\d+)\*\s*$")
OPTION_ENTRY = re.compile(r"^\*-")          # *-c*, *--config* _FILE_ (in OPTIONS)
SUB_OPTION_ENTRY = re.compile(r"^\t\*-")    # the same, indented once (in a command's entry)


def die(message):
    """A program that cannot be run or answers unexpectedly: exit 2, not a mismatch."""
    print(f"check_man: {message}", file=sys.stderr)
    sys.exit(2)


class Problems:
    def __init__(self):
        self.lines = []

    def add(self, page, text):
        self.lines.append(f"{page}: {text}")


# --- programs ----------------------------------------------------------------------------


def run(argv):
    """Runs argv; returns (exit status, stdout + stderr). RDMAMSG_SOCKET is removed
    from the environment: rdmamsg --help shows it as the default of --socket."""
    env = {k: v for k, v in os.environ.items() if k != "RDMAMSG_SOCKET"}
    try:
        p = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, timeout=TIMEOUT, text=True, env=env)
    except (OSError, subprocess.TimeoutExpired) as e:
        die(f"cannot run {' '.join(argv)}: {e}")
    return p.returncode, p.stdout + p.stderr


class Help:
    """What one help text says: options, subcommands, exit codes, variables."""

    def __init__(self, text):
        self.text = text
        self.options = set()
        self.defaults = {}           # long option -> its default, as the help shows it
        self.subcommands = []        # under "Subcommands:"
        self.usage_commands = []     # in a usage message's "commands: a [X], b" line
        self.exit_codes = {}
        self.exit_mentions = set()
        self.variables = set(re.findall(r"\$([A-Z][A-Z0-9_]*)", text))
        section = None
        has_options_section = False
        current = None               # the option whose description is being read
        for line in text.splitlines():
            m = re.match(r"^([A-Z][A-Za-z ]*):\s*$", line)
            if m:
                section = m.group(1).lower()
                has_options_section |= section == "options"
                continue
            if section == "options":
                m = re.match(r"^ {2}(-\S+)(.*)$", line)
                if m:
                    names = [n for n in m.group(1).split(",") if n.startswith("-")]
                    self.options.update(names)
                    current = next((n for n in names if n.startswith("--")), None)
                    # CLI11: "--window UINT:INT in [1 - 1048576]=4096   description"
                    definition = re.split(r"\s{2,}", m.group(1) + m.group(2))[0]
                    d = re.search(r"=([^\s=]+)$", definition)
                    if d and current:
                        self.defaults[current] = d.group(1)
                    description = m.group(2)
                else:
                    description = line
                d = re.search(r"\(default:? ([^\s,)]+)\)", description)
                if d and current and current not in self.defaults:
                    self.defaults[current] = d.group(1)
            elif section == "subcommands":
                m = re.match(r"^ {2}(\S+)(?:\s{2,}|$)", line)
                if m:
                    self.subcommands.append(m.group(1))
            elif section == "exit codes":
                m = re.match(r"^\s+(\d+)\s+(\S.*?)\s*$", line)
                if m:
                    self.exit_codes[m.group(1)] = m.group(2)
            # A usage message of a program without a parser: "commands: a [X], b".
            m = re.match(r"^commands?:\s*(.+)$", line, re.IGNORECASE)
            if m and section is None:
                self.usage_commands += [c.split()[0] for c in m.group(1).split(",") if c.split()]
        if not has_options_section:
            self.options.update(re.findall(r"(?<![\w-])(--[A-Za-z0-9][\w-]*)", text))
        for m in re.finditer(r"\bexit\s+(\d+(?:\s*\([^)]*\))?(?:(?:\s*,\s*|\s+or\s+|\s*,\s*or\s+)"
                             r"\d+(?:\s*\([^)]*\))?)*)", text, re.IGNORECASE):
            self.exit_mentions.update(re.findall(r"\d+", re.sub(r"\([^)]*\)", "", m.group(1))))


class Command:
    """A program or one of its subcommands, with its help."""

    def __init__(self, path, help_, implicit):
        self.path = path            # () for the program, ("bench", "sink") for a subcommand
        self.help = help_
        self.implicit = implicit    # options that exist without being listed (--help)
        self.children = []


def load_program(exe, page, page_text, problems):
    """The program's command tree, from its --help and its subcommands' --help."""
    name = os.path.basename(exe)

    def load(path):
        rc, text = run([exe, *path, "--help"])
        h = Help(text)
        implicit = set()
        if rc == 0:
            implicit.add("--help")
            if not path and "-h" not in h.options and re.search(r"\*-h\*", page_text):
                rc_h, text_h = run([exe, "-h"])
                if rc_h == 0 and text_h == text:
                    implicit.add("-h")
        cmd = Command(path, h, implicit)
        if path:
            # CLI11: "Usage: PROGRAM bench sink [OPTIONS] SERVICE".
            usage = re.search(r"^Usage: .*" + re.escape(" " + " ".join(path)) + r"( \[| [A-Z]|$)",
                              text, re.MULTILINE)
            if rc != 0 or not usage:
                problems.add(page, f"'{name} {' '.join(path)} --help' does not print the help of "
                                   f"'{' '.join(path)}'")
                return cmd
        if len(path) >= 3:
            return cmd
        for s in h.subcommands:
            cmd.children.append(load(path + (s,)))
        return cmd

    root = load(())
    return root, root.help.usage_commands


def walk(cmd):
    yield cmd
    for c in cmd.children:
        yield from walk(c)


# --- pages ------------------------------------------------------------------------------


def read_page(path):
    """The page's lines, with literal blocks and comments blanked (line numbers kept)."""
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    out, literal = [], False
    for line in lines:
        if line.strip().startswith("```"):
            literal = not literal
            out.append("")
        elif literal or line.startswith("; "):
            out.append("")
        else:
            out.append(line)
    return out


def sections(lines):
    """{SECTION NAME: [(line number, line), ...]} for the '# NAME' sections."""
    result, current = {}, None
    for i, line in enumerate(lines, 1):
        m = re.match(r"^# (.+?)\s*$", line)
        if m:
            current = m.group(1).upper()
            result.setdefault(current, [])
        elif current is not None:
            result[current].append((i, line))
    return result


def entries(numbered, header):
    """Splits a section into entries: a line at column 0 matching `header` and what
    follows it up to the next such line or the next unindented text line."""
    result, current = [], None
    for i, line in numbered:
        m = header.match(line)
        if m:
            current = (m.group(1), i, [line])
            result.append(current)
        elif current is not None:
            if line and not line[0].isspace():
                current = None
            else:
                current[2].append(line)
    return result


def plain(text):
    """The words of scdoc text, without markup, in lower case."""
    text = re.sub(r"\\(.)", r"\1", text)
    text = text.replace("*", "")
    text = re.sub(r"(?<!\w)_|_(?!\w)", "", text)
    return " ".join(text.split()).lower()


def option_entries(lines, indent):
    """{option: text of its entry} for the entries that start with "indent" tabs
    and a bold option (*-c*, *--config* _FILE_), up to the next line indented
    as much or less."""
    result, current = {}, None
    for line in lines:
        depth = len(line) - len(line.lstrip("\t"))
        if line.strip() and depth <= indent:
            current = None
            if depth == indent and line[indent:].startswith("*-"):
                current = []
                for o in BOLD_OPTION.findall(line):
                    result[o] = current
        if current is not None:
            current.append(line)
    return {o: plain(" ".join(text)) for o, text in result.items()}


def check_defaults(page, where, command, entries_text, problems):
    """Each default the help shows is the one the option's entry states."""
    for option, default in sorted(command.help.defaults.items()):
        text = entries_text.get(option)
        if text is None:
            continue  # reported as undocumented
        d = default.lower()
        if re.fullmatch(r"[0-9.]+", d):
            ok = re.search(r"default: " + re.escape(d) + r"(?![0-9])", text)
        else:
            ok = "default" in text and d in text
        if not ok:
            problems.add(page, f"{where}: the entry of {option} does not give its default, "
                               f"{default}, as --help does")


def bold_options(lines):
    return {m.group(1) for line in lines for m in BOLD_OPTION.finditer(line)}


# --- checks -----------------------------------------------------------------------------


def check_program(page, lines, root, flat_commands, problems):
    secs = sections(lines)
    commands = list(walk(root))
    known = set()
    for c in commands:
        known |= c.help.options | c.implicit

    # Every option the page writes exists.
    for i, line in enumerate(lines, 1):
        for m in BOLD_OPTION.finditer(line):
            if m.group(1) not in known:
                problems.add(page, f"line {i}: documents {m.group(1)}, which no --help lists")

    # Global options: each has an entry in OPTIONS.
    options_sec = [l for _, l in secs.get("OPTIONS", [])]
    if "OPTIONS" not in secs and (root.help.options or root.implicit):
        problems.add(page, "no OPTIONS section")
    in_options = bold_options(options_sec)
    with_entry = bold_options(l for l in options_sec if OPTION_ENTRY.match(l))
    for o in sorted(root.help.options - with_entry):
        problems.add(page, f"option {o} (in --help) has no entry in OPTIONS")
    for o in sorted(in_options - root.help.options - root.implicit):
        problems.add(page, f"OPTIONS documents {o}, which is not a global option")
    check_defaults(page, "OPTIONS", root, option_entries(options_sec, 0), problems)

    # Commands and their options.
    blocks = entries(secs.get("COMMANDS", []), COMMAND_HEADER)
    documented = {}
    for name, line_no, text in blocks:
        if name in documented:
            problems.add(page, f"line {line_no}: command '{name}' documented twice")
        documented[name] = (line_no, text)
    expected = {" ".join(c.path) for c in commands if c.path} | set(flat_commands)
    for name in sorted(expected - documented.keys()):
        problems.add(page, f"command '{name}' (in --help) is not documented in COMMANDS")
    for name in sorted(documented.keys() - expected):
        problems.add(page, f"line {documented[name][0]}: COMMANDS documents '{name}', "
                           "which --help does not list")
    for c in commands:
        if not c.path:
            continue
        name = " ".join(c.path)
        if name not in documented:
            continue
        line_no, text = documented[name]
        written = bold_options(text)
        with_entry = bold_options(l for l in text if SUB_OPTION_ENTRY.match(l))
        for o in sorted(c.help.options - HELP_OPTIONS - with_entry):
            problems.add(page, f"option {o} of '{name}' has no entry under '{name}' "
                               f"(line {line_no})")
        check_defaults(page, f"'{name}'", c, option_entries(text, 1), problems)
        related = set()
        for other in commands:
            if other.path[:len(c.path)] == c.path or c.path[:len(other.path)] == other.path:
                related |= other.help.options | other.implicit
        for o in sorted(written - related):
            if o in known:
                problems.add(page, f"entry '{name}' (line {line_no}) documents {o}, which "
                                   f"is not an option of '{name}', its parents or subcommands")

    # Exit codes.
    exit_entries = {}
    for code, line_no, text in entries(secs.get("EXIT STATUS", []), EXIT_HEADER):
        exit_entries[code] = (line_no, plain(" ".join(text[1:])))
    listed = root.help.exit_codes
    for code, text in listed.items():
        if code not in exit_entries:
            problems.add(page, f"exit code {code} ({text}) is not in EXIT STATUS")
        elif plain(text) not in exit_entries[code][1]:
            problems.add(page, f"EXIT STATUS {code} does not say what --help says: '{text}'")
    if listed:
        for code in sorted(exit_entries.keys() - listed.keys(), key=int):
            problems.add(page, f"EXIT STATUS documents {code}, which --help does not list")
    mentioned = set()
    for c in commands:
        mentioned |= c.help.exit_mentions
    for code in sorted(mentioned - exit_entries.keys() - listed.keys(), key=int):
        problems.add(page, f"exit status {code} (mentioned by --help) is not in EXIT STATUS")

    # Variables.
    env_text = plain(" ".join(l for _, l in secs.get("ENVIRONMENT", [])))
    variables = set()
    for c in commands:
        variables |= c.help.variables
    for v in sorted(variables):
        if not re.search(r"(?<![a-z0-9_])" + re.escape(v.lower()) + r"(?![a-z0-9_])", env_text):
            problems.add(page, f"${v} (named by --help) is not in ENVIRONMENT")


def allowed_keys(rdmamsgd, tmp):
    """The top-level and per-peer keys rdmamsgd accepts, from its unknown-key message."""
    def probe(name, yaml, pattern):
        path = os.path.join(tmp, name)
        with open(path, "w", encoding="utf-8") as f:
            f.write(yaml)
        _, text = run([rdmamsgd, "--check-config", path])
        m = re.search(pattern, text)
        if not m:
            die(f"rdmamsgd --check-config {path} did not list the allowed keys:\n{text}")
        return [k.strip() for k in m.group(1).split(",") if k.strip()]

    top = probe("top.yaml", "node: a\npeers: []\nzz_unknown_key: 1\n",
                r"unknown key 'zz_unknown_key'[^\n]*\(allowed: ([^)]*)\)")
    peer = probe("peer.yaml",
                 "node: a\nlisten: 127.0.0.1:7471\npeers:\n"
                 "  - name: b\n    address: 127.0.0.2:7471\n    zz_unknown_key: 1\n",
                 r"peers\[0\][^\n]*unknown key 'zz_unknown_key'[^\n]*\(allowed: ([^)]*)\)")
    return top, peer


def source_restart_keys(source_dir):
    with open(os.path.join(source_dir, "config", "reload.h"), encoding="utf-8") as f:
        text = f.read()
    m = re.search(r"kRestartKeys\[\]\s*=\s*\{([^}]*)\}", text)
    return set(re.findall(r'"([a-z0-9_]+)"', m.group(1))) if m else None


def source_defaults(source_dir):
    """key -> value for the keys the reference file sets (to their defaults)."""
    path = os.path.join(source_dir, "config", "rdmamsgd.yaml")
    result = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            m = re.match(r"^([a-z][a-z0-9_]*):\s*(\S.*?)\s*$", line)
            if m and m.group(1) not in ("node", "peers"):
                result[m.group(1)] = m.group(2).strip("\"'")
    return result


def check_config_page(page, lines, rdmamsgd_root, top, peer, source_dir, problems):
    known = set()
    for c in walk(rdmamsgd_root):
        known |= c.help.options | c.implicit
    for i, line in enumerate(lines, 1):
        for m in BOLD_OPTION.finditer(line):
            if m.group(1) not in known:
                problems.add(page, f"line {i}: documents {m.group(1)}, which rdmamsgd --help "
                                   "does not list")

    numbered = list(enumerate(lines, 1))
    key_entries = {}
    for name, line_no, text in entries(numbered, KEY_HEADER):
        if not any(l.startswith("\t") for l in text[1:]):
            continue  # bold text at column 0, not an entry
        if name in key_entries:
            problems.add(page, f"line {line_no}: key '{name}' documented twice")
        key_entries[name] = (line_no, text)
    for k in top:
        if k not in key_entries:
            problems.add(page, f"key '{k}' (allowed by rdmamsgd) is not documented")
    for k, (line_no, _) in key_entries.items():
        if k not in top:
            problems.add(page, f"line {line_no}: documents key '{k}', which rdmamsgd does not "
                               "allow")

    peer_entries = {}
    if "peers" in key_entries:
        line_no, text = key_entries["peers"]
        for j, line in enumerate(text):
            m = PEER_KEY_HEADER.match(line)
            if m and any(l.startswith("\t\t") for l in text[j + 1:j + 2]):
                peer_entries[m.group(1)] = line_no + j
    for k in peer:
        if k not in peer_entries:
            problems.add(page, f"peer key '{k}' (allowed by rdmamsgd) is not documented in the "
                               "entry of peers")
    for k, line_no in peer_entries.items():
        if k not in peer:
            problems.add(page, f"line {line_no}: documents peer key '{k}', which rdmamsgd does "
                               "not allow")

    # What a reload does with each key.
    kind = {}
    for k, (line_no, text) in key_entries.items():
        words = plain(" ".join(text[1:]))
        found = [v for m, v in RELOAD_MARKERS.items() if plain(m) in words]
        if len(found) != 1:
            problems.add(page, f"line {line_no}: key '{k}' must say exactly one of: "
                               + "; ".join(f"'{m}'" for m in RELOAD_MARKERS))
        else:
            kind[k] = found[0]
    page_restart = {k for k, v in kind.items() if v == "restart"}
    reload_sec = sections(lines).get("RELOADING")
    if reload_sec is None:
        problems.add(page, "no RELOADING section")
    else:
        para = []
        for _, line in reload_sec:
            if para and not line.strip():
                break
            if para or line.startswith("Kept until the daemon restarts"):
                para.append(line)
        named = {k for k in re.findall(r"\*([a-z][a-z0-9_]*)\*", " ".join(para)) if k in top}
        if not para:
            problems.add(page, "RELOADING has no paragraph 'Kept until the daemon restarts: ...'")
        elif named != page_restart:
            problems.add(page, "RELOADING's 'Kept until the daemon restarts' names "
                               f"{', '.join(sorted(named))}; the key entries say "
                               f"{', '.join(sorted(page_restart))}")

    if source_dir:
        restart = source_restart_keys(source_dir)
        if restart is None:
            problems.add(page, "cannot find kRestartKeys in config/reload.h")
        else:
            for k in sorted(restart - page_restart):
                problems.add(page, f"key '{k}' needs a restart (config/reload.h) but its entry "
                                   "does not say 'Changed only by a restart'")
            for k in sorted(page_restart - restart):
                problems.add(page, f"key '{k}' is documented as needing a restart, but "
                                   "config/reload.h applies it on reload")
        for k, value in source_defaults(source_dir).items():
            if k not in key_entries:
                continue
            words = plain(" ".join(key_entries[k][1][1:])).replace('"', "")
            if f"default: {value.lower()}" not in words:
                problems.add(page, f"key '{k}': config/rdmamsgd.yaml sets the default {value}, "
                                   "the page does not say 'Default: " + value + "'")


def check_header(name, man_dir, problems):
    """The preamble names the page: rdmamsgd(8) for rdmamsgd.8.scd."""
    with open(os.path.join(man_dir, name), encoding="utf-8") as f:
        first = f.readline()
    expected = name[:-len(".scd")]
    title, section = expected.rsplit(".", 1)
    if not re.match(r"^" + re.escape(f"{title}({section})") + r"(\s|$)", first):
        problems.add(name, f"the first line must start with {title}({section})")


def check_rendering(man_dir, names, problems):
    scdoc, groff = shutil.which("scdoc"), shutil.which("groff")
    if not scdoc:
        print("check_man: note: scdoc not found on PATH; pages not rendered")
        return
    if not groff:
        print("check_man: note: groff not found on PATH; rendered pages not checked")
    for name in names:
        with open(os.path.join(man_dir, name), encoding="utf-8") as f:
            source = f.read()
        p = subprocess.run([scdoc], input=source, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True, timeout=TIMEOUT)
        if p.returncode != 0 or p.stderr.strip():
            problems.add(name, f"scdoc: {p.stderr.strip() or 'exit ' + str(p.returncode)}")
            continue
        if groff:
            g = subprocess.run([groff, "-man", "-ww", "-z"], input=p.stdout,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               timeout=TIMEOUT)
            for line in (g.stdout + g.stderr).splitlines():
                problems.add(name, f"groff: {line}")
            if g.returncode != 0 and not (g.stdout + g.stderr).strip():
                problems.add(name, f"groff: exit {g.returncode}")


def main():
    parser = argparse.ArgumentParser(description="Check the man pages against the programs.")
    parser.add_argument("--man-dir", required=True)
    parser.add_argument("--rdmamsgd", required=True)
    parser.add_argument("--rdmamsg", required=True)
    parser.add_argument("--softrdma-run", required=True)
    parser.add_argument("--softrdma-ctl", required=True)
    parser.add_argument("--source-dir", help="source tree (default: the parent of --man-dir "
                                             "if it holds config/reload.h)")
    args = parser.parse_args()

    source_dir = args.source_dir
    if source_dir is None:
        parent = os.path.dirname(os.path.abspath(args.man_dir))
        if os.path.isfile(os.path.join(parent, "config", "reload.h")):
            source_dir = parent
        else:
            print("check_man: note: no source tree; restart keys and defaults not compared")

    problems = Problems()
    names = list(PAGES.values()) + [CONFIG_PAGE]
    missing = [n for n in names if not os.path.isfile(os.path.join(args.man_dir, n))]
    for n in missing:
        problems.add(n, "missing")

    exes = {"rdmamsgd": args.rdmamsgd, "rdmamsg": args.rdmamsg,
            "softrdma-run": args.softrdma_run, "softrdma-ctl": args.softrdma_ctl}
    roots = {}
    for program, page in PAGES.items():
        page_lines = read_page(os.path.join(args.man_dir, page)) if page not in missing else []
        root, flat = load_program(exes[program], page, "\n".join(page_lines), problems)
        roots[program] = root
        if page not in missing:
            check_program(page, page_lines, root, flat, problems)

    with tempfile.TemporaryDirectory(prefix="check_man.") as tmp:
        top, peer = allowed_keys(args.rdmamsgd, tmp)
    if CONFIG_PAGE not in missing:
        check_config_page(CONFIG_PAGE, read_page(os.path.join(args.man_dir, CONFIG_PAGE)),
                          roots["rdmamsgd"], top, peer, source_dir, problems)

    present = [n for n in names if n not in missing]
    for n in present:
        check_header(n, args.man_dir, problems)
    check_rendering(args.man_dir, present, problems)

    for line in problems.lines:
        print(line)
    if problems.lines:
        print(f"check_man: {len(problems.lines)} mismatch(es) between the pages in "
              f"{args.man_dir} and the programs", file=sys.stderr)
        return 1
    print(f"check_man: {len(names)} pages agree with the programs "
          f"({len(top)} configuration keys, {len(peer)} peer keys)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
