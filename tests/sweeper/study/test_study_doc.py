"""docs/STUDY.md, the study-file reference, held to the code that reads study files.

- Every TOML block of the page is a whole study: a block whose first line is ``# complete
  study`` passes ``sweeper validate`` (the CLI's own function, run in-process); a block whose
  first line is ``# refused study`` is refused with exactly the problems the ``text`` block
  after it shows; the cells a ``text`` block shows after a complete study are validate's.
- Every table and key the reader accepts (``sweeper.study.study_reader``: its sections and
  their keys, and the keys of ``[[ladder.cells]]`` and of a searched parameter's table, read
  from the reader's own "expected one of" message) has its row in the page's reference table
  of that section, and no table documents a key the reader refuses. A plain default in a row
  is the dataclass's default.
- Every allowed value of a choice key (samplers, pruners, schedules, optimizers, norms,
  parametrizations) is named in its section, and every line fits in 100 columns.
"""

from __future__ import annotations

import json
import re
from dataclasses import MISSING, fields
from pathlib import Path
from typing import Any

import pytest

import sweeper.cli as cli_mod
from proxy_models.config import NORMS
from proxy_models.hparams import OPTIMIZERS, SCHEDULES
from proxy_models.rules import PARAMETRIZATIONS
from sweeper.errors import StudyError
from sweeper.study.spec import (
    PRUNERS,
    SAMPLERS,
    ModelSpec,
    PrunerSpec,
    ResourcesSpec,
    SamplerSpec,
    SweepSection,
    TrainSpec,
    parse_study_toml,
)
from sweeper.study.study_reader import SECTION_KEYS, SECTIONS

REPO = Path(__file__).resolve().parents[3]
DOC = REPO / "docs" / "STUDY.md"
COMPLETE, REFUSED = "# complete study", "# refused study"
#: the heading of a reference table for each nested table (the sections' own: "[sweep]", ...)
CELLS, PARAM = "[[ladder.cells]]", "search.<parameter>"
#: the dataclass whose defaults each section's table states
DEFAULTS: dict[str, type] = {
    "sweep": SweepSection,
    "model": ModelSpec,
    "train": TrainSpec,
    "sampler": SamplerSpec,
    "pruner": PrunerSpec,
    "resources": ResourcesSpec,
}


def _text() -> str:
    return DOC.read_text(encoding="utf-8")


def _blocks(text: str) -> list[tuple[str, str, int]]:
    """Every fenced block: (language, body, index of its opening line)."""
    out: list[tuple[str, str, int]] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        m = re.match(r"^```(\w*)\s*$", lines[i])
        if m is None:
            i += 1
            continue
        end = next(j for j in range(i + 1, len(lines)) if lines[j].startswith("```"))
        out.append((m.group(1), "\n".join(lines[i + 1 : end]) + "\n", i))
        i = end + 1
    return out


def _studies(first_line: str) -> list[Any]:
    """The TOML blocks starting with ``first_line``, as pytest params (the study's name, its
    text, and the ``text`` block right after it when that shows ``sweeper validate``)."""
    out: list[Any] = []
    blocks = _blocks(_text())
    for k, (lang, body, _) in enumerate(blocks):
        if lang == "toml" and body.splitlines()[0].strip() == first_line:
            m = re.search(r'^name = "([^"]+)"', body, re.M)
            name = m.group(1) if m else f"block{len(out)}"
            after = blocks[k + 1] if k + 1 < len(blocks) else ("", "", 0)
            shown = after[1] if after[0] == "text" and "sweeper validate" in after[1] else ""
            out.append(pytest.param(name, body, shown, id=name))
    return out


