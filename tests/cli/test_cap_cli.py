import json

import pytest

from sci_moe.cli.main import main
from sci_moe.moe.cap import cap_metrics, load_model

MIXTRAL = ["cap", "--model", "mixtral-8x7b", "--hardware", "h100", "--batch", "32"]


def test_cap_prints_table_and_writes_json(tmp_path, capsys):
    out = tmp_path / "cap.json"
    argv = [*MIXTRAL, "--seq-len", "1024", "--tpot-ms", "40", "--json", str(out)]
    assert main(argv) == 0
    printed = capsys.readouterr().out
    assert "S-MBU" in printed and "S-MFU" in printed and "mixtral-8x7b" in printed
    data = json.loads(out.read_text())
    expected = cap_metrics(
        load_model("mixtral-8x7b"), "h100", batch_size=32, seq_len=1024, tpot=0.040
    )
    assert data["s_mbu"] == pytest.approx(expected.s_mbu, rel=1e-12)
    assert data["s_mfu"] == pytest.approx(expected.s_mfu, rel=1e-12)
    assert data["activated_mode"] == "uniform" and len(data["activated"]) == 32
    assert "Transcribed" in data["model_note"]


def test_cap_throughput_options_and_config_path(tmp_path, capsys):
    cfg = tmp_path / "toy.json"
    cfg.write_text(
        json.dumps(
            {
                "hidden_size": 64,
                "num_hidden_layers": 2,
                "num_attention_heads": 4,
                "intermediate_size": 128,
                "num_local_experts": 4,
                "num_experts_per_tok": 2,
            }
        )
    )
    argv = ["cap", "--model", str(cfg), "--hardware", "a100", "--batch", "4"]
    argv += ["--seq-len", "16", "--throughput", "100", "--activated", "all"]
    argv += ["--expert-count", "per_layer_once", "--json", str(tmp_path / "o.json")]
    assert main(argv) == 0
    data = json.loads((tmp_path / "o.json").read_text())
    assert data["tpot"] == pytest.approx(0.04) and data["activated"] == [4.0, 4.0]
    assert data["expert_count"] == "per_layer_once"
    assert main(["cap", "--list"]) == 0
    assert "mixtral-8x7b" in capsys.readouterr().out


def test_cap_radar(tmp_path):
    systems = tmp_path / "systems.json"
    systems.write_text(
        json.dumps(
            [
                {"name": "A", "cost": 8000, "accuracy": 0.9, "performance": 0.05},
                {"name": "B", "cost": 4000, "accuracy": 0.8, "performance": 0.09},
            ]
        )
    )
    png = tmp_path / "radar.png"
    argv = [*MIXTRAL, "--seq-len", "1024", "--tpot-ms", "40", "--radar", str(png)]
    argv += ["--systems", str(systems), "--cost", "6000", "--accuracy", "0.85"]
    assert main(argv) == 0
    assert png.stat().st_size > 10_000


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--tpot-ms", "40", "--throughput", "800"], "exactly one of --tpot-ms"),
        ([], "exactly one of --tpot-ms"),
        (["--tpot-ms", "-1"], "tpot must be"),
        (["--tpot-ms", "40", "--activated", "most"], "--activated"),
        (["--tpot-ms", "40", "--hardware", "tpu"], "unknown hardware"),
        (["--tpot-ms", "40", "--dtype", "fp8"], "no peak for float8"),
        (["--tpot-ms", "40", "--batch", "0"], "batch_size"),
        (["--tpot-ms", "40", "--radar", "x.png"], "--radar needs"),
        (["--tpot-ms", "40", "--radar", "x.png", "--cost", "1"], "both --cost and --accuracy"),
    ],
)
def test_cap_bad_input_exit_code_2(extra, message, capsys):
    argv = ["cap", "--model", "mixtral-8x7b", *extra]
    if "--hardware" not in extra:
        argv += ["--hardware", "a100"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("sci-moe cap: error:") and message in err


def test_cap_unknown_model_and_missing_model(capsys):
    assert main(["cap", "--model", "gpt-5", "--tpot-ms", "1"]) == 2
    assert "unknown model" in capsys.readouterr().err
    assert main(["cap", "--tpot-ms", "1"]) == 2
    assert "--model is required" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exc:  # argparse: invalid choice
        main(["cap", "--model", "mixtral-8x7b", "--tpot-ms", "1", "--expert-count", "twice"])
    assert exc.value.code == 2
