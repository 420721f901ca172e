"""Evaluating the parameter-setting lines of a launch script in bash (provenance helper, not imported by the package;
used by benchmarks/derive_launch.py): what a script's own variable logic decides for given environment values, without
running anything else of it (never the server launch).

The program is the script line for line (so bash's line numbers are the script's), with
  - kept: variable assignments (``NAME=...``, ``export NAME=...``, ``[[ ... ]] && NAME=...``) and the
    ``if``/``elif``/``else``/``fi``/``case``/``esac`` structure around them;
  - read into a variable: a ``cat > FILE << EOF`` (or ``>> FILE``) heredoc becomes ``read -r -d '' __H << EOF`` and is
    appended to ``__CFG`` (the file the script writes, its variables expanded by bash itself);
  - replaced by the no-op ``:`` every other line: commands and their continuation lines, other heredocs, loops and
    function definitions; a ``NAME=value command`` line (an environment prefix) is a command.
Bash runs restricted (``-r``: no output redirection, no ``cd``, no PATH change), in an empty temporary folder, with
no environment but the values given and a PATH that names no folder, so no program can run: a line that would call
one fails with "command not found" (reported). A value is *uncertain* when a line that decides it (its assignments,
the lines of a heredoc that writes it, the ``if``/``elif``/``case`` headers around them) failed, or reads a variable
that a failed line assigned (followed through assignments).
"""

from __future__ import annotations

import re
import subprocess
import tempfile
from dataclasses import dataclass

CONTROL = re.compile(r"^\s*(if|elif|else|fi|then|case|esac)\b|^\s*;;|^\s*[^\s()=#]+\)")
ASSIGN = re.compile(r"^\s*(?:export\s+|declare\s+(?:-\w+\s+)*|readonly\s+)?([A-Za-z_]\w*)(?:\[[^]]*\])?\+?=")
TESTED = re.compile(r"^\s*\[\[.*\]\]\s*(?:&&|\|\|)\s*(?:export\s+)?([A-Za-z_]\w*)\+?=")
PREFIX = re.compile(r"^\s*[A-Za-z_]\w*=[^\s\"'$`(]*\s+[A-Za-z./]")  # NAME=value command ...
LOOP = re.compile(r"^\s*(for|while|until)\b")
FUNC = re.compile(r"^\s*(?:function\s+\w+|\w[\w-]*\s*\(\s*\))\s*\{?\s*$")
HEREDOC = re.compile(r"<<(-?)\s*(['\"]?)(\w+)\2")
CAT = re.compile(r"^\s*cat\s+(?:>>?\s*\S+\s+)?<<-?\s*(['\"]?)\w+\1(?:\s*>>?\s*\S+)?\s*$")
REF = r"\$\{?%s\b"
SEP = "\x1e"


@dataclass(frozen=True)
class Evaluated:
    """What the parameter lines decided: ``config`` (the heredocs written to files, concatenated), ``variables``
    (the values of the names asked for), ``words`` (each word asked for, expanded), ``failed`` ({line: message} of
    the lines that failed) and ``uncertain`` (the names, words and config mark whose value a failed line decides)."""

    config: str
    variables: dict
    words: tuple
    failed: dict
    uncertain: frozenset
    complete: bool  # the program ran to its end (no early exit)


def program(text: str) -> tuple[list[str], list[str]]:
    """(bash lines, kind of each: 'keep' | 'config' (a heredoc read into __CFG) | 'noop'), one per script line."""
    lines, out, kind = text.split("\n"), [], []
    i = 0
    while i < len(lines):
        line = lines[i]
        bare = line.strip()
        if not bare or bare.startswith("#"):
            out.append(":"), kind.append("noop")
            i += 1
            continue
        doc = HEREDOC.search(line) if "<<<" not in line else None
        if doc:
            tag, dash = doc.group(3), doc.group(1)
            end = next((j for j in range(i + 1, len(lines))
                        if (lines[j].lstrip("\t") if dash else lines[j]) == tag), len(lines) - 1)
            if CAT.match(line):
                q = doc.group(2)
                out.append(f"IFS= read -r -d '' __H <<{dash}{q}{tag}{q} || true; __CFG+=\"$__H\"$'\\n'")
                out.extend(lines[i + 1:end + 1])
                kind.extend(["config"] * (end - i + 1))
            else:
                out.extend([":"] * (end - i + 1)), kind.extend(["noop"] * (end - i + 1))
            i = end + 1
            continue
        if LOOP.match(line) or FUNC.match(line):
            end = _block_end(lines, i)
            out.extend([":"] * (end - i + 1)), kind.extend(["noop"] * (end - i + 1))
            i = end + 1
            continue
        keep = (ASSIGN.match(line) or TESTED.match(line) or CONTROL.match(line)) and not PREFIX.match(line)
        end = i
        while lines[end].rstrip().endswith("\\") and end + 1 < len(lines):
            end += 1
        for j in range(i, end + 1):
            out.append(lines[j] if keep else ":"), kind.append("keep" if keep else "noop")
        i = end + 1
    return out, kind


