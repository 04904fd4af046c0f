"""Numbers on the results pages, rendered from the benchmark JSON at docs build time.

A results page never types a measured number: it names the JSON value and the build
writes it. A missing file, path or value is an error (the build runs with ``-W``).

The ``:result:`` role
---------------------

``:result:`FILE#SELECTOR[ @AGG][:FORMAT]``` renders one value.

``FILE``
    The JSON file's name without ``.json``, looked up under ``benchmarks/`` (the
    ``results_json_dirs`` setting of ``conf.py``, in order). Every paper keeps its JSON in
    its own folder (issue 41 item 5), so a name holds folders: ``mvcge/results/mvcge`` for
    ``benchmarks/mvcge/results/mvcge.json``, ``spice/results/history/spice_full_40ep`` for
    an older run.

``SELECTOR``, one of two forms:

* **a row**: ``CASE | METRIC`` -- the ``value`` of the row of ``rows`` with that ``case``
  and ``metric``. The parts are separated by a pipe *with a space on each side* (names
  may contain a bare ``|``). More parts narrow the choice or pick another field:
  ``CASE | METRIC | ratio`` renders the row's ``ratio``; ``CASE | METRIC | vs=FAME K=1``
  keeps the rows whose ``vs`` is ``FAME K=1`` (any row key: ``key=value``). One row must
  match (or several with the same value), unless ``@AGG`` is given. ``*`` in ``CASE``,
  ``METRIC`` or a filter's value matches any characters (``elnino inputs=full FAME K=*``,
  ``vs=* transformers grouped_mm``); such a selector needs ``@AGG``.
* **a JSON pointer** (RFC 6901) starting with ``/``: ``/machine/contention/wall_s``,
  ``/machine/seeds/2``, ``/verdicts/0/p_value`` (``~1`` stands for ``/`` in a key).

``@AGG``
    ``@min``, ``@max``, ``@mean``, ``@median`` (of an even count, the mean of the middle
    two), ``@std`` (population, ddof 0; at least two rows) or
    ``@count`` over every row the selector matches; ``@count`` of a pointer to a list is
    its length (``/machine/seeds @count``).

A derived figure
    Operands joined by `` // `` (quotient), `` -- `` (difference) or `` ** `` (product,
    not a power), spaces on both sides, evaluated from left to right:
    ``CASE A | METRIC // CASE B | METRIC`` renders the first value divided by the second,
    ``A -- B // C`` is ``(A - B) / C``. An operand is a selector with its own optional
    ``@AGG`` or a number literal (``1000 // openmm | steps/s`` is milliseconds per
    step). For the ratios and gaps a page states between stored figures of one file; the
    stored ``ratio`` field, when there is one, is preferred.

Quoted figures
    A row with a ``quoted`` record (``{"source", "machine"}``: a figure from a paper, an
    issue or another machine's run, not measured in this run; issue 41) renders with the
    mark :data:`QUOTED_MARK` after it (``0.0124 (quoted)``), in a node of class
    ``quoted`` whose tooltip names the source and the machine. Such a row has no ``vs``
    or ``ratio``, and a derived figure with a quoted operand is an error: only a baseline
    measured in the same run gets a ratio or a difference.

``:FORMAT``
    A Python format spec (``.3f``, ``.3g``, ``,.0f``, ``.0%``). ``%`` multiplies by 100
    and, as the pages write it, puts a space before the sign: ``0.758`` with ``.0%`` is
    ``76 %``. Default: ``.3g`` for a float, the plain text otherwise.

Examples::

    :result:`fame#oscillator N=100 observed=50% FAME K=5 | relative_l2:.3f`
    :result:`fame#oscillator N=100 observed=30% FAME K=3 | relative_l2 | ratio:.2f`
    :result:`fame#oscillator N=* FAME K=* | relative_l2_sd @max:.2f`
    :result:`fame#/machine/contention/other_cpu_fraction:.0%`

The ``result-table`` directive
------------------------------

A table whose cells are selectors, one column per body line ``HEADER = TEMPLATE``, one
row per entry of ``:rows:`` (separated by ``;``); ``{row}`` in a template stands for the
row's label, or for ``KEY`` when the entry is ``LABEL = KEY``. A template with its own
``FILE#`` reads that file instead of the directive's::

    .. result-table:: fame
       :stub: model
       :rows: FAME K=1; FAME K=3; FLM
       :format: .3f
       :empty: FLM | fit (s)

       30 % = oscillator N=100 observed=30% {row} | relative_l2
       fit (s) = oscillator N=100 {row} | fit_seconds:.0f

A template of several selectors joined by `` ± `` or `` / `` (spaces on both sides)
renders each, joined the same way: ``{row} | cer ± {row} | cer_std`` (mean ± sd),
``mxd {row} | mse / tc {row} | mse``.
``:format:`` is the spec of cells without their own; ``:empty:`` lists the cells (``ROW
| HEADER``, separated by ``;``) shown as ``-`` because the run has no such value (any other
missing cell is an error); ``:cells:`` gives single cells their own template, one per
line: ``ROW | HEADER = TEMPLATE``.

The ``verdicts`` directive
--------------------------

``.. verdicts:: FILE`` renders the JSON's top-level ``verdicts`` list (issue 41) as a
table: claim, verdict, decisive, metric, ours, baseline, baseline value, seeds, p-value,
converged, why. A file without a non-empty ``verdicts`` list, or an entry without one of
these keys or with another verdict than ``reproduced`` / ``contradicted`` / ``not
decided``, is an error.

The module also works under plain docutils (:func:`register`), which is how the tests
check every page's references in a fraction of a second.
"""

