"""Training loop: loss goes down, exact resume, NaN retry, stage-wise expert training."""

import pytest
import torch

from sci_moe.sampling.diffusion import (
    VPSDE,
    MLPEnergy,
    MLPScore,
    Stage,
    TimeMixture,
    TrainConfig,
    train,
)
from sci_moe.sampling.diffusion.train import CHECKPOINT_NAME
from sci_moe.train import TrainingDiverged


def _data(n=256):
    g = torch.Generator().manual_seed(0)
    return (torch.randn(n, 1, 2, generator=g) * 0.3 + torch.tensor([1.0, -1.0])).float()


def _cfg(epochs=2, fp=1e-3, **kw):
    return TrainConfig(
        stages=[Stage(epochs, (1e-3, 1.0), 0.3, fp, lr=3e-3)], batch_size=64, progress=False, **kw
    )


def test_loss_decreases():
    torch.manual_seed(0)
    net = MLPEnergy((1, 2), (32, 32))
    out = train(
        net,
        _data(1024),
        VPSDE(),
        TrainConfig(
            stages=[Stage(6, (1e-3, 1.0), None, 0.0, lr=3e-3)],
            batch_size=128,
            ema_decay=0.0,
            progress=False,
        ),
    )
    h = out["history"]
    assert out["done"] and len(h) == 6
    assert h[-1]["dsm"] < 0.85 * h[0]["dsm"]


def test_exact_resume(tmp_path):
    torch.manual_seed(0)
    a = MLPEnergy((1, 2), (16,))
    b = MLPEnergy((1, 2), (16,))
    b.load_state_dict(a.state_dict())
    full = train(a, _data(), VPSDE(), _cfg(3), out_dir=tmp_path / "a")
    part = train(b, _data(), VPSDE(), _cfg(3), out_dir=tmp_path / "b", max_epochs=1)
    assert not part["done"] and len(part["history"]) == 1
    c = MLPEnergy((1, 2), (16,))  # fresh weights: everything must come from the checkpoint
    rest = train(c, _data(), VPSDE(), _cfg(3), out_dir=tmp_path / "b", resume=True)
    assert rest["done"]
    for k, v in a.state_dict().items():
        torch.testing.assert_close(c.state_dict()[k], v, rtol=0, atol=0)
    assert [h["loss"] for h in rest["history"]] == [h["loss"] for h in full["history"]]
    assert (tmp_path / "b" / "stage1" / CHECKPOINT_NAME).exists()
    assert not list((tmp_path / "b").rglob("*.tmp"))


def test_exact_resume_of_a_staged_mixture_in_the_second_stage(tmp_path):
    """Interrupted one epoch into the second stage (an FP stage) and resumed with fresh
    weights: every stage comes back from its checkpoint, bitwise."""
    ranges = [(0.3, 1.0), (1e-3, 0.3)]

    def moe(seed):
        torch.manual_seed(seed)
        experts = [MLPEnergy((1, 2), (8,), t_range=r) for r in ranges]
        return TimeMixture(experts, ranges)

    cfg = TrainConfig(
        stages=[
            Stage(2, ranges[0], 0.8, 0.0, expert=0, lr=3e-3),
            Stage(3, ranges[1], 0.03, 1e-3, expert=1, lr=3e-3),
        ],
        batch_size=64,
        max_batches_per_epoch=2,
        progress=False,
    )
    a = moe(0)
    full = train(a, _data(), VPSDE(), cfg, out_dir=tmp_path / "a")
    part = train(moe(0), _data(), VPSDE(), cfg, out_dir=tmp_path / "b", max_epochs=3)
    assert not part["done"] and [h["stage"] for h in part["history"]] == [0, 0, 1]
    c = moe(1)
    rest = train(c, _data(), VPSDE(), cfg, out_dir=tmp_path / "b", resume=True)
    assert rest["done"] and [h["stage"] for h in rest["history"]] == [0, 0, 1, 1, 1]
    sa, sc = a.state_dict(), c.state_dict()
    assert all(torch.equal(sa[k], sc[k]) for k in sa)
    assert [h["loss"] for h in rest["history"]] == [h["loss"] for h in full["history"]]
    assert (tmp_path / "b" / "stage1" / CHECKPOINT_NAME).exists()
    assert (tmp_path / "b" / "stage2" / CHECKPOINT_NAME).exists()


