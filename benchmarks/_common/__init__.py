"""Helpers shared by the scripts in ``benchmarks/``.

Every benchmark script runs standalone (``python benchmarks/<paper>/run.py``), accepts
``--quick``, ``--json PATH``, ``--seed`` and ``--threads``, prints a table and, with
``--json``, writes::

    {"benchmark": str, "machine": {...},
     "rows": [{"case": str, "metric": str, "value": float, "unit": str,
               "vs": str | None, "ratio": float | None}]}

one row per measured figure; ``vs`` names a baseline measured in the same run and
``ratio`` is ``value / baseline`` oriented so that > 1 means sci-moe is better
(see ``DESIGN.md``). A figure from elsewhere (a paper, an issue, another machine's run)
is a *quoted* row, ``{"case", "metric", "value", "unit", "quoted": {"source",
"machine"}}``, without ``vs`` and ``ratio``: only a baseline measured in the same run
gets a ratio (issue 41). Scripts import this package as ``_common``: Python puts the
script's own folder first on ``sys.path``.

Measuring on a CPU, two things move timings by 10-100 % and are handled here:

* **Other processes.** Oversubscribed cores make OpenMP kernels wait for descheduled
  threads. :func:`busy_warning` samples the machine before a run and
  :class:`OtherLoad` reports the CPU time others used during it.
* **Allocator state.** glibc maps large blocks afresh (page faults on every step) and
  moves that threshold with the history of frees, so one contestant's timing depends
  on what ran before it in the same process. :func:`run_isolated` runs each measurement
  in a fresh process; :func:`set_malloc_policy` can switch to a caching policy.

The package holds one concept per module; every name is imported from the package itself
(``from _common import Row``):

* :mod:`~_common.cli`: the flags every script accepts (:func:`base_parser`, :func:`setup`);
* :mod:`~_common.allocator`: the glibc allocator policy (:func:`set_malloc_policy`);
* :mod:`~_common.machine`: the machine record and the load (:func:`machine_info`,
  :class:`OtherLoad`, :func:`busy_warning`);
* :mod:`~_common.timing`: timing in this process (:func:`time_fn`, :func:`interleaved`);
* :mod:`~_common.isolated`: measurements in a fresh process (:func:`run_isolated`);
* :mod:`~_common.verdicts`: the verdict entry and the paired rule (:func:`verdict_entry`,
  :func:`paired_test`, :func:`decide_verdict`, with the smallest gain a claim needs,
  :data:`MIN_EFFECT`, read by :func:`margin_test`), and Holm's correction (:func:`holm`);
* :mod:`~_common.stored_verdicts`: verdicts from stored summaries, intervals and rows
  (:func:`seed_verdict`, :func:`summary_verdict`);
* :mod:`~_common.rows`: measured and quoted rows (:class:`Row`, :class:`QuotedRow`);
* :mod:`~_common.tables`: plain-text tables (:func:`print_table`);
* :mod:`~_common.results`: the results JSON, written and re-derived (:func:`write_json`,
  :func:`finish`, :func:`verdicts_only`);
* training until flat in cycles (:func:`until_flat`): :mod:`sci_moe.train.cycles`,
  re-exported here;
* :mod:`~_common.pieces`: runs written in pieces (:func:`piece_arguments`,
  :func:`previous_run`);
* :mod:`~_common.refusals`: refused command lines (:func:`refuse`,
  :func:`check_resume_settings`).
"""

from __future__ import annotations

from sci_moe.train.cycles import CYCLE_SEED, concat, until_flat

from .allocator import set_malloc_policy
from .cli import base_parser, setup
from .isolated import child_result, run_isolated
from .machine import OtherLoad, busy_warning, cpu_model, git_revision, machine_info, warn_if_busy
from .pieces import piece_arguments, piece_deadline, previous_run
from .pieces import resume_state as resume_state
from .pieces import state_path as state_path
from .refusals import check_resume_settings, refuse
from .results import finish as finish
from .results import rederive_rows, verdicts_only, write_json
from .results import rederive_verdicts as rederive_verdicts
from .results import write_json_doc as write_json_doc
from .rows import QuotedRow, Row, print_rows, quote, row_dict, row_from_dict
from .stored_verdicts import difference_verdict as difference_verdict
from .stored_verdicts import interval_verdict as interval_verdict
from .stored_verdicts import row_value as row_value
from .stored_verdicts import seed_values as seed_values
from .stored_verdicts import seed_verdict as seed_verdict
from .stored_verdicts import summary_verdict as summary_verdict
from .tables import format_table, print_table
from .timing import Timing, interleaved, time_fn
from .verdicts import (
    MIN_DECISIVE_SEEDS,
    MIN_EFFECT,
    VERDICT_KEYS,
    VERDICTS,
    decide_verdict,
    few_seeds_note,
    holm,
    margin_test,
    paired_test,
    verdict_entry,
)

# The names of the old single module, in its order; its public names outside ``__all__``
# (imported ``as`` themselves above) are importable as before.
__all__ = [
    "CYCLE_SEED",
    "MIN_DECISIVE_SEEDS",
    "MIN_EFFECT",
    "VERDICTS",
    "VERDICT_KEYS",
    "OtherLoad",
    "QuotedRow",
    "Row",
    "Timing",
    "base_parser",
    "busy_warning",
    "check_resume_settings",
    "child_result",
    "concat",
    "cpu_model",
    "decide_verdict",
    "few_seeds_note",
    "format_table",
    "git_revision",
    "holm",
    "interleaved",
    "machine_info",
    "margin_test",
    "paired_test",
    "piece_arguments",
    "piece_deadline",
    "previous_run",
    "print_rows",
    "print_table",
    "quote",
    "rederive_rows",
    "refuse",
    "row_dict",
    "row_from_dict",
    "run_isolated",
    "set_malloc_policy",
    "setup",
    "time_fn",
    "until_flat",
    "verdict_entry",
    "verdicts_only",
    "warn_if_busy",
    "write_json",
]
