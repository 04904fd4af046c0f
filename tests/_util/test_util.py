"""The private bottom floor: atomic writes, restricted unpickling, parallel_map, scatter, units."""

from __future__ import annotations

import json
import os
import pickle

import numpy as np
import pytest
import torch

from sci_moe._util import (
    BOLTZMANN_KJ_PER_MOL_K,
    atomic_open,
    atomic_save_json,
    atomic_save_npz,
    atomic_torch_save,
    atomic_write_text,
    kt_kj_per_mol,
    parallel_map,
    previous_path,
    restricted_loads,
    scatter_mean,
    scatter_sum,
)


def test_atomic_write_replaces_and_keeps_previous(tmp_path):
    p = tmp_path / "sub" / "state.json"
    atomic_save_json(p, {"a": 1})
    atomic_save_json(p, {"a": 2}, keep_previous=True)
    assert json.loads(p.read_text()) == {"a": 2}
    assert json.loads(previous_path(p).read_text()) == {"a": 1}
    assert previous_path(p).name == "state_prev.json"
    assert oct(p.stat().st_mode & 0o777) != oct(0o600)  # not mkstemp's private mode
    assert sorted(x.name for x in p.parent.iterdir()) == ["state.json", "state_prev.json"]


def test_atomic_write_failure_leaves_old_file(tmp_path):
    p = tmp_path / "log.txt"
    atomic_write_text(p, "old")
    with pytest.raises(RuntimeError), atomic_open(p, "w") as fh:
        fh.write("half")
        raise RuntimeError("killed mid-write")
    assert p.read_text() == "old"
    assert [x.name for x in tmp_path.iterdir()] == ["log.txt"]  # no temporary left


def test_failed_keep_previous_leaves_no_temporary(tmp_path, monkeypatch):
    p = tmp_path / "ck.pt"
    atomic_write_text(p, "v1")
    real_replace = os.replace

    def failing_replace(src, dst):
        if str(dst).endswith("ck_prev.pt"):
            raise OSError("disk full")
        return real_replace(src, dst)

    monkeypatch.setattr(os, "replace", failing_replace)
    with pytest.raises(OSError, match="disk full"):
        atomic_write_text(p, "v2", keep_previous=True)
    monkeypatch.undo()
    assert p.read_text() == "v1"
    assert [x.name for x in tmp_path.iterdir()] == ["ck.pt"]


def test_atomic_open_rejects_append(tmp_path):
    with pytest.raises(ValueError, match="whole files"), atomic_open(tmp_path / "x", "ab"):
        pass


def test_atomic_npz_and_torch_round_trip(tmp_path):
    a = np.arange(6.0).reshape(2, 3)
    p = atomic_save_npz(tmp_path / "a.state", {"a": a})
    assert p.exists() and not (tmp_path / "a.state.npz").exists()
    np.testing.assert_array_equal(np.load(p)["a"], a)
    t = atomic_torch_save(tmp_path / "c.pt", {"w": torch.ones(3), "step": 4})
    back = torch.load(t, weights_only=True)
    assert back["step"] == 4 and torch.equal(back["w"], torch.ones(3))


class _Evil:
    def __reduce__(self):
        return (os.system, ("echo pwned",))


def test_restricted_loads_plain_data_and_refuses_code():
    data = {"x": np.arange(3, dtype=np.float32), "s": {1, 2}, "c": 1 + 2j, "n": np.float64(2.0)}
    back = restricted_loads(pickle.dumps(data, protocol=2))
    np.testing.assert_array_equal(back["x"], data["x"])
    assert back["s"] == {1, 2} and back["c"] == 1 + 2j and back["n"] == 2.0
    with pytest.raises(pickle.UnpicklingError, match=r"(posix|os|nt)\.system"):
        restricted_loads(pickle.dumps(_Evil()))


class _Bunch(dict):
    pass


def test_restricted_loads_substitutes():
    blob = pickle.dumps(_Bunch(a=1))
    with pytest.raises(pickle.UnpicklingError):
        restricted_loads(blob)
    out = restricted_loads(blob, substitutes={("tests", "_Bunch"): dict})
    assert out == {"a": 1}


def _square(x):
    if x == 3:
        raise ValueError("bad input 3")
    return {"y": x * x}


@pytest.mark.parametrize("n_jobs", [1, 2])
def test_parallel_map_keeps_order_and_reports_failures(n_jobs):
    seen = []
    jobs = [(i,) for i in range(5)]
    out = parallel_map(_square, jobs, n_jobs=n_jobs, on_result=lambda i, r: seen.append(i))
    assert [r.get("y") for r in out] == [0, 1, 4, None, 16]
    assert out[3]["failed"] and "bad input 3" in out[3]["reason"]
    assert sorted(seen) == list(range(5))
    with pytest.raises(ValueError, match="n_jobs"):
        parallel_map(_square, [(1,)], n_jobs=0)


def test_scatter(float_dtype):
    src = torch.randn(5, 2, dtype=float_dtype)
    idx = torch.tensor([0, 2, 0, 2, 2])
    s = scatter_sum(src, idx, 4)
    ref = torch.stack([src[idx == k].sum(0) for k in range(4)])
    torch.testing.assert_close(s, ref)
    m = scatter_mean(src, idx, 4)
    torch.testing.assert_close(m[0], src[[0, 2]].mean(0))
    assert torch.all(m[1] == 0) and torch.all(m[3] == 0)


def test_units():
    assert kt_kj_per_mol(300.0) == pytest.approx(2.494338785, rel=1e-9)
    assert BOLTZMANN_KJ_PER_MOL_K * 1000 == pytest.approx(8.314462618)
    with pytest.raises(ValueError, match="> 0 K"):
        kt_kj_per_mol(0)


def test_import_is_light():
    import subprocess
    import sys

    code = "import sys, sci_moe._util; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"  # scatter_* load torch on first use only
