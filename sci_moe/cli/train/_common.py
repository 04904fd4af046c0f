"""What every ``sci-moe train <method>`` shares: flags from the config, the output folder.

A method is a :class:`TrainMethod`: its config class (a dataclass inheriting
:class:`sci_moe.train.TrainConfig`), the files it writes and a ``run`` function. This
module turns it into a command with no per-method parsing code:

* one flag per config field (``batch_size`` -> ``--batch-size``; booleans as
  ``--x/--no-x``, tuples as comma lists, ``none`` for an optional value), with the help
  text taken from the field's entry in the config's docstring;
* ``--config FILE`` (TOML, YAML or JSON: a flat mapping of the same keys; flags override
  it), ``--out``, ``--resume``, ``--overwrite``;
* an unknown key, a wrong type or a value the config refuses is an error naming the key
  or flag (exit code 2); a run that diverges exits with code 1, keeping its last good
  checkpoint;
* ``--device cuda`` (every method: the config's ``device``) where torch sees no GPU is
  refused before anything is written;
* the resolved config is written to ``OUT/config.yaml``; ``--resume`` with other settings
  is refused before anything is written; ``--overwrite`` deletes only the files this
  method writes; one writer per ``OUT`` (a lock); under ``torchrun`` only rank 0 writes;
* ``OUT/results.json`` holds the method's results and the run's ``train`` summary.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import re
import sys
import types
import typing
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from .._errors import flag_error

__all__ = ["CONFIG_NAME", "RESULTS_NAME", "TrainMethod", "read_config_file", "run_method"]

CONFIG_NAME = "config.yaml"
RESULTS_NAME = "results.json"
_SUFFIXES = (".toml", ".yaml", ".yml", ".json")


@dataclass(frozen=True)
class TrainMethod:
    """One trainable method of ``sci-moe train``.

    Attributes
    ----------
    name : str
        The subcommand.
    help : str
        One line for ``sci-moe train --help``.
    config : callable
        Returns the config class (imported lazily, so that ``--help`` of the other
        methods does not import their fields).
    run : callable
        ``run(cfg, out: Path, resume: bool) -> dict``: trains (on
        :class:`sci_moe.train.Trainer` with ``out_dir=out``) and returns the JSON
        results; the key ``"train"`` should hold ``TrainResult.to_dict()``.
    outputs : tuple of str
        Files the method writes in ``OUT`` besides the engine's (model files, plots).
    description : str
        The longer text of ``sci-moe train <name> --help``.
    """

    name: str
    help: str
    config: Callable[[], type]
    run: Callable
    outputs: tuple[str, ...] = ()
    description: str = ""


def read_config_file(path: Path | None) -> dict:
    """A flat mapping of config keys from a TOML, YAML or JSON file (``{}`` without one)."""
    if path is None:
        return {}
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"--config {path} does not exist")
    text = path.read_text(encoding="utf-8")
    suffix = path.suffix.lower()
    try:
        if suffix == ".toml":
            import tomllib

            data = tomllib.loads(text)
        elif suffix == ".json":
            data = json.loads(text)
        elif suffix in (".yaml", ".yml"):
            import yaml

            data = yaml.safe_load(text)
        else:
            raise ValueError(
                f"--config {path}: unknown file type {suffix!r}; use one of {_SUFFIXES}"
            )
    except ValueError as err:
        if str(err).startswith("--config"):
            raise
        raise ValueError(f"--config {path} is not valid {suffix[1:].upper()}: {err}") from None
    except Exception as err:  # yaml's parser errors are not ValueErrors
        raise ValueError(f"--config {path} could not be parsed: {err}") from None
    data = data or {}
    if not isinstance(data, dict):
        raise ValueError(f"--config {path} must hold a mapping of config keys")
    return data


# -- dataclass fields -> flags ------------------------------------------------------------
def _field_types(cls) -> dict[str, object]:
    return typing.get_type_hints(cls)


def _base_type(tp):
    """``(base, optional)`` of an annotation: ``int | None`` -> ``(int, True)``."""
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        return (args[0] if len(args) == 1 else str), True
    return tp, False


def _docs(cls) -> dict[str, str]:
    """First sentence of each parameter's entry in the numpy docstrings of ``cls``'s MRO."""
    out: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        doc = klass.__doc__ or ""
        for m in re.finditer(r"^\s{4}(\w+)(?:, \w+)* : [^\n]*\n((?:\s{8}[^\n]*\n?)+)", doc, re.M):
            text = " ".join(line.strip() for line in m.group(2).splitlines())
            out[m.group(1)] = text.split(". ")[0].rstrip(".").replace("%", "%%")
    return out


def _convert(name: str, tp, value, where: str):
    """``value`` (from a file or a flag string) as the field's type; ValueError names it."""
    base, optional = _base_type(tp)
    if value is None or (optional and isinstance(value, str) and value.lower() == "none"):
        if optional:
            return None
        raise ValueError(f"{where} must not be empty")
    origin = typing.get_origin(base) or base
    try:
        if origin is bool:
            if isinstance(value, bool):
                return value
            if isinstance(value, str) and value.lower() in ("true", "yes", "1", "false", "no", "0"):
                return value.lower() in ("true", "yes", "1")
            raise TypeError
        if origin is int:
            if isinstance(value, bool) or (isinstance(value, float) and not value.is_integer()):
                raise TypeError
            return int(value)
        if origin is float:
            if isinstance(value, bool):
                raise TypeError
            return float(value)
        if origin is str:
            if not isinstance(value, str):
                raise TypeError
            return value
        if origin in (tuple, list):
            items = value.split(",") if isinstance(value, str) else list(value)
            args = [a for a in typing.get_args(base) if a is not Ellipsis] or [str]
            item_type = args[0]
            conv = [
                _convert(name, item_type, v.strip() if isinstance(v, str) else v, where)
                for v in items
            ]
            return tuple(conv) if origin is tuple else conv
    except (TypeError, ValueError):
        shown = getattr(origin, "__name__", str(origin))
        raise ValueError(
            f"{where} must be {'an' if shown[0] in 'aeiou' else 'a'} {shown}"
            f"{' or none' if optional else ''}, got {value!r}"
        ) from None
    return value


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def build_parser(method: TrainMethod, prog: str) -> argparse.ArgumentParser:
    """The argument parser of one method (flags from its config class)."""
    cls = method.config()
    p = argparse.ArgumentParser(
        prog=prog,
        description=method.description or method.help,
        epilog=(
            "Every option can also be given in --config FILE (TOML, YAML or JSON, the same "
            "names with underscores); flags override the file. Data parallel: torchrun "
            f"--nproc_per_node N -m sci_moe.cli.main train {method.name} ... (see "
            "docs/training.rst)."
        ),
    )
    p.add_argument("--config", type=Path, help="TOML/YAML/JSON file of config keys")
    p.add_argument("--out", type=Path, required=True, help="output folder")
    p.add_argument("--resume", action="store_true", help="continue the run in --out exactly")
    p.add_argument(
        "--overwrite", action="store_true", help="replace the run in --out (its files only)"
    )
    docs, hints = _docs(cls), _field_types(cls)
    defaults = {f.name: f for f in dataclasses.fields(cls)}
    for name, f in defaults.items():
        base = _base_type(hints[name])[0]
        default = (
            f.default
            if f.default is not dataclasses.MISSING
            else (f.default_factory() if f.default_factory is not dataclasses.MISSING else None)
        )
        text = f"{docs.get(name, name)} (default: {default})"
        if base is bool:
            p.add_argument(
                _flag(name),
                dest=name,
                action=argparse.BooleanOptionalAction,
                default=None,
                help=text,
            )
        else:
            p.add_argument(_flag(name), dest=name, default=None, metavar=name.upper(), help=text)
    return p