def _block_end(lines: list[str], i: int) -> int:
    """Last line of the loop or function opened on line i (one-line loops end where they start)."""
    if LOOP.match(lines[i]) and re.search(r"\bdone\b", lines[i]):
        return i
    depth = 0
    for j in range(i, len(lines)):
        s = lines[j].strip()
        if LOOP.match(lines[j]) or FUNC.match(lines[j]):
            depth += 1
        if s.startswith("done") or s == "}":
            depth -= 1
            if depth == 0:
                return j
    return len(lines) - 1


def evaluate(text: str, env: dict[str, str], names: tuple[str, ...] = (), words: tuple[str, ...] = (),
             config_mark: str = "") -> Evaluated:
    """Run the parameter lines of script ``text`` with environment ``env``; report the values of ``names``, the
    expansion of each shell word in ``words`` (e.g. ``"$MOE_BACKEND"``), and the files written by heredocs.
    ``config_mark``: a text whose heredocs decide a value (e.g. 'moe_config'), for the uncertainty check."""
    lines, kind = program(text)
    tail = [f"printf '{SEP}cfg%s\\n' \"$__CFG\""]
    tail += [f"printf '{SEP}var{n}=%s\\n' \"${{{n}}}\"" for n in names]
    tail += [f"printf '{SEP}word%s\\n' {w}" for w in words]
    tail.append(f"printf '{SEP}end\\n'")
    with tempfile.TemporaryDirectory() as tmp:
        run = subprocess.run(["/bin/bash", "--norc", "--noprofile", "-r", "-c", "\n".join(lines + tail)],
                             env={**env, "PATH": "/nonexistent-path-for-launch-eval"}, cwd=tmp, capture_output=True,
                             text=True, timeout=20, check=False)
    failed = {}
    for m in re.finditer(r"line (\d+): (.*)", run.stderr):
        n = int(m.group(1))
        if n <= len(lines):
            failed.setdefault(n, m.group(2).strip())
    parts = run.stdout.split(SEP)
    cfg = next((p[3:].rstrip("\n") for p in parts if p.startswith("cfg")), "")
    variables = dict(p[3:].rstrip("\n").split("=", 1) for p in parts if p.startswith("var"))
    got = tuple(p[4:].rstrip("\n") for p in parts if p.startswith("word"))
    uncertain = _uncertain(text.split("\n"), kind, failed, names, words, config_mark)
    return Evaluated(cfg, variables, got, failed, uncertain, any(p.startswith("end") for p in parts))


def _uncertain(src: list[str], kind: list[str], failed: dict, names, words, mark: str) -> frozenset:
    """The names and words (as given), and ``mark``, whose value a failed line decides (module docstring): for a
    name, its assignments; for a word, the assignments of the names it reads; for ``mark``, the heredocs that write
    it and the names they read; each with the if/elif/case headers around those lines."""
    if not failed:
        return frozenset()
    tainted: set[str] = set()
    changed = True
    while changed:  # names assigned by a failed line, or from a tainted name
        changed = False
        for n, line in enumerate(src, 1):
            m = (ASSIGN.match(line) or TESTED.match(line)) if kind[n - 1] == "keep" else None
            if m and m.group(1) not in tainted and (n in failed or any(re.search(REF % t, line) for t in tainted)):
                tainted.add(m.group(1))
                changed = True
    heredoc = _config_runs(kind, src, mark) if mark else set()
    targets = [(t, _reads(t) | ({t} if t in names else set()), set()) for t in (*names, *words)]
    if mark:
        targets.append((mark, {r for n in heredoc for r in _reads(src[n - 1])}, heredoc))
    blocks = _headers(src)
    out = set()
    for target, refs, lines in targets:
        decisive = set(lines) | {n for n, line in enumerate(src, 1) if kind[n - 1] == "keep"
                                 and (m := ASSIGN.match(line) or TESTED.match(line)) and m.group(1) in refs}
        decisive |= {h for n in list(decisive) for h in blocks.get(n, ())}
        if refs & tainted or any(n in failed or any(re.search(REF % t, src[n - 1]) for t in tainted)
                                 for n in decisive):
            out.add(target)
    return frozenset(out)


def _reads(text: str) -> set[str]:
    return set(re.findall(r"\$\{?([A-Za-z_]\w*)", text))


def _config_runs(kind: list[str], src: list[str], mark: str) -> set[int]:
    """Lines (1-based) of the heredocs read into __CFG that contain ``mark``."""
    out, run = set(), []
    for n, k in enumerate([*kind, "noop"], 1):
        if k == "config":
            run.append(n)
            continue
        if any(mark in src[i - 1] for i in run):
            out |= set(run)
        run = []
    return out


def _headers(src: list[str]) -> dict[int, tuple[int, ...]]:
    """{line: the if/elif/case header lines of every block around it} (1-based)."""
    stack: list[list[int]] = []
    out = {}
    for n, line in enumerate(src, 1):
        s = line.strip()
        if re.match(r"(if|case)\b", s) and not re.search(r"\b(fi|esac)\s*;?\s*$", s):
            stack.append([n])
        elif re.match(r"elif\b", s) and stack:
            stack[-1].append(n)
        out[n] = tuple(h for block in stack for h in block)
        if re.match(r"(fi|esac)\b", s) and stack:
            stack.pop()
    return out
