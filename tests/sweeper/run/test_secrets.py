"""No secret is ever printed: every verb, run against a storage URL that carries a sentinel
password (a server that answers, and one that does not), must not show the sentinel in its
stdout, stderr or log records, nor in any file it writes, nor in the logs of the Ray it starts,
when the URL comes from the environment (``$SWEEPER_STORAGE``). A command-line URL with a password
is warned about (and still never echoed). Ray's job table is checked in tests/cluster (a local
Ray's table goes with it)."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pandas as pd
import pytest
import sqlalchemy as sa

import sweeper.cli as cli_mod
from sweeper.study.study_toml import study_toml
from tests.sweeper.helpers import LAUNCHED_STUDY, launch_fake
from tests.sweeper.run.test_launch import tiny

SENTINEL = "Zq7xSentinelPw"
UNREACHABLE = f"postgresql+psycopg://bob:{SENTINEL}@127.0.0.1:9/nodb"  # discard port: closed


def _verbs(tmp: Path, csv: Path) -> list[list[str]]:
    target = ["--params", "1e9", "--tokens", "2e10"]
    return [
        ["status"], ["status", "launched"], ["status", "launched", "--json"], ["status", "nope"],
        ["-v", "status", "launched"],
        ["trials", "launched", "-o", str(tmp / "trials.csv")], ["trials", "nope"],
        ["import", str(csv), "--sweep", "imp"], ["import", str(csv), "--sweep", "imp", "--json"],
        ["fit", "launched", "--target", "lr", "--bootstrap", "40", "--json"], ["fit", "nope"],
        ["laws"], ["laws", "launched", "--json"], ["laws", "show", "1"], ["laws", "show", "999"],
        ["compare", "launched"], ["compare", "nope"],
        ["recommend", "launched", *target], ["recommend", "nope", *target],
        ["recommend", "launched", *target, "--json"],
        ["export", "launched", *target, "--format", "json", "-o", str(tmp / "recipe.json")],
        ["check", "launched", "--recipe", "llama2-7b"], ["check", "nope", "--recipe", "llama2-7b"],
        ["report", "launched", "-o", str(tmp / "report"), "--bootstrap", "40"],
        ["report", "nope", "-o", str(tmp / "report2")],
        ["validate-transfer", "nope"],
    ]  # fmt: skip


def _csv(tmp: Path) -> Path:
    path = tmp / "runs.csv"
    pd.DataFrame(
        {"n_params": [1e6, 2e6], "tokens": [1e8, 2e8], "loss": [3.1, 2.9], "lr": [1e-3, 2e-3]}
    ).to_csv(path, index=False)
    return path


def _run_all(
    verbs: list[list[str]],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
    url: str,
) -> list[tuple[list[str], int, str]]:
    """Every verb in this process, the URL from the environment; (argv, code, all it printed)."""
    monkeypatch.setenv("SWEEPER_STORAGE", url)
    caplog.set_level(logging.INFO)
    out = []
    for argv in verbs:
        code = cli_mod.main(argv)
        o, e = capsys.readouterr()
        out.append((argv, code, o + e + caplog.text))
        caplog.clear()
    return out


def _files_with(root: Path, secret: str) -> list[str]:
    hits = []
    for p in root.rglob("*"):
        if p.is_file() and not p.is_symlink():
            try:
                if secret.encode() in p.read_bytes():
                    hits.append(str(p))
            except OSError:
                continue
    return hits


def test_no_verb_shows_the_password_of_an_unreachable_storage(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    study = tmp_path / "s.toml"
    study.write_text(study_toml(tiny("sec")))
    verbs = [*_verbs(tmp_path, _csv(tmp_path)), ["launch", str(study), "--no-progress"]]
    results = _run_all(verbs, monkeypatch, capsys, caplog, UNREACHABLE)
    for argv, code, text in results:
        assert SENTINEL not in text, (argv, text)
        if argv[:2] not in (["laws", "show"],):
            assert code == 2, (argv, code, text)  # a user error, one line, never an internal one
    # the message says what failed, with the URL masked
    text = dict((" ".join(a), t) for a, _, t in results)["status launched"]
    assert "cannot open storage 'postgresql+psycopg://bob:***@127.0.0.1:9/nodb'" in text
    assert _files_with(tmp_path, SENTINEL) == []


def test_a_command_line_password_is_warned_about_and_never_echoed(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code = cli_mod.main(["status", "--storage", UNREACHABLE])
    _, err = capsys.readouterr()
    assert code == 2 and SENTINEL not in err
    assert "carries a password" in err and "PGPASSWORD" in err and "SWEEPER_STORAGE" in err
    code = cli_mod.main(["status", "--storage", UNREACHABLE.replace(f":{SENTINEL}", "")])
    _, err = capsys.readouterr()
    assert code == 2 and "carries a password" not in err


@pytest.mark.postgres
def test_no_verb_shows_the_password_of_a_reachable_storage(
    postgres_url: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    # the test server trusts local connections, so any password is accepted: the sentinel's
    url = sa.engine.make_url(postgres_url).set(password=SENTINEL).render_as_string(False)
    launch_fake(LAUNCHED_STUDY, url)
    results = _run_all(_verbs(tmp_path, _csv(tmp_path)), monkeypatch, capsys, caplog, url)
    by = {" ".join(a): (c, t) for a, c, t in results}
    for argv, code, text in results:
        assert SENTINEL not in text, (argv, text)
        assert code in (0, 2), (argv, code, text)  # never an internal error
    assert (
        by["status launched"][0] == 0
        and by["fit launched --target lr --bootstrap 40 --json"][0] == 0
    )
    assert "postgresql+psycopg://postgres:***@" in by["fit nope"][1]  # the URL, masked
    # a real launch through Ray, its session logs in a folder of this test
    ray_tmp = Path(tempfile.mkdtemp(prefix="swray", dir="/tmp"))  # short: Ray's socket paths
    try:
        study = tmp_path / "s.toml"
        study.write_text(study_toml(tiny("sec", trials=1)))
        env = {**os.environ, "SWEEPER_STORAGE": url, "RAY_TMPDIR": str(ray_tmp)}
        r = subprocess.run(
            [sys.executable, "-m", "sweeper", "-v", "launch", str(study), "--no-progress"],
            cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300,
        )  # fmt: skip
        assert r.returncode == 0, r.stderr[-3000:]
        assert SENTINEL not in r.stdout + r.stderr
        assert any(ray_tmp.rglob("*.log")) or any(ray_tmp.rglob("*.out")), "no Ray logs found"
        assert _files_with(ray_tmp, SENTINEL) == []
    finally:
        import shutil

        shutil.rmtree(ray_tmp, ignore_errors=True)
    assert _files_with(tmp_path, SENTINEL) == []
    assert (tmp_path / "report" / "index.html").is_file() and (tmp_path / "recipe.json").is_file()


def test_a_password_with_an_at_sign_or_in_a_query_is_masked_whole() -> None:
    """An unencoded '@' in a password: SQLAlchemy reads the password up to the first '@', so the
    rest showed, in the URL and in the driver's 'failed to resolve host' message. A query
    password swallowed the closing quote of the message."""
    from sweeper.study.storage import redact, safe_url

    url = "postgresql+psycopg://sweep:S3cr@tPW!x@127.0.0.9/db"
    assert safe_url(url) == "postgresql+psycopg://sweep:***@127.0.0.9/db"
    said = redact(f"cannot open storage '{url}': failed to resolve host 'tPW!x@127.0.0.9'", url)
    assert "S3cr" not in said and "tPW!x" not in said
    query = "postgresql+psycopg://sweep@h/db?password=S3cretPW!x"
    assert redact(f"cannot open '{query}': refused") == (
        "cannot open 'postgresql+psycopg://sweep@h/db?password=***': refused"
    )


@pytest.mark.parametrize(
    "url",
    [
        f"bob:{SENTINEL}@127.0.0.1:5432/db",  # (no scheme)
        f"postgresql+psycopg:/bob:{SENTINEL}@127.0.0.1/db",  # (a slash missing)
        f"postgresql+psycopg//bob:{SENTINEL}@127.0.0.1/db",  # (the colon missing)
        f"postgresql+psycopg:bob:{SENTINEL}@127.0.0.1/db",
    ],
)
def test_a_url_that_cannot_be_parsed_is_shown_without_its_password(
    url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """A storage audit: a URL SQLAlchemy could not parse was printed whole, password and all
    ("invalid storage URL 'auditor:s3cretPW@127.0.0.1:5432/...'"), by every verb and the API."""
    import sweeper
    from sweeper.errors import StorageError

    code = cli_mod.main(["status", "--storage", url])
    err = capsys.readouterr().err
    assert code == 2 and SENTINEL not in err and "bob:***@127.0.0.1" in err, err
    with pytest.raises(StorageError) as e:
        sweeper.runs("s", storage=url)
    assert SENTINEL not in str(e.value) and "bob:***@127.0.0.1" in str(e.value)


def test_masking_keeps_what_holds_no_secret_and_hides_a_sqlite_passphrase() -> None:
    """A review: an unparsable URL without a password lost its scheme and user; a SQLCipher
    URL (its backend 'sqlite') was shown whole, passphrase and all, by the rule that shows a
    SQLite path as given."""
    from sweeper.study.storage import safe_url

    assert safe_url("postgresql+psycopg://u@localhost:abc/db") == (
        "postgresql+psycopg://u@localhost:abc/db"
    )
    assert safe_url(f"sqlite+pysqlcipher://:{SENTINEL}@/x.db") == "sqlite+pysqlcipher://:***@/x.db"
    assert safe_url("sqlite:////tmp/a b/ü.db") == "sqlite:////tmp/a b/ü.db"


def test_a_study_files_password_is_warned_about_and_not_stored(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """`storage = "postgresql://user:pw@..."` in a study file was copied into the sweeps table
    (study_toml), where anyone reading the database or the dashboard saw it, without a word."""
    from dataclasses import replace

    from sweeper.study.spec import load_study
    from sweeper.study.sweep import open_sweep

    url = f"sqlite:///{tmp_path / 's.db'}"
    spec = tiny("pw")
    spec = replace(spec, sweep=replace(spec.sweep, storage=f"postgresql://bob:{SENTINEL}@h/db"))
    path = tmp_path / "pw.toml"
    path.write_text(study_toml(spec))
    with caplog.at_level(logging.WARNING):
        load_study(path)
    assert "sweep.storage carries a password" in caplog.text and SENTINEL not in caplog.text
    # the warning's own words survive the CLI's redaction ('password: anyone' read as a secret)
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        assert cli_mod.main(["validate", str(path)]) == 0
    said = [line for line in caplog.text.splitlines() if "carries a password" in line]
    assert said and "***" not in said[0] and "who reads the study file reads it" in said[0]
    # a notebook shows the repr of what a call returns (and saves it in the notebook)
    assert SENTINEL not in repr(load_study(path)) and "bob:***@h/db" in repr(load_study(path))
    open_sweep(spec, url)
    assert _files_with(tmp_path, SENTINEL) == [str(path)]  # the file itself only, not the db


def test_a_launch_summary_shows_its_storage_without_the_password() -> None:
    """``sweeper.launch(...)`` left as a notebook cell's last expression displayed the storage
    password (the generated repr of LaunchSummary), from --storage, $SWEEPER_STORAGE or the
    study file alike."""
    from sweeper.run.launch import LaunchSummary

    s = LaunchSummary("s", f"postgresql+psycopg://bob:{SENTINEL}@h/db", (), 1.0, 0, 0, 0, 1)
    assert SENTINEL not in repr(s) and "url='postgresql+psycopg://bob:***@h/db'" in repr(s)


@pytest.mark.parametrize("password", ["Sup3r S3cretPW", "Sup3r'S3cretPW", 'Sup3r"S3cretPW'])
def test_a_password_with_a_space_or_a_quote_is_masked_in_rays_job_table(
    password: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A cluster audit: a launch's command line (Ray's job entrypoint, readable by anyone with the
    cluster's token) kept a storage password holding a space or a quote, which the pattern of a
    URL's secret stopped short of; the launch's own URL is now masked by its password."""
    import ray._private.utils as ru

    from sweeper.run.launch import _ray_start_env
    from sweeper.study.storage import redact

    url = f"postgresql+psycopg://root:{password}@127.0.0.1:5432/db"
    line = f"sweeper launch t.toml --storage {url}"
    monkeypatch.setattr(ru, "get_entrypoint_name", lambda: line)
    with _ray_start_env(local=False, url=url):
        shown = ru.get_entrypoint_name()
    assert "S3cretPW" not in shown and "root:***@127.0.0.1" in shown, shown
    assert ru.get_entrypoint_name() == line  # (Ray's own, put back)
    # without the URL, text that is no URL's secret is kept (a review: a wider pattern had
    # masked "ray://head:10001; try ssh me@head")
    for text in ("could not join ray://head:10001; try ssh me@head",
                 "see https://host:8265/jobs and me@x"):  # fmt: skip
        assert redact(text) == text
