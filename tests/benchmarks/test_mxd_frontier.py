"""benchmarks/mxd/frontier.py at toy size (a tiny random Llama instead of SmolLM2): the
flatness rule, pieces cut by --max-hours and continued by --resume (a collection paused at
its deadline, a training run paused between segments), the plan of runs, rows, verdicts."""

from __future__ import annotations

import json
import math

import pytest
import torch

from .conftest import BENCH, load_benchmark, refused

transformers = pytest.importorskip("transformers")

TINY = dict(
    layers=[1], context_len=8, val_fraction=0.1, max_windows_per_source=6,
    chunk_windows=4, collect_batch=4, dtype="float16",
    ks=[2, 4], seeds=[0, 1], lrs=[1e-2, 3e-2], sweep_k=2, normalise=True,
    latent_multiplier=4, d_hidden=8, batch_size=32,
    min_steps=4, max_steps=8, eval_every=2, monitor_tokens=64, ce_windows=4,
)  # fmt: skip


@pytest.fixture(scope="module")
def bench():
    with load_benchmark("mxd/frontier.py", "mxd_frontier_under_test") as mod:
        yield mod


def _tiny_llama():
    torch.manual_seed(0)
    cfg = transformers.LlamaConfig(
        vocab_size=50, hidden_size=16, intermediate_size=32, num_hidden_layers=3,
        num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=64,
    )  # fmt: skip
    return transformers.LlamaForCausalLM(cfg).eval()


@pytest.fixture
def toy(bench, monkeypatch):
    from sci_moe.language.mxd import PretrainedModel, TokenWindows

    model = _tiny_llama()
    monkeypatch.setattr(bench, "load_smollm2", lambda: PretrainedModel(model, None, "tiny", "t"))

    def windows(tokenize, context_len, split, val_fraction, max_windows_per_source):
        g = torch.Generator().manual_seed(("train", "val", "test").index(split))
        n = 4 * max_windows_per_source
        src = torch.arange(n) % 4
        return TokenWindows(
            torch.randint(0, 50, (n, context_len), generator=g),
            src,
            torch.arange(n),
            bench.OFFLINE_TEXT_SOURCES,
        )

    monkeypatch.setattr(bench, "offline_text_windows", windows)
    monkeypatch.setattr(bench, "QUICK", dict(TINY))
    return bench


def test_flat_rule(bench):
    slow = [[s, 1.0 / s] for s in range(100, 1100, 100)]  # still falling 1/s: 20 % better
    assert not bench.flat(slow)
    plateau = [[s, 0.5 + 0.001 * (s == 100)] for s in range(100, 1100, 100)]
    assert bench.flat(plateau)
    assert not bench.flat(plateau, min_steps=2000)
    assert not bench.flat(plateau[:4])


def test_pieces_resume_to_a_complete_run(toy, tmp_path, capsys):
    path, cache = tmp_path / "toy.json", tmp_path / "cache"
    args = ["--quick", "--json", str(path), "--cache", str(cache), "--threads", "1"]
    # a piece with no time: the collection is paused before its first chunk
    assert toy.main([*args, "--max-hours", "0"]) == 0
    doc = json.loads(path.read_text())
    assert doc["complete"] is False and doc["runs"] == {} and doc["verdicts"] == []
    assert toy.main([*args, "--resume", "--plots", str(tmp_path / "img")]) == 0
    doc = json.loads(path.read_text())
    assert doc["complete"] is True and doc["machine"]["pieces"] == 2
    # the sweep (3 methods x 2 rates at k = 2, seed 0), then the chosen rate everywhere
    assert len(doc["runs"]) == 3 * 2 + 3 * (2 * 2 - 1)
    for rec in doc["runs"].values():
        assert 4 <= rec["steps"] <= 8 and rec["curve"][-1][0] == rec["steps"]
        assert math.isfinite(rec["ce_increase"]) and 0.0 <= rec["fvu"]
    rows = {(r["case"], r["metric"]) for r in doc["rows"]}
    for m in ("mxd", "transcoder", "skip_transcoder"):
        assert (f"L1/{m}", "chosen_lr") in rows
        assert (f"L1/{m}/k=4/seed=1", "ce_increase") in rows
    assert [v["seeds"] for v in doc["verdicts"]] == [2, 2, 2, 2]  # 2 k, probing, faithful
    assert all(not v["decisive"] for v in doc["verdicts"][-1:])
    assert (tmp_path / "img" / "mxd_1m_quick_frontier.png").is_file()
    assert (tmp_path / "img" / "mxd_1m_quick_curves.png").is_file()
    assert not (cache / "runs").exists() or not any((cache / "runs").iterdir())
    # a further --resume reruns nothing; other settings are refused
    assert toy.main([*args, "--resume"]) == 0
    assert json.loads(path.read_text())["runs"] == doc["runs"]
    toy.QUICK["ks"] = [2, 8]
    with refused(capsys, r"other settings \(ks: \[[0-9, ]+\] -> \[2, 8\]\)"):
        toy.main([*args, "--resume"])
    assert toy.main(["--verdicts-only", str(path)]) == 0


