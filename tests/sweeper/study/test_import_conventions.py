"""Importing runs whose numbers are not Sweeper's own: declared conventions, and the units and
counts an import can see are wrong (an audit's W&B-style files imported in silence)."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from sweeper.errors import ImportDataError
from sweeper.study.importer import import_runs, read_runs_file
from sweeper.study.runs import normalize_runs
from tests.sweeper.helpers import write_csv

REPO = Path(__file__).resolve().parents[3]


def ladder(vocab: int = 0, ffn: list[float] | None = None) -> pd.DataFrame:
    """Four shapes at three LRs; N counts the blocks (12·L·d², or with an FFN of its own), plus
    ``vocab``·d untied embeddings."""
    rows = []
    for i, (w, d) in enumerate([(64, 2), (128, 4), (256, 8), (512, 16)]):
        blocks = 12 * d * w * w if ffn is None else d * (4 * w * w + 3 * w * ffn[i] * w)
        for lr in (1e-3, 2e-3, 4e-3):
            n = blocks + vocab * w
            rows.append(
                {"width": w, "depth": d, "n_params": n, "tokens": 20 * n, "lr": lr, "loss": 3.0}
            )
    return pd.DataFrame(rows)


def notes_of(tmp_path: Path, df: pd.DataFrame, caplog: pytest.LogCaptureFixture, **kw) -> str:
    tmp_path.mkdir(exist_ok=True)
    path = write_csv(df, tmp_path / "runs.csv")
    with caplog.at_level(logging.WARNING):
        import_runs(path, sweep="s", url=f"sqlite:///{tmp_path / 'n.db'}", **kw)
    return caplog.text


def test_an_n_that_counts_the_embeddings_is_said(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Total counts steepen the N exponent (the audit's -0.51 for a true -0.30) with no word."""
    text = notes_of(tmp_path, ladder(vocab=50_000), caplog)
    assert "seems to count the embeddings" in text and "n_params=total" in text


