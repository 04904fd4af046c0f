"""CLI messages name the flag a user typed, not the config field behind it (issue 27)."""

from __future__ import annotations

import re
from collections.abc import Iterable

__all__ = ["flag_error"]


def flag_error(err: ValueError, section: str, names: Iterable[str]) -> ValueError:
    """Rewrite a config-validation error so that it names the command-line flag.

    A dataclass config says ``batch_size must be >= 1, got 0``; on the command line that
    becomes ``--batch-size (train.batch_size in the config file) must be >= 1, got 0``.
    Messages that do not start with one of ``names`` are returned unchanged.

    Parameters
    ----------
    err : ValueError
        The error raised by the config's validation.
    section : str
        The config-file section the field lives in (``model``, ``train``, ...).
    names : iterable of str
        The config field names that have a ``--flag-name`` spelling.

    Returns
    -------
    ValueError
        The rewritten error (raise it ``from None``), or ``err`` itself.

    Examples
    --------
    >>> str(flag_error(ValueError("batch_size must be >= 1, got 0"), "train", ["batch_size"]))
    '--batch-size (train.batch_size in the config file) must be >= 1, got 0'
    """
    msg = str(err)
    for name in sorted(names, key=len, reverse=True):
        if re.match(rf"{re.escape(name)}(?![\w-])", msg):
            flag = "--" + name.replace("_", "-")
            key = f"{section}.{name}" if section else name
            return ValueError(f"{flag} ({key} in the config file){msg[len(name) :]}")
    return err
