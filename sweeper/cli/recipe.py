"""``sweeper recommend | export | check``: from laws to a recipe, a config file, or a verdict.

Laws come from a stored SWEEP (the latest lr, batch_tokens and loss laws fitted for it), from
``--law ID`` (stored law ids; may be repeated, e.g. an lr law and a batch law), or from a published
set ``--law deepseek|steplaw|kaplan|porian``. Numbers accept the suffixes k, M, B (or G) and T:
``--params 7B --tokens 2T``. Nothing heavy is imported here at module level.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from proxy_models.hparams import SCHEDULES
from sweeper.cli.numbers import add_bytes_per_token, count, number, positive
from sweeper.cli.output import console as _console
from sweeper.cli.output import literal, plain_text
from sweeper.errors import TargetError

if TYPE_CHECKING:
    from sweeper.recipe.check import CheckResult
    from sweeper.recipe.recipe import Recipe

__all__ = ["register"]

#: the formats of :data:`sweeper.recipe.export.FORMATS`, spelled out so that registering imports nothing
EXPORT_FORMATS = ("litgpt", "hf", "deepspeed", "megatron", "torchtitan", "nanogpt", "json")
# ---------------------------------------------------------------------------------------- parsers


def _add_law_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("sweep", nargs="?", help="stored sweep whose latest fitted laws to use")
    p.add_argument(
        "--law",
        action="append",
        default=[],
        metavar="ID|NAME[:lr|:batch]",
        help="stored law id (repeatable: an lr law and a batch law) or "
        "deepseek|steplaw|kaplan|porian; NAME:lr or NAME:batch takes one of its laws, to pair "
        "with a law of yours (--law 2 --law deepseek:batch)",
    )
    p.add_argument("--storage", metavar="URL", help="SQLAlchemy URL (default $SWEEPER_STORAGE or sweeper.db)")
    p.add_argument(
        "--force",
        action="store_true",
        help="use a law where it is refused, with a warning: one of another parametrization or "
        "base width, one whose interval at the target spans more than 1000x (it does not "
        "determine the value there), or a published law beyond its data where its form fails "
        "(Kaplan's LR above N = 4.4e9); and keep --params beside a --width/--depth whose "
        "12·L·d² it does not match (a model with another MLP width)",
    )
    add_bytes_per_token(p)


def _add_target_args(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("target (N or shape; D, C or D/N)")
    g.add_argument("--params", type=number, help="non-embedding parameters N")
    g.add_argument("--width", type=count, help="d_model")
    g.add_argument("--depth", type=count, help="layers")
    g.add_argument("--heads", type=count, help="attention heads")
    g.add_argument("--vocab", type=count, help="vocabulary size (embedding memory)")
    g.add_argument("--context", type=count, help="context length (training sequence length)")
    g.add_argument("--tokens", type=number, help="training tokens D")
    g.add_argument("--compute", type=number, help="training FLOPs C (6·N·D + attention)")
    g.add_argument("--tokens-per-param", type=number, help="D = R·N")
    g.add_argument("--parametrization", default="sp", help="sp | mup | completep (default sp)")
    g.add_argument("--base-width", type=count, help="muP/CompleteP base width")
    g.add_argument("--base-depth", type=count, help="CompleteP base depth")
    h = p.add_argument_group("hardware (optional)")
    h.add_argument("--gpus", type=count, default=1, help="data-parallel GPUs (default 1)")
    h.add_argument("--gpu-memory-gb", type=number, help="memory per GPU in GiB")
    h.add_argument("--seq-len", type=count, help="training sequence length")
    h.add_argument("--micro-batch", type=count, help="sequences per GPU per forward pass")
    h.add_argument("--precision", default="bf16", help="bf16 (mixed, fp32 master) | fp32")
    h.add_argument("--peak-tflops", type=number, help="dense peak TFLOP/s per GPU")
    h.add_argument("--mfu", type=float, default=0.4, help="model FLOPs utilisation (default 0.4)")
    h.add_argument("--zero-stage", type=int, default=0, help="ZeRO stage 0-3 (default 0)")
    h.add_argument("--recompute", action="store_true", help="full activation recomputation")
    h.add_argument(
        "--no-flash-attention", action="store_true", help="attention scores kept in memory"
    )
    r = p.add_argument_group("recipe overrides")
    r.add_argument("--global-batch", type=count, help="global batch in sequences (not the law's)")
    r.add_argument(
        "--rampup",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="batch ramp-up on/off (default: on from 1024 sequences)",
    )
    r.add_argument(
        "--schedule",
        choices=SCHEDULES,
        help="LR schedule after the warmup (default: the one the LR law was measured under, "
        "else cosine)",
    )
    r.add_argument(
        "--min-lr-ratio",
        type=float,
        help="final LR / peak LR (default: the LR law's, else 0.1; constant: 1)",
    )
    r.add_argument(
        "--decay-fraction",
        type=float,
        help="WSD: share of the steps spent decaying (default: the LR law's, else 0.2)",
    )
    r.add_argument(
        "--warmup-steps",
        type=count,
        help="warmup steps (default: min(2000, 5%% of the steps)); a warning names the value "
        "that matches the LR law's measured warmup",
    )
    r.add_argument("--z-loss", type=float, help="z-loss coefficient (default 1e-4; 0: none)")
    r.add_argument(
        "--init-std",
        type=positive,
        help="init std (default under SP: sqrt(2/(5·width)); under muP/CompleteP: the proxies' "
        "at the base width)",
    )


def _add_export_parser(subparsers: Any) -> None:
    from sweeper.recipe.export.versions import help_text

    p = subparsers.add_parser(
        "export",
        help="a recipe as a litgpt/HF/DeepSpeed/Megatron/torchtitan/nanoGPT/JSON config",
        description="Write a recipe in the config format of the framework that will run it, for "
        "a named framework version. Every setting the format cannot carry is one warning on "
        f"stderr and a header line where the format has comments. Versions: {help_text()}.",
    )
    _add_law_args(p)
    _add_target_args(p)
    p.add_argument("--format", required=True, help=" | ".join(EXPORT_FORMATS))
    p.add_argument(
        "--framework-version",
        metavar="V",
        help="the framework version to write for (each format's series are listed above: "
        "e.g. megatron 0.16-0.19, torchtitan 0.2|0.3, litgpt 0.5, hf 5, deepspeed 0.19; default: "
        "each format's current one); another release of a series (0.19.1) is written for its "
        "checked release, with a warning",
    )
    p.add_argument(
        "--allow-inexpressible",
        action="store_true",
        help="write a muP/CompleteP (or non-AdamW) recipe to a format that cannot express it "
        "(refused without; the LR then does not mean what the format's model will do)",
    )
    p.add_argument("-o", "--output", type=Path, help="file to write (default stdout)")
    p.add_argument(
        "--recipe-json",
        type=Path,
        help="a saved `recommend --json` / `export --format json` recipe (schema sweeper-recipe)",
    )
    p.set_defaults(func=cmd_export)


def register(subparsers: Any) -> None:
    """Add the ``recommend``, ``export`` and ``check`` verbs."""
    p = subparsers.add_parser(
        "recommend",
        help="the training recipe for a target model from the laws",
        description="Peak LR, batch, schedule, optimizer, memory and time for a target, with "
        "intervals, provenance and warnings.",
    )
    _add_law_args(p)
    _add_target_args(p)
    p.add_argument("--json", action="store_true", help="print the recipe as one JSON object")
    p.set_defaults(func=cmd_recommend)

    _add_export_parser(subparsers)

    p = subparsers.add_parser(
        "check",
        help="how a published (or given) recipe sits against the laws",
        description="Ratio of a recipe's LR and batch to the law's prediction, whether it is "
        "inside the interval, and the loss penalty the law's curvature implies.",
    )
    _add_law_args(p)
    p.add_argument("--recipe", help="a built-in published recipe (see --list-recipes)")
    p.add_argument("--list-recipes", action="store_true", help="list the built-in recipes")
    p.add_argument("--all-recipes", action="store_true", help="check every built-in recipe")
    p.add_argument("--params", type=number, help="non-embedding parameters N")
    p.add_argument("--tokens", type=number, help="training tokens D")
    p.add_argument("--lr", type=number, help="peak LR")
    p.add_argument("--batch-tokens", type=number, help="batch size in tokens")
    p.add_argument("--width", type=count, help="d_model (for DeepSeek's M)")
    p.add_argument("--depth", type=count, help="layers (for DeepSeek's M)")
    p.add_argument("--context", type=count, help="sequence length (for DeepSeek's M)")
    p.add_argument("--vocab", type=count, help="vocabulary size (256: byte-level)")
    p.add_argument(
        "--parametrization",
        help="sp | mup | completep: the given recipe's (default sp; a muP recipe is taken at the "
        "law's base width)",
    )
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=cmd_check)


# -------------------------------------------------------------------------------- law resolution


def _laws_arg(args: argparse.Namespace) -> Any:
    """What ``--law``/SWEEP name, for :func:`sweeper.api.resolve_laws`: the stored sweep's
    name or a published name (resolve_laws says when there is no such sweep, naming the known
    ones), or the laws given by id and published name."""
    from sweeper import api
    from sweeper.recipe.published import PUBLISHED_NAMES, published_key

    if args.sweep and args.law:
        raise TargetError("give a SWEEP or --law, not both")
    if not args.sweep and not args.law:
        raise TargetError(f"give a SWEEP or --law ID|{'|'.join(PUBLISHED_NAMES)}")
    if args.sweep:
        return args.sweep
    laws: list[Any] = []
    for arg in args.law:
        name, _, part = arg.partition(":")
        key = published_key(name)
        if key in PUBLISHED_NAMES:
            laws += _published_part(key, part.strip().lower(), arg)
        elif arg.strip().isdigit():
            laws.append(api.law(int(arg), storage=args.storage))
        else:
            raise TargetError(
                f"--law expects a stored law id or one of {', '.join(PUBLISHED_NAMES)} (one of "
                f"its laws: NAME:lr or NAME:batch), got {arg!r}"
            )
    return laws


#: what ``--law NAME:PART`` names of a published law set
_PARTS = {"lr": "lr", "batch": "batch_tokens", "batch_tokens": "batch_tokens"}


def _published_part(key: str, part: str, arg: str) -> list[Any]:
    """The laws of the published set ``key``, or only its ``part`` (lr or batch), so that a law
    fitted on your sweeps can be paired with a published one of the other target: ``--law 2
    --law deepseek:batch`` (two LR laws had been refused with no way out; a laws audit)."""
    from sweeper.recipe.published import published_laws

    laws = published_laws(key)
    if not part:
        return list(laws.values())
    target = _PARTS.get(part)
    if target is None or target not in laws:
        have = ", ".join(k for k, v in _PARTS.items() if v in laws and k != "batch_tokens")
        raise TargetError(f"--law {arg!r}: {key} publishes no {part!r} law (it has: {have})")
    return [laws[target]]


#: the target and hardware arguments spelled as their fields (``--params`` is n_params)
_TARGET_ARGS = ("width", "depth", "heads", "vocab", "context", "tokens", "compute",
                "tokens_per_param", "parametrization", "base_width", "base_depth")  # fmt: skip
_SCHEDULE_ARGS = (
    "schedule", "min_lr_ratio", "decay_fraction", "warmup_steps", "z_loss", "init_std",
)  # fmt: skip
_HARDWARE_ARGS = ("gpus", "gpu_memory_gb", "seq_len", "micro_batch", "precision", "peak_tflops",
                  "mfu", "zero_stage", "recompute")  # fmt: skip


def _recipe_args_given(args: argparse.Namespace) -> list[str]:
    """The sweep and the law, target and hardware flags given away from their defaults: what
    ``export --recipe-json`` would ignore (it had exported the file's 1e9 params under
    --params 5e9 without a word; a CLI audit)."""
    from sweeper.cli import build_parser

    default = vars(build_parser().parse_args(["export", "--recipe-json", "-", "--format", "json"]))
    names = ("sweep", "law", "params", *_TARGET_ARGS, *_HARDWARE_ARGS, "no_flash_attention",
             "global_batch", "rampup", "bytes_per_token")  # fmt: skip
    out = ["SWEEP" if k == "sweep" else "--" + k.replace("_", "-")
           for k in names if getattr(args, k) != default[k]]  # fmt: skip
    return out


def _build_recipe(args: argparse.Namespace) -> Recipe:
    from sweeper import api
    from sweeper.recipe.hardware import Hardware
    from sweeper.recipe.target import Target

    target = Target(
        n_params=args.params,
        **{k: getattr(args, k) for k in _TARGET_ARGS},
    )
    hardware = Hardware(
        flash_attention=not args.no_flash_attention,
        **{k: getattr(args, k) for k in _HARDWARE_ARGS},
    )
    return api.recommend(
        _laws_arg(args),
        target,
        hardware,
        storage=args.storage,
        global_batch=args.global_batch,
        rampup=args.rampup,
        force=args.force,
        bytes_per_token=args.bytes_per_token,
        **{k: getattr(args, k) for k in _SCHEDULE_ARGS if getattr(args, k) is not None},
    )


# ---------------------------------------------------------------------------------------- output


def _warn(console: Any, label: str, text: str) -> None:
    """One warning line: ``label`` in yellow, then ``text`` as it is (rich markup escaped: a
    warning's ``'sweeper[hf]'`` had printed as ``'sweeper'``, the ``[hf]`` read as a style)."""
    console.print(f"[yellow]{literal(label)}[/yellow] {literal(text)}", highlight=False)


def _print_recipe(r: Recipe) -> None:
    from rich.table import Table

    from sweeper.recipe.table import recipe_rows

    t = Table(title="Sweeper recipe", show_lines=False)
    t.add_column("setting")
    t.add_column("value", justify="right")
    t.add_column(f"{r.level:.0%} interval / note")
    for row in recipe_rows(r):
        t.add_row(*row)
    console = _console()
    console.print(t)
    for w in r.warnings:
        _warn(console, "warning:", w)


# ------------------------------------------------------------------------------------------ verbs


def cmd_recommend(args: argparse.Namespace) -> int:
    recipe = _build_recipe(args)
    if args.json:
        print(json.dumps(recipe.to_dict(), indent=2))
    else:
        _print_recipe(recipe)
    return 0


def _read_recipe_json(path: Path) -> Recipe:
    from sweeper.recipe.recipe import recipe_from_dict

    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise TargetError(f"cannot read recipe JSON {path}: {e}") from None
    if not isinstance(data, dict):
        raise TargetError(f"{path}: expected one JSON object (a recipe)")
    try:
        return recipe_from_dict(data)
    except TargetError as e:
        raise TargetError(f"{path}: {e}") from None


def _check_output(path: Path | None) -> None:
    """Refuse an output path that cannot be written, before any work (nothing written)."""
    if path is None:
        return
    if path.is_dir():
        raise TargetError(f"cannot write {path}: it is a directory")
    parent = path.parent
    if not parent.is_dir():
        raise TargetError(f"cannot write {path}: directory {parent} does not exist")


def cmd_export(args: argparse.Namespace) -> int:
    from sweeper import api
    from sweeper.recipe.export import FORMATS
    from sweeper.recipe.export.versions import resolve_version

    if args.format not in FORMATS:
        raise TargetError(f"unknown export format {args.format!r}; known: {', '.join(FORMATS)}")
    try:
        resolve_version(args.format, args.framework_version, option="--framework-version")
    except ValueError as e:
        raise TargetError(str(e)) from None
    _check_output(args.output)
    given = [k for k in _SCHEDULE_ARGS if getattr(args, k) is not None]
    if args.recipe_json and given:
        flags = ", ".join("--" + k.replace("_", "-") for k in given)
        raise TargetError(f"{flags}: a --recipe-json recipe keeps its own schedule and settings")
    if args.recipe_json and (named := _recipe_args_given(args)):
        raise TargetError(
            f"{', '.join(named)}: a --recipe-json recipe names its own laws, target and hardware "
            "(drop them, or export from the sweep without --recipe-json)"
        )
    recipe = _read_recipe_json(args.recipe_json) if args.recipe_json else _build_recipe(args)
    out = api.export(
        recipe,
        args.format,
        args.framework_version,
        allow_inexpressible=args.allow_inexpressible,
        force=args.force,
    )
    if args.output is not None:
        try:
            args.output.write_text(out.text, encoding="utf-8")
        except OSError as e:
            raise TargetError(f"cannot write {args.output}: {e}") from None
    else:
        sys.stdout.write(out.text)
    for n in out.notes:
        print(f"sweeper: note: {args.format}: {n}", file=sys.stderr)
    for w in out.warnings:
        print(f"sweeper: warning: {w}", file=sys.stderr)
    for m in out.cannot_carry:
        print(f"sweeper: warning: {args.format} cannot express: {m}", file=sys.stderr)
    for c in out.cautions:
        print(f"sweeper: warning: {args.format}: {c}", file=sys.stderr)
    return 0


def _check_table(results: Sequence[CheckResult], title: str, console: Any = None) -> None:
    """``sweeper check``'s output on ``console`` (default: the CLI's, :func:`_console`): the
    table, its legend, a verdict per recipe (:func:`_verdict`), then the warnings. ``str`` of a
    :class:`~sweeper.recipe.check.CheckResult` is this as text (:func:`check_text`)."""
    from rich.table import Table

    t = Table(title=title)
    cols = ["recipe", "N", "D"]
    for q in ("LR", "batch"):
        cols += [q, f"law {q} (95%)", f"{q} off", f"{q} in"]
    for col in [*cols, "loss penalty"]:
        t.add_column(col, justify="left" if col == "recipe" else "right")

    def cells(res: CheckResult, q: str) -> list[str]:
        item = res.item(q)
        if item is None:  # (no law, or one that predicts nothing positive there: the warnings)
            own = res.lr if q == "lr" else res.batch_tokens
            return [f"{own:.3g}" if own else "-", "-", "-", "-"]
        # the interval's half-width in octaves (a log-space interval is near symmetric)
        half = math.log2(item.high / item.low) / 2 if item.low > 0 and item.high > 0 else 0.0
        span = "" if item.low == item.high else f" ±{half:.2g} oct"
        inside = {None: "-", True: "yes", False: "no"}[item.inside]
        off = f"{item.octaves:+.2f} oct" if item.determined else "undetermined"
        return [f"{item.actual:.3g}", f"{item.predicted:.3g}{span}", off, inside]

    for res in results:
        pen = "-" if res.loss_penalty is None else f"{res.loss_penalty:.2%}"
        t.add_row(
            res.name,
            f"{res.n_params:.3g}",
            f"{res.tokens:.3g}",
            *cells(res, "lr"),
            *cells(res, "batch_tokens"),
            pen,
        )
    console = console or _console()
    console.print(t)
    console.print(
        "off: the recipe's value against the law's, in octaves (+1: twice the law's); ±: the half "
        "width of the law's 95% interval, in octaves; in: inside that interval ('-': the law "
        "gives none, as a published law does, or one too wide to say: 'undetermined'); loss "
        "penalty: the loss the recipe's LR and batch cost by the law's curvature, each taken "
        "alone",
        highlight=False,
    )
    for res in results:
        console.print(f"{res.name}: {_verdict(res)}", highlight=False)
    # a warning every recipe has (the law's own) once; the rest under each recipe that has it (a
    # warning seen once had been dropped for every later recipe: an audit's llama2-7b lost its
    # extrapolation warning under --all-recipes)
    everyone = set.intersection(*(set(r.warnings) for r in results)) if len(results) > 1 else set()
    for w in dict.fromkeys(w for r in results for w in r.warnings if w in everyone):
        _warn(console, "warning (every recipe):", w)
    for res in results:
        for w in dict.fromkeys(res.warnings):
            if w not in everyone:
                _warn(console, f"warning ({res.name}):", w)


def check_text(results: Sequence[CheckResult], title: str) -> str:
    """What :func:`_check_table` prints, as text without colour: ``str`` of a check's result
    (it had printed the dataclass, its items and warnings in one line; an API audit)."""
    return plain_text(lambda con: _check_table(results, title, con))


def _verdict(res: CheckResult) -> str:
    """One line a reader can act on: where the recipe's LR and batch sit against the law."""
    parts = []
    for q, name in (("lr", "LR"), ("batch_tokens", "batch")):
        item = res.item(q)
        if item is None:
            continue
        if not item.determined:
            parts.append(f"the law does not determine the {name} there")
            continue
        where = (
            "at the law's"
            if abs(item.octaves) < 0.05
            else f"{abs(item.octaves):.2f} octave(s) {'above' if item.octaves > 0 else 'below'} "
            "the law's"
        )
        sure = {
            None: " (the law gives no interval)",
            True: ", inside its 95% interval",
            False: ", outside its 95% interval",
        }[item.inside]
        parts.append(f"its {name} is {where}{sure}")
    return "; ".join(parts) if parts else "nothing checked (see the warnings)"


def cmd_check(args: argparse.Namespace) -> int:
    from sweeper import api
    from sweeper.recipe.published_recipes import get_recipe, load_recipes

    if args.list_recipes:
        recipes = load_recipes()
        if args.json:
            print(json.dumps([r.to_dict() for r in recipes.values()], indent=2))
            return 0
        from rich.table import Table

        t = Table(title="Built-in published recipes")
        for col in ("name", "run", "N (non-emb.)", "shape", "D", "peak LR", "batch", "source"):
            t.add_column(col)
        for r in recipes.values():
            t.add_row(
                r.name,
                r.title,
                f"{r.n_params:.3g}" + ("*" if r.n_params_note.startswith("computed") else ""),
                f"{r.layers}×{r.d_model}, T {r.context}",
                f"{r.tokens:.3g}",
                f"{r.lr:.3g}",
                f"{r.batch_tokens:.3g}",
                r.source,
            )
        _console().print(t)
        print("* computed as 12·L·d²")
        return 0

    given = [args.params, args.tokens, args.lr, args.batch_tokens]
    modes = sum([bool(args.recipe), bool(args.all_recipes), any(v is not None for v in given)])
    if args.recipe and args.all_recipes:
        raise TargetError("give --recipe NAME or --all-recipes, not both")
    if modes > 1:  # (it had said "give one of ..." to a command that gave two)
        raise TargetError(
            "--recipe or --all-recipes checks a published recipe as it is: drop --params, "
            "--tokens, --lr and --batch-tokens (or check your own recipe with those alone)"
        )
    if modes != 1:
        raise TargetError(
            "give one of --recipe NAME, --all-recipes, or --params --tokens --lr --batch-tokens"
        )
    laws = _laws_arg(args)
    shape = [f"--{k.replace('_', '-')}" for k in ("width", "depth", "context", "vocab",
             "parametrization") if getattr(args, k, None) is not None]  # fmt: skip
    if shape and not any(v is not None for v in given):
        raise TargetError(  # (they were ignored in silence: a published recipe carries its own)
            f"{' '.join(shape)} {'describe' if len(shape) > 1 else 'describes'} a recipe given "
            "as numbers (--params --tokens --lr "
            "--batch-tokens); a published recipe carries its own"
        )
    if args.all_recipes:
        targets: list[Any] = list(load_recipes().values())
    elif args.recipe:
        targets = [get_recipe(args.recipe)]
    else:
        targets = [_given_recipe(args, given)]
    results = api.check(
        targets, laws, storage=args.storage, force=args.force, bytes_per_token=args.bytes_per_token
    )
    if args.json:
        out: Any = [r.to_dict() for r in results]
        print(json.dumps(out if args.all_recipes else out[0], indent=2))
    else:
        source = (
            f"the laws of sweep {args.sweep}"
            if args.sweep
            else ", ".join(
                f"law {a.strip()}" if a.strip().isdigit() else f"the published {a} laws"
                for a in args.law
            )
        )
        _check_table(results, f"Recipes against {source}")
    return 0


def _given_recipe(args: argparse.Namespace, given: Sequence[Any]) -> Any:
    """The recipe given as numbers on the command line (``check --params ... --lr ...``)."""
    from sweeper.recipe.check import CheckValues

    # (no --batch-tokens: laws without a batch law check the LR alone; with one, the library
    # refuses it and names the batch law, a verbs audit)
    missing = [
        f"--{n}" for n, v in zip(("params", "tokens", "lr"), given, strict=False) if v is None
    ]
    if missing:
        raise TargetError(f"checking given values needs {' '.join(missing)}")
    if (args.width is None) != (args.depth is None):
        raise TargetError("give --width and --depth together")
    return CheckValues(
        n_params=args.params,
        tokens=args.tokens,
        lr=args.lr,
        batch_tokens=args.batch_tokens,
        layers=args.depth,
        d_model=args.width,
        context=args.context,
        vocab=args.vocab,
        parametrization=args.parametrization or "sp",
    )
