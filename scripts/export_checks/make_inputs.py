"""Make the test inputs of tests/exports/: every format of a few recipes, written by the CURRENT
exporter through its command-line entry point (``sweeper.cli.main(["export", ...])``, in this
process; ``--python PY`` runs ``PY -m sweeper export`` per file instead), so that the checks follow
the package through any restructuring of its modules.

    python scripts/export_checks/make_inputs.py OUT_DIR [--python PY]

For each case in :data:`CASES` it writes, under ``OUT_DIR/<case>/``:

- ``recipe.json``: ``sweeper export --format json`` (the recipe the other files are checked
  against);
- ``<fmt>.out`` / ``<fmt>.err`` / ``<fmt>.rc``: stdout, stderr and exit status of
  ``sweeper export --format <fmt>``, for every format, with the default framework version;
- ``<fmt>@<version>.*``: the same with ``--framework-version <version>`` for the formats whose
  framework changed its config (:data:`VERSIONED`); a non-zero ``.rc`` there means the exporter
  does not know that version (the check then fails and says so);
- ``recipe_json/<probe>.*``: ``export --recipe-json`` probes of issue #15 item 4 (an unknown key,
  an edited ``lr`` with and without its ``min_lr``, the form before ``schema_version``), an unknown
  framework version, and muP exports without ``--allow-inexpressible`` (``no_allow.<fmt>``).

It needs only the project venv (where Sweeper and its dependencies are installed); the framework
venvs read the files it writes.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

#: name -> `sweeper export` arguments. The first is the issue's example (SP, batch ramp-up, bf16,
#: ZeRO 0, 64 GPUs); the second a muP, fp32, ZeRO-1 recipe without ramp-up (8 GPUs); the third a
#: muP recipe with a batch ramp-up and z-loss (bf16, 64 GPUs). The muP cases export with
#: --allow-inexpressible (without it, formats that cannot express muP refuse: probed below).
#: The last two are SP recipes under another schedule than the cosine, as an LR law measured under
#: it gives them (here by --schedule): WSD (decay over the last 20%, to 10%) with a ramp-up
#: (Megatron counts it in samples), and linear to 10% without one; the formats that cannot run
#: them refuse (tests/exports: harness.refused_schedule).
CASES: dict[str, list[str]] = {
    "sp-rampup-bf16": [
        "--law", "deepseek", "--width", "4096", "--depth", "30", "--heads", "32",
        "--vocab", "102400", "--context", "4096", "--tokens", "2T", "--gpus", "64",
        "--gpu-memory-gb", "80", "--micro-batch", "2",
    ],
    "mup-fp32-zero1": [
        "--law", "deepseek", "--width", "2048", "--depth", "16", "--heads", "16",
        "--vocab", "50304", "--context", "2048", "--tokens", "50B", "--gpus", "8",
        "--gpu-memory-gb", "80", "--micro-batch", "4", "--parametrization", "mup",
        "--base-width", "256", "--force", "--precision", "fp32", "--zero-stage", "1",
        "--no-rampup", "--allow-inexpressible",
    ],
    "mup-rampup-zloss": [
        "--law", "deepseek", "--width", "2048", "--depth", "16", "--heads", "16",
        "--vocab", "50304", "--context", "2048", "--tokens", "100B", "--gpus", "64",
        "--gpu-memory-gb", "80", "--micro-batch", "2", "--parametrization", "mup",
        "--base-width", "256", "--force", "--rampup", "--allow-inexpressible",
    ],
    "wsd-rampup": [
        "--law", "deepseek", "--width", "2048", "--depth", "16", "--heads", "16",
        "--vocab", "50304", "--context", "2048", "--tokens", "200B", "--gpus", "64",
        "--gpu-memory-gb", "80", "--micro-batch", "2", "--rampup",
        "--schedule", "wsd", "--decay-fraction", "0.2",
    ],
    "linear": [
        "--law", "deepseek", "--width", "2048", "--depth", "16", "--heads", "16",
        "--vocab", "50304", "--context", "2048", "--tokens", "100B", "--gpus", "8",
        "--gpu-memory-gb", "80", "--micro-batch", "4", "--no-rampup", "--schedule", "linear",
    ],
}  # fmt: skip

FORMATS = ("litgpt", "hf", "deepspeed", "megatron", "torchtitan", "nanogpt", "json")

#: format -> the ``--framework-version`` values the checks ask for (docs/EXPORTS.md)
VERSIONED: dict[str, tuple[str, ...]] = {
    "megatron": ("0.16", "0.17", "0.18", "0.19"),
    "torchtitan": ("0.2", "0.3"),
}


def _run_in_process(args: list[str]) -> tuple[str, str, int]:
    """``sweeper.cli.main(["export", *args])`` in this process: stdout, stderr, exit status."""
    import contextlib
    import io

    from sweeper.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            rc = main(["export", *args])
        except SystemExit as e:  # argparse errors
            rc = e.code if isinstance(e.code, int) else 1
        except Exception as e:  # what `python -m sweeper` would print and exit 1 on
            print(f"sweeper: internal error: {type(e).__name__}: {e}", file=sys.stderr)
            rc = 1
    return out.getvalue(), err.getvalue(), int(rc or 0)


def _run(py: str | None, args: list[str], out: Path, cwd: Path) -> int:
    """One `sweeper export` run, its stdout/stderr/status written beside ``out``: in this
    process when ``py`` is None (one import of Sweeper for every run), else ``py -m sweeper``."""
    if py is None:
        stdout, stderr, rc = _run_in_process(args)
    else:
        env = dict(os.environ)
        p = subprocess.run(
            [py, "-m", "sweeper", "export", *args], capture_output=True, text=True, cwd=cwd, env=env
        )
        stdout, stderr, rc = p.stdout, p.stderr, p.returncode
    for ext, text in ((".out", stdout), (".err", stderr), (".rc", f"{rc}\n")):
        out.with_name(out.name + ext).write_text(text, encoding="utf-8")
    return rc


def make(out_dir: Path, py: str | None) -> None:
    root = Path(__file__).resolve().parents[2]
    for case, args in CASES.items():
        print(f"  {case}", flush=True)
        d = out_dir / case
        d.mkdir(parents=True, exist_ok=True)
        (d / "args.json").write_text(json.dumps(args) + "\n", encoding="utf-8")
        rc = _run(py, [*args, "--format", "json"], d / "recipe", root)
        (d / "recipe.json").write_text(
            (d / "recipe.out").read_text(encoding="utf-8"), encoding="utf-8"
        )
        if rc != 0:
            err = (d / "recipe.err").read_text(encoding="utf-8")
            raise SystemExit(f"{case}: `sweeper export --format json` failed ({rc}):\n{err}")
        for fmt in FORMATS:
            _run(py, [*args, "--format", fmt], d / fmt, root)
            for ver in VERSIONED.get(fmt, ()):
                _run(
                    py,
                    [*args, "--format", fmt, "--framework-version", ver],
                    d / f"{fmt}@{ver}",
                    root,
                )
        # issue #15 item 4: --recipe-json with an unknown key, and with an edited peak LR
        probes = d / "recipe_json"
        probes.mkdir(exist_ok=True)
        recipe = json.loads((d / "recipe.json").read_text(encoding="utf-8"))
        unknown = dict(recipe, not_a_recipe_key=1)
        (probes / "unknown_key.json").write_text(json.dumps(unknown), encoding="utf-8")
        _run(py, ["--recipe-json", str(probes / "unknown_key.json"), "--format", "megatron"],
             probes / "unknown_key", root)  # fmt: skip
        edited = json.loads(json.dumps(recipe))
        edited["lr"]["value"] = edited["lr"]["value"] * 2
        (probes / "edited_lr.json").write_text(json.dumps(edited), encoding="utf-8")
        # the same edit with the derived min_lr dropped: the min LR must follow lr × min_lr_ratio
        edited.pop("min_lr", None)
        (probes / "edited_lr_no_min.json").write_text(json.dumps(edited), encoding="utf-8")
        # (--allow-inexpressible always: the probes ask about the min LR, not what is refused)
        allow = ["--allow-inexpressible"] + [a for a in ("--force",) if a in args]
        for fmt in FORMATS:
            for probe in ("edited_lr", "edited_lr_no_min"):
                _run(py, ["--recipe-json", str(probes / f"{probe}.json"), "--format", fmt, *allow],
                     probes / f"{probe}.{fmt}", root)  # fmt: skip
        _probe_refusals(py, args, case, d, probes, recipe, root)


def _probe_refusals(
    py: str | None, args: list[str], case: str, d: Path, probes: Path, recipe: dict, root: Path
) -> None:
    """The recipe JSON written before schema_version existed; a framework version the exporter
    does not know; a muP recipe without --allow-inexpressible to formats that cannot express it."""
    old = {k: v for k, v in recipe.items()
           if k not in ("schema", "schema_version", "lr_point", "optimizer", "base_head_dim")}  # fmt: skip
    (probes / "old_form.json").write_text(json.dumps(old), encoding="utf-8")
    force = ["--force"] if "--force" in args else []
    _run(py, ["--recipe-json", str(probes / "old_form.json"), "--format", "json", *force],
         probes / "old_form", root)  # fmt: skip
    _run(py, [*args, "--format", "megatron", "--framework-version", "9.9"],
         probes / "unknown_version", root)  # fmt: skip
    plain = [a for a in args if a != "--allow-inexpressible"]
    for fmt in ("litgpt", "hf", "deepspeed", "torchtitan", "nanogpt"):
        _run(py, [*plain, "--format", fmt], probes / f"no_allow.{fmt}", root)
    _run(py, [*plain, "--format", "megatron", "--framework-version", "0.16"],
         probes / "no_allow.megatron@0.16", root)  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out_dir", type=Path)
    ap.add_argument(
        "--python",
        default=None,
        help="run `PYTHON -m sweeper export` per file instead of the exporter in this process",
    )
    a = ap.parse_args(argv)
    make(a.out_dir, a.python)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
