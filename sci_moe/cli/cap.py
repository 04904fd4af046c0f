"""``sci-moe cap``: MoE-CAP S-MBU / S-MFU of a model on a device, and the CAP radar.

Examples
--------
.. code-block:: console

    $ sci-moe cap --model mixtral-8x7b --hardware h100 --batch 32 --seq-len 1024 --tpot-ms 40
    $ sci-moe cap --model path/to/config.json --hardware a100 --batch 8 --seq-len 4096 \\
          --throughput 900 --activated all --json cap.json
"""

from __future__ import annotations

import argparse

from .._util import read_json_file
from ._threads import add_threads_argument, torch_threads

__all__ = ["add_parser", "run"]


def add_parser(sub) -> argparse.ArgumentParser:
    """Add the ``cap`` subcommand to the subparsers ``sub`` of the ``sci-moe`` parser."""
    p = sub.add_parser(
        "cap",
        help="MoE-CAP sparse utilisation (S-MBU, S-MFU) of a model on a device",
        description=(
            "Sparse memory-bandwidth and model-FLOPs utilisation (MoE-CAP, Eqs. 4-5) of one "
            "inference step: BATCH sequences with SEQ_LEN tokens of context, each step "
            "taking TPOT (decoding: one new token per sequence)."
        ),
    )
    p.add_argument("--list", action="store_true", help="list the shipped models and hardware")
    p.add_argument(
        "--model",
        help="shipped model (mixtral-8x7b, qwen3-30b-a3b, deepseek-v3, olmoe-1b-7b) "
        "or a transformers-style config.json",
    )
    p.add_argument(
        "--hardware",
        default="h100",
        help="a100, h100, h200 (dense datasheet peaks), cpu (measured, ~2 s) or a JSON "
        "file (default h100)",
    )
    p.add_argument("--batch", type=int, default=1, help="sequences per step (default 1)")
    p.add_argument(
        "--seq-len", type=float, default=0, help="context tokens per sequence (default 0)"
    )
    p.add_argument("--tpot-ms", type=float, help="time per step (per output token), ms")
    p.add_argument("--throughput", type=float, help="tokens/s (instead of --tpot-ms)")
    p.add_argument("--tokens", type=float, help="tokens per step (default: --batch, i.e. decoding)")
    p.add_argument(
        "--activated",
        default="uniform",
        help="activated experts per MoE layer: 'uniform' (expected under uniform routing, "
        "default), 'all', or a number",
    )
    p.add_argument("--dtype", help="weight format (default: the model's, e.g. bfloat16)")
    p.add_argument("--kv-dtype", help="KV-cache format (default: --dtype)")
    p.add_argument("--num-devices", type=int, default=1, help="devices (default 1)")
    p.add_argument(
        "--expert-count",
        choices=("per_expert", "per_layer_once"),
        default="per_expert",
        help="per_expert: the paper's equations (default); per_layer_once: the MoE-CAP code",
    )
    p.add_argument("--lm-head", action="store_true", help="also count the LM head")
    p.add_argument("--json", metavar="PATH", help="write the report as JSON")
    p.add_argument(
        "--radar",
        metavar="PNG",
        help="draw the CAP radar: needs --systems and/or --cost with --accuracy",
    )
    p.add_argument(
        "--systems",
        metavar="JSON",
        help="JSON list of systems for the radar: [{name, cost, accuracy, performance}, ...] "
        "(performance in s/token)",
    )
    p.add_argument("--cost", type=float, help="cost of this run for the radar, $")
    p.add_argument("--accuracy", type=float, help="accuracy of this run for the radar")
    p.add_argument("--name", help="name of this run in the radar (default: model on hardware)")
    add_threads_argument(
        p, 0, "--hardware cpu measures the peak of the whole machine; the others run no torch"
    )
    p.set_defaults(func=run)
    return p


def _activated(text: str):
    if text in ("uniform", "all"):
        return text
    try:
        return float(text)
    except ValueError:
        raise ValueError(
            f"--activated must be 'uniform', 'all' or a number, got {text!r}"
        ) from None


def _systems(args, report) -> list[dict]:
    systems: list[dict] = []
    if args.systems:
        data = read_json_file(args.systems, "--systems file")
        if not isinstance(data, list):
            raise ValueError("--systems must hold a JSON list of {name, cost, accuracy, ...}")
        systems.extend(data)
    if (args.cost is None) != (args.accuracy is None):
        raise ValueError("give both --cost and --accuracy to add this run to the radar")
    if args.cost is not None:
        name = args.name or f"{report.model} on {report.hardware}"
        systems.append(
            {
                "name": name,
                "cost": args.cost,
                "accuracy": args.accuracy,
                "performance": report.tpot,
            }
        )
    if not systems:
        raise ValueError("--radar needs --systems FILE and/or --cost with --accuracy")
    return systems


def run(args: argparse.Namespace) -> int:
    """Run ``sci-moe cap``; raises ``ValueError`` on bad input (exit code 2)."""
    with torch_threads(getattr(args, "threads", None), default=0):
        return _run(args)


def _run(args: argparse.Namespace) -> int:
    from ..moe.cap import (
        available_hardware,
        available_models,
        cap_metrics,
        get_hardware,
        load_model,
    )

    if args.list:
        print("models:  ", ", ".join(available_models()), "(or a config.json)")
        print("hardware:", ", ".join(available_hardware()), "(or a JSON file)")
        return 0
    if not args.model:
        raise ValueError("--model is required (see `sci-moe cap --list`)")
    if (args.tpot_ms is None) == (args.throughput is None):
        raise ValueError("give exactly one of --tpot-ms and --throughput")
    if args.radar and not (args.systems or args.cost is not None or args.accuracy is not None):
        raise ValueError("--radar needs --systems FILE and/or --cost with --accuracy")
    spec = load_model(args.model)
    hardware = get_hardware(args.hardware)
    report = cap_metrics(
        spec,
        hardware,
        batch_size=args.batch,
        seq_len=args.seq_len,
        tpot=None if args.tpot_ms is None else args.tpot_ms / 1e3,
        throughput=args.throughput,
        tokens=args.tokens,
        activated=_activated(args.activated),
        dtype=args.dtype,
        kv_dtype=args.kv_dtype,
        num_devices=args.num_devices,
        expert_count=args.expert_count,
        lm_head=args.lm_head,
    )
    systems = _systems(args, report) if args.radar else None
    print(report.format_table())
    if args.json:
        from .._util import atomic_save_json

        out = {"model_note": spec.note, "hardware_note": hardware.note, **report.to_dict()}
        path = atomic_save_json(args.json, out, indent=2)
        print(f"wrote {path}")
    if args.radar:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        from ..moe.cap import cap_radar

        fig = cap_radar(systems, args.radar, title=f"CAP radar: {report.model}")
        plt.close(fig)
        print(f"wrote {args.radar}")
    return 0
