"""Writing results: every output file is written under a temporary name and renamed when complete, and a run's
folder carries a manifest. One home for both rules (the library's writers and the CLI use it).

- :func:`atomic_write` / :func:`atomic_path` / :func:`atomic_text`: one file. A failure or Ctrl-C
  (KeyboardInterrupt) removes the temporary file, so no partial file is ever left under the final name.
- :class:`RunFolder`: one run's output folder. Files are written into a staging folder inside it and moved into
  place only when the run completes; ``manifest.json`` records the command, its arguments, the version and the files.
  A previous run's recorded files (its manifest lists them) are replaced, so two runs never mix; other files are
  left alone, and a run that would overwrite a file no run recorded is refused (before anything is moved) unless
  ``force``. Whether the folder can be written is checked before any work.
- Every output file gets the mode a plain ``open`` would give (0644 under the usual umask 022), never the 0600 of
  a temporary file.

Errors are one-line :class:`~simulator.errors.ParameterError` naming the parameter (``param``), the path and the fix.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from .errors import ParameterError

MANIFEST = "manifest.json"
_STAGE_PREFIX = ".partial-"
_TMP_PREFIX = ".tmp-"


def _file_mode() -> int:
    """0o666 less the process umask: the mode ``open(path, "w")`` gives a new file."""
    mask = os.umask(0o022)
    os.umask(mask)
    return 0o666 & ~mask


def _probe(folder: Path, param: str, path) -> None:
    """Create and remove a file in ``folder`` (an existing folder): it can be written."""
    try:
        fd, tmp = tempfile.mkstemp(prefix=_TMP_PREFIX, dir=folder)
    except OSError as exc:
        raise output_error(param, path, f"{_reason(exc)} in folder '{folder}'", "choose a writable folder") from None
    os.close(fd)
    _remove(tmp)


def _reason(exc: OSError) -> str:
    return (exc.strerror or type(exc).__name__).lower()


def output_error(param: str, path, problem: str, fix: str) -> ParameterError:
    """The one-line error for an output path: ``param`` is the library parameter (the CLI names its flag)."""
    return ParameterError(f"cannot write {param} '{path}': {problem}; {fix}", owner="output", param=param,
                          expected="", value=str(path))


def _make_parent(path: Path, param: str) -> Path:
    if path.exists() and path.is_dir():
        raise output_error(param, path, "it is a folder", "give a file name")
    folder = path.parent
    for p in (folder, *folder.parents):  # a file where a folder is needed
        if p.exists():
            if not p.is_dir():
                raise output_error(param, path, f"'{p}' is a file, not a folder", "choose another path")
            break
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise output_error(param, path, f"cannot create folder '{folder}' ({_reason(exc)})",
                           "choose a writable folder") from None
    return folder


def check_writable(path, *, param: str = "path", suffixes: tuple[str, ...] = ()) -> Path:
    """Check, before any work, that a file can be written at ``path`` (with one of ``suffixes``, when given): the
    path is not a folder, no part of its folder is a file, and a probe file can be created in the nearest existing
    folder (created and removed; no folder is made). Returns the path."""
    path = Path(path)
    if suffixes and path.suffix.lower() not in suffixes:
        stem = path.name if not path.suffix else path.stem
        raise output_error(param, path, f"the file type {path.suffix or '(none)'} is not one of "
                           f"{', '.join(suffixes)}", f"give a file name such as {stem}{suffixes[0]}")
    if path.is_dir():
        raise output_error(param, path, "it is a folder", "give a file name")
    for p in path.parents:
        if p.exists():
            if not p.is_dir():
                raise output_error(param, path, f"'{p}' is a file, not a folder", "choose another path")
            _probe(p, param, path)
            break
    return path


@contextlib.contextmanager
def atomic_path(path, *, param: str = "path") -> Iterator[Path]:
    """Yield a temporary path (same folder, same suffix) to write; on success it is renamed to ``path``.

    For writers that want a file name (matplotlib ``savefig``, ``np.save``)."""
    path = Path(path)
    folder = _make_parent(path, param)
    try:
        fd, tmp = tempfile.mkstemp(prefix=_TMP_PREFIX, suffix=path.suffix, dir=folder)
    except OSError as exc:
        raise output_error(param, path, f"{_reason(exc)} in folder '{folder}'", "choose a writable folder") \
            from None
    os.close(fd)
    try:
        yield Path(tmp)
        os.chmod(tmp, _file_mode())
        os.replace(tmp, path)
    except OSError as exc:
        _remove(tmp)
        raise output_error(param, path, _reason(exc), "choose a writable path") from None
    except BaseException:
        _remove(tmp)
        raise


@contextlib.contextmanager
def atomic_write(path, mode: str = "w", *, param: str = "path", **open_kw) -> Iterator[Any]:
    """``open(path, mode)`` whose result appears under ``path`` only when the block completes."""
    if "b" not in mode:
        open_kw.setdefault("encoding", "utf-8")
    with atomic_path(path, param=param) as tmp, open(tmp, mode, **open_kw) as fh:
        yield fh


def atomic_text(path, text: str, *, param: str = "path") -> str:
    """Write ``text`` to ``path`` atomically; returns the path as a string."""
    with atomic_write(path, "w", param=param) as fh:
        fh.write(text)
    return str(path)


def _remove(path) -> None:
    with contextlib.suppress(OSError):
        os.unlink(path)


def read_manifest(folder) -> dict | None:
    """The manifest of a run folder (None when there is none or it is unreadable)."""
    try:
        doc = json.loads((Path(folder) / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return doc if isinstance(doc, dict) else None


def _jsonable(v):
    if isinstance(v, Mapping):
        return {str(k): _jsonable(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_jsonable(x) for x in v]
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    return str(v)


class RunFolder:
    """One run's output folder (see the module docstring). Use as ``with RunFolder(...) as stage:`` and write into
    ``stage`` (a staging folder); the files move into ``folder`` when the block completes without an exception."""

    def __init__(self, folder, command: str, arguments: Mapping[str, Any], force: bool = False,
                 param: str = "out"):
        from . import __version__

        self.folder = Path(folder)
        self.param = param
        self.force = force
        self.manifest = {"command": command, "arguments": _jsonable(dict(arguments)), "version": __version__}
        self._created: list[Path] = []
        self._stage: Path | None = None
        self._check()

    def _error(self, problem: str, fix: str) -> ParameterError:
        return output_error(self.param, self.folder, problem, fix)

    def _check(self) -> None:
        f = self.folder
        if f.exists() and not f.is_dir():
            raise self._error("it is a file, not a folder", "give a folder name")
        for p in (f, *f.parents):
            if p.exists():
                if not p.is_dir():
                    raise self._error(f"'{p}' is a file, not a folder", "choose another folder")
                _probe(p, self.param, f)
                break

    def __enter__(self) -> Path:
        missing = []
        for p in (self.folder, *self.folder.parents):
            if p.exists():
                break
            missing.append(p)
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            self._created = missing
            self._stage = Path(tempfile.mkdtemp(prefix=_STAGE_PREFIX, dir=self.folder))
        except OSError as exc:
            self._cleanup()
            raise self._error(_reason(exc), "choose a writable folder") from None
        return self._stage

    def __exit__(self, kind, exc, tb) -> None:
        if kind is not None:
            self._cleanup()
            return
        try:
            self._commit()
        except OSError as exc:
            self._cleanup()
            raise self._error(_reason(exc), "choose a writable folder") from None
        except BaseException:
            self._cleanup()
            raise

    def _commit(self) -> None:
        stage = self._stage
        files = sorted(p.relative_to(stage).as_posix() for p in stage.rglob("*") if p.is_file())
        old = read_manifest(self.folder)
        recorded = set((old or {}).get("files", []))
        clash = [n for n in (*files, MANIFEST) if (self.folder / n).exists() and n not in recorded
                 and not (n == MANIFEST and old is not None)]
        if clash and not self.force:
            raise self._error(f"it holds '{clash[0]}', which no run of this tool recorded (no {MANIFEST} lists it) "
                              "and this run would overwrite", "choose another folder or pass --force to replace it")
        for name in recorded:  # the previous run's files that this run does not rewrite
            target = self.folder / name
            if name not in files and target.is_file() and self.folder in target.resolve().parents:
                _remove(target)
        mode = _file_mode()
        for name in files:
            target = self.folder / name
            target.parent.mkdir(parents=True, exist_ok=True)
            os.chmod(stage / name, mode)
            os.replace(stage / name, target)
        shutil.rmtree(stage, ignore_errors=True)
        self._stage = None
        atomic_text(self.folder / MANIFEST, json.dumps({**self.manifest, "files": files}, indent=1) + "\n",
                    param=self.param)

    def _cleanup(self) -> None:
        if self._stage is not None:
            shutil.rmtree(self._stage, ignore_errors=True)
            self._stage = None
        for p in self._created:  # folders this run created, if still empty
            with contextlib.suppress(OSError):
                p.rmdir()
