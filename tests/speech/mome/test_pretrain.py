"""SpecAugment masking of the speech encoder, CTC pretraining of the encoder alone, and the
pretrained encoder loaded (verified, frozen) into a recogniser (issue 43 item 1)."""

import dataclasses

import pytest
import torch

transformers = pytest.importorskip("transformers")

from sci_moe.speech.mome import (  # noqa: E402
    EncoderConfig,
    EncoderCTC,
    MatryoshkaRates,
    MoMEConfig,
    PretrainConfig,
    RecognizerConfig,
    SpeechEncoder,
    SpeechRecognizer,
    SpeechSetConfig,
    TrainConfig,
    build_speech_set,
    evaluate_encoder,
    load_encoder,
    pretrain_encoder,
    read_encoder,
    recognizer_meta,
    save_encoder,
    spec_mask,
    train_recognizer,
)

ENC = dict(dim=8, layers=1, heads=2, subsample=2)
PHRASES = ["open the door", "we like music", "rivers flow"]


# ------------------------------------------------------------------ spec masking


def test_spec_mask_zeroes_spans_within_the_real_frames():
    B, T, d = 4, 60, 10
    x = torch.randn(B, T, d) + 5.0  # no value is zero by chance
    mask = torch.zeros(B, T, dtype=torch.bool)
    lengths = [60, 40, 25, 9]
    for b, n in enumerate(lengths):
        mask[b, :n] = True
    gen = torch.Generator().manual_seed(3)
    y = spec_mask(x, mask, time_masks=2, time_width=12, time_ratio=0.5, generator=gen)
    for b, n in enumerate(lengths):
        zero_t = (y[b] == 0).all(-1)  # a time mask zeroes whole frames
        assert ((y[b] == 0) == zero_t.unsqueeze(-1)).all()
        assert not zero_t[n:].any() and (y[b, n:] == x[b, n:]).all()  # padding untouched
        assert zero_t.sum() <= 2 * min(12, int(0.5 * n))  # two spans, each capped
        assert (y[b][~zero_t] == x[b][~zero_t]).all()
    gen = torch.Generator().manual_seed(3)
    y = spec_mask(x, mask, freq_masks=1, freq_width=4, generator=gen)
    zero_f = (y == 0).all(1)  # (B, d): a band zeroes a feature in every frame
    assert ((y == 0) == zero_f.unsqueeze(1)).all()
    assert (zero_f.sum(1) <= 4).all()
    for b in range(B):  # one contiguous band
        idx = zero_f[b].nonzero().flatten()
        assert len(idx) == 0 or (idx.diff() == 1).all()


def test_spec_mask_is_deterministic_under_a_seed_and_masks_something():
    x, mask = torch.randn(8, 80, 16) + 3.0, torch.ones(8, 80, dtype=torch.bool)
    kw = dict(time_masks=2, time_width=20, freq_masks=2, freq_width=5, time_ratio=0.3)
    a = spec_mask(x, mask, **kw, generator=torch.Generator().manual_seed(0))
    b = spec_mask(x, mask, **kw, generator=torch.Generator().manual_seed(0))
    c = spec_mask(x, mask, **kw, generator=torch.Generator().manual_seed(1))
    assert torch.equal(a, b) and not torch.equal(a, c)
    assert (a == 0).any()
    torch.manual_seed(5)  # the global generator by default
    g1 = spec_mask(x, mask, **kw)
    torch.manual_seed(5)
    assert torch.equal(g1, spec_mask(x, mask, **kw))
    assert spec_mask(x, mask) is x  # nothing asked: identity


def test_spec_mask_bad_values():
    x, mask = torch.randn(1, 4, 2), torch.ones(1, 4, dtype=torch.bool)
    with pytest.raises(ValueError, match="time_masks"):
        spec_mask(x, mask, time_masks=-1)
    with pytest.raises(ValueError, match="time_ratio"):
        spec_mask(x, mask, time_masks=1, time_width=2, time_ratio=0.0)
    with pytest.raises(ValueError, match="mask"):
        spec_mask(x, mask[:, :3])
    with pytest.raises(ValueError, match="freq_masks"):
        EncoderConfig(freq_masks=-2)
    with pytest.raises(ValueError, match="time_mask_ratio"):
        EncoderConfig(time_mask_ratio=1.5)


