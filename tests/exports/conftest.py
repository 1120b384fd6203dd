"""Real-loader checks of the export formats (issue #15): run by scripts/check_exports.sh, each
test module inside the virtualenv of its framework.

Nothing here is collected unless ``SWEEPER_EXPORT_CHECK`` is set (check_exports.sh sets it to the
venv's name): the main suite's venv has none of the frameworks, and the inputs are made once per
run by scripts/export_checks/make_inputs.py (``SWEEPER_EXPORT_INPUTS``). Each test's outcome is
appended to ``SWEEPER_EXPORT_REPORT`` (JSON lines) for scripts/export_checks/summary.py.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

if os.environ.get("SWEEPER_EXPORT_CHECK"):
    sys.path.insert(0, str(ROOT / "scripts" / "export_checks"))
else:
    collect_ignore_glob = ["test_*.py"]


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    rep = outcome.get_result()
    path = os.environ.get("SWEEPER_EXPORT_REPORT")
    if not path or (rep.when != "call" and not (rep.when == "setup" and not rep.passed)):
        return
    rows = getattr(item.module, "ROWS", {})
    params = getattr(getattr(item, "callspec", None), "params", {})
    version = params.get("version", "")
    row = rows.get(version) or rows.get("") or {}
    msg = ""
    if rep.failed:
        msg = str(
            (getattr(rep.longrepr, "reprcrash", None) and rep.longrepr.reprcrash.message)
            or rep.longrepr
        )
    elif rep.skipped:
        msg = str(rep.longrepr[2]) if isinstance(rep.longrepr, tuple) else str(rep.longrepr)
    rec = {
        "venv": os.environ.get("SWEEPER_EXPORT_CHECK"),
        "format": getattr(item.module, "FORMAT", "?"),
        "version": version,
        "framework": row.get("framework", ""),
        "loader": row.get("loader", ""),
        "limitation": row.get("limitation", ""),
        "case": params.get("case", ""),
        "test": (getattr(item, "originalname", None) or item.name)
        + (f"[{params['check']}]" if "check" in params else ""),
        "outcome": rep.outcome,
        "message": msg[:2000],
    }
    with open(path, "a", encoding="utf-8") as f:
        f.write(json.dumps(rec) + "\n")
