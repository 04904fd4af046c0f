"""benchmarks/mome/full.py at toy size: the grid's models at matched parameters, a unit cut
by its time budget and resumed exactly, a toy run in pieces, the rows and the verdict
rules (issue 43 item 1)."""

from __future__ import annotations

import json
import sys

import pytest

transformers = pytest.importorskip("transformers")
pytest.importorskip("espeakng_loader")

from tests.benchmarks.conftest import load_benchmark, refused  # noqa: E402


@pytest.fixture(scope="module")
def bench():
    with load_benchmark("mome/full.py", "mome_full_under_test") as mod:
        yield mod


@pytest.fixture(scope="module")
def helpers(bench):
    """benchmarks/mome/_mome.py as full.py imported it: the speech data flags' settings and
    the encoder pretraining stage."""
    mod = sys.modules["_mome"]
    assert mod.build_model is bench.build_model
    return mod


def _bert():
    import torch

    torch.manual_seed(0)  # the same backbone every time (a resumed unit checks its digest)
    cfg = transformers.BertConfig(
        hidden_size=16,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=32,
        vocab_size=8,
        max_position_embeddings=256,
    )
    return transformers.BertModel(cfg)


def test_grid_models_match_parameters(bench):
    s = bench.settings(True)
    s = dict(s, rates=[1, 2, 4, 8], num_experts=8, bottleneck=4)
    models = {m: bench.build_model(m, "av", s, _bert(), 0) for m in bench.METHODS}
    p = {m: model.parameter_counts() for m, model in models.items()}
    one = 2 * 16 + 16 + 1  # the smallest step of a dense adapter: one bottleneck unit
    assert abs(p["per_rate"]["adapter"] - p["mome"]["adapter"]) <= 4 * one  # 4 rate pairs
    assert abs(p["shared"]["adapter"] - p["mome"]["adapter"]) <= one
    assert abs(p["dense_active"]["adapter"] - p["mome"]["adapter_active"]) <= one
    assert p["dense_active"]["adapter"] < p["shared"]["adapter"]
    assert models["mome"].config.compression.labels()[1] == "audio=2,video=2"
    assert set(models["mome"].encoders) == {"audio", "video"}
    with pytest.raises(ValueError, match="method"):
        bench.build_model("nope", "audio", s, _bert(), 0)


@pytest.fixture(scope="module")
def data(bench, helpers, tmp_path_factory):
    from sci_moe.speech.mome import build_speech_set

    s = bench.settings(True)
    return build_speech_set(helpers.speech_config(s), tmp_path_factory.mktemp("speech"), False)


def test_heldout_voices_speak_only_validation_and_test(bench, data):
    assert len(data.splits["train"]) and len(data.splits["test"])
    train_phrases = set(data.phrase[data.splits["train"]].tolist())
    for split in ("val", "test"):
        assert not set(data.phrase[data.splits[split]].tolist()) & train_phrases


def test_unit_cut_by_its_budget_resumes_exactly(bench, data, tmp_path):
    s = bench.settings(True)
    ref = bench.run_unit("audio", "mome", 0, s, data, _bert(), tmp_path / "a")
    assert ref["train"]["steps"] == s["steps"] and ref["routing_untrained"]["js"] >= 0
    assert bench.run_unit("audio", "mome", 0, s, data, _bert(), tmp_path / "b", 0.0) is None
    # a budget spent during training: the trainer checkpoints and the unit is None
    cut = bench.run_unit("audio", "mome", 0, s, data, _bert(), tmp_path / "b", 1e-12)
    assert cut is None and (tmp_path / "b" / "checkpoint.pt").is_file()
    rec = bench.run_unit("audio", "mome", 0, s, data, _bert(), tmp_path / "b")
    assert rec["eval"] == ref["eval"] and rec["train"]["curve"] == ref["train"]["curve"]