class _Flaky(MLPEnergy):
    """Returns NaN energies for the first ``fail`` forward calls."""

    def __init__(self, fail):
        super().__init__((1, 2), (8,))
        self.fail = fail

    def forward(self, x, t):
        e = super().forward(x, t)
        if self.fail > 0:
            self.fail -= 1
            return e * float("nan")
        return e


def test_nan_retry():
    net = _Flaky(fail=3)
    out = train(net, _data(64), VPSDE(), _cfg(1))
    assert out["history"][0]["retries"] >= 1
    assert all(torch.isfinite(p).all() for p in net.parameters())
    with pytest.raises(TrainingDiverged, match="loss is nan at step 1 "):
        train(_Flaky(fail=10**9), _data(64), VPSDE(), _cfg(1, max_retries=2))


def test_stagewise_mixture_training_freezes_other_experts():
    ranges = [(0.3, 1.0), (1e-3, 0.3)]
    moe = TimeMixture(
        [MLPScore((1, 2), (8,), t_range=ranges[0]), MLPEnergy((1, 2), (8,), t_range=ranges[1])],
        ranges,
    )
    before = {k: v.clone() for k, v in moe.state_dict().items()}
    cfg = TrainConfig(
        stages=[Stage(1, ranges[1], 0.03, 1e-3, expert=1)], batch_size=64, progress=False
    )
    train(moe, _data(128), VPSDE(), cfg)
    after = moe.state_dict()
    assert all(torch.equal(before[k], after[k]) for k in before if k.startswith("experts.0"))
    assert any(not torch.equal(before[k], after[k]) for k in before if k.startswith("experts.1"))


def test_config_errors():
    with pytest.raises(ValueError, match="mid"):
        Stage(1, (0.0, 0.5), mid=0.7)
    with pytest.raises(ValueError, match="t_range"):
        Stage(1, (0.5, 0.2))
    with pytest.raises(ValueError, match="NaN"):
        train(MLPEnergy((1, 2), (4,)), torch.full((4, 1, 2), float("nan")), VPSDE(), _cfg(1))
    ranges = [(0.3, 1.0), (1e-3, 0.3)]
    moe = TimeMixture([MLPScore((1, 2), (8,)), MLPEnergy((1, 2), (8,))], ranges)
    with pytest.raises(ValueError, match="energy network"):
        train(
            moe,
            _data(8),
            VPSDE(),
            TrainConfig(stages=[Stage(1, ranges[0], None, 1.0, expert=0)], progress=False),
        )


def test_fast_defaults_equal_reference_path():
    """Fused AdamW + the batched FP estimator train to the same weights as the reference."""
    nets = []
    for fast in (False, True):
        torch.manual_seed(0)
        net = MLPEnergy((1, 2), (16, 16)).double()
        cfg = _cfg(2, fp=1e-2, fp_batched=fast, fused=fast)
        out = train(net, _data(256).double(), VPSDE(), cfg)
        nets.append((net, out["history"]))
    (a, ha), (b, hb) = nets
    for pa, pb in zip(a.parameters(), b.parameters(), strict=True):
        torch.testing.assert_close(pb, pa, rtol=1e-6, atol=1e-9)
    for ra, rb in zip(ha, hb, strict=True):
        for k in ("loss", "dsm", "fp"):
            assert abs(ra[k] - rb[k]) <= 1e-6 * abs(ra[k]) + 1e-12


def _mixture(seed, ranges, shape=(1, 2)):
    torch.manual_seed(seed)
    experts = [MLPEnergy(shape, (8,), t_range=r) for r in ranges]
    return TimeMixture(experts, ranges)


def _staged(ranges, **kw):
    return TrainConfig(
        stages=[
            Stage(1, ranges[0], 0.8, 0.0, expert=0, lr=3e-3),
            Stage(2, ranges[1], 0.03, 1e-3, expert=1, lr=3e-3),
        ],
        batch_size=32,
        max_batches_per_epoch=2,
        progress=False,
        **kw,
    )


