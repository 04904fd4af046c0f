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
