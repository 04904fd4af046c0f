import pytest
import torch

from sci_moe.vision import IncrementalConfig, SceneConfig, run_incremental


def _cfg(method):
    return IncrementalConfig(
        method=method,
        n_components=2,
        scene=SceneConfig(image_size=16, max_objects=2),
        n_train=6,
        n_test=4,
        base_iters=3,
        step_iters=2,
        batch_size=2,
        width=4,
        feature_dim=4,
        replay_per_class=8,
        max_pixels_per_class=200,
    )


@pytest.mark.parametrize("method", ["finetune", "prototype", "gmm"])
def test_runs_all_steps(method):
    out = run_incremental(_cfg(method))
    assert len(out["steps"]) == 3
    for s in out["steps"]:
        assert 0 <= s["miou_all"] <= 1
    if method != "finetune":
        assert out["memory"].classes == [1, 2, 3, 4, 5, 6]


def test_resume_is_bit_identical(tmp_path):
    full = run_incremental(_cfg("gmm"))
    run_incremental(_cfg("gmm"), checkpoint_dir=tmp_path, stop_after=1)
    assert sorted(p.name for p in tmp_path.glob("step_*.pt")) == ["step_0.pt", "step_1.pt"]
    resumed = run_incremental(_cfg("gmm"), checkpoint_dir=tmp_path)

    def nan_free(steps):
        return [{k: (None if v != v else v) for k, v in s.items()} for s in steps]

    assert nan_free(resumed["steps"]) == nan_free(full["steps"])
    for a, b in zip(
        full["model"].state_dict().values(), resumed["model"].state_dict().values(), strict=True
    ):
        assert torch.equal(a, b)
    sa, sb = full["memory"].state_dict(), resumed["memory"].state_dict()
    assert sa.keys() == sb.keys() and all(torch.equal(sa[k], sb[k]) for k in sa)


def test_bad_method():
    with pytest.raises(ValueError, match="method"):
        IncrementalConfig(method="replay")