def resolve(method: TrainMethod, args: argparse.Namespace):
    """The config object from ``--config`` and the flags (flags win)."""
    cls = method.config()
    hints = _field_types(cls)
    names = [f.name for f in dataclasses.fields(cls)]
    raw = read_config_file(args.config)
    unknown = sorted(set(raw) - set(names))
    if unknown:
        raise ValueError(
            f"--config {args.config}: unknown key{'s' if len(unknown) > 1 else ''} "
            f"{', '.join(map(repr, unknown))} for `{method.name}`; valid keys: {', '.join(names)}"
        )
    values = {k: _convert(k, hints[k], v, f"{k} (in {args.config})") for k, v in raw.items()}
    for name in names:
        flag_value = getattr(args, name, None)
        if flag_value is not None:
            values[name] = _convert(name, hints[name], flag_value, _flag(name))
    try:
        cfg = cls(**values)
    except ValueError as err:
        raise flag_error(err, "", names) from None
    except TypeError as err:
        raise ValueError(f"bad config for {method.name}: {err}") from None
    if isinstance(getattr(cfg, "device", None), str):
        # the device must exist here: refused before anything is written or built
        from ..._util import resolve_device

        resolve_device(cfg.device, what="--device")
    return cfg


def _plain(obj):
    if dataclasses.is_dataclass(obj):
        return {k: _plain(v) for k, v in dataclasses.asdict(obj).items()}
    if isinstance(obj, tuple | list):
        return [_plain(v) for v in obj]
    if isinstance(obj, dict):
        return {k: _plain(v) for k, v in obj.items()}
    return obj