from __future__ import annotations

import functools
import importlib.util
import itertools
import json
import math
import re
from pathlib import Path
from typing import ClassVar

from docutils import nodes
from docutils.parsers.rst import Directive, directives, roles

__all__ = [
    "QUOTED_MARK",
    "VERDICT_KEYS",
    "ResultError",
    "ResultTable",
    "Verdicts",
    "evaluate",
    "format_value",
    "load",
    "lookup",
    "parse",
    "quotes",
    "register",
    "render",
    "result_role",
    "setup",
]

ROOT = Path(__file__).resolve().parents[2]
#: Where ``FILE`` is looked up when no Sphinx configuration says otherwise.
DEFAULT_DIRS = (ROOT / "benchmarks",)
SEPARATOR = " | "
#: Join several selectors in one ``result-table`` cell: ``mean ± sd``, ``a / b / c``.
CELL_JOINERS = re.compile(r" (±|/) ")
AGGREGATES = ("min", "max", "mean", "median", "std", "count")


def _verdict_schema() -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The keys and values of a verdict entry, from their one source.

    ``benchmarks/_common/verdicts.py`` (standard library only) defines them for the scripts
    that write the JSON; it is loaded by path, so the extension needs neither the
    ``benchmarks`` folder on ``sys.path`` nor the rest of ``_common``.
    """
    path = ROOT / "benchmarks" / "_common" / "verdicts.py"
    spec = importlib.util.spec_from_file_location("_sci_moe_results_verdicts", path)
    if spec is None or spec.loader is None:  # pragma: no cover - the file ships with the repo
        raise ImportError(f"cannot load the verdict schema from {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return tuple(module.VERDICT_KEYS), tuple(module.VERDICTS)


#: The keys of one entry of a JSON's ``verdicts`` list, in order, and the verdicts allowed.
VERDICT_KEYS, VERDICT_VALUES = _verdict_schema()
#: What follows a figure of a quoted row (not measured in the run).
QUOTED_MARK = " (quoted)"
_FORMAT_SPEC = re.compile(r"^(?:.?[<>=^])?[+\- ]?z?#?0?\d*[,_]?(?:\.\d+)?[bcdeEfFgGnosxX%]?$")
_AGG = re.compile(r"\s@(" + "|".join(AGGREGATES) + r")$")
#: The operators of a derived figure: `` // `` (quotient), `` -- `` (difference) and
#: `` ** `` (product).
_OPERATOR = re.compile(r" (//|--|\*\*) ")
_LITERAL_NUMBER = re.compile(r"^-?\d+(?:\.\d+)?(?:e[-+]?\d+)?$")


class ResultError(ValueError):
    """A ``:result:`` reference that cannot be rendered: the message says what and where."""


# ----------------------------------------------------------------------------- core


def _find(name: str, dirs) -> Path:
    if not name or name.startswith(("/", ".")) or ".." in Path(name).parts:
        raise ResultError(f"bad results file name {name!r}: give the JSON's name without .json")
    tried = []
    for d in dirs:
        path = Path(d) / f"{name}.json"
        if path.is_file():
            return path
        tried.append(str(path))
    raise ResultError(f"no results file {name!r} (looked for {', '.join(tried)})")


@functools.lru_cache(maxsize=64)
def _parsed(path: str, mtime_ns: int, size: int):
    """The parsed JSON at ``path``; the key's mtime and size make an edited file re-read."""
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except json.JSONDecodeError as err:
        raise ResultError(f"{path} is not valid JSON: {err}") from None


