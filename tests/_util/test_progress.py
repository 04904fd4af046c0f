"""Progress output: a bar on a terminal, plain newline-terminated lines in a log (issue 27)."""

from __future__ import annotations

import io
import subprocess
import sys

import pytest

from sci_moe._util import LineWriter, progress_bar, progress_mode


class _Tty(io.StringIO):
    def isatty(self):
        return True


def test_mode_follows_the_stream_and_the_environment(monkeypatch):
    monkeypatch.delenv("SCI_MOE_PROGRESS", raising=False)
    assert progress_mode(io.StringIO()) == "lines"
    assert progress_mode(_Tty()) == "bar"
    monkeypatch.setenv("SCI_MOE_PROGRESS", "off")
    assert progress_mode(_Tty()) == "off"
    monkeypatch.setenv("SCI_MOE_PROGRESS", "sometimes")
    with pytest.raises(ValueError, match="bar, lines, off"):
        progress_mode(io.StringIO())


def test_line_writer_turns_redraws_into_lines():
    buf = io.StringIO()
    w = LineWriter(buf)
    w.write("\r fit: 10%")
    w.write("\r")  # the empty redraw of a closing bar
    w.write("\r fit: 20%\x1b[A")
    assert buf.getvalue() == " fit: 10%\n fit: 20%\n"


def test_log_gets_plain_lines_and_a_final_status(monkeypatch):
    monkeypatch.delenv("SCI_MOE_PROGRESS", raising=False)
    buf = io.StringIO()
    bar = progress_bar(total=5, desc="fit", unit="epoch", file=buf, interval=0.0, leave=False)
    for _ in range(5):
        bar.update()
    bar.close()
    text = buf.getvalue()
    assert "\r" not in text
    lines = text.splitlines()
    assert lines[-1].startswith("fit: 100%") and "5/5" in lines[-1]
    assert len(lines) >= 2


def test_postfix_updates_do_not_flood_the_log(monkeypatch):
    monkeypatch.delenv("SCI_MOE_PROGRESS", raising=False)
    buf = io.StringIO()
    bar = progress_bar(total=200, desc="train", file=buf, interval=3600.0)
    for i in range(200):
        bar.set_postfix(loss=1.0 / (i + 1))  # refresh=True on every call
        bar.update()
    bar.close()
    lines = buf.getvalue().splitlines()
    assert len(lines) == 2, lines  # the opening line and the final status
    assert "200/200" in lines[-1]


def test_disabled_shows_nothing(monkeypatch):
    buf = io.StringIO()
    assert sum(progress_bar(range(4), disable=True, file=buf)) == 6
    monkeypatch.setenv("SCI_MOE_PROGRESS", "off")
    assert sum(progress_bar(range(4), file=buf)) == 6
    assert buf.getvalue() == ""


def test_bad_interval_is_a_clear_error(monkeypatch):
    monkeypatch.delenv("SCI_MOE_PROGRESS", raising=False)
    monkeypatch.setenv("SCI_MOE_PROGRESS_INTERVAL", "soon")
    with pytest.raises(ValueError, match="SCI_MOE_PROGRESS_INTERVAL"):
        progress_bar(range(2), file=io.StringIO())


def test_a_real_command_writes_no_carriage_returns_into_its_log(tmp_path):
    """``sci-moe md run`` with stderr in a file: a log of whole lines, no ``\\r`` redraws."""
    cmd = [sys.executable, "-m", "sci_moe.cli.main", "md", "run", "--system", "double-well"]
    cmd += ["--steps", "400", "--report-interval", "10", "--out", str(tmp_path / "run")]
    env = {"SCI_MOE_PROGRESS_INTERVAL": "0", "OMP_NUM_THREADS": "1", "PATH": "/usr/bin:/bin"}
    with open(tmp_path / "stderr.log", "w") as err:
        proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=err, text=True, env=env)
    log = (tmp_path / "stderr.log").read_text()
    assert proc.returncode == 0, log
    assert "\r" not in log
    assert any("400/400" in line for line in log.splitlines()), log
