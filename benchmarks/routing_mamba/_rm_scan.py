"""The scan experiment of ``run.py``: the parallel selective scan against the reference.

The parallel scan of one Mamba block against the recurrent CPU scan (the CPU default), the
step-by-step reference and transformers' ``MambaMixer`` (slow path; skipped without
transformers), the same weights in all: forward + backward tokens/s, measured once and
kept in the state (``state["scan"]``). A helper module: ``run.py`` imports it.
"""

from __future__ import annotations

import torch
from _common import Row, time_fn

from sci_moe.language.mamba import MambaBlock

__all__ = [
    "exp_scan",
]


def exp_scan(p, rows, table, state):
    Bsz, L, d = p["scan"]
    torch.manual_seed(0)
    fast = MambaBlock(d_model=d, d_state=16, scan="parallel")
    ref = MambaBlock(d_model=d, d_state=16, scan="reference")
    ref.load_state_dict(fast.state_dict())
    rec = MambaBlock(d_model=d, d_state=16, scan="recurrent")
    rec.load_state_dict(fast.state_dict())
    x = torch.randn(Bsz, L, d)
    contenders = {
        "parallel scan": fast,
        "recurrent scan (CPU default)": rec,
        "step-by-step reference": ref,
    }
    try:
        import transformers
        from transformers.models.mamba.modeling_mamba import MambaMixer

        hf = MambaMixer(
            transformers.MambaConfig(
                hidden_size=d, state_size=16, expand=2, time_step_rank=fast.config.dt_rank
            ),
            0,
        )
        hf.load_state_dict(fast.state_dict())
        hf.eval()  # slow path; in training mode it also falls back to it
        contenders["transformers MambaMixer (slow path)"] = hf
    except ImportError:
        pass

    def fb(m):
        def go():
            xi = x.clone().requires_grad_(True)
            m(xi).square().mean().backward()

        return go

    def job():
        return {name: Bsz * L / time_fn(fb(m), repeats=5).median for name, m in contenders.items()}

    if "scan" not in state:
        state["scan"] = job()
    tps = state["scan"]
    for name, v in tps.items():
        vs = None if name == "parallel scan" else name
        tag = "hf" if "transformers" in name else "recurrent" if "recurrent" in name else "ref"
        rows.append(
            Row(
                "parallel scan",
                "fwd_bwd_tokens_per_s" if vs is None else f"fwd_bwd_tokens_per_s_vs_{tag}",
                tps["parallel scan"],
                "tokens/s",
                vs,
                tps["parallel scan"] / v if vs else None,
            )
        )
        table.append([name, v, tps["parallel scan"] / v])