def load(name: str, dirs=DEFAULT_DIRS) -> tuple[dict, Path]:
    """The parsed JSON of results file ``name`` and its path (read once per version of the
    file: treat the result as read-only)."""
    path = _find(name, dirs)
    stat = path.stat()
    return _parsed(str(path), stat.st_mtime_ns, stat.st_size), path


def parse(spec: str) -> tuple[str, str, str | None, str | None]:
    """Split ``FILE#SELECTOR[ @AGG][:FORMAT]`` into its four parts (``None`` when absent)."""
    spec = " ".join(spec.split())
    if "#" not in spec:
        raise ResultError(f"{spec!r}: write FILE#SELECTOR, e.g. fame#CASE | METRIC")
    name, selector = spec.split("#", 1)
    fmt = None
    head, sep, tail = selector.rpartition(":")
    if sep and tail and _FORMAT_SPEC.match(tail.strip()) and head:
        selector, fmt = head, tail.strip()
    agg = None
    m = _AGG.search(selector)
    if m and not _OPERATOR.search(selector):
        agg, selector = m.group(1), selector[: m.start()]
    selector = selector.strip()
    if not selector:
        raise ResultError(f"{spec!r}: empty selector after '#'")
    return name.strip(), selector, agg, fmt


def _pointer(doc, selector: str):
    node = doc
    for raw in selector.split("/")[1:]:
        key = raw.replace("~1", "/").replace("~0", "~")
        if isinstance(node, list):
            if not key.isdigit() or int(key) >= len(node):
                raise ResultError(f"{selector}: no item {key!r} in a list of {len(node)}")
            node = node[int(key)]
        elif isinstance(node, dict):
            if key not in node:
                raise ResultError(f"{selector}: no key {key!r} (keys: {', '.join(node)})")
            node = node[key]
        else:
            raise ResultError(f"{selector}: {key!r} asked of a {type(node).__name__}")
    return node


def _glob(text: str) -> re.Pattern:
    """``text`` as a whole-string pattern in which ``*`` matches any characters."""
    return re.compile("^" + ".*".join(re.escape(p) for p in text.split("*")) + "$")


def _rows(doc, selector: str) -> tuple[list[dict], str]:
    parts = [p.strip() for p in selector.split(SEPARATOR)]
    if len(parts) < 2:
        raise ResultError(f"{selector!r}: a row selector is 'CASE | METRIC' (space, pipe, space)")
    case, metric, *rest = parts
    rows = doc.get("rows") if isinstance(doc, dict) else None
    if not isinstance(rows, list):
        raise ResultError("the file has no 'rows' list")
    pattern, mpattern = _glob(case), _glob(metric)
    found = [
        r
        for r in rows
        if pattern.match(str(r.get("case", ""))) and mpattern.match(str(r.get("metric", "")))
    ]
    if not found:
        near = sorted({r["metric"] for r in rows if pattern.match(str(r.get("case", "")))})
        hint = f"; metrics of that case: {', '.join(near)}" if near else "; no row has that case"
        raise ResultError(f"no row with case {case!r} and metric {metric!r}{hint}")
    field = "value"
    for part in rest:
        key, eq, want = part.partition("=")
        if eq and key.strip() in found[0]:
            wanted = _glob(want.strip())
            found = [r for r in found if wanted.match(str(r.get(key.strip())))]
            if not found:
                raise ResultError(f"{selector!r}: no matching row has {key.strip()} = {want!r}")
        elif part in found[0]:
            field = part
        else:
            raise ResultError(
                f"{selector!r}: {part!r} is neither a row field nor a key=value filter"
            )
    return found, field


