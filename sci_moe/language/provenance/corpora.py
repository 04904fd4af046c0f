"""Read labelled corpora from files or directories (one label per corpus).

A corpus is a list of ``(doc_id, text)`` documents:

* a ``.txt`` file is **one** document;
* a ``.jsonl`` file holds one document per line, a JSON object with a ``"text"`` field
  (``"id"`` optional);
* a directory is every ``.txt`` and ``.jsonl`` file below it (sorted by path).

Bytes must be UTF-8; undecodable bytes raise a ``ValueError`` naming the file and offset
(pass ``errors="replace"`` to substitute U+FFFD instead).
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path

__all__ = ["read_corpora", "read_corpus"]

_SUFFIXES = (".txt", ".jsonl")


def _decode(path: Path, errors: str) -> str:
    data = path.read_bytes()
    try:
        return data.decode("utf-8", errors=errors)
    except UnicodeDecodeError as err:
        raise ValueError(
            f"{path}: undecodable bytes at offset {err.start} (not UTF-8); convert the file "
            "to UTF-8 or pass errors='replace' (--errors replace)"
        ) from None


def _read_file(path: Path, root: Path, errors: str) -> list[tuple[str, str]]:
    rel = path.relative_to(root).as_posix() if path != root else path.name
    text = _decode(path, errors)
    if path.suffix == ".txt":
        return [(rel, text)] if text.strip() else []
    docs = []
    for i, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as err:
            raise ValueError(f"{path}:{i}: not a JSON object ({err.msg})") from None
        if not isinstance(obj, dict) or not isinstance(obj.get("text"), str):
            raise ValueError(f'{path}:{i}: each line must be a JSON object with a "text" string')
        if obj["text"].strip():
            docs.append((f"{rel}:{obj.get('id', i)}", obj["text"]))
    return docs


def read_corpus(path: str | os.PathLike, errors: str = "strict") -> list[tuple[str, str]]:
    """Documents of one corpus (see the module docstring for the accepted layouts).

    Parameters
    ----------
    path : path-like
        A ``.txt`` / ``.jsonl`` file or a directory.
    errors : {"strict", "replace"}
        UTF-8 decoding of bytes that are not UTF-8.

    Returns
    -------
    list of (doc_id, text)
        Non-empty documents; ``doc_id`` is the path relative to ``path`` (plus
        ``":id"`` for JSON lines).
    """
    if errors not in ("strict", "replace"):
        raise ValueError(f"errors must be 'strict' or 'replace', got {errors!r}")
    root = Path(path)
    if root.is_dir():
        files = sorted(p for p in root.rglob("*") if p.is_file() and p.suffix in _SUFFIXES)
    elif root.is_file():
        if root.suffix not in _SUFFIXES:
            raise ValueError(f"{root}: expected a .txt or .jsonl file or a directory")
        files = [root]
    else:
        raise FileNotFoundError(f"no such corpus file or directory: {root}")
    docs: list[tuple[str, str]] = []
    for f in files:
        docs.extend(_read_file(f, root if root.is_dir() else f, errors))
    if not docs:
        raise ValueError(
            f"corpus {root} is empty: no non-empty .txt file or .jsonl line found under it"
        )
    return docs


def read_corpora(
    paths: Sequence[str | os.PathLike],
    names: Sequence[str] | None = None,
    errors: str = "strict",
) -> dict[str, list[tuple[str, str]]]:
    """Several corpora, one label each: ``{name: documents}`` in the order given.

    ``names`` defaults to each path's file stem / directory name; names must be distinct.
    Document ids are prefixed with the name, so documents of different corpora never share a
    split key.
    """
    paths = list(paths)
    if len(paths) < 2:
        raise ValueError(f"give at least 2 corpora (one per label), got {len(paths)}")
    names = [Path(p).stem for p in paths] if names is None else list(names)
    if len(names) != len(paths):
        raise ValueError(f"{len(names)} names for {len(paths)} corpora")
    if len(set(names)) != len(names):
        raise ValueError(f"corpus names must be distinct, got {names}; pass names explicitly")
    return {
        n: [(f"{n}/{d}", t) for d, t in read_corpus(p, errors)]
        for n, p in zip(names, paths, strict=True)
    }
