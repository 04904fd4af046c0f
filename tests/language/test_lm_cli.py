"""``sci-moe train lm`` at tiny size, on a small text file (not the 20 s corpus parse)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from sci_moe.cli.main import main
from sci_moe.language import MoELMConfig, MoETransformerLM, load_checkpoint

TINY = [
    "--d-model", "16", "--n-heads", "2", "--seq-len", "16", "--d-hidden", "16",
    "--num-experts", "4", "--top-k", "2", "--batch-size", "4", "--steps", "3",
    "--eval-every", "2", "--eval-batches", "1", "--no-progress",
]  # fmt: skip
TEXT = "The cat sat on the mat. A dog ran in the park, and the sun was warm. " * 40


@pytest.fixture
def text(tmp_path):
    path = tmp_path / "text.txt"
    path.write_text(TEXT, encoding="utf-8")
    return str(path)


def _train(out, text, *extra) -> int:
    return main(["train", "lm", "--out", str(out), "--text-file", text, *TINY, *extra])


def test_train_lm_tiny_writes_results_model_and_finetunes(tmp_path, text):
    out = tmp_path / "run"
    assert _train(out, text, "--default-moe", "--selection-bias", "--bias-balancing", "0.01") == 0
    res = json.loads((out / "results.json").read_text())
    assert res["method"] == "lm" and res["train"]["step"] == 3 and res["train"]["finished"]
    assert [e["step"] for e in res["train"]["evals"]] == [2, 3]
    assert res["val"]["step"] == 3 and res["val"]["bits_per_byte"] > 0
    assert len(res["val"]["layers"]) == 2 and len(res["val"]["layers"][0]["load"]) == 4
    saved = load_checkpoint(out / "model.pt")
    assert saved["model_config"]["moe"] == {"default_moe": True, "selection_bias": True}
    assert saved["history"]["step"] == [0, 2, 3]
    model = MoETransformerLM(MoELMConfig(**saved["model_config"]))
    model.load_state_dict(saved["model"])  # the single-process weights, all of them
    for name in ("checkpoint.pt", "metrics.jsonl", "config.yaml"):
        assert (out / name).is_file()
    # fine-tune the saved model with the specialisation losses
    ft = tmp_path / "ft"
    init = ["--init-from", str(out / "model.pt"), "--default-moe", "--selection-bias"]
    coefs = ["--orthogonality-coef", "0.1", "--variance-coef", "0.1"]
    assert _train(ft, text, *init, *coefs) == 0
    got = json.loads((ft / "results.json").read_text())
    assert got["config"]["orthogonality_coef"] == 0.1
    assert load_checkpoint(ft / "model.pt")["model_config"]["moe"]["variance_coef"] == 0.1


def test_train_lm_routing_mamba_and_resume(tmp_path, text):
    out = tmp_path / "rom"
    rom = ["--layers", "ra", "--no-positions", "--d-state", "4", "--mamba-experts", "2"]
    assert _train(out, text, *rom) == 0
    cfg = load_checkpoint(out / "model.pt")["model_config"]
    assert cfg["layers"] == "ra" and cfg["mamba"] == {"d_state": 4, "num_experts": 2}
    before = load_checkpoint(out / "checkpoint.pt")["model"]
    # a finished run resumes to the same weights; other settings are refused
    assert _train(out, text, *rom, "--resume") == 0
    after = load_checkpoint(out / "checkpoint.pt")["model"]
    assert all(torch.equal(before[k], after[k]) for k in before)
    assert _train(out, text, *rom, "--resume", "--d-state", "8") == 2


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--steps", "0"], "--steps"),
        (["--d-model", "15"], "--d-model"),
        (["--top-k", "5"], "--top-k"),
        (["--layers", "ax"], "--layers"),
        (["--eval-batches", "0"], "--eval-batches"),
        (["--bias-balancing", "0.01"], "selection_bias"),
        (["--expert-parallel"], "expert_parallel"),
        (["--until-flat", "--max-cycles", "0"], "--max-cycles"),
        (["--max-cycles", "-1"], "--max-cycles"),
        (["--until-flat", "--init-from", "x.pt"], "excludes init_from"),
        (["--until-flat", "--stop-when-flat", "0.01"], "excludes stop_when_flat"),
        (["--until-flat", "--patience", "2"], "excludes patience"),
    ],
)
def test_train_lm_bad_values_exit_2(tmp_path, capsys, text, extra, message):
    assert _train(tmp_path / "r", text, *extra) == 2
    assert message in capsys.readouterr().err


def test_train_lm_unknown_config_key_and_missing_text_exit_2(tmp_path, capsys, text):
    cfg = tmp_path / "c.toml"
    cfg.write_text("steps = 2\nnum_expert = 4\n")
    assert main(["train", "lm", "--config", str(cfg), "--out", str(tmp_path / "r")]) == 2
    assert "num_expert" in capsys.readouterr().err
    assert _train(tmp_path / "r2", str(tmp_path / "missing.txt")) == 2
    assert "text_file" in capsys.readouterr().err


# -- --until-flat: cycles as the Routing Mamba benchmark ---------------------------------
def _weights(path):
    return load_checkpoint(path)["model"]


def _same(a, b) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_train_lm_until_flat_records_cycles(tmp_path, text):
    out = tmp_path / "flat"
    assert _train(out, text, "--until-flat", "--max-cycles", "2") == 0
    res = json.loads((out / "results.json").read_text())
    rec = res["until_flat"]
    assert rec["cycles"] in (1, 2) and rec["finished"]
    assert rec["steps"] == rec["cycles"] * 3 and rec["cap"] == 6 and rec["max_cycles"] == 2
    assert rec["curve"][-1][0] == rec["steps"] and rec["tokens_per_step"] == 4 * 16
    assert res["train"]["cycle"] == rec["cycles"] - 1 and res["val"]["step"] == 3
    last = out / f"cycle_{rec['cycles'] - 1}"
    assert _same(_weights(out / "model.pt"), _weights(last / "model.pt"))
    cycle0 = json.loads((out / "cycle_0" / "cycle.json").read_text())
    assert cycle0["seed"] == 0 and [s for s, _ in cycle0["curve"]] == [0, 2, 3]
    assert rec["curve"][:3] == cycle0["curve"]


def test_train_lm_until_flat_unflat_stops_at_cap(tmp_path, text, monkeypatch):
    monkeypatch.setattr("sci_moe.train.is_flat", lambda *a, **k: False)
    out = tmp_path / "cap"
    assert _train(out, text, "--until-flat", "--max-cycles", "2", "--seed", "5") == 0
    rec = json.loads((out / "results.json").read_text())["until_flat"]
    assert rec["cycles"] == 2 and rec["steps"] == 6 and rec["converged"] is False
    assert [s for s, _ in rec["curve"]] == [0, 2, 3, 5, 6]
    assert json.loads((out / "cycle_1" / "cycle.json").read_text())["seed"] == 105


def test_train_lm_until_flat_resume_is_exact(tmp_path, text, monkeypatch):
    """Killed after cycle 0, or stopped inside cycle 1: --resume ends with the weights of
    an uninterrupted run, without retraining the finished cycle. --max-cycles cannot
    change on --resume (a new --out is needed for more cycles)."""
    import sci_moe.language as language

    monkeypatch.setattr("sci_moe.train.is_flat", lambda *a, **k: False)
    flags = ["--until-flat", "--max-cycles", "2"]
    ref = tmp_path / "ref"
    assert _train(ref, text, *flags) == 0
    expected = _weights(ref / "model.pt")
    real = language.run_training
    calls: list = []

    def killed(*args, **kw):  # the process dies when cycle 1 starts
        calls.append(Path(args[2]).name)
        if Path(args[2]).name == "cycle_1":
            raise KeyboardInterrupt
        return real(*args, **kw)

    def paused(*args, **kw):  # cycle 1 stops after one step, checkpointed
        calls.append(Path(args[2]).name)
        if Path(args[2]).name == "cycle_1":
            kw["stop_after"] = 1
        return real(*args, **kw)

    def counted(*args, **kw):
        calls.append(Path(args[2]).name)
        return real(*args, **kw)

    for name, stop in (("killed", killed), ("paused", paused)):
        out = tmp_path / name
        monkeypatch.setattr(language, "run_training", stop)
        if name == "killed":
            with pytest.raises(KeyboardInterrupt):
                _train(out, text, *flags)
        else:
            assert _train(out, text, *flags) == 0
            res = json.loads((out / "results.json").read_text())
            assert res["until_flat"]["finished"] is False and res["train"]["cycle"] == 1
            assert not (out / "model.pt").exists()
        monkeypatch.setattr(language, "run_training", counted)
        calls.clear()
        assert _train(out, text, *flags, "--resume") == 0
        assert calls == ["cycle_1"]  # cycle 0 read back, not retrained
        assert _same(_weights(out / "model.pt"), expected)
        res = json.loads((out / "results.json").read_text())
        assert res["until_flat"]["cycles"] == 2 and res["until_flat"]["finished"]
    # a finished run resumes without training; other --max-cycles is refused
    calls.clear()
    assert _train(ref, text, *flags, "--resume") == 0 and calls == []
    assert _same(_weights(ref / "model.pt"), expected)
    assert _train(ref, text, "--until-flat", "--max-cycles", "3", "--resume") == 2
