"""``sci-moe data``: build the offline molecule set, inspect MARCEL archives.

Examples
--------
.. code-block:: console

    $ sci-moe data molecules --out molset            # ~50 molecules, about a minute on 2 cores
    $ sci-moe data molecules --full --out molset_full # 500 molecules
    $ sci-moe data marcel --dataset kraken Kraken.zip --limit 100
"""

from __future__ import annotations

import argparse
import json

__all__ = ["add_parser"]

_LOADERS = ("drugs", "kraken", "bde", "ee")


def add_parser(sub) -> argparse.ArgumentParser:
    """Add the ``data`` subcommand to the subparsers ``sub`` of the ``sci-moe`` parser."""
    from ..data.molecule_set import add_arguments

    p = sub.add_parser("data", help="build or inspect molecular data sets")
    dsub = p.add_subparsers(dest="data_command", required=True)
    mol = dsub.add_parser(
        "molecules",
        help="build the offline conformer-ensemble set (NCI molecules, GFN2-xTB labels)",
        description="NCI molecules shipped with RDKit, ETKDGv3/MMFF94 conformer ensembles, "
        "Boltzmann-averaged GFN2-xTB dipole and HOMO-LUMO gap, radius of gyration and SASA. "
        "Cached per molecule; writes molecule_set.npz, report.json, labels.png and "
        "checksums.sha256 to --out.",
    )
    add_arguments(mol)
    mol.set_defaults(func=_molecules)
    mar = dsub.add_parser(
        "marcel",
        help="load a MARCEL archive and summarise it",
        description="Read a MARCEL archive (Drugs.zip, Kraken.zip, BDE.zip, EE.zip or the "
        "folder with its extracted files) and print molecules, conformers, targets and "
        "skipped records.",
    )
    mar.add_argument("path", help="the archive or folder")
    mar.add_argument("--dataset", required=True, choices=_LOADERS, help="which MARCEL set")
    mar.add_argument("--max-confs", type=int, default=20, help="conformers kept (default 20)")
    mar.add_argument("--limit", type=int, default=None, help="only the first N molecules")
    mar.add_argument("--json", metavar="PATH", help="write the summary as JSON")
    mar.set_defaults(func=_marcel)
    return p


def _molecules(args: argparse.Namespace) -> int:
    from ..data.molecule_set import run_from_args

    return run_from_args(args)


def _marcel(args: argparse.Namespace) -> int:
    from ..data import marcel

    loader = getattr(marcel, f"load_{args.dataset}")
    ds = loader(args.path, max_confs=args.max_confs, limit=args.limit)
    confs = {
        part: sum(g.num_confs for g in ds.graphs(part)) if len(ds) else 0 for part in ds.part_names
    }
    summary = {
        "dataset": ds.name,
        "molecules": len(ds),
        "parts": ds.part_names,
        "conformers": confs,
        "targets": ds.target_names,
        "target_mean": ds.y.mean(0).tolist() if len(ds) else [],
        "skipped": len(ds.failures),
        "failures": ds.failures[:20],
    }
    print(
        f"{ds.name}: {len(ds)} molecules, conformers {confs}, targets {ds.target_names}, "
        f"{len(ds.failures)} records skipped"
    )
    for f in ds.failures[:10]:
        print(f"  skipped {f['name']}: {f['reason']}")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(summary, fh, indent=1)
    return 0
