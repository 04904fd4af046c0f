"""The trainable speech encoder, the recogniser with it (subsampled token rate, one encoder
pass for every rate), paired rates, active-parameter matching, a Llama-like decoder as the
frozen backbone and held-out voices."""

import pytest
import torch

transformers = pytest.importorskip("transformers")

from sci_moe.speech.mome import (  # noqa: E402
    EncoderConfig,
    MatryoshkaRates,
    MoMEAdapter,
    MoMEConfig,
    RecognizerConfig,
    SpeechEncoder,
    SpeechRecognizer,
    SpeechSetConfig,
    adapter_parameter_count,
    matched_bottleneck,
)
from tests.speech.mome.backbones import tiny_bert, tiny_llama  # noqa: E402


def _model(backbone, rates=None, paired=False, adapter="mome"):
    torch.manual_seed(0)
    rates = rates or {"audio": (1, 2, 4)}
    cfg = RecognizerConfig(
        input_dims={"audio": 40, "video": 22},
        frame_rates={"audio": 100.0, "video": 25.0},
        compression=MatryoshkaRates(rates, paired=paired),
        adapter=adapter,
        mome=MoMEConfig(d_model=16, num_experts=4, top_k=2, bottleneck=2),
        bottleneck=3,
        upsample=2,
        encoders={"audio": EncoderConfig(dim=8, layers=1, heads=2, subsample=2)},
    )
    return SpeechRecognizer(backbone, cfg)


def test_encoder_shapes_and_padding_does_not_leak():
    enc = SpeechEncoder(5, EncoderConfig(dim=8, layers=2, heads=2, subsample=2)).eval()
    torch.manual_seed(1)
    x = torch.randn(1, 12, 5)
    mask = torch.ones(1, 12, dtype=torch.bool)
    h, m = enc(x, mask)
    assert h.shape == (1, 6, 8) and m.all()
    # the same utterance padded with 8 frames of garbage: its real outputs do not change
    xp = torch.cat([x, 50 * torch.randn(1, 8, 5)], 1)
    mp = torch.cat([mask, torch.zeros(1, 8, dtype=torch.bool)], 1)
    hp, mpad = enc(xp, mp)
    assert mpad.sum() == 6 and not mpad[0, 6:].any()
    torch.testing.assert_close(hp[:, :6], h, atol=1e-5, rtol=1e-5)
    assert (hp[:, 6:] == 0).all()


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"kernel": 4}, "odd"),
        ({"dim": 10, "heads": 4}, "divide"),
        ({"subsample": 0}, "subsample"),
        ({"dropout": 1.0}, "dropout"),
        ({"layers": -1}, "layers"),
    ],
)
def test_encoder_config_rejects_bad_values(kwargs, match):
    with pytest.raises(ValueError, match=match):
        EncoderConfig(**kwargs)


def test_encoder_needs_a_multiple_of_its_subsampling():
    enc = SpeechEncoder(5, EncoderConfig(dim=8, layers=0, heads=2, subsample=4))
    with pytest.raises(ValueError, match="multiple of subsample"):
        enc(torch.randn(2, 10, 5), torch.ones(2, 10, dtype=torch.bool))


@pytest.mark.parametrize("backbone", [tiny_bert, tiny_llama])
def test_recognizer_with_encoder_subsamples_and_reuses_the_encoding(backbone):
    model = _model(backbone()).eval()
    assert model.config.frame_multiple("audio") == 2 * 4
    x, mask = torch.randn(2, 32, 40), torch.ones(2, 32, dtype=torch.bool)
    mask[1, 24:] = False
    streams = {"audio": (x, mask)}
    enc = model.encode(streams)
    assert enc["audio"][0].shape == (2, 16, 8)
    for rate in (1, 2, 4):
        out = model(streams, {"audio": rate})
        assert out.log_probs.shape == (2, 16 // rate * 2, 29)
        assert out.lengths.tolist() == [16 // rate * 2, 12 // rate * 2]
        again = model(streams, {"audio": rate}, enc)
        torch.testing.assert_close(again.log_probs, out.log_probs)
    # a trainable encoder: gradients reach it through the frozen backbone
    model.train()
    model(streams, {"audio": 2}).log_probs.sum().backward()
    assert model.encoders["audio"].conv[0].weight.grad is not None
    assert all(p.grad is None for p in model.backbone.parameters())


def test_recognizer_config_rejects_encoder_conflicts():
    comp = MatryoshkaRates({"audio": (1, 2)})
    with pytest.raises(ValueError, match="not both"):
        RecognizerConfig(compression=comp, encoder_dim=4, encoders={"audio": EncoderConfig()})
    with pytest.raises(ValueError, match="no compression"):
        RecognizerConfig(compression=comp, encoders={"video": EncoderConfig()})
    cfg = RecognizerConfig(compression=comp, encoders={"audio": {"dim": 8, "heads": 2}})
    assert isinstance(cfg.encoders["audio"], EncoderConfig)


def test_paired_rates_and_audio_visual_forward():
    rates = MatryoshkaRates({"audio": (1, 2, 4), "video": (1, 2, 4)}, paired=True)
    assert rates.labels() == ["audio=1,video=1", "audio=2,video=2", "audio=4,video=4"]
    with pytest.raises(ValueError, match="as many rates"):
        MatryoshkaRates({"audio": (1, 2), "video": (1,)}, paired=True)
    model = _model(tiny_bert(), {"audio": (1, 2, 4), "video": (1, 2, 4)}, paired=True).eval()
    xa, ma = torch.randn(2, 32, 40), torch.ones(2, 32, dtype=torch.bool)
    xv, mv = torch.randn(2, 8, 22), torch.ones(2, 8, dtype=torch.bool)
    out = model({"audio": (xa, ma), "video": (xv, mv)}, {"audio": 2, "video": 2})
    # audio: 100 frames/s / 2 (encoder) / 2 (rate) = 25 tokens/s > video's 12.5
    assert out.log_probs.shape[1] == 8 * 2 and out.label == "audio=2,video=2"


def test_matched_bottleneck_of_active_parameters():
    mc = MoMEConfig(d_model=64, num_experts=8, top_k=2, num_shared=1, bottleneck=4)
    active = MoMEAdapter(mc).active_parameters()
    total = sum(p.numel() for p in MoMEAdapter(mc).parameters())
    b_act = matched_bottleneck(mc, 1, active=True)
    b_tot = matched_bottleneck(mc, 1)
    assert b_act < b_tot
    assert abs(adapter_parameter_count(64, b_act) - active) <= adapter_parameter_count(64, 1)
    assert abs(adapter_parameter_count(64, b_tot) - total) <= adapter_parameter_count(64, 1)


def test_heldout_voices_config():
    base = SpeechSetConfig(voices=("en-us",))
    assert SpeechSetConfig(voices=("en-us",), heldout_voices=()).key() == base.key()
    assert SpeechSetConfig(voices=("en-us",), heldout_voices=("en-gb-x-rp",)).key() != base.key()
    with pytest.raises(ValueError, match="overlap"):
        SpeechSetConfig(voices=("en-us",), heldout_voices=("en-us",))
