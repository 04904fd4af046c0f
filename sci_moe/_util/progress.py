"""Progress bars that stay readable in log files.

On a terminal, :func:`progress_bar` is an ordinary ``tqdm`` bar. When standard error is not a
terminal (a batch job, ``2> run.log``, a CI log) a redrawn bar would fill the log with
carriage-return fragments; there it writes one plain, newline-terminated status line at most
every ``interval`` seconds (and a final one), with the same text a bar shows::

    fit:  40%|####      | 40/100 [00:12<00:18,  3.31epoch/s]

The environment variable ``SCI_MOE_PROGRESS`` overrides the choice: ``bar`` (always a bar),
``lines`` (always plain lines) or ``off`` (nothing). ``SCI_MOE_PROGRESS_INTERVAL`` sets the
seconds between plain lines (default 30).
"""

from __future__ import annotations

import os
import sys

__all__ = ["LineWriter", "progress_bar", "progress_mode"]

_MODES = ("bar", "lines", "off")
DEFAULT_INTERVAL_S = 30.0


class LineWriter:
    """A file-like wrapper that turns ``tqdm``'s carriage-return redraws into plain lines.

    ``tqdm`` writes each redraw as ``"\\r" + status``; this writes ``status + "\\n"`` instead
    and drops the empty redraws a closing bar makes, so every line in the log is one
    complete status.

    Parameters
    ----------
    stream : file-like
        Where the lines go (``sys.stderr`` by default, looked up at each write so that
        redirections made later, e.g. by pytest, are honoured).
    """

    def __init__(self, stream=None):
        self._stream = stream

    @property
    def stream(self):
        return self._stream if self._stream is not None else sys.stderr

    def write(self, text: str) -> int:
        line = text.replace("\r", "").replace("\x1b[A", "").rstrip()
        if line:
            self.stream.write(line + "\n")
        return len(text)

    def flush(self) -> None:
        flush = getattr(self.stream, "flush", None)
        if flush is not None:
            flush()

    def isatty(self) -> bool:
        return False


def progress_mode(stream=None) -> str:
    """How progress is shown: ``"bar"``, ``"lines"`` or ``"off"``.

    Parameters
    ----------
    stream : file-like, optional
        The stream the progress goes to (default ``sys.stderr``).

    Returns
    -------
    str
        ``SCI_MOE_PROGRESS`` when it is set, else ``"bar"`` on a terminal and ``"lines"``
        otherwise.

    Raises
    ------
    ValueError
        If ``SCI_MOE_PROGRESS`` holds something other than ``bar``, ``lines`` or ``off``.
    """
    env = os.environ.get("SCI_MOE_PROGRESS", "").strip().lower()
    if env:
        if env not in _MODES:
            raise ValueError(
                f"SCI_MOE_PROGRESS={env!r} is not understood: set it to one of "
                f"{', '.join(_MODES)} (or unset it to choose by whether stderr is a terminal)"
            )
        return env
    stream = sys.stderr if stream is None else stream
    isatty = getattr(stream, "isatty", None)
    try:
        tty = bool(isatty()) if isatty is not None else False
    except ValueError:  # a closed stream
        tty = False
    return "bar" if tty else "lines"


def progress_bar(iterable=None, *, disable: bool = False, interval: float | None = None, **kwargs):
    """A ``tqdm`` progress bar on a terminal, plain periodic lines in a log.

    Parameters
    ----------
    iterable : iterable, optional
        What to iterate over, as for ``tqdm``.
    disable : bool, optional
        Show nothing (the caller's own ``progress=False`` switch).
    interval : float, optional
        Seconds between plain lines when stderr is not a terminal; default
        ``SCI_MOE_PROGRESS_INTERVAL`` or 30 s. Ignored for a bar.
    **kwargs
        Passed to ``tqdm`` (``total``, ``desc``, ``unit``, ``initial``, ``leave``, ...).

    Returns
    -------
    tqdm.tqdm
        The bar object (``update``, ``set_postfix``, ``close``, iteration, context manager).

    Examples
    --------
    >>> from sci_moe._util.progress import progress_bar
    >>> sum(progress_bar(range(3), disable=True))
    3
    """
    from tqdm.auto import tqdm

    mode = "off" if disable else progress_mode(kwargs.get("file"))
    if mode == "bar":
        return tqdm(iterable, **kwargs)
    if mode == "off":
        return tqdm(iterable, disable=True, **kwargs)
    if interval is None:
        raw = os.environ.get("SCI_MOE_PROGRESS_INTERVAL", "")
        try:
            interval = float(raw) if raw else DEFAULT_INTERVAL_S
        except ValueError:
            raise ValueError(
                f"SCI_MOE_PROGRESS_INTERVAL={raw!r} is not a number of seconds: set it to e.g. 30"
            ) from None
    kwargs["file"] = LineWriter(kwargs.get("file"))
    kwargs["leave"] = True  # a log keeps the final status line
    kwargs.pop("dynamic_ncols", None)
    kwargs.setdefault("ncols", 100)
    kwargs.setdefault("ascii", True)
    return _log_bar_class()(
        iterable,
        line_interval=interval,
        mininterval=interval,
        maxinterval=max(interval, 10.0),
        **kwargs,
    )


def _log_bar_class():
    """A ``tqdm`` whose redraws (also those ``set_postfix`` asks for) are one line per interval."""
    from tqdm import tqdm

    class LogBar(tqdm):
        def __init__(self, *args, line_interval: float = DEFAULT_INTERVAL_S, **kwargs):
            self._line_interval = float(line_interval)
            self._last_line = None
            super().__init__(*args, **kwargs)

        def refresh(self, nolock=False, lock_args=None):
            now = self._time()
            if self._last_line is not None and now - self._last_line < self._line_interval:
                return None
            self._last_line = now
            return super().refresh(nolock=nolock, lock_args=lock_args)

    return LogBar