def lookup(doc, selector: str, agg: str | None = None):
    """The value ``selector`` names in ``doc`` (see the module docstring)."""
    if selector.startswith("/"):
        value = _pointer(doc, selector)
        if agg == "count" and isinstance(value, list):
            return len(value)
        if agg is not None:
            raise ResultError(f"{selector}: of a pointer, only @count of a list")
    else:
        found, field = _rows(doc, selector)
        values = [r.get(field) for r in found]
        if agg is None:
            if len({json.dumps(v) for v in values}) > 1:
                cands = "; ".join(f"vs={r.get('vs')}" for r in found[:4])
                raise ResultError(
                    f"{selector!r} matches {len(found)} rows ({cands}): add a key=value filter "
                    "or an @min/@max/@mean/@median/@std/@count"
                )
            value = values[0]
        elif agg == "count":
            return len(found)
        else:
            bad = [v for v in values if not _is_number(v)]
            if bad:
                raise ResultError(f"{selector!r} @{agg}: non-numeric values {bad[:3]}")
            if agg == "std" and len(values) < 2:
                raise ResultError(f"{selector!r} @std: needs at least two rows")
            mean = sum(values) / len(values)
            value = {
                "min": min(values),
                "max": max(values),
                "mean": mean,
                "median": _median(values),
                "std": math.sqrt(sum((v - mean) ** 2 for v in values) / len(values)),
            }[agg]
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        raise ResultError(f"{selector!r}: the value is {value!r}, not a measurement")
    if isinstance(value, dict | list):
        raise ResultError(f"{selector!r}: names a {type(value).__name__}, not a value")
    return value


def _median(values: list) -> float:
    ordered = sorted(values)
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2


def _is_number(v) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


def format_value(value, fmt: str | None = None) -> str:
    """``value`` in format spec ``fmt`` (default: ``.3g`` for a float, plain text otherwise)."""
    if fmt is None:
        return format(value, ".3g") if isinstance(value, float) else str(value)
    if fmt and fmt[-1] in "eEfFgG%" and isinstance(value, int) and not isinstance(value, bool):
        value = float(value)
    try:
        text = format(value, fmt)
    except (ValueError, TypeError) as err:
        raise ResultError(f"cannot format {value!r} with {fmt!r}: {err}") from None
    # The pages write a space before the percent sign: 76 %, not 76%.
    return text[:-1] + " %" if fmt.endswith("%") else text


def _operand(doc, text: str):
    text = text.strip()
    if _LITERAL_NUMBER.match(text):
        return float(text)
    agg = None
    m = _AGG.search(text)
    if m:
        agg, text = m.group(1), text[: m.start()].strip()
    value = lookup(doc, text, agg)
    if not _is_number(value):
        raise ResultError(f"{text!r}: {value!r} is not a number, cannot compute with it")
    return value


def evaluate(doc, selector: str, agg: str | None = None):
    """The value of ``selector`` in ``doc``: a plain selector (see :func:`lookup`) or
    operands joined by `` // `` (divided by), `` -- `` (minus) or `` ** `` (times),
    evaluated from left to right (``A -- B // C`` is ``(A - B) / C``), each operand a
    selector with an optional ``@AGG`` or a number literal."""
    parts = _OPERATOR.split(selector)
    if len(parts) == 1:
        return lookup(doc, selector, agg)
    value = _operand(doc, parts[0])
    for op, text in zip(parts[1::2], parts[2::2], strict=True):
        b = _operand(doc, text)
        if op == "//":
            if b == 0:
                raise ResultError(f"{selector!r}: division by zero")
            value = value / b
        elif op == "**":
            value = value * b
        else:
            value = value - b
    return value


def quotes(doc, selector: str) -> list[dict]:
    """The ``quoted`` records of the rows ``selector`` reads (empty: all measured here).

    Raises :class:`ResultError` for a derived figure (`` // ``, `` -- ``, `` ** ``) with a
    quoted operand: a ratio or difference to a figure of another run is not a measurement.
    """
    parts = _OPERATOR.split(selector)
    found = []
    for text in parts[::2]:
        text = _AGG.sub("", text.strip()).strip()
        if text.startswith("/") or _LITERAL_NUMBER.match(text):
            continue
        rows, _ = _rows(doc, text)
        found += [r["quoted"] for r in rows if r.get("quoted")]
    if found and len(parts) > 1:
        raise ResultError(
            f"{selector!r} derives a figure from a quoted row ({found[0].get('source')}): "
            "only a baseline measured in the same run gets a ratio or a difference"
        )
    return found


def _render(spec: str, dirs) -> tuple[str, Path, list[dict]]:
    name, selector, agg, fmt = parse(spec)
    doc, path = load(name, dirs)
    try:
        value = evaluate(doc, selector, agg)
        quoted = quotes(doc, selector)
    except ResultError as err:
        raise ResultError(f"{name}.json: {err}") from None
    shown = format_value(value, fmt)
    return (shown + QUOTED_MARK if quoted else shown), path, quoted


