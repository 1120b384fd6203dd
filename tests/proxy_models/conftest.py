"""Shared fixtures for the proxy_models tests: the built-in corpus, loaded once, and one torch
thread per test (the test machines are small and shared; oversubscribed threads crawl)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import torch

from proxy_models import TokenData, load_data


@pytest.fixture(scope="session")
def corpus() -> TokenData:
    return load_data(None)


@pytest.fixture(autouse=True)
def _one_thread(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.delenv("SWEEPER_THREADS", raising=False)
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