def test_encoder_masks_in_training_only():
    cfg = EncoderConfig(**ENC, dropout=0.0, time_masks=2, time_mask_width=6, freq_masks=2,
                        freq_mask_width=3, time_mask_ratio=0.5)  # fmt: skip
    plain = EncoderConfig(**ENC, dropout=0.0)
    torch.manual_seed(0)
    enc = SpeechEncoder(10, cfg)
    ref = SpeechEncoder(10, plain)
    ref.load_state_dict(enc.state_dict())
    x, mask = torch.randn(3, 40, 10), torch.ones(3, 40, dtype=torch.bool)
    enc.eval(), ref.eval()
    torch.testing.assert_close(enc(x, mask)[0], ref(x, mask)[0])  # identity at eval
    enc.train(), ref.train()
    torch.manual_seed(1)
    h1 = enc(x, mask)[0]
    torch.manual_seed(1)
    assert torch.equal(h1, enc(x, mask)[0])  # seeded: the same masks
    assert not torch.allclose(h1, ref(x, mask)[0])  # training: masked


# ------------------------------------------------------------------ pretraining


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    pytest.importorskip("espeakng_loader")
    cfg = SpeechSetConfig(num_phrases=3, variants=1, voices=("en-us",), split=(0.34, 0.33, 0.33))
    return build_speech_set(cfg, tmp_path_factory.mktemp("speech"), False, phrases=PHRASES)


def _pcfg(**kw):
    base = dict(steps=3, batch_size=2, eval_every=2, rates=(1, 2), upsample=2, progress=False,
                snr_db=(None, 10.0))  # fmt: skip
    return PretrainConfig(**{**base, **kw})


def _recognizer(enc=None, seed=0):
    torch.manual_seed(0)  # the same backbone every time
    bcfg = transformers.BertConfig(hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                                   intermediate_size=32, vocab_size=8,
                                   max_position_embeddings=256)  # fmt: skip
    bert = transformers.BertModel(bcfg)
    torch.manual_seed(seed)
    cfg = RecognizerConfig(
        compression=MatryoshkaRates({"audio": (1, 2)}),
        mome=MoMEConfig(d_model=16, num_experts=2, top_k=1, bottleneck=2),
        upsample=2,
        encoders={"audio": EncoderConfig(**(enc or ENC))},
    )
    return SpeechRecognizer(bert, cfg)


def test_pretrain_writes_an_encoder_the_recogniser_loads_frozen(data, tmp_path):
    enc_cfg = EncoderConfig(**ENC, time_masks=1, time_mask_width=5, freq_masks=1)
    run = pretrain_encoder(data, enc_cfg, _pcfg(), out_dir=tmp_path / "run")
    r = run.result
    assert r.step == 3 and r.reason == "completed" and len(run.history) == 3
    assert {"val_cer", "val_cer[1]", "val_cer[2]"} <= set(r.evals[-1])
    assert not run.model.training and isinstance(run.model, EncoderCTC)
    ev = evaluate_encoder(run.model, data, "test", rate=2)
    assert 0.0 <= ev["cer"] and len(ev["hyps"]) == len(data.splits["test"])
    path = save_encoder(tmp_path / "enc.pt", run.model.encoder, "audio", {"test_cer": ev["cer"]})

    enc, meta = read_encoder(path)
    assert meta["test_cer"] == ev["cer"] and meta["config"]["time_masks"] == 1
    assert torch.equal(enc.conv[0].weight, run.model.encoder.conv[0].weight)
    model = _recognizer()
    info = load_encoder(model, path)
    assert info["test_cer"] == ev["cer"] and info["frozen"] and info["modality"] == "audio"
    for k, v in run.model.encoder.state_dict().items():
        assert torch.equal(model.encoders["audio"].state_dict()[k], v)
    assert not any(p.requires_grad for p in model.encoders["audio"].parameters())
    model.train()  # the frozen encoder stays in eval mode (no dropout, no masking)
    assert model.training and not model.encoders["audio"].training
    assert recognizer_meta(model)["frozen_encoders"] == {"audio": info["digest"]}

    before = {k: v.clone() for k, v in model.encoders["audio"].state_dict().items()}
    head = model.head.weight.detach().clone()
    cfg = TrainConfig(steps=2, batch_size=2, eval_every=0, progress=False, snr_db=(None,))
    train_recognizer(model, data, cfg, out_dir=tmp_path / "unit")
    after = model.encoders["audio"].state_dict()
    assert all(torch.equal(before[k], after[k]) for k in before)  # frozen: unchanged
    assert not torch.equal(head, model.head.weight)  # the rest trained

    tuned = _recognizer()
    assert load_encoder(tuned, path, freeze=False)["frozen"] is False
    assert all(p.requires_grad for p in tuned.encoders["audio"].parameters())
    cfg = dataclasses.replace(cfg, encoder_lr=1e-4)
    train_recognizer(tuned, data, cfg)
    moved = tuned.encoders["audio"].state_dict()
    assert any(not torch.equal(before[k], moved[k]) for k in before)  # fine-tuned