def _settings(path):
    return json.loads(path.read_text())["machine"]["settings"]


def test_seeds_flag(toy, tmp_path, capsys, monkeypatch):
    """--seeds N: paired seeds --seed, ..., --seed + N - 1 (default 5 in the full plan, the
    quick plan's own count); N < 1 exits with status 2; the seed list is in the stored
    settings, so --resume refuses a state made with other seeds."""
    assert toy.FULL["seeds"] == [0, 1, 2, 3, 4]
    path, cache = tmp_path / "toy.json", tmp_path / "cache"
    args = ["--json", str(path), "--cache", str(cache), "--threads", "1", "--max-hours", "0"]
    # the full plan's default (its data settings made toy-sized, its seeds kept)
    monkeypatch.setattr(toy, "FULL", dict(TINY, seeds=toy.FULL["seeds"]))
    assert toy.main(args) == 0
    assert _settings(path)["seeds"] == [0, 1, 2, 3, 4]
    # the quick plan keeps its own count unless given
    assert toy.main([*args, "--quick"]) == 0
    assert _settings(path)["seeds"] == TINY["seeds"] == [0, 1]
    assert toy.main([*args, "--quick", "--seeds", "3", "--seed", "1"]) == 0
    assert _settings(path)["seeds"] == [1, 2, 3]
    for bad in ("0", "-2"):
        with refused(capsys, f"--seeds must be >= 1, got {bad}"):
            toy.main([*args, "--quick", "--seeds", bad])
    # resume: the same seeds continue, other seeds are refused
    assert toy.main([*args, "--quick", "--seeds", "3", "--seed", "1", "--resume"]) == 0
    assert json.loads(path.read_text())["machine"]["pieces"] == 2
    with refused(capsys, r"other settings \(seeds: \[1, 2, 3\] -> \[1, 2, 3, 4, 5\]\)"):
        toy.main([*args, "--quick", "--seeds", "5", "--seed", "1", "--resume"])
    with refused(capsys, r"other settings \(seeds: \[1, 2, 3\] -> \[0, 1\]\)"):
        toy.main([*args, "--quick", "--resume"])


def test_a_training_run_paused_between_segments_continues_exactly(bench, tmp_path):
    from sci_moe.language.mxd import match_decomposition_sizes

    g = torch.Generator().manual_seed(0)
    x = torch.randn(256, 16, generator=g)
    data = {"x": x.half(), "y": torch.tanh(x @ torch.randn(16, 16, generator=g)).half()}
    val = {k: v[:64].float() for k, v in data.items()}
    sizes = match_decomposition_sizes(16, 16, latent_multiplier=4, d_hidden=8)

    def run(deadlines, out):
        torch.manual_seed(3)
        layer = sizes.build("transcoder", top_k=2)
        for d in deadlines:
            rec = bench.train_run("k", layer, data, val, TINY, 1e-2, 0, out, d)
        return rec, layer

    whole, a = run([math.inf], tmp_path / "a")
    paused, _ = run([-math.inf], tmp_path / "b")
    assert paused is None  # one segment, then the deadline
    resumed, b = run([-math.inf, math.inf], tmp_path / "c")
    assert resumed["curve"] == whole["curve"] and resumed["steps"] == whole["steps"]
    for pa, pb in zip(a.parameters(), b.parameters(), strict=True):
        assert torch.equal(pa, pb)
    # a finished run not yet in the results JSON (a piece killed meanwhile) is taken as it is
    again, c = run([-math.inf], tmp_path / "a")
    assert again == json.loads(json.dumps(whole))
    for pa, pc in zip(a.parameters(), c.parameters(), strict=True):
        assert torch.equal(pa, pc)


def test_faithful_verdict_is_one_rule_for_both_scripts():
    with load_benchmark("mxd/_frontier.py", "mxd_frontier_helper_under_test") as mod:
        helper = mod.faithful_verdict
    v = helper([0.95, 0.91, 0.97], seeds=3, layer=2)
    assert v["verdict"] == "reproduced" and v["ours"] == 0.91 and v["seeds"] == 3
    assert v["claim"].endswith("(layer 2)") and not v["decisive"] and not v["converged"]
    assert "a claim about MxD alone" in v["why"]
    low = helper([0.95, 0.5], seeds=2, caveat="less is no test")
    assert low["verdict"] == "not decided" and low["why"].endswith("reproduces; less is no test)")
    assert low["claim"] == "the spliced MxD model stays faithful to the original"
    with pytest.raises(ValueError, match="at least one"):
        helper([], seeds=2)


@pytest.mark.parametrize("name", ["mxd.json", "mxd_quick.json"])
def test_run_py_stored_verdicts_are_its_rule(name):
    """run.py's rule (faithfulness from ``_frontier.faithful_verdict``) gives the stored
    verdicts exactly."""
    path = BENCH / "mxd" / "results" / name
    doc = json.loads(path.read_text())
    with load_benchmark("mxd/run.py", "mxd_run_under_test") as run:
        assert json.dumps(run.verdicts(doc)) == json.dumps(doc["verdicts"])