def _fake_doc(bench, cer_mome, cer_base, flat=True, seeds=(0, 1, 2, 3, 4)):
    s = bench.settings(True)
    runs = {}
    for mod in bench.MODALITIES:
        labels = bench.compression(mod, s["rates"]).labels()
        snrs = s["test_snr"] if mod != "video" else [None]
        for method in bench.METHODS:
            for sd in seeds:
                step = 0.01 if method == "mome" else 0.013  # paired differences vary
                cer = (cer_mome if method == "mome" else cer_base) + step * sd
                ev = {f"{lab}/{bench.snr_name(x)}": [cer, 2 * cer] for lab in labels for x in snrs}
                rec = {
                    "eval": ev,
                    "params": dict(trainable=10, adapter=5, adapter_active=3, frozen=100),
                    "train": dict(steps=10, converged=flat, curve=[[5, 0.5], [10, 0.4]]),
                    "train_s": 1.0,
                }
                if method == "mome":
                    rec["routing"] = {"js": 0.01 + 0.001 * sd, "js_shuffled": 0.1}
                    rec["routing_untrained"] = {"js": 0.05 + 0.002 * sd, "js_shuffled": 0.1}
                runs[bench.unit_key(mod, method, sd)] = rec
    rows = bench.make_rows(runs, s, list(seeds))
    machine = {"seeds": list(seeds), "settings": s}
    return {"machine": machine, "rows": [vars(r) for r in rows]}, runs


def test_verdict_rules(bench):
    doc, _ = _fake_doc(bench, 0.2, 0.25)
    assert bench.gate_passed(doc, [0, 1, 2, 3, 4])
    vs = bench.verdicts(doc)
    # per modality: 3 baselines x (mean, top rate); noise 3 SNRs for audio, av; routing
    assert len(vs) == 3 * 6 + 2 * 3 + 3
    beat = [v for v in vs if v["claim"].startswith("MoME beats")]
    assert all(v["verdict"] == "reproduced" and v["decisive"] for v in beat)
    routing = [v for v in vs if "same experts" in v["claim"]]
    assert all(v["verdict"] == "reproduced" for v in routing)
    # not flat: the same numbers are not decisive
    doc, _ = _fake_doc(bench, 0.2, 0.25, flat=False)
    assert not any(v["decisive"] for v in bench.verdicts(doc))
    # a recogniser that does not recognise: nothing is decisive either
    doc, _ = _fake_doc(bench, 0.5, 0.6)
    assert not bench.gate_passed(doc, [0, 1, 2, 3, 4])
    vs = bench.verdicts(doc)
    assert not any(v["decisive"] for v in vs) and "do not reach" in vs[0]["why"]
    # MoME worse: contradicted
    doc, _ = _fake_doc(bench, 0.25, 0.2)
    beat = [v for v in bench.verdicts(doc) if v["claim"].startswith("MoME beats")]
    assert all(v["verdict"] == "contradicted" for v in beat)


def test_toy_run_in_pieces_and_resume(bench, tmp_path, monkeypatch):
    monkeypatch.setattr(bench, "load_backbone", lambda s: _bert())
    path = tmp_path / "full.json"
    args = ["--quick", "--threads", "1", "--json", str(path), "--cache", str(tmp_path / "c"),
            "--modalities", "audio", "--methods", "mome,per_rate",
            "--work", str(tmp_path / "w")]  # fmt: skip
    assert bench.main([*args, "--seeds", "1"]) == 0
    doc = json.loads(path.read_text())
    assert doc["complete"] is True and list(doc["runs"]) == [
        "audio/mome/seed=0",
        "audio/per_rate/seed=0",
    ]
    assert doc["verdicts"] == []  # one seed: no paired test yet
    first = doc["runs"]["audio/mome/seed=0"]
    assert bench.main([*args, "--seeds", "2", "--resume", "--plots", str(tmp_path)]) == 0
    doc = json.loads(path.read_text())
    assert doc["complete"] is True and doc["runs"]["audio/mome/seed=0"] == first
    assert [p["units"] for p in doc["machine"]["pieces"]] == [2, 2]
    assert (tmp_path / "full_quick_curves.png").is_file()  # named after the JSON
    rows = {(r["case"], r["metric"]) for r in doc["rows"]}
    assert ("audio/mome/audio=1/clean/seed=1", "cer") in rows
    assert ("audio/mome/mean_over_rates/0dB", "cer") in rows
    assert ("audio/routing_untrained", "js_across_rates") in rows
    assert ("audio/per_rate", "params_adapter") in rows
    claims = [v["claim"] for v in doc["verdicts"]]
    assert "MoME beats per-rate adapters across scales (audio, mean over rates)" in claims
    assert all(v["seeds"] == 2 for v in doc["verdicts"])
    # a piece whose budget is spent starts no unit; the run stays incomplete
    assert bench.main([*args, "--seeds", "3", "--resume", "--max-hours", "1e-9"]) == 0
    doc = json.loads(path.read_text())
    assert doc["complete"] is False and len(doc["runs"]) == 4
    assert (tmp_path / "w" / "full" / "audio_mome_seed=1" / "checkpoint.pt").is_file()