def render(spec: str, dirs=DEFAULT_DIRS) -> tuple[str, Path]:
    """The text ``:result:`spec``` shows (a quoted figure with :data:`QUOTED_MARK`), and
    the JSON file it read."""
    shown, path, _ = _render(spec, dirs)
    return shown, path


def _quote_text(quoted: list[dict]) -> str:
    first = quoted[0]
    return f"quoted, not measured in this run: {first.get('source')} ({first.get('machine')})"


# --------------------------------------------------------------- docutils / Sphinx


def _dirs(document) -> tuple:
    env = getattr(document.settings, "env", None)
    if env is not None:
        return tuple(ROOT / d for d in env.config.results_json_dirs)
    return DEFAULT_DIRS


def _note(document, path: Path) -> None:
    env = getattr(document.settings, "env", None)
    if env is not None:
        env.note_dependency(str(path))


def result_role(name, rawtext, text, lineno, inliner, options=None, content=None):
    """``:result:`FILE#SELECTOR[ @AGG][:FORMAT]```: the value, rendered from the JSON."""
    try:
        shown, path, quoted = _render(text, _dirs(inliner.document))
    except ResultError as err:
        msg = inliner.reporter.error(f":result:`{text}`: {err}", line=lineno)
        prb = inliner.problematic(rawtext, rawtext, msg)
        return [prb], [msg]
    _note(inliner.document, path)
    if quoted:
        node = nodes.abbreviation(
            rawtext, shown, explanation=_quote_text(quoted), classes=["result", "quoted"]
        )
        return [node], []
    return [nodes.inline(rawtext, shown, classes=["result"])], []


def _render_cell(template: str, name: str, default_fmt: str | None, dirs) -> tuple[str, list]:
    """One ``result-table`` cell: selectors joined by `` ± `` or `` / ``.

    `` ± `` always joins. `` / `` may also sit inside a case or metric name (``spice /
    sterimol_B1``), so the readings are tried from the fewest joins up and the first whose
    every part renders wins; none rendering re-raises the error of the unsplit reading.
    """
    pieces = CELL_JOINERS.split(template)
    slashes = [i for i in range(1, len(pieces), 2) if pieces[i] == "/"]
    first_error = None
    for n in range(len(slashes) + 1):
        for cut in itertools.combinations(slashes, n):
            parts, joiners, current = [], [], pieces[0]
            for i in range(1, len(pieces), 2):
                if pieces[i] == "±" or i in cut:
                    parts.append(current)
                    joiners.append(f" {pieces[i]} ")
                    current = pieces[i + 1]
                else:
                    current = f"{current} {pieces[i]} {pieces[i + 1]}"
            parts.append(current)
            try:
                shown, paths = [], []
                for spec in parts:
                    spec = spec.strip()
                    if "#" not in spec:
                        spec = f"{name}#{spec}"
                    if default_fmt and not parse(spec)[3]:
                        spec = f"{spec}:{default_fmt}"
                    text, path = render(spec, dirs)
                    shown.append(text)
                    paths.append(path)
            except ResultError as err:
                first_error = first_error or err
                continue
            out = shown[0]
            for joiner, text in zip(joiners, shown[1:], strict=True):
                out += joiner + text
            return out, paths
    raise first_error


def _table(headers: list[str], body: list[list[str]], stub: bool = False) -> nodes.table:
    table = nodes.table(classes=["results-table"])
    group = nodes.tgroup(cols=len(headers))
    table += group
    for _ in headers:
        group += nodes.colspec(colwidth=1)
    if stub:
        group[0]["stub"] = True
    head = nodes.thead()
    group += head
    tbody = nodes.tbody()
    group += tbody
    for target, cells in ((head, [headers]), (tbody, body)):
        for cells_row in cells:
            row = nodes.row()
            for cell in cells_row:
                row += nodes.entry("", nodes.paragraph(text=cell))
            target += row
    return table


def _split(text: str) -> list[str]:
    return [" ".join(p.split()) for p in text.split(";") if p.strip()]


