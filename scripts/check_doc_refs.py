#!/usr/bin/env python3
"""check_doc_refs.py: every citation of a documentation section in the repository resolves.

Code and docs cite the notes by section title and the design by section number:
  docs/performance_notes.md, "TITLE"   (TITLE: a heading of performance_notes.md or of a file of
                                        docs/performance_notes/, or the start of one; the index in
                                        performance_notes.md names the file of each)
  design.md §N / §N.M                  (a numbered heading of docs/design.md)
A citation may run over lines (comment markers between its words are ignored). Prints each one that
resolves to no heading, with its file; exit status 1 if there is any, else 0. Files under
benchmarks/results/ (raw logs of past runs) and this script (its self-test's cases) are not checked.

  scripts/check_doc_refs.py            (ctest doc_refs, so CI's test command runs it)
  scripts/check_doc_refs.py --self-test
"""
import glob
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NOTES_CITE = re.compile(r'performance_notes(?:\.md)?,?\s+"([^"]+)"')
DESIGN_CITE = re.compile(r"design\.md,?\s+§\s?([0-9]+(?:\.[0-9]+)?)")
# A line break inside a comment or a Markdown paragraph: the next line's comment marker and indent.
JOIN = re.compile(r"\n[ \t]*(?://+|#+(?!#)|\*|;)?[ \t]*")


def headings(text):
    return [m.group(1).strip() for m in re.finditer(r"^#+ (.*)$", text, re.M)]


def notes_headings(root):
    out = []
    for f in [os.path.join(root, "docs", "performance_notes.md")] + sorted(
            glob.glob(os.path.join(root, "docs", "performance_notes", "*.md"))):
        if os.path.exists(f):
            with open(f, encoding="utf-8") as fh:
                out += headings(fh.read())
    return out


def design_numbers(root):
    path = os.path.join(root, "docs", "design.md")
    if not os.path.exists(path):
        return set()
    with open(path, encoding="utf-8") as fh:
        return {m.group(1).rstrip(".") for h in headings(fh.read()) for m in [re.match(r"([0-9]+(?:\.[0-9]+)*)\.?\s", h)]
                if m}


def problems(files_text, notes, numbers):
    """[(file, citation)] that resolve to nothing. files_text: {path: text}."""
    bad = []
    for path, text in files_text.items():
        joined = JOIN.sub(" ", text)
        for m in NOTES_CITE.finditer(joined):
            title = m.group(1).strip().rstrip(".")
            if title == "TITLE":  # (the notes' own explanation of the form)
                continue
            if not any(h.startswith(title) for h in notes):
                bad.append((path, f'performance_notes.md, "{title}"'))
        for m in DESIGN_CITE.finditer(joined):
            if m.group(1) not in numbers:
                bad.append((path, f"design.md §{m.group(1)}"))
    return bad


def repo_files(root):
    try:  # the tracked files; outside a git checkout, the tree without build folders
        out = subprocess.run(["git", "ls-files"], cwd=root, capture_output=True, text=True, check=True).stdout.split()
    except (OSError, subprocess.CalledProcessError):
        out = []
        for d, dirs, names in os.walk(root):
            dirs[:] = [x for x in dirs if not x.startswith((".", "build"))]
            out += [os.path.relpath(os.path.join(d, n), root) for n in names]
    texts = {}
    for f in out:
        if f.startswith("benchmarks/results/") or f == "scripts/check_doc_refs.py":  # (its self-test's cases)
            continue
        try:
            with open(os.path.join(root, f), encoding="utf-8") as fh:
                texts[f] = fh.read()
        except (UnicodeDecodeError, IsADirectoryError, FileNotFoundError):
            continue
    return texts


def self_test():
    notes = ["The precheck: a failed attempt decided from the raw gate (session 46)", "Tuning knobs (build-time)"]
    numbers = {"3", "3.5", "6"}
    cases = {
        "good.cu": ('// see docs/performance_notes.md, "The precheck" and design.md §3.5\n'
                    '// (performance_notes.md, "Tuning\n// knobs"); design.md §6', 0),
        "bad_title.cu": ('// docs/performance_notes.md, "The chunk step\'s parts, one at a time"', 1),
        "bad_number.md": ("design.md §3.7 and design.md §3.5", 1),
    }
    ok = True
    for name, (text, want) in cases.items():
        got = len(problems({name: text}, notes, numbers))
        print(f"self-test {name}: {got} unresolved (expected {want}) -> {'as expected' if got == want else 'WRONG'}")
        ok &= got == want
    print("check_doc_refs self-test " + ("passed" if ok else "FAILED"))
    return 0 if ok else 1


def main():
    if "--self-test" in sys.argv[1:]:
        return self_test()
    texts = repo_files(ROOT)
    notes, numbers = notes_headings(ROOT), design_numbers(ROOT)
    if not notes or not numbers:
        print("check_doc_refs: found no headings in docs/performance_notes*.md or docs/design.md")
        return 1
    bad = problems(texts, notes, numbers)
    cites = sum(len(NOTES_CITE.findall(JOIN.sub(" ", t))) + len(DESIGN_CITE.findall(JOIN.sub(" ", t)))
                for t in texts.values())
    for path, what in bad:
        print(f"{path}: {what} names no section")
    print(f"check_doc_refs: {cites} citations in {len(texts)} files, {len(bad)} unresolved")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