def test_pretrained_encoder_stage_then_frozen_units(bench, helpers, tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(bench, "load_backbone", lambda s: _bert())
    path = tmp_path / "pre.json"
    args = ["--quick", "--threads", "1", "--json", str(path), "--cache", str(tmp_path / "c"),
            "--modalities", "audio", "--methods", "mome", "--seeds", "1",
            "--work", str(tmp_path / "w"), "--pretrain-encoder"]  # fmt: skip
    enc = tmp_path / "w" / "pre" / "audio_encoder.pt"
    # a piece whose budget is spent before the stage: nothing pretrained, no unit
    assert bench.main([*args, "--max-hours", "1e-9"]) == 0
    assert not enc.exists() and json.loads(path.read_text())["runs"] == {}
    assert bench.main([*args, "--pretrain-only", "--resume"]) == 0
    doc = json.loads(path.read_text())
    assert enc.is_file() and doc["runs"] == {} and doc["complete"] is False
    pre = doc["pretrain"]
    assert pre["steps"] == 4 and set(pre["test"]) >= {"audio=1/clean", "audio=1/0dB"}
    assert [c[0] for c in pre["curve"]] == [2, 4] and isinstance(pre["converged"], bool)
    rows = {(r["case"], r["metric"]) for r in doc["rows"]}
    assert ("audio/pretrained_encoder/audio=1/clean", "cer") in rows
    assert bench.main([*args, "--resume", "--plots", str(tmp_path)]) == 0
    doc = json.loads(path.read_text())
    unit = doc["runs"]["audio/mome/seed=0"]
    assert unit["encoder"] == {"digest": pre["digest"], "frozen": True}
    assert doc["pretrain"] == pre and doc["complete"] is True
    assert (tmp_path / "pre_quick_curves.png").is_file()
    # the units' trainable parameters exclude the frozen encoder
    s = bench.settings(True, pretrain=True)
    plain = bench.build_model("mome", "audio", s, _bert(), 0).parameter_counts()
    assert unit["params"]["trainable"] < plain["trainable"]
    # the encoder file no longer fits the settings: a clear exit
    s_other = dict(s, audio_encoder=dict(s["audio_encoder"], dim=8))
    with refused(capsys, r"other settings \(audio_encoder.dim: \d+ -> 8\); remove"):
        helpers.pretrain_stage(s_other, None, enc)
    # a unit given an encoder of another architecture: ValueError saying what to do
    from sci_moe.speech.mome import EncoderConfig, SpeechEncoder, save_encoder

    bad = save_encoder(tmp_path / "bad.pt", SpeechEncoder(40, EncoderConfig(dim=8, heads=2)))
    with pytest.raises(ValueError, match="pretrain it again"):
        bench.run_unit("audio", "mome", 0, s, None, _bert(), None, encoder=bad)


@pytest.mark.parametrize("flag", [["--pretrain-only"], ["--pretrain-steps", "10"]])
def test_pretrain_flags_need_the_stage(bench, tmp_path, flag):
    with pytest.raises(SystemExit, match="need --pretrain-encoder"):
        bench.main(["--quick", *flag, "--work", str(tmp_path)])


def test_encoder_and_data_flags_enter_the_settings(bench, helpers):
    plain = bench.settings(False, pretrain=True)
    assert "extra_train_phrases" not in plain and "train_variants" not in plain
    assert helpers.pretrain_settings(plain) == {"pretrain": plain["pretrain"],
                                              "audio_encoder": plain["audio_encoder"]}  # fmt: skip
    # the defaults given explicitly: the settings of the runs before the flags
    assert bench.settings(False, pretrain=True, encoder_dim=128, encoder_layers=2,
                          train_variants=2) == plain  # fmt: skip
    s = bench.settings(False, pretrain=True, encoder_dim=192, encoder_layers=4,
                       extra_train_phrases=2700, train_variants=3)  # fmt: skip
    assert s["audio_encoder"] == dict(plain["audio_encoder"], dim=192, layers=4)
    assert s["extra_train_phrases"] == 2700 and s["train_variants"] == 3
    cfg = helpers.speech_config(s)
    assert (cfg.extra_train_phrases, cfg.train_variants) == (2700, 3)
    assert helpers.speech_config(plain).key() == cfg.__class__(
        **{**vars(cfg), "extra_train_phrases": 0, "train_variants": None}).key()  # fmt: skip
    assert helpers.pretrain_settings(s)["data"] == {"extra_train_phrases": 2700,
                                                  "train_variants": 3}  # fmt: skip


@pytest.mark.parametrize(
    "flags",
    [["--encoder-dim", "130"], ["--encoder-layers", "0"], ["--extra-train-phrases", "-1"],
     ["--extra-train-phrases", "5000"], ["--train-variants", "1"],
     ["--pretrain-encoder", "--pretrain-steps", "0"]],
)  # fmt: skip
def test_bad_encoder_and_data_flags_exit(bench, tmp_path, flags):
    with pytest.raises(SystemExit, match="must be"):
        bench.main(["--threads", "1", "--work", str(tmp_path), *flags])


def test_pretrain_with_extra_training_data(bench, tmp_path, capsys):
    path = tmp_path / "more.json"
    args = ["--quick", "--threads", "1", "--json", str(path), "--cache", str(tmp_path / "c"),
            "--work", str(tmp_path / "w"), "--pretrain-encoder", "--pretrain-only",
            "--pretrain-steps", "3", "--extra-train-phrases", "2", "--train-variants", "2",
            "--encoder-layers", "2"]  # fmt: skip
    assert bench.main(args) == 0
    doc = json.loads(path.read_text())
    s = doc["machine"]["settings"]
    # the stage's cap (the quick default is 4) enters the settings and the encoder's record
    assert s["pretrain"]["steps"] == 3 == doc["pretrain"]["settings"]["pretrain"]["steps"]
    assert doc["pretrain"]["steps"] <= 3
    assert s["extra_train_phrases"] == 2 and s["train_variants"] == 2
    assert s["audio_encoder"]["layers"] == 2
    n = doc["machine"]["n_utterances"]
    plain = bench.settings(True)
    assert n["train"] == 2 * (round(0.7 * plain["num_phrases"]) + 2)  # 2 variants each
    assert doc["pretrain"]["settings"]["data"] == {"extra_train_phrases": 2, "train_variants": 2}
    # resuming with other data settings is refused (the run's settings differ)
    with refused(capsys, r"other settings \(audio_encoder.layers: 2 -> 1; train_variants: 2 -> "):
        bench.main([*args[:-4], "--resume"])


def test_finished_encoder_kept_beside_the_json_and_restored(bench, helpers, tmp_path, monkeypatch,
                                                            capsys):  # fmt: skip
    """The finished encoder is copied beside the JSON with its SHA-256 in the record; a
    resume on a fresh machine (no work folder) loads it instead of pretraining again; a
    damaged or missing copy stops with what to do; a record without it needs the work file."""
    import hashlib
    import shutil

    monkeypatch.setattr(bench, "load_backbone", lambda s: _bert())
    path = tmp_path / "enc.json"
    args = ["--quick", "--threads", "1", "--json", str(path), "--cache", str(tmp_path / "c"),
            "--modalities", "audio", "--methods", "mome", "--seeds", "1",
            "--work", str(tmp_path / "w"), "--pretrain-encoder"]  # fmt: skip
    kept = tmp_path / "enc_files" / "audio_encoder.pt"
    assert bench.committed_encoder(path) == kept
    # a piece cut before the stage finishes: nothing kept
    assert bench.main([*args, "--max-hours", "1e-9"]) == 0
    assert not kept.exists()
    assert bench.main([*args, "--pretrain-only", "--resume"]) == 0
    pre = json.loads(path.read_text())["pretrain"]
    work = tmp_path / "w" / "enc" / "audio_encoder.pt"
    assert kept.read_bytes() == work.read_bytes()
    assert pre["file"] == {"path": "enc_files/audio_encoder.pt",
                           "sha256": hashlib.sha256(kept.read_bytes()).hexdigest(),
                           "bytes": kept.stat().st_size}  # fmt: skip
    assert not list(kept.parent.glob("*.tmp"))
    # a fresh machine: no work folder; pretraining again would fail the test
    shutil.rmtree(tmp_path / "w")

    def no_pretraining(*a, **k):
        raise AssertionError("pretrained again")

    monkeypatch.setattr(sys.modules["_mome_pretrain"], "pretrain_encoder", no_pretraining)
    capsys.readouterr()
    assert bench.main([*args, "--resume"]) == 0
    assert "restored from the committed copy" in capsys.readouterr().out
    doc = json.loads(path.read_text())
    assert doc["pretrain"] == pre and doc["complete"] is True
    assert doc["runs"]["audio/mome/seed=0"]["encoder"] == {"digest": pre["digest"], "frozen": True}
    # the work file there: used as is
    assert bench.main([*args, "--pretrain-only", "--resume"]) == 0
    assert "the work-folder file" in capsys.readouterr().out
    # a damaged copy: a clear exit saying what to do, nothing restored
    shutil.rmtree(tmp_path / "w")
    good = kept.read_bytes()
    kept.write_bytes(good[:-1] + bytes([good[-1] ^ 1]))
    with pytest.raises(SystemExit, match=r"not the encoder of this run \(SHA-256.*git checkout"):
        bench.main([*args, "--resume"])
    assert not work.exists()
    kept.unlink()
    with pytest.raises(SystemExit, match="and so is its committed copy"):
        bench.main([*args, "--resume"])
    # a record of a run before the copy (no "file"): the work file is needed, as before
    kept.write_bytes(good)
    doc = json.loads(path.read_text())
    del doc["pretrain"]["file"]
    path.write_text(json.dumps(doc))
    with pytest.raises(SystemExit, match="missing; restore it or start the run afresh"):
        bench.main([*args, "--resume"])


def test_an_unfinished_pretraining_is_kept_for_commit_and_continued(bench, tmp_path, monkeypatch,
                                                                    capsys):  # fmt: skip
    """A piece cut inside the encoder's pretraining keeps the trainer checkpoint beside the
    JSON (to commit); a fresh machine (no work folder) continues from it instead of from
    step 0; the finished stage removes it. The trainer is replaced by a stand-in, so that
    the cut does not depend on wall time."""
    from types import SimpleNamespace

    mod = sys.modules["_mome_pretrain"]
    s = bench.settings(True, pretrain=True)
    enc = tmp_path / "w" / "run" / "audio_encoder.pt"
    keep = tmp_path / "run_files" / mod.CHECKPOINT_FILE
    calls = []

    def cut(data, enc_cfg, cfg, out_dir, resume):
        calls.append(("cut", resume))
        out_dir.mkdir(parents=True, exist_ok=True)
        (out_dir / "checkpoint.pt").write_bytes(b"state at step 2")
        return SimpleNamespace(result=SimpleNamespace(reason="budget", step=2, steps=4))

    monkeypatch.setattr(mod, "pretrain_encoder", cut)
    assert mod.pretrain_stage(s, None, enc, max_hours=1.0, keep=keep) is None
    assert keep.read_bytes() == b"state at step 2" and calls == [("cut", False)]
    assert "kept for commit" in capsys.readouterr().out

    # a fresh machine: the work folder is gone; the stage resumes from the kept copy
    import shutil

    shutil.rmtree(tmp_path / "w")

    def finish(data, enc_cfg, cfg, out_dir, resume):
        calls.append(("finish", resume, (out_dir / "checkpoint.pt").read_bytes()))
        r = SimpleNamespace(reason="completed", step=4, steps=4, best_step=4, best_metric=0.5,
                            train_time_s=1.0, evals=[{"step": 2, "val_cer": 0.6},
                                                     {"step": 4, "val_cer": 0.5}])  # fmt: skip
        return SimpleNamespace(result=r, model=SimpleNamespace(encoder=None))

    monkeypatch.setattr(mod, "pretrain_encoder", finish)
    monkeypatch.setattr(mod, "evaluate_encoder", lambda *a, **k: {"cer": 0.5, "wer": 0.9})
    saved = []
    monkeypatch.setattr(mod, "save_encoder", lambda path, *a: saved.append(path))
    monkeypatch.setattr(mod, "read_encoder", lambda path: (None, {"digest": "d"}))
    info = mod.pretrain_stage(s, None, enc, max_hours=1.0, keep=keep)
    assert calls[-1] == ("finish", True, b"state at step 2")
    assert "continuing from the committed checkpoint" in capsys.readouterr().out
    assert info == {"digest": "d"} and saved == [enc]
    assert not keep.exists()  # the finished stage keeps the encoder instead
