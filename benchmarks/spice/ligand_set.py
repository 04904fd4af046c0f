"""Build (or read) the Kraken-like ligand set and summarise it: counts, fallbacks, oracle gap.

Usage::

    OMP_NUM_THREADS=1 python benchmarks/spice/ligand_set.py --workers 1 \\
        --json benchmarks/spice/results/ligand_set_small.json          # 100 ligands
    python benchmarks/spice/ligand_set.py --full --data data/ligand_set_full --json ...

The set lives in ``data/ligand_set_small`` (``--full``: ``data/ligand_set_full``), the
same convention as ``data/molecule_set_small`` in ``benchmarks/spice/run.py``; it is rebuilt
from code (cached per ligand, resumable), never committed. An existing complete set is
only read. Rows (one per target): ``std`` of the target over ligands, and the oracle gap
``mae_lowest`` / ``mae_random`` (exact value of the lowest-energy / a random conformer)
with ``ratio`` = MAE / std. The build time in the JSON is the first (uncached) build's,
taken from the builder's report when ``--build-seconds`` is not given; the machine was
shared with other jobs (see ``machine``). Rows ``build``: that time, per ligand, and the
full set's time projected linearly from it.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/_common/

import _common
from _common import Row


def main(argv=None) -> int:
    p = _common.base_parser(__doc__.splitlines()[0])
    p.add_argument("--data", type=Path, default=None, help="set folder (default data/...)")
    p.add_argument("--full", action="store_true", help="the 1,000-ligand set")
    p.add_argument("--n", type=int, default=None, help="ligands (default 100 / 1,000)")
    p.add_argument("--workers", type=int, default=1, help="build workers (default 1)")
    p.add_argument("--build-seconds", type=float, default=None, help="measured build time")
    args = p.parse_args(argv)
    _common.setup(args)
    from sci_moe.data.ligands_build import FULL_LIGANDS, LigandSetConfig, build_ligand_set

    n = args.n or (FULL_LIGANDS if args.full else 100)
    data = args.data or Path("data/ligand_set_full" if args.full else "data/ligand_set_small")
    t0 = time.perf_counter()
    build_ligand_set(data, LigandSetConfig(n_ligands=n), n_jobs=args.workers)
    rep = json.loads((data / "report.json").read_text())
    wall = time.perf_counter() - t0
    rows = []
    for t in rep["targets"]:
        s = rep["statistics"][t]
        unit = s["unit"]
        rows.append(Row(t, "std", s["std"], unit))
        for k in ("lowest", "random"):
            rows.append(Row(t, f"mae_{k}", s[f"mae_{k}"], unit, "std", s[f"rel_{k}"]))
    build_s = args.build_seconds if args.build_seconds else rep["seconds"]
    per_ligand = build_s / max(rep["n_ligands"], 1)
    rows += [
        Row("build", "build seconds (first, uncached build)", build_s, "s"),
        Row(
            "build",
            "seconds per ligand (1 worker)"
            if args.workers == 1
            else f"seconds per ligand ({args.workers} workers)",
            per_ligand,
            "s",
        ),
        Row(
            "build",
            f"projected {FULL_LIGANDS}-ligand build (same workers, linear)",
            per_ligand * FULL_LIGANDS / 3600,
            "h",
        ),
    ]
    summary = {
        "n_ligands": rep["n_ligands"],
        "n_requested": rep["n_requested"],
        "n_conformers": rep["n_conformers"],
        "classes": rep["classes"],
        "n_mmff": rep["n_mmff"],
        "n_uff_fallback": rep["n_uff_fallback"],
        "n_failures": len(rep["failures"]),
        "failures": rep["failures"],
        "conformers_per_ligand": rep["statistics"]["conformers_per_molecule"],
        "atoms_per_ligand": rep["statistics"]["atoms_per_molecule"],
        "build_seconds": build_s,
        "cache_hits_this_run": rep["cache_hits"],
        "this_run_seconds": wall,
        "content_sha256": rep["content_sha256"],
        "config": rep["config"],
        "command": "OMP_NUM_THREADS=1 python " + " ".join(sys.argv),
    }
    machine = _common.machine_info(seed=args.seed, n_jobs=args.workers)
    _common.print_table(
        ["target", "std", "MAE lowest / std", "MAE random / std"],
        [
            [
                t,
                rep["statistics"][t]["std"],
                rep["statistics"][t]["rel_lowest"],
                rep["statistics"][t]["rel_random"],
            ]
            for t in rep["targets"]
        ],
        title=f"ligand set: {rep['n_ligands']} ligands, {rep['n_conformers']} conformers",
    )
    if args.json is not None:
        doc = {"benchmark": "ligand_set", "machine": machine, "summary": summary}
        doc["rows"] = [r.__dict__ for r in rows]
        _common.write_json_doc(args.json, doc)
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
