"""Where the corpora that gensim's wheel ships live (``gensim/test/test_data``), found
without importing gensim."""

from __future__ import annotations

import importlib.util
from pathlib import Path

__all__ = ["gensim_test_file"]


def gensim_test_file(name: str) -> Path:
    """Path of ``name`` inside the installed gensim package's ``test/test_data`` folder.

    Parameters
    ----------
    name : str
        File name, e.g. ``"lee_background.cor"``.

    Returns
    -------
    Path
        The existing file.

    Raises
    ------
    ImportError
        If gensim is not installed (it is a dependency of sci-moe).
    FileNotFoundError
        If the installed gensim lacks the file.
    """
    spec = importlib.util.find_spec("gensim")  # locate, without importing gensim
    if spec is None or not spec.submodule_search_locations:
        raise ImportError(
            f"{name} ships inside gensim's wheel, which is not installed: pip install 'gensim>=4.3'"
        )
    path = Path(next(iter(spec.submodule_search_locations))) / "test" / "test_data" / name
    if not path.is_file():
        raise FileNotFoundError(f"{path} is missing; reinstall gensim (its wheel ships it)")
    return path
