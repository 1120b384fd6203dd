"""Arguments of the Python API whose type had been taken in silence or refused wrongly (a Python
API audit): a flag given as a string, numpy's numbers, a Path for a storage URL; and the API's
``__all__``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

import sweeper
import sweeper.api as api
from sweeper.errors import FitError, StorageError, StudyError, TargetError
from sweeper.recipe.target import Target

REPO = Path(__file__).resolve().parents[2]
STUDY = REPO / "studies/quickstart.toml"


class _Reached(Exception):
    """Raised by the stand-in for the launch itself: the arguments got past the checks."""


@pytest.fixture
def no_launch(monkeypatch: pytest.MonkeyPatch) -> None:
    """The launch replaced by a stand-in that raises :class:`_Reached` (no Ray, no training)."""
    import sweeper.run.launch as launch_module

    def reached(*args: Any, **kwargs: Any) -> None:
        raise _Reached

    monkeypatch.setattr(launch_module, "launch_study", reached)


@pytest.mark.parametrize(
    ("flag", "value", "said"),
    [
        ("force_new", "no", "force_new (--force-new) must be a bool (True or False), got 'no'"),
        ("takeover", 1, "takeover (--takeover) must be a bool (True or False), got 1"),
        ("code_changed", "False", "code_changed (--code-changed) must be a bool"),
        ("progress", None, "progress must be a bool (True or False), got None"),
        ("verbose", "x", "verbose (-v) must be an integer >= 0, got 'x'"),
        ("verbose", -1, "verbose (-v) must be an integer >= 0, got -1"),
        ("address", 5, "address (--address) must be a string or None, got 5"),
    ],
)
def test_launch_refuses_a_flag_of_another_type(
    no_launch: None, tmp_path: Path, flag: str, value: object, said: str
) -> None:
    """force_new="no" had counted as True, and deleted the sweep's trials: every flag of launch
    is refused unless it is a bool (verbose: a count), before anything is launched."""
    url = f"sqlite:///{tmp_path / 'l.db'}"
    with pytest.raises(StudyError, match="^" + said.replace("(", r"\(").replace(")", r"\)")):
        sweeper.launch(STUDY, storage=url, **{flag: value})


def test_launch_takes_the_flags_as_documented(no_launch: None, tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'l.db'}"
    with pytest.raises(_Reached):
        sweeper.launch(STUDY, storage=url, force_new=True, takeover=False, code_changed=False,
                       progress=False, verbose=np.int64(2), address=None)  # fmt: skip


def test_a_target_takes_numpy_numbers_as_python_ones() -> None:
    """np.int64(2048) had been refused ("must be a positive integer"), and np.float32 kept, which
    no JSON or YAML export of the recipe could write."""
    t = Target(width=np.int64(2048), depth=np.int32(20), tokens=np.float32(2e10),
               heads=np.uint16(16), n_params=np.float64(1e9))  # fmt: skip
    assert (t.width, t.depth, t.heads) == (2048, 20, 16)
    assert (type(t.width), type(t.depth), type(t.heads)) == (int, int, int)
    assert type(t.tokens) is float and t.tokens == pytest.approx(2e10)
    assert type(t.n_params) is float and t.n_params == 1e9
    per = Target(n_params=np.int64(10**9), tokens_per_param=np.float16(20))
    assert type(per.n_params) is int and type(per.tokens_per_param) is float
    assert Target(n_params=1e9, tokens=2e10) == Target(n_params=np.float32(1e9), tokens=2e10)
    # what is wrong stays refused
    for bad in (np.int64(0), True, 2048.0, "2048"):
        with pytest.raises(TargetError, match="width must be a positive integer"):
            Target(width=bad, depth=20, tokens=2e10)  # type: ignore[arg-type]
    with pytest.raises(TargetError, match="tokens must be positive"):
        Target(n_params=1e9, tokens=np.float64(-1.0))


def test_a_recipe_from_numpy_numbers_exports() -> None:
    """An audit: at={"n_params": np.float32(1e9), ...} then export(r, "json") raised a bare
    TypeError; global_batch=np.int64(256) and hardware={"gpus": np.int64(8)} likewise (the
    latter had been refused)."""
    r = sweeper.recommend(
        "steplaw",
        at={"n_params": np.float32(1e9), "tokens": np.float32(2e10)},
        hardware={"gpus": np.int64(8), "gpu_memory_gb": np.float64(80.0)},
        global_batch=np.int64(256),
        warmup_steps=np.int64(500),
    )
    assert r.global_batch_sequences == 256 and type(r.global_batch_sequences) is int
    json.dumps(r.to_dict())
    assert json.loads(sweeper.export(r, "json").text)["global_batch_sequences"] == 256
    litgpt = yaml.safe_load(sweeper.export(r, "litgpt").text)
    assert litgpt["train"]["global_batch_size"] == 256


def test_sweep_load_refuses_a_path_for_the_storage(tmp_path: Path) -> None:
    """Sweep.load("smoke", Path(...)) had raised a bare AttributeError."""
    db = tmp_path / "s.db"
    with pytest.raises(StorageError, match=r"^storage_url must be a SQLAlchemy URL .*sqlite:///"):
        sweeper.Sweep.load("smoke", db)  # type: ignore[arg-type]
    with pytest.raises(StorageError, match=r"^name must be a sweep's name \(a string\), got 5"):
        sweeper.Sweep.load(5, f"sqlite:///{db}")  # type: ignore[arg-type]
    with pytest.raises(StorageError, match="no database at"):  # a string: looked up as before
        sweeper.Sweep.load("smoke", f"sqlite:///{db}")


def test_the_api_all_lists_every_function_sweeper_exports() -> None:
    """sweeper.__all__ had published_laws, sweeper.api.__all__ did not."""
    assert "published_laws" in api.__all__
    functions = {n for n in sweeper.__all__ if callable(getattr(sweeper, n))
                 and getattr(getattr(sweeper, n), "__module__", "") == "sweeper.api"}  # fmt: skip
    assert functions <= set(api.__all__), sorted(functions - set(api.__all__))


def test_diff_refuses_n_boot_zero_before_reading_the_storage(tmp_path: Path) -> None:
    """sweeper.diff(sw, sw, n_boot=0) had fitted both sweeps, then raised that a law had too few
    resamples (1) for intervals."""
    url = f"sqlite:///{tmp_path / 'none.db'}"
    with pytest.raises(FitError, match=r"^diff: n_boot \(--bootstrap\) must be at least 80"):
        sweeper.diff("a", "b", storage=url, n_boot=0)
