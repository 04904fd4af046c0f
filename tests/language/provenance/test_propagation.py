import dataclasses

import numpy as np
import pytest
import torch

from sci_moe.language import MoELMConfig, TrainConfig
from sci_moe.language.provenance import generate, mixture_documents, train_lm_on_texts


def test_mixture_documents_hits_byte_proportions():
    a = ["a" * 100] * 10
    b = ["b" * 100] * 10
    docs = mixture_documents([a, b], [0.7, 0.3], 500, seed=0)
    joined = "".join(docs)
    assert joined.count("a") == 350 and joined.count("b") == 150
    with pytest.raises(ValueError, match="fewer than"):
        mixture_documents([a, b], [0.5, 0.5], 10_000)
    with pytest.raises(ValueError, match="sum to 1"):
        mixture_documents([a, b], [0.5, 0.6], 100)


def test_train_and_generate_tiny():
    docs = ["- alpha beta\n- gamma delta\n"] * 60
    cfg = MoELMConfig(
        d_model=16, n_layers=1, n_heads=2, seq_len=32, d_hidden=16, num_experts=2, top_k=1
    )
    tcfg = TrainConfig(
        steps=200,  # 150 left seed 0 at 0.78 of the alphabet on the engine (0.83 before)
        batch_size=8,
        warmup=0.03,
        eval_every=0,
        eval_batches=1,
        lr=1e-2,
        progress=False,
    )
    model, hist = train_lm_on_texts(docs, cfg, tcfg)
    assert hist["val_ppl"][-1] < hist["val_ppl"][0]
    g1 = generate(model, 3, 20, seed=1, burn_in=4)
    g2 = generate(model, 3, 20, seed=1, burn_in=4)
    assert g1 == g2 and len(g1) == 3
    assert all(len(s.encode("utf-8", "replace")) >= 1 for s in g1)
    # the LM learned the training bytes: most generated characters are from the training text
    alphabet = set(docs[0])
    sample = "".join(generate(model, 8, 40, seed=2))
    assert np.mean([c in alphabet for c in sample]) > 0.8
    with pytest.raises(ValueError, match="too few"):
        train_lm_on_texts(["short"], cfg, tcfg)


def test_piece_tokenizer_round_trip_and_word_lm():
    from sci_moe.language.provenance import PieceTokenizer

    text = "The river and the city.\n- The king, the war  \n\nMusic of the river.\n"
    tok = PieceTokenizer.fit([text] * 3, vocab_size=120)
    assert len(tok) <= 120 and tok.vocab[0] == "\ufffd"
    ids = tok.encode(text)
    assert tok.decode(ids) == text and str(ids.dtype) == "torch.int64"
    assert tok.index[" river"] in ids.tolist()  # whole words with their leading space
    assert tok.decode(tok.encode("rivers.")) == "rivers."  # unseen word: spelled in chunks
    assert tok.decode(tok.encode("\u4e2d")) == "\ufffd"  # unseen character
    with pytest.raises(ValueError, match="U\\+FFFD"):
        PieceTokenizer(["a", "b"])
    docs = [text] * 40
    cfg = MoELMConfig(
        vocab_size=len(tok),
        d_model=16,
        n_layers=1,
        n_heads=2,
        seq_len=16,
        d_hidden=16,
        num_experts=2,
        top_k=1,
    )
    tcfg = TrainConfig(
        steps=60, batch_size=8, eval_every=0, eval_batches=1, lr=1e-2, progress=False
    )
    model, hist = train_lm_on_texts(docs, cfg, tcfg, tokenizer=tok)
    assert hist["val_ppl"][-1] < hist["val_ppl"][0]
    g = generate(model, 2, 12, seed=0, burn_in=2, tokenizer=tok)
    assert len(g) == 2 and all(isinstance(s, str) and s for s in g)
    bad = MoELMConfig(
        d_model=16, n_layers=1, n_heads=2, seq_len=16, d_hidden=16, num_experts=2, top_k=1
    )
    with pytest.raises(ValueError, match="vocab_size"):
        train_lm_on_texts(docs, bad, tcfg, tokenizer=tok)


def test_train_lm_on_texts_init_from_continues_the_weights(tmp_path):
    from sci_moe.language import save_model

    docs = ["- alpha beta\n- gamma delta\n"] * 20
    cfg = MoELMConfig(
        d_model=16, n_layers=1, n_heads=2, seq_len=16, d_hidden=16, num_experts=2, top_k=1
    )
    tcfg = TrainConfig(steps=6, batch_size=4, eval_every=3, eval_batches=1, progress=False)
    model, hist = train_lm_on_texts(docs, cfg, tcfg)
    path = save_model(tmp_path / "cycle0.pt", cfg, model.state_dict())
    _, hist2 = train_lm_on_texts(docs, cfg, tcfg, init_from=path)
    # the second cycle's first evaluation (before any step) is the first cycle's last
    assert hist2["val_loss"][0] == pytest.approx(hist["val_loss"][-1], rel=1e-6)
    assert hist2["step"] == [0, 3, 6]


def test_train_lm_on_texts_validates_on_given_documents():
    """With ``val_documents`` the validation part is those documents, not a cut of the
    training stream: text of bytes never trained on scores far worse than the same text."""
    docs = ["- alpha beta\n- gamma delta\n"] * 30
    cfg = MoELMConfig(
        d_model=16, n_layers=1, n_heads=2, seq_len=16, d_hidden=16, num_experts=2, top_k=1
    )
    tcfg = TrainConfig(
        steps=60, batch_size=8, eval_every=0, eval_batches=1, lr=1e-2, progress=False
    )
    _, seen = train_lm_on_texts(docs, cfg, tcfg, val_documents=docs[:4])
    _, unseen = train_lm_on_texts(docs, cfg, tcfg, val_documents=["QXZ! wvy? 0189 JKQ\n"] * 4)
    assert unseen["val_ppl"][-1] > 10 * seen["val_ppl"][-1]
    with pytest.raises(ValueError, match="validation tokens"):
        train_lm_on_texts(docs, cfg, tcfg, val_documents=["short"])


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_train_and_generate_on_cuda():
    """The LM trains on the GPU and stays there; sampling draws on the CPU generator."""
    docs = ["- alpha beta\n- gamma delta\n"] * 60
    cfg = MoELMConfig(
        d_model=16, n_layers=1, n_heads=2, seq_len=32, d_hidden=16, num_experts=2, top_k=1
    )
    tcfg = TrainConfig(steps=20, batch_size=8, eval_every=10, eval_batches=1, progress=False)
    model, hist = train_lm_on_texts(docs, cfg, dataclasses.replace(tcfg, device="cuda"))
    assert next(model.parameters()).device.type == "cuda"
    assert np.isfinite(hist["val_ppl"]).all()
    g = generate(model, 3, 10, seed=1, burn_in=2)
    assert g == generate(model, 3, 10, seed=1, burn_in=2) and len(g) == 3
    _, ref_hist = train_lm_on_texts(docs, cfg, tcfg)
    assert hist["val_ppl"][-1] == pytest.approx(ref_hist["val_ppl"][-1], rel=0.05)