@pytest.mark.parametrize("fp_batched", [True, False])
def test_explicit_cpu_device_equals_the_default(fp_batched):
    """The draws moved to the batch's device (times, noise, probes, rotations) and the EMA
    that follows the parameters change nothing on the CPU."""
    ranges = [(0.3, 1.0), (1e-3, 0.3)]
    g = torch.Generator().manual_seed(0)
    data = torch.randn(64, 3, 3, generator=g)
    runs = []
    for device in (None, "cpu"):
        m = _mixture(0, ranges, (3, 3))
        cfg = _staged(ranges, device=device, random_rotation=True, fp_batched=fp_batched)
        runs.append((m, train(m, data, VPSDE(), cfg)))
    (a, ra), (b, rb) = runs
    sa, sb = a.state_dict(), b.state_dict()
    assert all(torch.equal(sa[k], sb[k]) for k in sa)
    assert _records(ra) == _records(rb)
    assert all(torch.equal(x, y) for x, y in zip(ra["ema"], rb["ema"], strict=True))


def _records(out):
    return [{k: v for k, v in h.items() if k != "seconds"} for h in out["history"]]


_NEEDS_CUDA = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")


@pytest.mark.gpu
@_NEEDS_CUDA
@pytest.mark.parametrize("fp_batched", [True, False])
@pytest.mark.parametrize("rotation", [True, False])
def test_staged_fp_training_on_cuda_matches_the_cpu(fp_batched, rotation):
    ranges = [(0.3, 1.0), (1e-3, 0.3)]
    g = torch.Generator().manual_seed(0)
    data = torch.randn(64, 3, 3, generator=g)
    runs = []
    for device in ("cuda", "cpu"):
        m = _mixture(0, ranges, (3, 3))
        cfg = _staged(ranges, device=device, random_rotation=rotation, fp_batched=fp_batched)
        runs.append((m, train(m, data, VPSDE(), cfg)))
    (a, ra), (b, rb) = runs
    assert next(a.parameters()).device.type == "cuda"
    assert all(e.device.type == "cuda" for e in ra["ema"])
    # loose: the FP term's finite differences (sigma 1e-4, float32) amplify the rounding
    sa, sb = a.state_dict(), b.state_dict()
    for k in sb:
        torch.testing.assert_close(sa[k].cpu(), sb[k], rtol=1e-2, atol=1e-3)
    for ha, hb in zip(ra["history"], rb["history"], strict=True):
        assert ha["dsm"] == pytest.approx(hb["dsm"], rel=1e-2, abs=1e-6)
        assert ha["fp"] == pytest.approx(hb["fp"], rel=0.1, abs=1e-4)


@pytest.mark.gpu
@_NEEDS_CUDA
def test_a_cpu_run_resumes_on_cuda(tmp_path):
    """A run paused on the CPU continues on the GPU: the checkpoint's weights, optimiser
    state, EMA and generator state move there; the result is close to a CPU run."""
    ranges = [(0.3, 1.0), (1e-3, 0.3)]
    full_model = _mixture(0, ranges)
    full = train(full_model, _data(), VPSDE(), _staged(ranges), out_dir=tmp_path / "a")
    part = train(_mixture(0, ranges), _data(), VPSDE(), _staged(ranges), tmp_path / "b", False, 2)
    assert not part["done"]
    c = _mixture(1, ranges)
    cfg = _staged(ranges, device="cuda")
    rest = train(c, _data(), VPSDE(), cfg, out_dir=tmp_path / "b", resume=True)
    assert rest["done"] and next(c.parameters()).device.type == "cuda"
    sa, sc = full_model.state_dict(), c.state_dict()
    for k in sa:
        torch.testing.assert_close(sc[k].cpu(), sa[k], rtol=1e-2, atol=1e-3)
    for ha, hc in zip(full["history"], rest["history"], strict=True):
        assert hc["dsm"] == pytest.approx(ha["dsm"], rel=1e-2, abs=1e-6)
