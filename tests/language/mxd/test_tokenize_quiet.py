"""Issue 40: tokenizing a whole document (longer than the model's context, cut into windows
afterwards) prints no "sequence length is longer than the maximum" warning, which readers
of the docs build took for an error."""

from __future__ import annotations

import pytest

from sci_moe.language.mxd.models import PretrainedModel

transformers = pytest.importorskip("transformers")


def test_long_document_tokenizes_quietly(tmp_path, capfd, caplog):
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "word"]
    (tmp_path / "vocab.txt").write_text("\n".join(vocab) + "\n")
    tok = transformers.BertTokenizerFast(str(tmp_path / "vocab.txt"), model_max_length=16)
    pm = PretrainedModel(None, tok, "tiny", "0" * 64)
    ids = pm.tokenize("word " * 100)
    assert ids == [5] * 100  # every token kept, nothing truncated
    out, err = capfd.readouterr()
    assert "longer than the specified maximum" not in out + err + caplog.text
    # the tokenizer itself would have warned (the warning is off only here)
    tok.encode("word " * 100, add_special_tokens=False)
    out, err = capfd.readouterr()
    assert "longer than the specified maximum" in out + err + caplog.text
