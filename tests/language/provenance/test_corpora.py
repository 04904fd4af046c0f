import json

import pytest

from sci_moe.language.provenance import read_corpora, read_corpus


def test_read_layouts(tmp_path):
    d = tmp_path / "web"
    (d / "sub").mkdir(parents=True)
    (d / "a.txt").write_text("first doc")
    (d / "sub" / "b.jsonl").write_text(
        json.dumps({"text": "second", "id": "x"}) + "\n\n" + json.dumps({"text": "third"}) + "\n"
    )
    (d / "ignored.bin").write_bytes(b"\xff")
    docs = read_corpus(d)
    assert docs == [("a.txt", "first doc"), ("sub/b.jsonl:x", "second"), ("sub/b.jsonl:3", "third")]
    one = tmp_path / "one.txt"
    one.write_text("solo")
    both = read_corpora([d, one])
    assert list(both) == ["web", "one"] and both["one"] == [("one/one.txt", "solo")]


def test_bad_input(tmp_path):
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"ok \xff\xfe text")
    with pytest.raises(ValueError, match="undecodable bytes at offset 3"):
        read_corpus(bad)
    assert "\ufffd" in read_corpus(bad, errors="replace")[0][1]
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "blank.txt").write_text("  \n")
    with pytest.raises(ValueError, match="empty"):
        read_corpus(empty)
    with pytest.raises(FileNotFoundError):
        read_corpus(tmp_path / "missing")
    js = tmp_path / "x.jsonl"
    js.write_text('{"txt": 1}\n')
    with pytest.raises(ValueError, match='"text"'):
        read_corpus(js)
    with pytest.raises(ValueError, match="at least 2"):
        read_corpora([bad])
    with pytest.raises(ValueError, match="distinct"):
        read_corpora([bad, bad])