class ResultTable(Directive):
    """``.. result-table:: FILE``: a table of selector cells (see the module docstring)."""

    required_arguments = 1
    has_content = True
    option_spec: ClassVar[dict] = {
        "rows": directives.unchanged_required,
        "stub": directives.unchanged,
        "format": directives.unchanged,
        "empty": directives.unchanged,
        "cells": directives.unchanged,
    }

    def run(self):
        document = self.state.document
        name = self.arguments[0]
        rows = _split(self.options.get("rows", ""))
        default_fmt = self.options.get("format")
        empty = {
            tuple(x.strip() for x in e.split("|", 1)) for e in _split(self.options.get("empty", ""))
        }
        cells_at = {}
        for entry in self.options.get("cells", "").split("\n"):
            where, eq, template = entry.partition(" = ")
            if not entry.strip():
                continue
            if not eq or "|" not in where:
                return [self._error(f":cells: entry {entry!r} is not 'ROW | HEADER = TEMPLATE'")]
            row, _, header = where.partition("|")
            cells_at[(" ".join(row.split()), " ".join(header.split()))] = template.strip()
        columns = []
        for line in self.content:
            if not line.strip():
                continue
            header, eq, template = line.partition(" = ")
            if not eq:
                return [self._error(f"column line {line!r} is not 'HEADER = TEMPLATE'")]
            columns.append((" ".join(header.split()), template.strip()))
        if not rows or not columns:
            return [self._error("needs :rows: and at least one 'HEADER = TEMPLATE' line")]
        headers = [self.options.get("stub", "")] + [h for h, _ in columns]
        body = []
        for entry in rows:
            label, eq, key = entry.partition(" = ")
            key = key if eq else label
            cells = [label]
            for header, template in columns:
                if (label, header) in empty:
                    cells.append("-")
                    continue
                template = cells_at.get((label, header), template).replace("{row}", key)
                try:
                    shown, paths = _render_cell(template, name, default_fmt, _dirs(document))
                except ResultError as err:
                    return [self._error(f"cell ({label} | {header}): {err}")]
                for path in paths:
                    _note(document, path)
                cells.append(shown)
            body.append(cells)
        return [_table(headers, body, stub=True)]

    def _error(self, text: str):
        return self.state.document.reporter.error(
            f"result-table {self.arguments[0]}: {text}", line=self.lineno
        )


def _verdict_cell(key: str, value) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if key == "p_value" and isinstance(value, float):
        return format(value, ".2g")
    if isinstance(value, float):
        return format(value, ".4g")
    return str(value)


def verdict_entries(doc) -> list[dict]:
    """A results JSON's top-level ``verdicts`` list, checked: non-empty, every entry with
    every key of :data:`VERDICT_KEYS` and a verdict of :data:`VERDICT_VALUES`
    (:class:`ResultError` otherwise)."""
    entries = doc.get("verdicts") if isinstance(doc, dict) else None
    if not isinstance(entries, list) or not entries:
        raise ResultError("no non-empty top-level 'verdicts' list")
    for i, entry in enumerate(entries):
        missing = [k for k in VERDICT_KEYS if k not in entry]
        if missing:
            raise ResultError(f"verdict {i} has no {', '.join(missing)}")
        if entry["verdict"] not in VERDICT_VALUES:
            raise ResultError(f"verdict {i} is {entry['verdict']!r}, not one of {VERDICT_VALUES}")
    return entries


class Verdicts(Directive):
    """``.. verdicts:: FILE``: the JSON's ``verdicts`` list as a table."""

    required_arguments = 1

    def run(self):
        document = self.state.document
        name = self.arguments[0]
        try:
            doc, path = load(name, _dirs(document))
            entries = verdict_entries(doc)
        except ResultError as err:
            return [document.reporter.error(f"verdicts {name}: {err}", line=self.lineno)]
        _note(document, path)
        headers = [k.replace("_", " ") for k in VERDICT_KEYS]
        body = [[_verdict_cell(k, e[k]) for k in VERDICT_KEYS] for e in entries]
        return [_table(headers, body)]


def register() -> None:
    """Register the role and directives with plain docutils (for tests and scripts)."""
    roles.register_local_role("result", result_role)
    directives.register_directive("result-table", ResultTable)
    directives.register_directive("verdicts", Verdicts)


def setup(app):
    """Sphinx entry point: the role, the two directives and ``results_json_dirs``."""
    app.add_config_value("results_json_dirs", ["benchmarks/results", "benchmarks"], "env", [list])
    app.add_role("result", result_role)
    app.add_directive("result-table", ResultTable)
    app.add_directive("verdicts", Verdicts)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
