"""Token data for the proxies: the built-in corpus, user text files, nanoGPT ``.bin`` files.

- ``load_data(None)`` / ``load_data("builtin")``: byte-level (vocab 256) text that exists on every
  machine with Python and needs no download: the source of the Python standard library (sorted
  paths, test directories and generated tables skipped, about 4 MiB). It is read once per Python
  version and cached as a uint8 ``.npy`` under ``$SWEEPER_CACHE`` or ``~/.cache/sweeper`` (written
  to a temporary file and renamed, so processes racing to build it are safe). Different Python
  versions give different corpora: compare ``TokenData.fingerprint`` before comparing losses.
- A text file, or a directory of ``.txt``/``.md`` files (sorted, recursive): its bytes, vocab 256.
- A directory holding nanoGPT's ``train.bin`` and ``val.bin`` (uint16 tokens): memory-mapped;
  ``vocab_size`` is required.

Text sources hold out their last ``val_fraction`` of tokens for validation. Training batches are
windows at offsets drawn from a seeded ``torch.Generator``; validation uses fixed, evenly spaced
windows of the held-out split, the same for every run with the same data and context.
"""

from __future__ import annotations

import hashlib
import logging
import os
import sys
import sysconfig
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

__all__ = [
    "BUILTIN_CORPUS_BYTES",
    "TokenData",
    "builtin_corpus",
    "gather_batch",
    "load_data",
    "sample_offsets",
    "val_offsets",
]

logger = logging.getLogger(__name__)

#: size cap of the built-in corpus in bytes (whole files are taken until the next would exceed it)
BUILTIN_CORPUS_BYTES = 4 * 1024 * 1024
#: bump when the selection rule changes, so stale caches are not reused
_BUILTIN_VERSION = 1
#: stdlib directories left out: tests, third-party packages, code-page tables, generated text
_SKIP_DIRS = frozenset(
    {
        "__pycache__",
        "test",
        "tests",
        "idle_test",
        "site-packages",
        "dist-packages",
        "encodings",
        "pydoc_data",
        "lib2to3",
        "turtledemo",
    }
)
_builtin_cache: dict[str, np.ndarray] = {}


@dataclass(frozen=True, eq=False)
class TokenData:
    """Train and validation token arrays (uint8 or uint16, possibly memory-mapped)."""

    train: np.ndarray
    val: np.ndarray
    vocab_size: int  # every token id is < vocab_size
    name: str  # where the tokens came from, for logs and provenance
    fingerprint: str  # 16 hex digits identifying the content (same data ⇒ same fingerprint)

    def __repr__(self) -> str:
        return (
            f"TokenData(name={self.name!r}, train={len(self.train)}, val={len(self.val)}, "
            f"vocab_size={self.vocab_size}, fingerprint={self.fingerprint!r})"
        )


# ---- loading ----------------------------------------------------------------------------------
def load_data(
    source: str | os.PathLike[str] | None = None,
    *,
    vocab_size: int | None = None,
    val_fraction: float = 0.1,
) -> TokenData:
    """Load tokens from ``source`` (see the module docstring for the accepted sources).

    Raises ``FileNotFoundError`` for a missing path or a ``train.bin`` without ``val.bin``, and
    ``ValueError`` for unusable input (empty, a vocab too small for bytes, tokens >= vocab_size).
    """
    if not 0.0 < val_fraction < 1.0:
        raise ValueError(f"`val_fraction` must be in (0, 1), but got {val_fraction=}")
    if source is None or str(source) == "builtin":
        tokens = builtin_corpus()
        return _split_bytes(tokens, vocab_size, val_fraction, f"builtin:{_builtin_key()}")
    path = Path(source).expanduser()
    if not path.exists():
        raise FileNotFoundError(f"data not found: {path}")
    if path.is_dir() and (path / "train.bin").exists():
        return _load_bin_dir(path, vocab_size)
    if path.is_dir():
        files = sorted(
            p for p in path.rglob("*") if p.is_file() and p.suffix.lower() in (".txt", ".md")
        )
        if not files:
            raise ValueError(f"no train.bin/val.bin and no .txt/.md files in {path}")
        raw = b"\n".join(p.read_bytes() for p in files)
    else:
        raw = path.read_bytes()
    tokens = np.frombuffer(raw, dtype=np.uint8)
    return _split_bytes(tokens, vocab_size, val_fraction, str(path))


def _split_bytes(
    tokens: np.ndarray, vocab_size: int | None, val_fraction: float, name: str
) -> TokenData:
    if vocab_size is not None and vocab_size < 256:
        raise ValueError(f"byte-level data needs vocab_size >= 256, but got {vocab_size=}")
    if len(tokens) < 2:
        raise ValueError(f"{name} holds {len(tokens)} bytes: too little text to train on")
    n_val = max(1, int(len(tokens) * val_fraction))
    return TokenData(
        train=tokens[:-n_val],
        val=tokens[-n_val:],
        vocab_size=vocab_size or 256,
        name=name,
        fingerprint=_fingerprint(tokens, extra=f"val={n_val}"),
    )


