"""``CompiledOrEager``: the compiled function when it works; one warning and eager when not."""

from __future__ import annotations

import warnings

import pytest
import torch

from sci_moe._util import CompiledOrEager


def test_uses_the_compiled_function(monkeypatch):
    monkeypatch.setattr(torch, "compile", lambda fn, **kw: lambda *a: ("compiled", fn(*a)))
    run = CompiledOrEager(lambda x: x + 1, lambda x: ("eager", x + 1), "f", "eager f")
    assert run(1) == ("compiled", 2) and not run.failed


def test_falls_back_once_with_one_warning(monkeypatch):
    calls = []

    def broken(fn, **kw):
        def call(*a):
            calls.append(a)
            raise RuntimeError("no compiler here")

        return call

    monkeypatch.setattr(torch, "compile", broken)
    run = CompiledOrEager(lambda x: x + 1, lambda x: x + 10, "the f step", "the eager f")
    match = r"the f step failed \(RuntimeError: no compiler.*eager f"
    with pytest.warns(RuntimeWarning, match=match):
        assert run(1) == 11  # the failed call is repeated eagerly: nothing is lost
    assert run.failed
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert run(2) == 12  # no second warning, no second compile attempt
    assert len(calls) == 1
