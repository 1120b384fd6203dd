from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

import proxy_models.data as data_mod
from proxy_models import TokenData, load_data
from proxy_models.data import gather_batch, sample_offsets, val_offsets


def test_text_file_is_bytes_with_a_held_out_tail(tmp_path: Path) -> None:
    text = ("hello sweeper " * 500).encode()
    f = tmp_path / "corpus.txt"
    f.write_bytes(text)
    d = load_data(f, val_fraction=0.2)
    assert d.vocab_size == 256 and d.train.dtype == np.uint8
    assert len(d.val) == int(len(text) * 0.2)
    assert bytes(d.train) + bytes(d.val) == text
    assert load_data(str(f), val_fraction=0.2).fingerprint == d.fingerprint


def test_directory_of_text_files(tmp_path: Path) -> None:
    (tmp_path / "b.md").write_bytes(b"second " * 100)
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "a.txt").write_bytes(b"first " * 100)
    (tmp_path / "ignored.bin").write_bytes(b"\x00" * 10)
    d = load_data(tmp_path)
    whole = bytes(d.train) + bytes(d.val)
    assert whole == b"second " * 100 + b"\n" + b"first " * 100  # sorted: b.md < sub/a.txt
    with pytest.raises(ValueError, match="byte-level data needs vocab_size >= 256"):
        load_data(tmp_path, vocab_size=100)


def test_nanogpt_bin_dir_is_memory_mapped(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    rng.integers(0, 1000, 5000, dtype=np.uint16).tofile(tmp_path / "train.bin")
    rng.integers(0, 1000, 700, dtype=np.uint16).tofile(tmp_path / "val.bin")
    d = load_data(tmp_path, vocab_size=1000)
    assert isinstance(d.train, np.memmap) and d.train.dtype == np.uint16
    assert (len(d.train), len(d.val), d.vocab_size) == (5000, 700, 1000)
    x, y = gather_batch(d.train, np.array([0, 10]), 8)
    assert x.dtype == torch.int64 and x.shape == (2, 8)
    assert torch.equal(x[0, 1:], y[0, :-1])
    assert x[1, 0].item() == int(d.train[10])
    with pytest.raises(ValueError, match="give vocab_size"):
        load_data(tmp_path)
    with pytest.raises(ValueError, match="holds token"):
        load_data(tmp_path, vocab_size=10)
    (tmp_path / "val.bin").unlink()
    with pytest.raises(FileNotFoundError, match=r"val\.bin"):
        load_data(tmp_path, vocab_size=1000)


def test_missing_and_empty_sources(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="data not found"):
        load_data(tmp_path / "nope.txt")
    with pytest.raises(ValueError, match=r"no train.bin/val.bin and no .txt/.md files"):
        load_data(tmp_path)
    (tmp_path / "empty.txt").write_bytes(b"")
    with pytest.raises(ValueError, match="too little text"):
        load_data(tmp_path / "empty.txt")


def test_builtin_corpus_is_cached_once_and_deterministic(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, corpus: TokenData
) -> None:
    monkeypatch.setenv("SWEEPER_CACHE", str(tmp_path))
    monkeypatch.setattr(data_mod, "_builtin_cache", {})
    fresh = load_data("builtin")
    cached = list(tmp_path.glob("*.npy"))
    assert len(cached) == 1 and not list(tmp_path.glob("*.tmp"))
    assert fresh.fingerprint == corpus.fingerprint  # same selection as the shared cache
    assert 1_000_000 < len(fresh.train) + len(fresh.val) <= data_mod.BUILTIN_CORPUS_BYTES
    assert b"def " in bytes(fresh.train[:200_000])

    def must_not_read() -> np.ndarray:
        raise AssertionError("the corpus was read again instead of loaded from the cache")

    monkeypatch.setattr(data_mod, "_builtin_cache", {})
    monkeypatch.setattr(data_mod, "_read_builtin", must_not_read)
    again = load_data(None)
    assert np.array_equal(again.train, fresh.train) and again.fingerprint == fresh.fingerprint


def test_batches_follow_the_seed_and_validation_does_not() -> None:
    a = sample_offsets(10_000, 64, 16, torch.Generator().manual_seed(1))
    b = sample_offsets(10_000, 64, 16, torch.Generator().manual_seed(1))
    c = sample_offsets(10_000, 64, 16, torch.Generator().manual_seed(2))
    assert np.array_equal(a, b) and not np.array_equal(a, c)
    assert a.min() >= 0 and a.max() <= 10_000 - 64 - 1
    v = val_offsets(1000, 64, 8)
    assert v[0] == 0 and v[-1] == 1000 - 64 - 1 and np.all(np.diff(v) > 0)
    with pytest.raises(ValueError, match="too short"):
        val_offsets(50, 64, 8)


def test_two_processes_building_the_cache_at_once(tmp_path: Path) -> None:
    import os
    import subprocess
    import sys

    code = "from proxy_models import load_data; print(load_data(None).fingerprint)"
    env = {**os.environ, "SWEEPER_CACHE": str(tmp_path)}
    procs = [
        subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE, text=True)
        for _ in range(2)
    ]
    outs = [p.communicate(timeout=120)[0].strip() for p in procs]
    assert all(p.returncode == 0 for p in procs)
    assert outs[0] == outs[1] and len(outs[0]) == 16
    assert len(list(tmp_path.glob("*.npy"))) == 1 and not list(tmp_path.glob("*.tmp"))