def _validate(
    body: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> dict[str, Any]:
    """``sweeper validate --json`` of the study ``body``, from the repository root (where the
    page's own-code example finds ``examples/``)."""
    path = tmp_path / "study.toml"
    path.write_text(body, encoding="utf-8")
    monkeypatch.chdir(REPO)
    capsys.readouterr()
    code = cli_mod.main(["validate", "--json", str(path)])
    out = json.loads(capsys.readouterr().out)
    out["exit"] = code
    return out


def test_every_toml_block_is_a_complete_or_refused_study() -> None:
    blocks = [b for lang, b, _ in _blocks(_text()) if lang == "toml"]
    assert blocks, "no TOML block in docs/STUDY.md"
    for body in blocks:
        assert body.splitlines()[0].strip() in (COMPLETE, REFUSED), body[:200]
    assert _studies(COMPLETE), "no complete study in docs/STUDY.md"
    assert any(p.values[2] for p in _studies(COMPLETE)), "no validate output shown"


#: a cell's line in ``sweeper validate``'s table: name, heads, N, tokens
_CELL_LINE = re.compile(r"^\s+(w\d+-d\d+-t\S+)\s+(\d+)\s+([\d,]+)\s+([\d,]+)\s")


@pytest.mark.parametrize(("name", "body", "shown"), _studies(COMPLETE))
def test_complete_study_validates(
    name: str,
    body: str,
    shown: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: Any,
) -> None:
    out = _validate(body, tmp_path, monkeypatch, capsys)
    assert out["ok"] is True and out["exit"] == 0, out.get("problems")
    assert out["sweep"] == name
    assert out["warnings"] == []
    if shown:  # the cells the page prints after it are the ones validate lists
        said = [m.groups() for m in map(_CELL_LINE.match, shown.splitlines()) if m]
        cells = [
            (c["name"], str(c["heads"]), f"{c['n_params']:,}", f"{c['tokens']:,}")
            for c in out["cells"]
        ]
        assert said == cells


def test_refused_study_says_what_the_page_shows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    blocks = _blocks(_text())
    seen = 0
    for k, (lang, body, _) in enumerate(blocks):
        if lang != "toml" or body.splitlines()[0].strip() != REFUSED:
            continue
        seen += 1
        shown = next(b for lang2, b, _ in blocks[k + 1 :] if lang2 == "text")
        said = [
            line.split(": ", 2)[2].split(": ", 1)[1]
            for line in shown.splitlines()
            if line.startswith("sweeper: error: ")
        ]
        out = _validate(body, tmp_path, monkeypatch, capsys)
        assert out["ok"] is False and out["exit"] == 2
        assert said == out["problems"]
    assert seen, "no refused study in docs/STUDY.md"


def _tables(text: str) -> dict[str, list[list[str]]]:
    """The reference tables by heading (``### `[sweep]` ``: "[sweep]"): each row's cells."""
    out: dict[str, list[list[str]]] = {}
    current: str | None = None
    for line in text.splitlines():
        if line.startswith("#"):
            m = re.match(r"^#{3,4} `([^`]+)`", line)
            current = m.group(1) if m else None
            if current is not None:
                assert current not in out, f"two headings {current!r}"
                out[current] = []
        elif current is not None and line.startswith("| `"):
            out[current].append([c.strip() for c in line.strip().strip("|").split("|")])
    return out


def _section_text(text: str, heading: str) -> str:
    """The page from the heading ``### `heading` `` to the next heading."""
    start = text.index(f"### `{heading}`")
    body = text.index("\n", start)
    nxt = re.search(r"^#", text[body:], re.M)
    return text[start : body + nxt.start()] if nxt else text[start:]


def _expected_keys(toml: str, key: str) -> tuple[str, ...]:
    """The keys the reader allows where ``toml`` puts the unknown key ``key``, from its
    message (``... unknown key (expected one of: a, b)``)."""
    with pytest.raises(StudyError) as e:
        parse_study_toml(toml)
    line = next(p for p in e.value.problems if p.startswith(key + ":"))
    m = re.search(r"expected one of: ([^)]*)\)", line)
    assert m, line
    return tuple(k.strip() for k in m.group(1).split(","))


_PROBE = """\
[sweep]
name = "probe"
trials_per_cell = 1
[ladder]
[[ladder.cells]]
width = 32
depth = 2
tokens = 819200
zz_probe = 1
[search]
lr = { low = 1e-3, high = 1e-2, zz_probe = 1 }
"""


def _reader_keys() -> dict[str, tuple[str, ...]]:
    """Every table the reader accepts (by the page's heading for it) and its keys."""
    keys = {f"[{s}]": tuple(SECTION_KEYS[s]) for s in SECTIONS}
    keys[CELLS] = _expected_keys(_PROBE, "ladder.cells[0].zz_probe")
    keys[PARAM] = _expected_keys(_PROBE, "search.lr.zz_probe")
    return keys


def test_the_probe_reads_the_nested_tables() -> None:
    assert set(_reader_keys()[CELLS]) >= {"width", "depth", "tokens"}
    assert set(_reader_keys()[PARAM]) >= {"low", "high", "values"}
    assert set(SECTIONS) >= {"sweep", "ladder", "search", "sampler"}


def test_every_key_the_reader_accepts_has_its_row() -> None:
    tables = _tables(_text())
    problems = []
    for heading, keys in _reader_keys().items():
        if heading not in tables:
            problems.append(f"no reference table under a heading `{heading}`")
            continue
        rows = [re.fullmatch(r"`([A-Za-z_0-9]+)`", r[0]) for r in tables[heading]]
        documented = [m.group(1) for m in rows if m]
        missing = [k for k in keys if k not in documented]
        extra = [k for k in documented if k not in keys]
        if missing:
            problems.append(f"{heading}: no row for {missing}")
        if extra:
            problems.append(f"{heading}: rows for keys the reader refuses: {extra}")
        if len(documented) != len(set(documented)):
            problems.append(f"{heading}: a key has two rows")
    unknown = set(tables) - set(_reader_keys())
    if unknown:
        problems.append(f"reference tables of tables the reader does not read: {unknown}")
    assert not problems, "\n".join(problems)
    assert "[model.args]" in _text()


def _plain(cell: str) -> tuple[bool, Any]:
    """A default cell as a value, when it is a plain one (a number, a quoted string, a
    boolean, "none")."""
    v = cell.strip("`")
    if v == "none":
        return True, None
    if v in ("true", "false"):
        return True, v == "true"
    if re.fullmatch(r'"[^"]*"', v):
        return True, v[1:-1]
    try:
        return True, float(v)
    except ValueError:
        return False, None


def test_plain_defaults_are_the_code_defaults() -> None:
    tables = _tables(_text())
    problems = []
    checked = 0
    for section, cls in DEFAULTS.items():
        defaults = {f.name: f.default for f in fields(cls) if f.default is not MISSING}
        for row in tables[f"[{section}]"]:
            key, default = row[0].strip("`"), row[2]
            plain, value = _plain(default)
            if not plain or key not in defaults:
                continue
            checked += 1
            code = defaults[key]
            if value != code and not (value is None and code in ((), None)):
                problems.append(f"{section}.{key}: the page says {default}, the code {code!r}")
    assert not problems, "\n".join(problems)
    assert checked >= 30


@pytest.mark.parametrize(
    ("section", "values"),
    [
        ("[sampler]", SAMPLERS),
        ("[pruner]", PRUNERS),
        ("[train]", SCHEDULES),
        ("[train]", OPTIMIZERS),
        ("[model]", NORMS),
        ("[model]", PARAMETRIZATIONS),
    ],
)
def test_every_choice_is_named(section: str, values: tuple[str, ...]) -> None:
    text = _section_text(_text(), section)
    missing = [v for v in values if f"`{v}`" not in text and f'"{v}"' not in text]
    assert not missing, f"{section} does not name {missing}"


def test_lines_fit_in_100_columns() -> None:
    """Prose and examples fit in 100 columns; the tool's output, quoted as it prints it in
    ```text blocks, may not."""
    long, quoted = [], False
    for i, line in enumerate(_text().splitlines()):
        if line.startswith("```"):
            quoted = line.strip() == "```text"
        elif len(line) > 100 and not quoted:
            long.append(i + 1)
    assert not long, f"docs/STUDY.md lines over 100 columns: {long}"