def _load_bin_dir(path: Path, vocab_size: int | None) -> TokenData:
    if vocab_size is None:
        raise ValueError(f"{path} holds uint16 train.bin/val.bin: give vocab_size")
    if not 0 < vocab_size <= 65536:
        raise ValueError(f"uint16 tokens need 0 < vocab_size <= 65536, but got {vocab_size=}")
    if not (path / "val.bin").exists():
        raise FileNotFoundError(f"data not found: {path / 'val.bin'} (next to train.bin)")
    arrays = []
    for split in ("train", "val"):
        f = path / f"{split}.bin"
        if f.stat().st_size < 4 or f.stat().st_size % 2:
            raise ValueError(f"{f} is not a uint16 token file (size {f.stat().st_size} bytes)")
        arr = np.memmap(f, dtype=np.uint16, mode="r")
        # a bounded check: scanning a multi-GB file here would cost more than a trial
        head = int(arr[: 1 << 20].max())
        if head >= vocab_size:
            raise ValueError(f"{f} holds token {head} >= vocab_size={vocab_size}")
        arrays.append(arr)
    train, val = arrays
    return TokenData(
        train=train,
        val=val,
        vocab_size=vocab_size,
        name=str(path),
        fingerprint=_fingerprint(train, extra=_fingerprint(val)),
    )


def _fingerprint(tokens: np.ndarray, *, extra: str = "") -> str:
    """Hash of the content; for arrays over 8 MiB only the size and the first and last 4 MiB."""
    h = hashlib.sha256(f"{tokens.dtype.str}:{len(tokens)}:{extra}".encode())
    limit = 4 << 20
    if tokens.nbytes <= 2 * limit:
        h.update(np.ascontiguousarray(tokens).tobytes())
    else:
        per = limit // tokens.itemsize
        h.update(np.ascontiguousarray(tokens[:per]).tobytes())
        h.update(np.ascontiguousarray(tokens[-per:]).tobytes())
    return h.hexdigest()[:16]


# ---- the built-in corpus ----------------------------------------------------------------------
def cache_dir() -> Path:
    """``$SWEEPER_CACHE`` if set, else ``~/.cache/sweeper``."""
    env = os.environ.get("SWEEPER_CACHE")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "sweeper"


def _builtin_key() -> str:
    v = sys.version_info
    return f"stdlib-py{v.major}.{v.minor}.{v.micro}-v{_BUILTIN_VERSION}"


def _stdlib_files() -> list[Path]:
    """The selected stdlib ``.py`` files: sorted relative paths, skipped dirs and test files out."""
    root = Path(sysconfig.get_paths()["stdlib"])
    selected: list[Path] = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in _SKIP_DIRS)
        selected.extend(
            Path(dirpath, f) for f in filenames if f.endswith(".py") and not f.startswith("test")
        )
    return sorted(selected, key=lambda p: p.relative_to(root).as_posix())


def _read_builtin() -> np.ndarray:
    parts: list[bytes] = []
    total = 0
    for f in _stdlib_files():
        raw = f.read_bytes()
        if total + len(raw) + 1 > BUILTIN_CORPUS_BYTES:
            break
        parts.append(raw + b"\n")
        total += len(raw) + 1
    if total < 100_000:
        raise ValueError(f"the standard library at {sysconfig.get_paths()['stdlib']} is missing")
    return np.frombuffer(b"".join(parts), dtype=np.uint8)


def builtin_corpus() -> np.ndarray:
    """The built-in corpus as uint8 bytes: from the in-process cache, the ``.npy`` cache, or read
    from the standard library (then cached atomically)."""
    key = _builtin_key()
    if key in _builtin_cache:
        return _builtin_cache[key]
    path = cache_dir() / f"{key}.npy"
    tokens: np.ndarray | None = None
    if path.exists():
        try:
            tokens = np.load(path)
        except (OSError, ValueError) as e:  # a truncated or foreign file: rebuild it
            logger.warning("ignoring unreadable corpus cache %s: %s", path, e)
    if tokens is None:
        tokens = _read_builtin()
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{key}.", suffix=".tmp")
            try:
                with os.fdopen(fd, "wb") as fh:
                    np.save(fh, tokens)
                os.replace(tmp, path)  # atomic: a racing reader sees the old file or the whole new
            except BaseException:
                Path(tmp).unlink(missing_ok=True)
                raise
        except OSError as e:  # a read-only home still trains, it just rereads the files
            logger.warning("could not cache the built-in corpus at %s: %s", path, e)
    tokens.setflags(write=False)
    _builtin_cache[key] = tokens
    return tokens


# ---- batches ----------------------------------------------------------------------------------
def sample_offsets(
    n_tokens: int, context: int, count: int, generator: torch.Generator
) -> np.ndarray:
    """``count`` random window starts in [0, n_tokens - context - 1] (int64), from ``generator``."""
    high = n_tokens - context
    if high < 1:
        raise ValueError(f"{n_tokens} tokens are too few for windows of context={context} + 1")
    return torch.randint(0, high, (count,), generator=generator).numpy()


def val_offsets(n_tokens: int, context: int, count: int) -> np.ndarray:
    """``count`` evenly spaced window starts covering the held-out split (no randomness)."""
    high = n_tokens - context - 1
    if high < 0:
        raise ValueError(
            f"the validation split ({n_tokens} tokens) is too short for context={context} + 1"
        )
    return np.linspace(0, high, count).astype(np.int64)


def gather_batch(
    tokens: np.ndarray, offsets: np.ndarray, context: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """Inputs and next-token targets, both (B, context) int64, for windows at ``offsets``."""
    idx = offsets[:, None] + np.arange(context + 1)
    batch = torch.from_numpy(tokens[idx].astype(np.int64))  # (B, T + 1)
    return batch[:, :-1], batch[:, 1:]
