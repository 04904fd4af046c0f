"""MDConfig types are strict: nothing is coerced, errors name the config key and the flag."""

from __future__ import annotations

import pytest

from sci_moe.sampling.md import MDConfig, resolve_config


@pytest.mark.parametrize(
    "text, match",
    [
        ('deterministic = "false"', r"deterministic must be true or false .*--deterministic"),
        ('minimize = "no"', r"minimize must be true or false .*--no-minimize"),
        ("friction_per_ps = true", r"friction_per_ps must be a number .*--friction-per-ps"),
        ("system = [1, 2]", r"system must be a string .*'system'"),
        ("steps = 2.5", r"steps must be an integer"),
        ("extra = 5", r"extra must be a table"),
        ("md = 5", r"'md' must be a table"),
        ("steps = 4\n[md]\nseed = 1", r"'md' must be a table .* the only top-level entry"),
    ],
)
def test_wrong_types_in_a_config_file_raise(tmp_path, text, match):
    conf = tmp_path / "md.toml"
    conf.write_text(text + "\n")
    with pytest.raises(ValueError, match=match):
        resolve_config(conf)


def test_right_types_still_pass():
    cfg = MDConfig(deterministic=True, minimize=False, friction_per_ps=2, steps=100.0)
    assert cfg.deterministic is True and cfg.steps == 100 and isinstance(cfg.steps, int)


def test_compile_default_follows_the_run_length():
    from sci_moe.sampling.md.config import COMPILE_MIN_STEPS

    assert MDConfig(steps=COMPILE_MIN_STEPS).compile_forces is True
    assert MDConfig(steps=COMPILE_MIN_STEPS - 1).compile_forces is False
    assert MDConfig(steps=COMPILE_MIN_STEPS, deterministic=True).compile_forces is False
    assert MDConfig(steps=10, compile=True).compile_forces is True
    assert MDConfig(steps=10**6, compile=False).compile_forces is False
    with pytest.raises(ValueError, match="compile and deterministic"):
        MDConfig(compile=True, deterministic=True)


def test_compile_flags_reach_the_config():
    from sci_moe.cli.main import build_parser
    from sci_moe.cli.md_config import overrides as _overrides

    parser = build_parser()
    assert _overrides(parser.parse_args(["md", "run", "--compile"]))["compile"] is True
    assert _overrides(parser.parse_args(["md", "run", "--no-compile"]))["compile"] is False
    assert "compile" not in _overrides(parser.parse_args(["md", "run"]))
    with pytest.raises(SystemExit):
        parser.parse_args(["md", "run", "--compile", "--no-compile"])
