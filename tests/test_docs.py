"""The outputs the README and docs/results.md show are what the commands print today.

Each listed command (those that take seconds: the default model, ``info`` and the weight-only
commands on the installed real models, the error messages) runs as a user would type it, in a
fresh folder, and its output is compared with the block under it in the docs, line by line:
the words exactly, each number to within one unit of its last printed digit (another CPU may
round a last digit the other way). A command whose block is gone or renamed fails here too,
so the list cannot silently shrink. The minutes-long commands (``validate`` and ``intervene``
on real models, training; ``SLOW``, long: they train five toys) run only when asked for,
``COMPSCOPE_SLOW_DOCS=1 pytest tests/test_docs.py``, in doc order in one shared folder (later
commands read what earlier ones wrote). And every link between the project's documents names a
file that exists and, with ``#``, one of its headings.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

import forked
from environments import offline_env

ROOT = Path(__file__).resolve().parents[1]
DOCS = {"README.md": ROOT / "README.md", "docs/results.md": ROOT / "docs" / "results.md"}

CHECKED = [
    ("README.md", "compscope scores --top 3"),  # `make demo`'s first step, shown as a text block
    ("README.md", "compscope models glm4_moe llava MarianMTModel deepseek_v3 axk2"),
    ("README.md", "compscope info /nonexistent"),
    ("README.md", "compscope scores --out /no/such/dir/x.csv"),
    ("README.md", "compscope validate smollm2 --metric embd --out v"),
    ("README.md", "compscope intervene --sequences 1"),
    ("docs/results.md", "compscope info smollm2"),
    ("docs/results.md", "compscope info gemma3-270m"),
    ("docs/results.md", "compscope info minilm"),
    ("docs/results.md", "compscope info gemma3-270m --out card.json > /dev/null && python -c \"import json; "
                        "c = json.load(open('card.json')); print(c['sliding_window']); print(c['norms']); "
                        "print([round(c['rotary']['inv_freq'][l][1], 6) for l in (0, 5)], c['logit_scale'])\""),
    ("docs/results.md", "compscope scores smollm2 --top 3"),
    ("docs/results.md", "compscope pair 0.0 1.1 --kind K"),
    ("docs/results.md", "compscope pair gemma3-270m 4.1 5.3 --out pair.json"),
    ("docs/results.md", "compscope axioms"),
    ("docs/results.md", "compscope axioms --axiom gauge --metric embed"),
    ("docs/results.md", "compscope circuits"),
    ("docs/results.md", "compscope circuits smollm2 --top 5"),
    ("docs/results.md", "compscope intervene"),
    ("docs/results.md", "compscope validate --out verdict"),
    ("README.md", "HF_HUB_OFFLINE=1 compscope info Org/not-cached"),
]

#: the minutes-long commands, in the order they run (``verdict_candidates`` reads the verdicts,
#: ``track`` the training run)
SLOW = [
    ("docs/results.md", "compscope pair smollm2 16.0 17.5 --kind K --on-data | tail -4"),
    ("docs/results.md", "compscope gauge smollm2"),
    ("docs/results.md", "compscope gauge gemma3-270m"),
    ("README.md", "compscope sweep induction-2l smollm2 gemma3-270m --job validate --kinds K --sequences 64 --half 32 --metric identity --metric covariance --linearise-qk-norm text --out verdicts --quiet"),
    ("README.md", "python -c \"from compscope.sweep import read_dataset; d = read_dataset('verdicts'); k = d[d.kind == 'K']; print(k.pivot_table('auroc', ['measure', 'metric'], 'model').round(3).to_string()); print(k.groupby('model').processing.first().to_string())\""),
    ("README.md", "compscope validate smollm2 --top 5 --out verdict-smollm2"),
    ("README.md", "compscope validate smollm2 --writers 16 --metric identity --top 5"),
    ("README.md", "compscope intervene smollm2 --kinds K --sequences 8 --top 5"),
    ("README.md", "compscope intervene smollm2 --writers 16.0 --kinds K --sequences 8 --top 5"),
    ("docs/results.md", "compscope circuits smollm2 --top 5 --content activations"),
    ("docs/results.md", "compscope circuits gemma3-270m --top 5 --content activations"),
    ("docs/results.md", "compscope validate smollm2 --out verdict-smollm2"),
    ("docs/results.md", "compscope validate gemma3-270m --out verdict-gemma"),
    ("docs/results.md", "compscope validate smollm2 --text-labels --sample-sequences 32 --kinds K --metric identity --writers 16.0 --intervention-sequences 2 --top 3"),
    ("docs/results.md", "compscope validate gemma3-270m --fold-norm --fold-qk-gains --top 6"),
    ("docs/results.md", "compscope validate gemma3-270m --fold-qk-gains --metric covariance-own --metric covariance --metric identity --kinds K --top 8"),
    ("docs/results.md", "compscope validate gemma3-270m --linearise-norms qk --top 6"),
    ("docs/results.md", "compscope validate gemma3-270m --linearise-qk-norm --top 10"),
    ("docs/results.md", "compscope validate gemma3-270m --linearise-qk-norm text --top 10"),
    ("docs/results.md", "compscope scores gemma3-270m --linearise-qk-norm text --metric covariance --kinds K --measure read_gain --top 8"),
    ("docs/results.md", "compscope validate gemma3-270m --fold-norm --linearise-qk-norm --metric identity --metric embed --kinds K --top 4"),
    ("docs/results.md", "compscope validate gemma3-270m --metric covariance-own --metric covariance --kinds K --top 8"),
    ("docs/results.md", "compscope validate gemma3-270m --metric covariance-own --metric covariance --metric-shrinkage none --kinds K --top 8"),
    ("docs/results.md", "compscope validate smollm2 --fold-norm --top 6"),
    ("docs/results.md", "python bench/verdict_candidates.py smollm2 verdict-smollm2"),
    ("docs/results.md", "python bench/verdict_candidates.py gemma3-270m verdict-gemma"),
    ("docs/results.md", "python bench/verdict_thresholds.py smollm2 verdict-smollm2"),
    ("docs/results.md", "python bench/verdict_thresholds.py gemma3-270m verdict-gemma"),
    ("docs/results.md", "python bench/verdict_pairs.py smollm2 verdict-smollm2"),
    ("docs/results.md", "python bench/verdict_pairs.py smollm2 verdict-smollm2 --measure read_gain --metric covariance"),
    ("docs/results.md", "python bench/verdict_within.py smollm2 verdict-smollm2 --on-data"),
    ("docs/results.md", "python bench/verdict_pairs.py gemma3-270m verdict-gemma --measure frobenius --metric covariance"),
    ("docs/results.md", "python bench/verdict_pairs.py gemma3-270m verdict-gemma --measure read_gain --metric covariance --linearise-norms qk"),
    # "trained here": toys trained in the folder, whose numbers repeat only on the kind of CPU that
    # trained them for the docs (docs/results.md says so, with another machine's numbers)
    ("docs/results.md", "mkdir -p runs && compscope train --out runs/rotary-4l --name rotary-4l --layers 4 --positions rotary --norm rmsnorm --mlp"),  # trained here
    ("docs/results.md", "compscope validate runs/rotary-4l/final --top 10 --out verdict-rotary-4l"),  # trained here
    ("docs/results.md", "python bench/toy_norms.py --runs runs"),  # trained here
    ("docs/results.md", "compscope validate gemma3-270m --linearise-norms --metric identity --metric covariance"),
    ("docs/results.md", "compscope validate runs/gemma-like-4l/final --prev-threshold 0.2 --metric identity --metric covariance --top 6 --out verdict-gemma-like-t02"),  # trained here
    ("docs/results.md", "compscope validate runs/gemma-like-4l/final --prev-threshold 0.2 --metric identity --linearise-norms --top 4"),  # trained here
    ("docs/results.md", "compscope validate minilm --top 6"),
    ("docs/results.md", "mkdir -p runs && compscope train --out runs/induction-2l"),
    ("docs/results.md", "compscope track runs/induction-2l --out track.parquet --plot docs/k_composition_over_training.png"),
]

# text blocks that show a command's output without its command line: first line -> command
TEXT_BLOCKS = {"induction-2l: metric identity, processing none": "compscope scores --top 3"}

_NUMBER = re.compile(r"-?\d+(?:\.\d+)?(?:e[+-]?\d+)?")


def shown_blocks(text: str) -> list[list[tuple[str, str]]]:
    """Each console block of ``text`` as its ``(command, output)`` pairs in order (a block may hold
    several), and each text block named in ``TEXT_BLOCKS`` as one pair."""
    blocks = []
    for kind, body in re.findall(r"```(console|text)\n(.*?)```", text, re.S):
        if kind == "text":
            first = body.split("\n", 1)[0]
            if first in TEXT_BLOCKS:
                blocks.append([(TEXT_BLOCKS[first], body)])
            continue
        pairs: list[tuple[str, list[str]]] = []
        for line in body.splitlines():
            if line.startswith("$ "):
                pairs.append((line[2:].strip(), []))
            elif pairs:
                pairs[-1][1].append(line)
        blocks.append([(cmd, "\n".join(lines) + "\n") for cmd, lines in pairs])
    return blocks


def shown_outputs(text: str) -> dict[str, str]:
    """``command -> output`` of the first place ``text`` shows each command."""
    found: dict[str, str] = {}
    for block in shown_blocks(text):
        for cmd, out in block:
            found.setdefault(cmd, out)
    return found


def _unit(token: str) -> float:
    """One unit of the last printed digit of a number as printed (``0.1803`` -> 1e-4)."""
    mant, _, exp = token.lower().partition("e")
    decimals = len(mant.split(".")[1]) if "." in mant else 0
    return 10.0 ** (-decimals + (int(exp) if exp else 0))


def differences(shown: str, printed: str) -> list[str]:
    """Lines where ``printed`` differs from ``shown`` beyond the last digit's rounding. A shown
    line ``...`` stands for the printed lines up to the one that matches the next shown line
    (to the end, if it is the last): how the docs cut a long list."""
    a, b = shown.rstrip("\n").splitlines(), printed.rstrip("\n").splitlines()
    out, j = [], 0
    for i, x in enumerate(a):
        if x == "...":
            words = _NUMBER.sub("#", a[i + 1]) if i + 1 < len(a) else None
            while j < len(b) and (words is None or _NUMBER.sub("#", b[j]) != words):
                j += 1
            continue
        if j >= len(b):
            return out + [f"line {i + 1} and after shown, not printed: {x}"]
        y, j = b[j], j + 1
        if x == y:
            continue
        if _NUMBER.sub("#", x) != _NUMBER.sub("#", y):
            out.append(f"line {i + 1}:\n  shown   {x}\n  printed {y}")
            continue
        for s, p in zip(_NUMBER.findall(x), _NUMBER.findall(y)):
            if abs(float(s) - float(p)) > 1.01 * max(_unit(s), _unit(p)):
                out.append(f"line {i + 1}: {s} shown, {p} printed\n  shown   {x}\n  printed {y}")
                break
    if j < len(b):
        out.append(f"{len(b) - j} more lines printed than shown, from: {b[j]}")
    return out


def test_differences_tolerates_only_the_last_digit():
    assert differences("a 0.1803 b\n", "a 0.1804 b\n") == []
    assert differences("a 0.1803 b\n", "a 0.1805 b\n") != []
    assert differences("a 0.18 b\n", "a 0.18 c\n") != []
    assert differences("x 1.5e-06\n", "x 1.6e-06\n") == []
    assert differences("x\n", "x\ny\n") != []
    assert differences("x\ny\n", "x\n") != []


def test_an_elision_stands_for_the_lines_up_to_the_next_shown_one():
    printed = "head\na 1\nb 2\nc 3\n\nlist two\nd 4\ne 5\nlast 6\n"
    assert differences("head\na 1\n...\n\nlist two\nd 4\n...\nlast 6\n", printed) == []
    assert differences("head\n...\n", printed) == []  # to the end
    assert differences("head\na 1\n...\n\nlist two\nd 4\n", printed) != []  # more printed than shown
    assert differences("head\n...\nlast 9\n", printed) != []  # the line after an elision is compared
    assert differences("head\n...\nnowhere 1\n", printed) != []


def run_shown(command: str, cwd: Path, timeout: int = 300) -> subprocess.CompletedProcess:
    """``command`` as the docs show it, through bash in ``cwd`` with this environment's
    ``compscope`` and ``python`` first on the PATH, offline, 200 columns wide, with
    huggingface_hub's default cache folder (the docs show it as ``~/.cache/huggingface/hub``); a line
    that is one ``compscope`` or ``python script.py`` command and nothing bash would read (:data:`SHELL`)
    is that script run by a forked Python, as bash would run it."""
    line = command.replace(".venv/bin/compscope", "compscope").replace("python bench/", f"python {ROOT}/bench/")
    env = offline_env(drop=("HF_HOME", "HF_HUB_CACHE", "XDG_CACHE_HOME"), COLUMNS="200",
                      PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    words = shlex.split(line)
    if not SHELL.search(line):  # one command, nothing for bash to do
        if words[0] == "compscope":
            return forked.run([str(Path(sys.executable).parent / "compscope"), *words[1:]], cwd=cwd, env=env, timeout=timeout)
        if words[0] == "python" and len(words) > 1 and words[1].endswith(".py"):
            return forked.run(words[1:], cwd=cwd, env=env, timeout=timeout)
    return subprocess.run(["bash", "-o", "pipefail", "-c", line], capture_output=True, text=True, cwd=cwd,
                          env=env, timeout=timeout)


#: what makes a shown line more than one command and its words (pipes, redirections, variables, globs, ...):
#: bash runs those; the others are run as Python scripts (``compscope``'s is the one pip wrote) by a Python
#: forked from one that has imported torch and transformers (``tests/forked.py``)
SHELL = re.compile(r"[|&;<>()$`*?\[\]{}~=\\]|^\s*\w+=")


def check_shown(doc: str, command: str, cwd: Path, timeout: int = 300) -> None:
    shown = shown_outputs(DOCS[doc].read_text()).get(command)
    assert shown is not None, f"{doc} no longer shows `{command}`; update the lists in this file"
    p = run_shown(command, cwd, timeout)
    # a refusal prints on stderr; a command whose exit status answers a question (models NAME) on stdout
    printed = (p.stdout if p.returncode == 0 or p.stdout else p.stderr).replace(str(Path.home()), "~")
    diff = differences(shown, printed)
    assert not diff, f"{doc}, `{command}` (exit {p.returncode}):\n" + "\n".join(diff[:10])


@pytest.mark.parametrize(("doc", "command"), CHECKED, ids=[c for _, c in CHECKED])
def test_the_docs_show_what_the_command_prints(doc, command, tmp_path):
    check_shown(doc, command, tmp_path)


@pytest.fixture(scope="module")
def slow_folder(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("slow-docs")
    (folder / "docs").mkdir()  # track's --plot docs/...
    return folder


@pytest.mark.skipif(os.environ.get("COMPSCOPE_SLOW_DOCS") != "1", reason="minutes-long; COMPSCOPE_SLOW_DOCS=1 runs it")
@pytest.mark.parametrize(("doc", "command"), SLOW, ids=[c for _, c in SLOW])
def test_the_docs_show_what_the_slow_command_prints(doc, command, slow_folder):
    check_shown(doc, command, slow_folder, timeout=3600)  # bench/toy_norms.py trains three toys


def test_every_shown_command_is_listed_or_a_placeholder():
    """Each command the README and results.md show is checked here, or names a placeholder path
    (``path/to/``) or the README's train-and-sweep session (its own test)."""
    listed = {c for _, c in CHECKED + SLOW}
    for doc, path in DOCS.items():
        for command in shown_outputs(path.read_text()):
            if command in listed or "path/to/" in command or "run-a" in command:
                continue
            pytest.fail(f"{doc} shows `{command}`, which tests/test_docs.py does not run")


