import json

from sci_moe.cli.main import main


def test_demo_runs_and_writes_results(tmp_path, capsys):
    out = tmp_path / "demo"
    assert main(["demo", "--out", str(out), "--steps", "40", "--experts", "4"]) == 0
    summary = json.loads((out / "moe_demo.json").read_text())
    assert (out / "moe_routing.png").stat().st_size > 10_000
    # 40 steps already beat chance (0.1) by far on the held-out digits
    assert summary["moe"]["test_accuracy"] > 0.5
    assert abs(sum(summary["moe"]["expert_load_fraction"]) - 1) < 1e-3
    printed = capsys.readouterr().out
    assert "expert load" in printed and "dense, same active params" in printed


def test_demo_bad_option_exit_code(tmp_path, capsys):
    assert main(["demo", "--out", str(tmp_path), "--top-k", "9"]) == 2
    assert "top_k" in capsys.readouterr().err


def test_version(capsys):
    assert main(["--version"]) == 0
    assert "sci-moe" in capsys.readouterr().out
