"""Sphinx configuration for the sci-moe documentation.

Build (from the repository root)::

    .venv/bin/sphinx-build -W --keep-going -b html docs docs/_build/html

Everything is built offline: no intersphinx, no remote theme assets, no Binder or
JupyterLite links. The tutorials in ``docs/tutorials`` are executed on every build.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

# Headless plotting for the executed tutorials; set before anything imports pyplot.
os.environ.setdefault("MPLBACKEND", "Agg")
import matplotlib

matplotlib.use("Agg")

DOCS = Path(__file__).resolve().parent
ROOT = DOCS.parent
# Import the checkout being documented, even if another copy is installed; docs/ itself
# for ``_gallery_setup`` (sphinx-gallery imports hooks by their qualified name).
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(DOCS))
# The local extensions (``results_role``: the ``:result:`` role and the ``result-table``
# and ``verdicts`` directives of the results pages).
sys.path.insert(0, str(DOCS / "_ext"))

from _results import generate as _generate_results  # noqa: E402

import sci_moe  # noqa: E402

# Results pages are rendered from benchmarks/<paper>/results/*.json before the build reads sources.
_generate_results()

# -- Project -----------------------------------------------------------------

project = "sci-moe"
author = "sci-moe developers"
copyright = "sci-moe developers"
version = sci_moe.__version__
release = sci_moe.__version__

# -- General -----------------------------------------------------------------

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.napoleon",
    # MathJax is loaded by the reader's browser from its default CDN when a page with
    # math is viewed (the build itself needs no network); without it, TeX shows as text.
    "sphinx.ext.mathjax",
    "sphinx.ext.viewcode",
    "sphinx_gallery.gen_gallery",
    # Every number on a results page is rendered from its JSON (docs/_ext/results_role.py).
    "results_role",
    # The results index's table of every paper's verdict counts (docs/_ext/verdict_summary.py).
    "verdict_summary",
]
# Folders (relative to the repository root) where ``:result:`FILE#...``` finds FILE.json.
results_json_dirs = ["benchmarks"]  # FILE is <paper>/results/<name> (benchmarks/README.md)

templates_path = ["_templates"]
# ``tutorials/`` holds the gallery sources; their pages are built from ``auto_tutorials/``.
exclude_patterns = ["_build", "tutorials", "Thumbs.db", ".DS_Store"]
# Unresolved cross-references to external projects (torch, numpy) stay plain text.
nitpicky = False
default_role = "py:obj"
# ``x`` in a docstring (the default role) that names a parameter shared by several
# classes (``d_model``, ``targets``) is ambiguous, not broken: keep it plain text.
suppress_warnings = ["ref.python"]

# -- autodoc / autosummary / napoleon -----------------------------------------

autosummary_generate = True
autosummary_imported_members = False
# Members are listed by the autosummary class template (``_templates/autosummary``), so
# module pages (``automodule``) show only the module docstring.
autodoc_default_options = {}
autodoc_member_order = "bysource"
autodoc_typehints = "signature"
autodoc_class_signature = "mixed"

# The core's docstrings are NumPy style.
napoleon_google_docstring = False
napoleon_numpy_docstring = True
napoleon_use_rtype = False
# ``Attributes`` sections become attribute entries (so ``:attr:`MoEInfo.aux_loss``` links);
# dataclass fields carry no docstring of their own, so they are not described twice.
napoleon_use_ivar = False
napoleon_preprocess_types = False

# -- sphinx-gallery ----------------------------------------------------------

sphinx_gallery_conf = {
    "examples_dirs": "tutorials",
    "gallery_dirs": "auto_tutorials",
    # Execute every tutorial on every build (not only ``plot_*`` files).
    "filename_pattern": r".*\.py$",
    "ignore_pattern": r"__init__\.py",
    "abort_on_example_error": True,
    "only_warn_on_example_error": False,
    "plot_gallery": "True",
    "image_scrapers": ("matplotlib",),
    "matplotlib_animations": False,
    # Reset matplotlib, and run each tutorial with one torch thread and a fixed seed,
    # restoring the thread count afterwards (see _gallery_setup.py for why).
    "reset_modules": ("matplotlib", "_gallery_setup.reset_torch"),
    "reset_modules_order": "both",
    "remove_config_comments": True,
    "within_subsection_order": "FileNameSortKey",
    "download_all_examples": False,
    # Nothing that needs the network: no Binder, no JupyterLite, no backreferences
    # to external sites.
    "binder": {},
    "backreferences_dir": None,
    "show_memory": False,
    "min_reported_time": 0,
    # The sg_execution_times pages load jQuery and DataTables from CDNs; the build log
    # and each tutorial page still report the running time.
    "write_computation_times": False,
}

# -- HTML --------------------------------------------------------------------

html_theme = "pydata_sphinx_theme"
html_title = f"sci-moe {release}"
html_static_path = []
html_theme_options = {
    # Only locally bundled assets: no version switcher JSON, no analytics,
    # no remote announcement, no remote logo or icons.
    "navigation_with_keys": False,
    "show_version_warning_banner": False,
    "check_switcher": False,
    "show_toc_level": 2,
    "secondary_sidebar_items": ["page-toc", "sourcelink"],
    "footer_start": ["copyright"],
    "footer_end": ["sphinx-version", "theme-version"],
}
html_show_sourcelink = True


# -- Hooks -------------------------------------------------------------------


def _skip_torch_overrides_without_docs(app, what, name, obj, skip, options):
    """Hide ``nn.Module`` overrides (``extra_repr``, ...) that have no docstring of their own.

    autodoc would otherwise show torch's generic docstring for them.
    """
    if skip or what != "class":
        return None
    import torch

    func = getattr(obj, "__func__", obj)
    if name in vars(torch.nn.Module) and getattr(func, "__doc__", None) is None:
        return True
    return None


def setup(app):
    app.connect("autodoc-skip-member", _skip_torch_overrides_without_docs)