def test_the_readme_sweep_session_prints_what_it_shows(tmp_path):
    """The README's training-and-sweep blocks, run in order in one folder, as shown (``.venv/bin/``
    is where `make` installs compscope; here it is the running environment's)."""
    session = [pair for block in shown_blocks(DOCS["README.md"].read_text())
               if any("run-a" in cmd for cmd, _ in block) for pair in block]
    assert [c.split()[1] for c, _ in session] == ["train", "sweep", "sweep", "sweep"], session
    for command, shown in session:
        p = run_shown(command, tmp_path)
        assert p.returncode == 0, f"`{command}` exited {p.returncode}:\n{p.stderr[-2000:]}"
        diff = differences(shown, p.stdout)
        assert not diff, f"README.md, `{command}`:\n" + "\n".join(diff[:10])


#: every Markdown document of the project whose links are checked
LINKED = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), ROOT / "bench" / "RESULTS.md"]


#: a fenced code block (which holds no heading and no link)
_FENCED = re.compile(r"^```.*?^```", re.S | re.M)


def _prose(text: str) -> str:
    """``text`` without its fenced code blocks and inline code spans (which hold no links)."""
    return re.sub(r"`[^`\n]*`", "", _FENCED.sub("", text))


def heading_anchors(text: str) -> set[str]:
    """The anchors a Markdown renderer (GitHub's rule) gives the headings of ``text``: lower case,
    inline code marks and every character but letters, digits, ``_``, ``-`` and spaces dropped,
    spaces turned to ``-``; a repeated anchor gets ``-1``, ``-2``, ..."""
    seen: dict[str, int] = {}
    anchors = set()
    for title in re.findall(r"^#{1,6}\s+(.*?)\s*#*\s*$", _FENCED.sub("", text), re.M):
        slug = re.sub(r"[^\w\- ]", "", title.replace("`", "").lower()).replace(" ", "-")
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        anchors.add(slug if n == 0 else f"{slug}-{n}")
    return anchors


