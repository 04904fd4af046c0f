"""What the training engine costs per step against a bare hand-written loop.

Two workloads at the sizes the package trains them: the MoE language model
(:class:`sci_moe.language.MoETransformerLM`, default :class:`~sci_moe.language.MoELMConfig`,
byte windows) and the digits MoE classifier of ``sci-moe demo`` (8 experts top-2,
d = 64, batch 128: a tiny model, where a per-step cost shows most). Both contestants
train the same architecture from the same weights on the same batches (precomputed, so
neither pays for data), with AdamW, clipping at 1.0 and the same learning rate:

* ``bare``: ``zero_grad``, loss, ``backward``, ``clip_grad_norm_``, ``step``;
* ``engine``: :class:`sci_moe.train.Trainer` ``fit()`` for the same steps (no output
  folder, no evaluation, progress off): schedule, the NaN check, the metrics, the
  hooks machinery.

Rounds are interleaved (the order rotated per round); the ratio is the median over rounds
of ``bare / engine`` seconds per step (> 1 would mean the engine is faster). Target of
issue 39: the engine costs < 3 % of a step (ratio >= 0.97).

Usage::

    python benchmarks/train_overhead/run.py --threads 1 \
        --json benchmarks/train_overhead/results/train_overhead.json
"""

from __future__ import annotations

import copy
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/_common/

import torch
from _common import OtherLoad, Row, base_parser, finish, interleaved, machine_info, print_rows
from _common import setup as common_setup
from torch import nn

from sci_moe.train import Batch, ShuffledBatches, TrainConfig, Trainer

TARGET = 0.97  # bare / engine time per step: the engine costs < 3 %


def _lm_workload(quick: bool):
    from sci_moe.language import MoELMConfig, MoETransformerLM

    cfg = MoELMConfig()
    model = MoETransformerLM(cfg)
    g = torch.Generator().manual_seed(0)
    n, bs = 64, 16
    x = torch.randint(0, cfg.vocab_size, (n, cfg.seq_len + 1), generator=g)

    def collate(idx):
        return x[idx, :-1], x[idx, 1:]

    def loss(m, b):
        ce, aux, _ = m.loss(*b)
        return ce + aux

    return "moe_lm", model, loss, n, bs, collate


def _digits_workload(quick: bool):
    from sci_moe.moe import MoE, MoEConfig

    torch.manual_seed(0)
    d = 64
    mixer = MoE(MoEConfig(d_model=d, d_hidden=d, num_experts=8, top_k=2, load_balance_coef=0.01))

    class Classifier(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed, self.mixer = nn.Linear(64, d), mixer
            self.norm, self.head = nn.LayerNorm(d), nn.Linear(d, 10)

        def forward(self, x):
            h = self.embed(x)
            out, info = self.mixer(h, return_routing=True)
            return self.head(self.norm(h + out)), info.aux_loss

    g = torch.Generator().manual_seed(0)
    n, bs = 1437, 128  # the demo's training split of digits
    x, y = torch.randn(n, 64, generator=g), torch.randint(0, 10, (n,), generator=g)

    def collate(idx):
        return x[idx], y[idx]

    def loss(m, b):
        logits, aux = m(b[0])
        return nn.functional.cross_entropy(logits, b[1]) + aux

    return "digits_moe", Classifier(), loss, n, bs, collate


def _contestants(workload, steps: int):
    name, model, loss_fn, n, bs, collate = workload
    source = ShuffledBatches(n, bs, collate, seed=0)
    batches = [source.get(s).data for s in range(steps)]
    bare_model, engine_model = model, copy.deepcopy(model)
    bare_opt = torch.optim.AdamW(bare_model.parameters(), lr=1e-3, weight_decay=0.0)

    class Fixed(ShuffledBatches):
        def get(self, step, rank=0, world_size=1):
            return Batch(batches[step % steps], bs, 0)

    cfg = TrainConfig(
        steps=steps,
        batch_size=bs,
        lr=1e-3,
        eval_every=0,
        progress=False,
        grad_clip=1.0,
        threads=torch.get_num_threads(),
        checkpoint_minutes=0,
    )

    def bare():
        for b in batches:
            bare_opt.zero_grad(set_to_none=True)
            loss = loss_fn(bare_model, b)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(bare_model.parameters(), 1.0)
            bare_opt.step()

    def engine():
        Trainer(engine_model, loss_fn, Fixed(n, bs, collate), cfg).fit()

    return name, {"bare": bare, "engine": engine}


def main(argv=None) -> int:
    p = base_parser(__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=None, help="steps per round")
    p.add_argument("--rounds", type=int, default=None, help="interleaved rounds")
    args = p.parse_args(argv)
    common_setup(args)
    other, t0 = OtherLoad(), time.perf_counter()
    steps = args.steps or (20 if args.quick else 100)
    rounds = args.rounds or (5 if args.quick else 9)
    rows = []
    for make in (_lm_workload, _digits_workload):
        name, fns = _contestants(make(args.quick), steps)
        times = interleaved(fns, rounds)
        per = {k: statistics.median(v) / steps for k, v in times.items()}
        ratios = [b / e for b, e in zip(times["bare"], times["engine"], strict=True)]
        ratio = statistics.median(ratios)
        rows.append(Row(name, "bare loop step", per["bare"] * 1e3, "ms"))
        rows.append(
            Row(name, "engine step", per["engine"] * 1e3, "ms", vs="bare loop step", ratio=ratio)
        )
        verdict = "met" if ratio >= TARGET else "not met"
        rows.append(Row(name, f"engine overhead < 3 % ({verdict})", (1 / ratio - 1) * 100, "%"))
    print_rows(rows, "training engine vs bare loop (ratio = bare / engine per step)")
    machine = machine_info(args.seed, steps_per_round=steps, rounds=rounds)
    return finish(args, "train_overhead", machine, rows, other, t0)


if __name__ == "__main__":
    raise SystemExit(main())
