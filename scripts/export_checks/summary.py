"""One line per format × framework version from the JSON-lines reports of tests/exports/.

    python scripts/export_checks/summary.py RESULTS_DIR [--markdown FILE] [--update-docs DOC]

RESULTS_DIR holds ``<venv>.jsonl`` (one record per test, written by tests/exports/conftest.py)
and ``<venv>.setup-error`` (a venv that could not be installed). A row's result is "loads,
numbers agree" when every check passed ("numbers agree; limitation: ..." when the row's framework
is partly checked against a table, its test module naming why); otherwise the failing checks,
each with the first line of its reason. ``--update-docs`` replaces the table between the ``<!-- check_exports:begin -->``
and ``<!-- check_exports:end -->`` markers of DOC. Exit status 1 when a check failed.
"""

from __future__ import annotations

import argparse
import json
import re
from collections import defaultdict
from datetime import date
from pathlib import Path

ORDER = ("litgpt", "hf", "deepspeed", "megatron", "torchtitan", "nanogpt", "json")
#: venv name -> format, for venvs that could not be made
VENV_FORMAT = {"litgpt": "litgpt", "transformers": "hf", "deepspeed": "deepspeed",
               "megatron": "megatron", "torchtitan": "torchtitan"}  # fmt: skip


def _reason(msg: str) -> str:
    """The first informative line of a failure message, short."""
    lines = [ln.strip() for ln in msg.splitlines() if ln.strip()]
    for ln in lines:
        ln = re.sub(r"^(harness\.)?ExportFailed: ", "", ln)
        ln = re.sub(r"^AssertionError: ", "", ln)
        if ln.endswith("]:"):  # harness.check's "case / name [framework; loader]:" line
            continue
        ln = re.sub(r"^[a-z0-9]+(-[a-z0-9]+)+(/\w+)?: ", "", ln)  # a leading "case: "
        nd = " (limitation" in ln and "not declared" in ln
        m = re.match(r"^(\w+): the framework reads no value \(recipe .*?\)", ln)
        if m:
            return f"{m.group(1)}: not carried" + (", not declared" if nd else "")
        m = re.match(r"^(\w+): framework (.+?) != recipe (.+?)(?: \(limitation.*)?$", ln)
        if m:
            return f"{m.group(1)}: {m.group(2)} ≠ recipe {m.group(3)}" + (
                ", not declared" if nd else ""
            )
        if ln:
            return ln[:170]
    return msg[:170]


def rows(results: Path) -> list[dict]:
    recs = []
    for f in sorted(results.glob("*.jsonl")):
        recs += [
            json.loads(line) for line in f.read_text(encoding="utf-8").splitlines() if line.strip()
        ]
    by: dict[tuple, list[dict]] = defaultdict(list)
    for r in recs:
        by[(r["format"], r["framework"], r["loader"])].append(r)
    out = []
    for (fmt, fw, loader), rs in by.items():
        failed = [r for r in rs if r["outcome"] == "failed"]
        passed = [r for r in rs if r["outcome"] == "passed"]
        limitation = next((r.get("limitation") for r in rs if r.get("limitation")), "")
        if not failed and passed and limitation:
            result = f"numbers agree; limitation: {limitation}"
        elif not failed and passed:
            result = "loads, numbers agree"
        elif not failed:
            result = "skipped: " + _reason(rs[0]["message"])
        else:
            # group the failing tests by reason (the same load error fails every check of a row)
            reasons: dict[str, list[str]] = defaultdict(list)
            for r in failed:
                reasons[_reason(r["message"])].append(f"{r['test']}[{r['case']}]")
            parts = [
                f"{len(v)}× {k}" for k, v in sorted(reasons.items(), key=lambda kv: -len(kv[1]))
            ]
            result = (
                f"FAIL {len(failed)}/{len(rs)}: "
                + "; ".join(parts[:4])
                + (" …" if len(parts) > 4 else "")
            )
        out.append({"format": fmt, "framework": fw, "loader": loader, "result": result,
                    "failed": len(failed), "total": len(rs)})  # fmt: skip
    for f in sorted(results.glob("*.setup-error")):
        venv = f.stem
        fmt = next((v for k, v in VENV_FORMAT.items() if venv.startswith(k)), venv)
        err = [
            ln for ln in f.read_text(encoding="utf-8").splitlines() if "ERROR" in ln or "rror" in ln
        ]
        out.append({"format": fmt, "framework": venv, "loader": "-",
                    "result": "NOT INSTALLED: " + (err[-1][:160] if err else "see the setup log"),
                    "failed": 1, "total": 1})  # fmt: skip
    out.sort(
        key=lambda r: (ORDER.index(r["format"]) if r["format"] in ORDER else 99, r["framework"])
    )
    return out


def markdown(rs: list[dict]) -> str:
    lines = [
        f"Produced by `scripts/check_exports.sh` on {date.today().isoformat()}.",
        "",
        "| format | framework version | loader | result |",
        "| --- | --- | --- | --- |",
    ]
    for r in rs:
        res = r["result"].replace("|", "\\|")
        lines.append(f"| {r['format']} | {r['framework']} | {r['loader']} | {res} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("results", type=Path)
    ap.add_argument("--markdown", type=Path)
    ap.add_argument("--update-docs", type=Path)
    a = ap.parse_args(argv)
    rs = rows(a.results)
    w = max([len(r["format"]) for r in rs] + [6])
    wf = max([len(r["framework"]) for r in rs] + [9])
    for r in rs:
        print(f"{r['format']:<{w}}  {r['framework']:<{wf}}  {r['loader']}  ->  {r['result']}")
    md = markdown(rs)
    if a.markdown:
        a.markdown.write_text(md, encoding="utf-8")
    if a.update_docs:
        doc = a.update_docs.read_text(encoding="utf-8")
        begin, end = "<!-- check_exports:begin -->", "<!-- check_exports:end -->"
        if begin in doc and end in doc:
            head, rest = doc.split(begin, 1)
            _, tail = rest.split(end, 1)
            a.update_docs.write_text(f"{head}{begin}\n{md}{end}{tail}", encoding="utf-8")
        else:
            print(f"{a.update_docs}: no {begin} … {end} markers; table not written")
    n_fail = sum(1 for r in rs if r["failed"])
    total = sum(r["total"] for r in rs)
    failed = sum(r["failed"] for r in rs)
    print(f"export checks: {total - failed} passed, {failed} failed")
    return 1 if n_fail else 0


if __name__ == "__main__":
    raise SystemExit(main())