def broken_links(doc: Path) -> list[str]:
    """The relative links of ``doc`` whose file does not exist or whose ``#anchor`` names no heading."""
    broken = []
    for target in re.findall(r"\[[^\]]*\]\(([^)\s]+)\)", _prose(doc.read_text())):
        if re.match(r"[a-z]+:", target):  # http:, https:, mailto:
            continue
        path, _, anchor = target.partition("#")
        file = (doc.parent / path).resolve() if path else doc
        if not file.exists():
            broken.append(f"{target}: no file {path}")
        elif anchor and (file.suffix != ".md" or anchor not in heading_anchors(file.read_text())):
            broken.append(f"{target}: no heading with the anchor #{anchor} in {path or doc.name}")
    return broken


def test_heading_anchors_follow_the_renderers_rule():
    text = ("# compscope\n## The verdict on data: which measure × metric agrees with the model\n"
            "### Keeping the reader's scale: `read_gain`\n```console\n# not a heading\n```\n## Tests\n## Tests\n")
    assert heading_anchors(text) == {"compscope", "the-verdict-on-data-which-measure--metric-agrees-with-the-model",
                                     "keeping-the-readers-scale-read_gain", "tests", "tests-1"}


def test_a_broken_link_is_found(tmp_path):
    (tmp_path / "other.md").write_text("# Other\n## A part\n")
    doc = tmp_path / "doc.md"
    doc.write_text("# Doc\n[ok](other.md#a-part) [self](#doc) [web](https://example.org/x#y) `[code](nowhere.md)`\n"
                   "[bad anchor](other.md#no-part) [bad file](missing.md) [bad self](#nothing)\n")
    assert [b.split(":")[0] for b in broken_links(doc)] == ["other.md#no-part", "missing.md", "#nothing"]


@pytest.mark.parametrize("doc", LINKED, ids=[str(d.relative_to(ROOT)) for d in LINKED])
def test_every_link_between_the_docs_resolves(doc):
    assert broken_links(doc) == []