def test_a_non_embedding_n_is_not_taken_for_a_total(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Neither the blocks alone, nor an FFN that varies with the shape (Step Law's N), nor a
    declared total count is said to count the embeddings."""
    assert "embeddings" not in notes_of(tmp_path, ladder(), caplog)
    caplog.clear()
    varied = ladder(ffn=[4.0, 3.2, 2.6, 2.0])
    assert "embeddings" not in notes_of(tmp_path / "b", varied, caplog)
    caplog.clear()
    declared = notes_of(tmp_path / "c", ladder(50_000), caplog, conventions=["n_params=total"])
    assert "embeddings" not in declared


def test_tokens_in_billions_are_refused_or_said(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    df = ladder()
    df["tokens"] = df["tokens"] / 1e9
    assert "tokens per parameter" in notes_of(tmp_path, df, caplog)
    df["batch_tokens"] = 2048 * 64.0  # now every run is less than one step
    with pytest.raises(ImportDataError, match="less than one step"):
        read_runs_file(write_csv(df, tmp_path / "b.csv"))


def test_a_logger_jitter_in_tokens_does_not_split_a_cell() -> None:
    """Cells were (N, D) rounded to 3 digits: 8.495e8 and 8.505e8 made two cells of one."""
    df = pd.DataFrame(
        {"n_params": [8.49e7] * 4, "tokens": [8.4951e8, 8.4952e8, 8.5049e8, 8.5e8], "loss": 3.0}
    )
    assert normalize_runs(df)["cell"].nunique() == 1
    df["tokens"] = [8.5e8, 8.5e8, 1.7e9, 1.7e9]
    cells = normalize_runs(df)["cell"].tolist()
    assert cells == ["N8.49e07-D8.5e08"] * 2 + ["N8.49e07-D1.7e09"] * 2


def test_declared_conventions_are_stored_and_recorded_by_the_laws(tmp_path: Path) -> None:
    from sweeper import api

    url = f"sqlite:///{tmp_path / 'c.db'}"
    rng = np.random.default_rng(0)
    rows = []
    for w in (64, 96, 128, 192, 256):
        n = 12 * 2 * w * w
        best = np.log2(0.5 * n**-0.3)
        for lr in 2.0 ** (best + np.arange(-3, 3.5, 0.5)):
            loss = 3 + 0.02 * (np.log2(lr) - best) ** 2 + rng.normal(0, 1e-3)
            rows.append({"n_params": n, "tokens": 1e8, "lr": lr, "loss": loss})
    path = write_csv(pd.DataFrame(rows), tmp_path / "runs.csv")
    declared = {
        "parametrization": "mup",
        "base_width": 64,
        "tokens": "tokenizer:llama3",
        "schedule": "wsd",
        "decay_fraction": 0.2,
        "optimizer": "adamw",
    }
    sw = api.import_runs(path, sweep="ours", storage=url, conventions=declared)
    assert sw.meta["conventions"] == declared
    (law,) = api.fit("ours", storage=url, target="lr", n_boot=0)
    c = law.conventions
    assert (c.parametrization, c.base_width, c.tokens) == ("mup", 64, "tokenizer:llama3")
    assert (c.schedule, c.decay_fraction, c.optimizer) == ("wsd", 0.2, "adamw")
    assert "declared: optimizer adamw, schedule wsd" in c.lr
    assert c.n_params_source == "as imported"


@pytest.mark.parametrize(
    ("items", "message"),
    [
        (["color=blue"], "unknown; known: n_params"),
        (["tokens=words"], "tokens=words: must be 'tokens'"),
        (["base_width=64"], "declare parametrization=mup"),
        (["warmup=-1"], "must be a number >= 0"),
        (["schedule=cosine", "schedule=wsd"], "given twice"),
        (["decay_fraction=0.2"], "declare schedule=wsd"),
        (["parametrization"], "takes KEY=VALUE"),
    ],
)
def test_a_bad_declaration_is_refused(tmp_path: Path, items: list[str], message: str) -> None:
    path = write_csv(ladder(), tmp_path / "runs.csv")
    with pytest.raises(ImportDataError, match=message):
        import_runs(path, sweep="s", url=f"sqlite:///{tmp_path / 'r.db'}", conventions=items)


def test_a_declaration_the_file_contradicts_or_a_study_says_is_refused(tmp_path: Path) -> None:
    df = ladder()
    df["parametrization"] = "sp"
    path = write_csv(df, tmp_path / "runs.csv")
    url = f"sqlite:///{tmp_path / 'r.db'}"
    with pytest.raises(ImportDataError, match="column names sp"):
        import_runs(path, sweep="s", url=url, conventions=["parametrization=mup"])
    study = REPO / "studies" / "smoke.toml"
    with pytest.raises(ImportDataError, match="with --study"):
        import_runs(path, sweep="s", url=url, conventions=["schedule=wsd"], study=study)


def test_runs_imported_with_a_study_have_its_n(tmp_path: Path) -> None:
    """--study made the laws say N was 'counted' by the study while the runs' own N (an
    audit's total counts, 9x the study's) were fitted."""
    runs = pd.read_csv(REPO / "docs" / "data" / "quickstart.csv")
    runs["n_params"] = runs["n_params_total"]
    path = write_csv(runs, tmp_path / "q.csv")
    with pytest.raises(ImportDataError, match="differ from the N its study counts"):
        import_runs(
            path,
            sweep="q",
            url=f"sqlite:///{tmp_path / 'q.db'}",
            study=REPO / "studies" / "quickstart.toml",
        )


def test_mixed_parametrizations_are_said(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    df = ladder()
    df["parametrization"] = ["sp", "mup"] * 6
    assert "column names mup, sp" in notes_of(tmp_path, df, caplog)


def test_a_batch_in_sequences_without_a_length_is_not_pooled(tmp_path: Path) -> None:
    """Without a sequence length the batch in tokens is unknown, and every fit pooled the batch
    sizes of a cell as one (an audit's LR interval widened 2.5x); the fit now says so."""
    from sweeper import api
    from sweeper.errors import FitError

    df = ladder()
    df = pd.concat([df.assign(batch_size=32), df.assign(batch_size=128)], ignore_index=True)
    path = write_csv(df, tmp_path / "runs.csv")
    url = f"sqlite:///{tmp_path / 'b.db'}"
    api.import_runs(path, sweep="seqs", storage=url)
    with pytest.raises(FitError, match="--seq-len"):
        api.fit("seqs", storage=url, n_boot=0)


def test_tracker_states_and_an_empty_loss(tmp_path: Path) -> None:
    """Weights & Biases writes finished/crashed/killed; an empty loss says how to mark it."""
    df = ladder()
    df["state"] = ["finished", "crashed", "killed", "finished"] * 3
    df.loc[df["state"] != "finished", "loss"] = np.nan
    runs = read_runs_file(write_csv(df, tmp_path / "w.csv"))
    assert runs["state"].value_counts().to_dict() == {"COMPLETE": 6, "FAIL": 6}
    df["state"] = "finished"
    with pytest.raises(ImportDataError, match="mark one in a diverged column"):
        read_runs_file(write_csv(df, tmp_path / "e.csv"))


def test_mup_runs_without_a_base_width_are_told_to_declare_it(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    df = ladder()
    df["parametrization"] = "mup"
    assert "--convention base_width=W" in notes_of(tmp_path, df, caplog)
    caplog.clear()
    said = notes_of(tmp_path / "b", df, caplog, conventions=["base_width=64"])
    assert "base width" not in said


def test_a_study_imported_with_its_runs_is_not_told_to_declare_a_base_width(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The study says its base width (a review: every muP ladder imported with --study was told
    to declare one, and the advice was then refused)."""
    with caplog.at_level(logging.WARNING):
        import_runs(
            REPO / "docs" / "data" / "width_mup.csv",
            sweep="wm",
            url=f"sqlite:///{tmp_path / 'm.db'}",
            study=REPO / "studies" / "width_mup.toml",
        )
    assert "base width" not in caplog.text


def test_the_loss_law_needs_no_batch_unit(tmp_path: Path) -> None:
    from sweeper import api

    base = ladder()
    df = pd.concat([base.assign(tokens=base["tokens"] * k) for k in (1, 2)])
    df = pd.concat([df.assign(batch_size=32), df.assign(batch_size=128)], ignore_index=True)
    df["loss"] = 2.0 + 50 / df["n_params"] ** 0.3 + 300 / df["tokens"] ** 0.3
    url = f"sqlite:///{tmp_path / 'l.db'}"
    api.import_runs(write_csv(df, tmp_path / "runs.csv"), sweep="seqs", storage=url)
    (law,) = api.fit("seqs", storage=url, target="loss", n_boot=0, store=False)
    assert law.target == "loss"


def test_a_batch_in_sequences_is_refused_where_only_some_rows_have_a_length(
    tmp_path: Path,
) -> None:
    from sweeper import api
    from sweeper.errors import FitError

    df = ladder()
    df = pd.concat([df.assign(batch_size=32), df.assign(batch_size=128)], ignore_index=True)
    df["seq_len"] = np.where(df.index < 3, 2048.0, np.nan)  # a length in a few rows only
    url = f"sqlite:///{tmp_path / 'p.db'}"
    api.import_runs(write_csv(df, tmp_path / "runs.csv"), sweep="part", storage=url)
    with pytest.raises(FitError, match="--seq-len"):
        api.fit("part", storage=url, n_boot=0)
