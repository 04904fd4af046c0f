"""MoME on synthetic espeak-ng speech: CER/WER per compression rate vs per-rate and single adapters.

Task (synthetic speech, not LRS2/LRS3): phrases of 2-4 words cut from the offline corpus
of ``sci_moe.language.load_corpus``, spoken by espeak-ng with 4 voices, 3 speaking rates
and 3 pitches (2 variants per phrase; 40 phrases quick, 150 full), split by phrase
(seeded). Features: 40 log-mel bins at 100 frames/s, per-utterance normalised; white
noise at a chosen SNR. Model: a trainable linear projector into the **frozen**
all-MiniLM-L6-v2 (its first ``--layers`` transformer layers: 1 quick, 2 full; the
average-pooled log-mel frames go straight into the projector, no audio encoder),
adapters beside every attention block, a CTC character head with 8 outputs per token;
greedy decoding.

ASR at audio rates 4, 8, 16 (average pooling; 25, 12.5, 6.25 tokens/s). Methods at equal
trainable adapter parameters:

* ``mome``: 8 routed (top-2) + 1 shared bottleneck experts of width 8 per layer, one
  router for every rate, trained on all three rates per step (loss = mean CTC over rates
  + 0.01 Switch balance);
* ``per_rate``: one dense adapter per rate (bottleneck matched), trained on all rates;
* ``single``: one dense adapter (bottleneck matched) trained at the lowest compression
  (rate 4) only, evaluated at every rate.

Training (the engine, ``sci_moe.train``): 30 steps of batch 8 (quick) / 100 of batch 6, AdamW
3e-3 with a 10 % linear warm-up and cosine decay, the weights of the best validation CTC
kept, noise augmentation (clean, 10 dB, 5 dB per batch). (The recorded results up to
issue 39 used a one-cycle schedule and the final weights.) Evaluation on the test phrases:
clean, and at 10, 5, 0 dB (noise seed 0).
Routing consistency of MoME: per layer, expert-usage histograms of the test tokens at
each rate; mean pairwise Jensen-Shannon divergence across rates, against a control that
permutes expert ids independently per rate (200 draws).

AVSR (``--avsr``): audio rates 4, 16 x video rates 1, 2 of the **synthetic** viseme
stream (22 SAPI visemes at 25 frames/s from espeak's phoneme timings, one-hot, 30 % of
the frames zeroed in training and test), video tokens added to the audio tokens at the
nearest time. MoME and per-rate adapters (one per rate pair) trained on all four pairs
per step, and MoME trained on audio only (rates 4, 16) as the reference; CER at audio
SNR clean, 5, 0, -5 dB. Rows ``avsr/*`` carry ``ratio`` = baseline CER / MoME CER.

Run: ``python benchmarks/mome/run.py [--quick] [--avsr] [--json PATH] [--seed 0]
[--plots DIR] [--cache DIR] [--layers N] [--steps N] [--batch N] [--raw PATH]``
(``--seed`` offsets the three seeds; ``--replot RAW`` redraws the plots from a ``--raw``
dump; ``--untrained-routing`` measures only the routing consistency of the untrained
MoME models, the control for the trained router's). Needs ``sci-moe[speech,features]``.
:func:`verdicts` decides the paper's claims from the rows and writes them into the JSON;
``--verdicts-only PATH`` recomputes a stored JSON's verdicts (no training).
``--device cuda`` trains and scores the recognisers (and the untrained routing control) on
a GPU; the speech batches are still built on the CPU. The device is recorded in the JSON's
``machine`` block for information only (the stored CPU results stay the reference).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/_common/

import torch
from _common import (
    OtherLoad,
    Row,
    base_parser,
    finish,
    machine_info,
    rederive_verdicts,
    setup,
    verdicts_only,
    write_json_doc,
)
from _mome_asr import _jsonable, plot, report, run, settings
from _mome_avsr import plot_avsr, report_avsr, run_avsr
from _mome_untrained import report_untrained_routing, run_untrained_routing
from _mome_verdicts import verdicts

BENCHMARK = "mome"


def load_raw(path: Path) -> dict:
    """A ``--raw`` dump back in the form :func:`report` / :func:`plot` take."""
    import json

    res = json.loads(Path(path).read_text())
    for rec in res["runs"]:
        ev = {}
        for k, v in rec["eval"].items():
            rate, snr = k.rsplit("/", 1)
            ev[(int(rate) if rate.isdigit() else rate, snr)] = tuple(v)
        rec["eval"] = ev
    return res


def main(argv: list[str] | None = None) -> int:
    parser = base_parser(__doc__.split("\n", 1)[0], verdicts=verdicts, device=True)
    parser.add_argument("--plots", type=Path, default=None, metavar="DIR", help="PNG folder")
    parser.add_argument("--layers", type=int, default=None, help="MiniLM layers (1 quick, 2 full)")
    parser.add_argument("--steps", type=int, default=None, help="training steps (30 quick, 100)")
    parser.add_argument("--batch", type=int, default=None, help="batch size (8 quick, 6)")
    parser.add_argument("--raw", type=Path, default=None, help="also dump the raw runs (JSON)")
    parser.add_argument(
        "--replot", type=Path, default=None, help="only redraw the plots from a --raw dump"
    )
    parser.add_argument(
        "--untrained-routing",
        action="store_true",
        help="only the routing consistency of untrained MoME routers (control)",
    )
    parser.add_argument(
        "--avsr", action="store_true", help="run the audio-visual part instead (synthetic visemes)"
    )
    parser.add_argument(
        "--cache",
        type=Path,
        default=Path.home() / ".cache" / "sci-moe" / "mome",
        help="data set cache folder",
    )
    args = parser.parse_args(argv)
    if (done := verdicts_only(args)) is not None:
        return done
    setup(args)
    if args.replot is not None:
        res = load_raw(args.replot)
        folder = args.plots or Path(".")
        suffix = "_quick" if args.quick else ""
        paths = [plot_avsr(res, folder, suffix)] if args.avsr else plot(res, folder, suffix)
        for p in paths:
            print(f"plot in {p}")
        return 0
    s = settings(args.quick, args.layers, args.steps, args.batch)
    machine = machine_info(
        seed=args.seed,
        quick=args.quick,
        seeds=[args.seed + i for i in range(3)],
        settings={k: list(v) if isinstance(v, tuple) else v for k, v in s.items()},
        task="synthetic espeak-ng speech (not LRS2/LRS3)",
        device=args.device,  # information only: the stored CPU results are the reference
    )
    print(
        f"mome: torch {machine['torch']}, {torch.get_num_threads()} threads, git {machine['git']}"
    )
    other = OtherLoad()
    t0 = time.perf_counter()
    runner = run_avsr if args.avsr else run
    reporter = report_avsr if args.avsr else report
    if args.untrained_routing:
        runner, reporter = run_untrained_routing, report_untrained_routing
        args.plots = None
    res = runner(
        args.quick, args.seed, args.layers, args.cache, args.steps, args.batch, args.device
    )
    if args.raw is not None:
        raw = {**res, "runs": [_jsonable(r) for r in res["runs"]]}
        write_json_doc(args.raw, raw)
    machine["n_utterances"] = res["n_utts"]
    machine["part"] = "avsr" if args.avsr else "asr"
    if args.untrained_routing:
        machine["part"] = "untrained routing control"
    rows: list[Row] = []
    reporter(res, rows)
    if args.plots is not None:
        suffix = "_quick" if args.quick else ""
        paths = [plot_avsr(res, args.plots, suffix)] if args.avsr else plot(res, args.plots, suffix)
        for p in paths:
            print(f"plot in {p}")
    code = finish(args, BENCHMARK, machine, rows, other, t0)
    if args.json is not None:  # the verdicts, by the same rule as --verdicts-only
        rederive_verdicts(args.json, verdicts)
    return code


if __name__ == "__main__":
    raise SystemExit(main())
