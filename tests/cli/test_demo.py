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
    # issue 40: the demo says why the MoE does not beat the dense network
    assert "why" in printed and summary["explanation"][0].startswith("accuracy:")


def _summary(acc, dense_acc, loss, dense_loss, seconds, dense_seconds):
    return {
        "config": {"num_experts": 8, "top_k": 2, "batch_size": 128, "d_model": 64},
        "data": {"train": 1438, "test": 359},
        "moe": {
            "test_accuracy": acc,
            "final_train_loss": loss,
            "train_seconds": seconds,
            "total_params": 35_000,
        },
        "dense_same_active_params": {
            "test_accuracy": dense_acc,
            "final_train_loss": dense_loss,
            "train_seconds": dense_seconds,
            "total_params": 10_000,
        },
    }


def test_explain_says_why_the_moe_does_not_win():
    from sci_moe.cli.demo_moe import explain

    acc, time = explain(_summary(344 / 359, 348 / 359, 3e-4, 3e-4, 11.0, 2.0))
    assert "the dense network is ahead by 4 of 359 test images, within the noise" in acc
    assert "Both fit" in acc and "3.5x parameters" in acc
    assert "took 5.5x" in time and "~32 rows" in time and "routing" in time
    acc, time = explain(_summary(300 / 359, 340 / 359, 0.5, 0.4, 2.0, 2.0))
    assert "more than the noise" in acc and "not converged" in acc
    assert time == "time: the MoE took 1.0x the dense network's."
    acc, _ = explain(_summary(0.9, 0.9, 3e-4, 3e-4, 1.0, 1.0))
    assert acc.startswith("accuracy: equal")


def test_demo_bad_option_exit_code(tmp_path, capsys):
    assert main(["demo", "--out", str(tmp_path), "--top-k", "9"]) == 2
    assert "top_k" in capsys.readouterr().err


def test_version(capsys):
    assert main(["--version"]) == 0
    assert "sci-moe" in capsys.readouterr().out
