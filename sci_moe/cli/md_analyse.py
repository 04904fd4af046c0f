"""``sci-moe md analyse``: Ramachandran free energy, JS divergence and traces of a run."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

__all__ = ["analyse"]


def analyse(args: argparse.Namespace) -> int:
    """``sci-moe md analyse``; raises ``ValueError`` on bad input (exit code 2)."""
    import warnings

    from ..sampling.md import analyse_run

    with warnings.catch_warnings():  # printed below from res["warnings"], once
        warnings.simplefilter("ignore", UserWarning)
        res = analyse_run(args.run_dir, args.reference, bins=args.bins, burn_in_ps=args.burn_in_ps)
    units = res.get("units") or {}
    print(f"frames analysed: {res['frames']}")
    if res["js_divergence"] is not None:
        cond = res.get("reference_conditions")
        which = "given with --reference" if args.reference is not None else "default"
        if cond:
            which += (
                f"; simulated with {cond['forcefield']} + {cond['implicit_solvent'] or 'vacuum'}"
                f", {float(cond['temperature_k']):g} K"
            )
        print(f"reference: {res['reference']} ({which})")
        print(
            f"JS divergence: {res['js_divergence']:.4f} nats; PMF error "
            f"{res['pmf_error']:.3f} {units.get('pmf_error', '(kT)^2')}"
        )
    else:
        print("no reference histogram: JS divergence not computed (pass --reference FILE)")
    for key in ("free_energy_png", "traces_png"):
        if key in res:
            print(f"wrote {Path(args.run_dir) / res[key]}")
    print(f"wrote {Path(args.run_dir) / 'analysis.json'}")
    for msg in res.get("warnings", []):
        print(f"sci-moe md analyse: warning: {msg}", file=sys.stderr)
    if args.json:
        Path(args.json).write_text(json.dumps(res, indent=2) + "\n")
    return 0