def _check_out(out: Path, resume: bool, overwrite: bool, files) -> None:
    if resume and overwrite:
        raise ValueError("--resume and --overwrite exclude each other")
    if out.exists() and not out.is_dir():
        raise ValueError(f"--out {out} exists and is not a folder")
    present = [p.name for p in files if p.exists()]
    if present and not resume and not overwrite:
        raise ValueError(
            f"--out {out} already holds a run ({', '.join(present)}); pass --resume to "
            "continue it, --overwrite to replace it, or choose another --out"
        )


def run_method(method: TrainMethod, argv: Sequence[str], prog: str) -> int:
    """Parse ``argv`` for ``method`` and run it; returns the exit code."""
    import yaml

    from ..._util import atomic_save_json, atomic_write_text, lock_directory
    from ...train import (
        RESUMABLE_CHANGES,
        TrainingDiverged,
        broadcast_object,
        init_distributed,
        run_files,
    )

    args = build_parser(method, prog).parse_args(list(argv))
    cfg = resolve(method, args)
    out: Path = args.out
    files = [out / CONFIG_NAME, out / RESULTS_NAME, *run_files(out)]
    files += [out / name for name in method.outputs]
    ctx = init_distributed()
    lock = None
    error = None
    saved_cfg = _plain(cfg)
    if ctx.is_main:
        try:
            _check_out(out, args.resume, args.overwrite, files)
            previous = out / CONFIG_NAME
            if args.resume and previous.exists():
                old = yaml.safe_load(previous.read_text(encoding="utf-8")) or {}
                diff = sorted(
                    k
                    for k in set(old) | set(saved_cfg)
                    if k not in RESUMABLE_CHANGES and old.get(k) != saved_cfg.get(k)
                )
                if diff:
                    shown = ", ".join(f"{k}: {old.get(k)!r} -> {saved_cfg.get(k)!r}" for k in diff)
                    raise ValueError(
                        f"--resume with other settings than {previous} ({shown}); resume "
                        "with the same options (only --max-hours, --threads, --device, --progress "
                        "and the log/checkpoint intervals may change) or use a new --out"
                    )
            lock = lock_directory(
                out, command=f"{prog} --out {out}" + (" --resume" if args.resume else "")
            )
        except (ValueError, OSError) as err:
            error = str(err) or type(err).__name__
    error = broadcast_object(error, ctx)
    if error is not None:
        if ctx.is_main:
            raise ValueError(error)
        return 2
    try:
        if ctx.is_main:
            if args.overwrite:
                for f in files:
                    f.unlink(missing_ok=True)
            out.mkdir(parents=True, exist_ok=True)
            atomic_write_text(out / CONFIG_NAME, yaml.safe_dump(saved_cfg, sort_keys=True))
        try:
            results = method.run(cfg, out, args.resume)
        except TrainingDiverged as err:
            print(f"{prog}: error: {err}", file=sys.stderr)
            return 1
        if ctx.is_main:
            results = {"method": method.name, "config": saved_cfg, **(results or {})}
            atomic_save_json(out / RESULTS_NAME, results, indent=1, default=_json_default)
            train = results.get("train") or {}
            if train.get("reason") == "budget":
                print(
                    f"paused at step {train.get('step')} of {train.get('steps')} (the "
                    f"--max-hours budget); continue with: {prog} --out {out} --resume "
                    "(plus your other options)"
                )
            print(f"results: {out / RESULTS_NAME}")
        return 0
    finally:
        if lock is not None:
            lock.release()


def _json_default(obj):
    if hasattr(obj, "tolist"):
        return obj.tolist()
    if hasattr(obj, "to_dict"):
        return obj.to_dict()
    raise TypeError(f"{type(obj).__name__} is not JSON serialisable")