def test_pretrain_resumes_exactly(data, tmp_path):
    enc_cfg = EncoderConfig(**ENC, time_masks=1, time_mask_width=5)
    ref = pretrain_encoder(data, enc_cfg, _pcfg(steps=4), out_dir=tmp_path / "a")
    cut = pretrain_encoder(data, enc_cfg, _pcfg(steps=4), out_dir=tmp_path / "b", stop_after=2)
    assert cut.result.step == 2
    again = pretrain_encoder(data, enc_cfg, _pcfg(steps=4), out_dir=tmp_path / "b", resume=True)
    assert again.result.step == 4
    for k, v in ref.model.state_dict().items():
        assert torch.equal(again.model.state_dict()[k], v)


def test_mismatched_or_damaged_encoder_file_raises_value_error(data, tmp_path):
    torch.manual_seed(0)
    other = SpeechEncoder(40, EncoderConfig(dim=12, layers=1, heads=2, subsample=2))
    path = save_encoder(tmp_path / "other.pt", other)
    with pytest.raises(ValueError, match=r"dim: file 12, model 8.*pretrain it again"):
        load_encoder(_recognizer(), path)
    wrong_in = save_encoder(tmp_path / "in.pt", SpeechEncoder(22, EncoderConfig(**ENC)))
    with pytest.raises(ValueError, match="d_in"):
        load_encoder(_recognizer(), wrong_in)
    good = save_encoder(tmp_path / "good.pt", SpeechEncoder(40, EncoderConfig(**ENC)))
    with pytest.raises(ValueError, match="'video'"):
        load_encoder(_recognizer(), good, modality="video")
    damaged = tmp_path / "damaged.pt"
    raw = bytearray(good.read_bytes())
    raw[-20] ^= 0xFF
    damaged.write_bytes(bytes(raw))
    with pytest.raises(ValueError, match="pretrain the encoder again"):
        load_encoder(_recognizer(), damaged)
    with pytest.raises(ValueError, match="does not exist"):
        load_encoder(_recognizer(), tmp_path / "missing.pt")
    torch.save({"format": "something else"}, tmp_path / "plain.pt")
    with pytest.raises(ValueError):
        read_encoder(tmp_path / "plain.pt")
    # dropout and masking do not count: a masked pretraining loads into a plain encoder
    masked = EncoderConfig(**ENC, dropout=0.0, time_masks=2, freq_masks=2)
    ok = save_encoder(tmp_path / "masked.pt", SpeechEncoder(40, masked))
    assert load_encoder(_recognizer(), ok)["frozen"]


def test_pretrain_config_bad_values():
    with pytest.raises(ValueError, match="rates"):
        PretrainConfig(rates=(0,))
    with pytest.raises(ValueError, match="modality"):
        PretrainConfig(modality="text")
    with pytest.raises(ValueError, match="upsample"):
        PretrainConfig(upsample=0)
    with pytest.raises(ValueError, match="encoder_lr"):
        TrainConfig(encoder_lr=0.0)
