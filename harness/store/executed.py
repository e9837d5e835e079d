"""What a run executed, recorded in its result file (``executed``) so that the evidence can be tied to code.

A record holds:

* ``files``: the SHA-256 of every file of the project and of its plugins that the run loaded, by path
  (relative to the checkout when inside it), and beside it (``blobs``) the name git gives those bytes, with
  which a later check finds the very version that ran in the repository and tells a cosmetic edit from
  one that changes code (:mod:`harness.report.freshness`). Which files: the project's
  modules present in ``sys.modules`` once training and testing are done, less :data:`EXCLUDED` (modules that
  parse the command line, launch runs, or write results and reports, which cannot change the numbers of a
  run given the settings the file records), and of the plugin packages (``baselines``, ``harness.sources``,
  ``harness.encoders``, ``--include`` files) only those that define the run's method, encoders and data
  source, and the plugin modules those use: discovery imports every plugin, and an edit to SCAN's file does
  not change what a SwAMP run computes. When the native Sinkhorn kernel ran, its C source joins them.
* ``kernels``: the path each kernel took (the Sinkhorn solves by implementation: native, compiled, eager),
  the native kernel's build (compiler, flags, lanes), the device, torch's threads and the precision.
* ``versions``: torch and numpy.
* ``data``: a content fingerprint of the loaded splits (SHA-256 over their arrays), and the SHA-256 of every
  file under the dataset's root that the run read (seen by an audit hook on ``open``).
* ``commit`` and ``clean``: the commit of the checkout, and whether every recorded file equals that commit's
  copy (per file: a run in a tree with other uncommitted edits is clean when the files it ran are the
  commit's); ``differs_from_commit`` names those that are not, ``changed_during_run`` those whose bytes
  changed between the run's start and its end (that makes a run dirty too).
* ``cost_ms``: what recording took.

:mod:`harness.report.freshness` compares a record with a checkout.
"""
from __future__ import annotations

import ast
import hashlib
import os
import subprocess
import sys
import time
from pathlib import Path
from types import ModuleType
from typing import Any, Iterable

ROOT = Path(__file__).resolve().parents[2]  # the checkout holding the harness

# Project modules left out of a record, each with why: they cannot change a run's numbers given the settings,
# seeds, threads, processes and device that the result file records. Reviewed: a module is added here only
# when it parses the command line, launches runs, or writes results and reports.
EXCLUDED: dict[str, str] = {
    "harness.__main__": "entry point",
    "harness.cli": "parses the command line",
    "harness.worker": "launches a run in a worker process",
    "harness.run.grid": "launches runs (settings, threads and processes are recorded)",
    "harness.run.jobs": "the grid's jobs and outcomes: launches runs",
    "harness.run.dispatch": "the grid's dispatch to its launchers: launches runs",
    "harness.run.sequential": "the grid's runs in this process: launches runs",
    "harness.run.rerun": "runs result files again: launches runs (each run's settings are recorded)",
    "harness.run.commands": "harness run and rerun as functions: plans and launches runs",
    "harness.run.hardware": "compares a record's machine with this one (the machine is recorded)",
    "harness.run.error_lines": "reads a failed process's error line",
    "harness.run.launcher": "launches runs in worker processes",
    "harness.run.slurm": "launches runs as SLURM jobs",
    "harness.run.slurm_job": "runs a SLURM job's worker",
    "harness.run.slurm_submit": "submits SLURM jobs",
    "harness.run.slurm_accounting": "reads SLURM's records of jobs",
    "harness.run.slurm_watch": "watches SLURM jobs",
    "harness.run.locks": "locks an output folder",
    "harness.tune": "searches settings and launches the tuned runs (each run's settings are recorded)",
    "harness.remake": "re-makes runs from their result files; each run's settings are recorded",
    "harness.store": "writes result files and records provenance",
    "harness.report": "tables, pages, ledgers",
    "harness.bench": "the benchmark gate",
    "harness.errors": "error classes and messages",
}
PLUGIN_PACKAGES = ("baselines", "harness.sources", "harness.encoders")
INCLUDED_PREFIX = "swamp_bench_include_"  # the module names of plugin files loaded with --include
DATA_HASH_LIMIT = 32 * 2**20  # arrays above this size are fingerprinted by a sample of their elements
SAMPLE_BYTES = 64 * 2**10  # the size of each sampled slice


def excluded(module: str) -> bool:
    """Whether ``module`` is left out of records (:data:`EXCLUDED`, a package and its modules)."""
    return any(module == name or module.startswith(name + ".") for name in EXCLUDED)


# --- files read: an audit hook sees every open() --------------------------------------------------------------

_OPENED: set[str] = set()
_HOOKED = False


def _audit(event: str, args: tuple[Any, ...]) -> None:
    if event != "open" or not args:
        return
    path, mode = args[0], args[1] if len(args) > 1 else None
    flags = args[2] if len(args) > 2 else 0
    if isinstance(mode, str):
        if any(c in mode for c in "wax+"):
            return
    elif isinstance(flags, int) and flags & (os.O_WRONLY | os.O_RDWR):
        return
    if isinstance(path, (str, bytes, os.PathLike)):
        try:
            _OPENED.add(os.path.abspath(os.fsdecode(path)))
        except (TypeError, ValueError):
            pass


def watch_reads() -> None:
    """Start noting the files this process opens for reading (once per process; an audit hook stays)."""
    global _HOOKED
    if not _HOOKED:
        sys.addaudithook(_audit)
        _HOOKED = True


def files_read_under(root: Path) -> list[Path]:
    """The files under ``root`` that this process opened for reading since :func:`watch_reads`."""
    base = os.path.abspath(root)
    prefix = base.rstrip(os.sep) + os.sep
    return sorted(Path(p) for p in _OPENED if p.startswith(prefix) and os.path.isfile(p))


# --- hashes ---------------------------------------------------------------------------------------------------

def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


_FILE_CACHE: dict[tuple[str, int, int], str] = {}


def file_sha256(path: Path) -> str:
    """SHA-256 of a file, cached by path, size and modification time (data files are hashed once a process)."""
    st = path.stat()
    key = (str(path), st.st_size, st.st_mtime_ns)
    if key not in _FILE_CACHE:
        h = hashlib.sha256()
        with open(path, "rb") as fh:
            for chunk in iter(lambda: fh.read(2**22), b""):
                h.update(chunk)
        _FILE_CACHE[key] = h.hexdigest()
    return _FILE_CACHE[key]


def strip_docstrings(tree: ast.AST) -> ast.AST:
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
                    and isinstance(body[0].value.value, str):
                node.body = body[1:] or [ast.Pass()]
    return tree


def normalized_source(text: str, suffix: str = ".py") -> str:
    """The form of a source file that the cosmetic rule compares (:mod:`harness.report.freshness`): for Python, its
    AST without docstrings (comments, blank lines, line breaks and quoting do not reach the AST); other files as
    they are."""
    if suffix != ".py":
        return text
    try:
        return ast.dump(strip_docstrings(ast.parse(text)), annotate_fields=False, include_attributes=False)
    except SyntaxError:
        return text


def git_blob_sha1(data: bytes) -> str:
    """The object name git gives a file of these bytes (to compare with a commit without reading it)."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def name_of(path: Path) -> str:
    """A file's name in a record: relative to the checkout when inside it, else absolute."""
    path = path.resolve()
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


def path_of(name: str, root: Path = ROOT) -> Path:
    """The file a record's name means in the checkout at ``root``."""
    return Path(name) if os.path.isabs(name) else root / name


# --- which files a run executed -------------------------------------------------------------------------------

def _used_plugin_modules(classes: Iterable[Any], plugin: dict[str, Path]) -> set[str]:
    """The plugin modules that define ``classes`` and their bases, and those that these use (closure over the
    modules and objects their globals name)."""
    todo = []
    for obj in classes:
        for cls in getattr(obj, "__mro__", (obj,)):
            module = getattr(cls, "__module__", "") or ""
            if module in plugin:
                todo.append(module)
    seen: set[str] = set()
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        module = sys.modules.get(name)
        for value in vars(module).values() if module is not None else ():
            other = value.__name__ if isinstance(value, ModuleType) else getattr(value, "__module__", None)
            if isinstance(other, str) and other in plugin and other not in seen:
                todo.append(other)
    return seen


def executed_files(classes: Iterable[Any] = (), plugin_dirs: Iterable[Path] = ()) -> list[Path]:
    """The files a run executed (see the module's docstring), sorted. Plugin files loaded with ``--include`` (as
    modules named ``swamp_bench_include_*``) and the helper modules beside them count as plugins."""
    included = [str(m.__file__) for n, m in list(sys.modules.items())
                if n.startswith(INCLUDED_PREFIX) and getattr(m, "__file__", None)]
    folders = [*map(str, plugin_dirs), *(os.path.dirname(f) for f in included)]
    dirs = tuple(sorted({form(d) + os.sep for d in folders for form in (os.path.abspath, os.path.realpath)}))
    project: dict[str, Path] = {}
    plugin: dict[str, Path] = {}
    for name, module in list(sys.modules.items()):
        top = name.partition(".")[0]
        file = getattr(module, "__file__", None) if module is not None else None
        if not file or not file.endswith(".py"):
            continue
        in_dirs = top not in ("harness", "torch", "numpy") and file.startswith(dirs)
        if any(name == p or name.startswith(p + ".") for p in PLUGIN_PACKAGES) or name.startswith(INCLUDED_PREFIX) \
                or in_dirs:
            plugin[name] = Path(file).resolve()
        elif top == "harness" and not excluded(name):
            project[name] = Path(file).resolve()
    used = _used_plugin_modules(classes, plugin)
    return sorted(set(project.values()) | {plugin[n] for n in used})


def read_files(paths: Iterable[Path]) -> dict[str, bytes]:
    out = {}
    for path in paths:
        try:
            out[name_of(path)] = path.read_bytes()
        except OSError:
            continue
    return out


# --- the data -------------------------------------------------------------------------------------------------

SAMPLES = 64  # arrays above DATA_HASH_LIMIT: this many evenly spaced slices of SAMPLE_BYTES are hashed


def _sample_starts(numel: int, per: int) -> list[int]:
    """The first element of each sampled slice (``per`` elements) of an array of ``numel`` elements."""
    import numpy as np

    return [int(s) for s in np.linspace(0, numel - per, SAMPLES).astype(np.int64)]


def _array_bytes(value: Any, sampled: list[bool]) -> Iterable[bytes]:
    """The bytes a fingerprint hashes of a tensor, array, memory-mapped rows or bundle of them: the dtype and
    shape, then every element's bytes, or above :data:`DATA_HASH_LIMIT` those of :data:`SAMPLES` evenly spaced
    slices of :data:`SAMPLE_BYTES`. A tensor and an array of the same values give the same bytes; a GPU tensor
    is sampled on the GPU and only the sample is copied. Appends True to ``sampled`` for an array it sampled."""
    import numpy as np
    import torch

    if isinstance(value, torch.Tensor):
        t = value.detach()
        t = t.float() if t.dtype == torch.bfloat16 else t
        flat = t.reshape(-1)
        yield f"{torch.empty(0, dtype=t.dtype).numpy().dtype}{tuple(t.shape)}".encode()
        if flat.numel() * flat.element_size() > DATA_HASH_LIMIT:
            per = SAMPLE_BYTES // flat.element_size()
            flat = torch.cat([flat[s:s + per] for s in _sample_starts(flat.numel(), per)])
            sampled.append(True)
        yield flat.cpu().numpy().tobytes()
        return
    if isinstance(value, np.ndarray) or hasattr(value, "array"):  # ArrayRows: memory-mapped rows
        array = value if isinstance(value, np.ndarray) else np.asarray(value.array)
        yield f"{array.dtype}{array.shape}".encode()
        rows = array.reshape(-1)  # a view of a contiguous (memory-mapped) array: nothing is read yet
        if rows.nbytes <= DATA_HASH_LIMIT:
            yield rows.tobytes()
        else:
            per = SAMPLE_BYTES // rows.itemsize
            sampled.append(True)
            for start in _sample_starts(int(rows.size), per):
                yield rows[start:start + per].tobytes()
        return
    if isinstance(value, (list, tuple)):
        for item in value:
            yield from _array_bytes(item, sampled)
        return
    if hasattr(value, "__dict__"):  # a bundle of tensors (padded captions, word fields)
        for key in sorted(vars(value)):
            yield key.encode()
            yield from _array_bytes(vars(value)[key], sampled)


def data_fingerprint(data: Any) -> dict[str, Any]:
    """SHA-256 over the arrays of every split of ``data`` (features, pairing, labels)."""
    h = hashlib.sha256()
    sampled: list[bool] = []
    for split_name in ("train", "val", "test"):
        try:
            split = data[split_name]
        except (KeyError, TypeError):
            continue
        h.update(split_name.encode())
        for attr in ("a", "b", "b_to_a", "labels_a", "labels_b"):
            for chunk in _array_bytes(getattr(split, attr, None), sampled):
                h.update(chunk)
    return {"sha256": h.hexdigest(), **({"sampled": True} if sampled else {})}


# --- git ------------------------------------------------------------------------------------------------------

def _git(*args: str, root: Path = ROOT) -> str:
    return subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, check=True).stdout


def commit_blobs(root: Path = ROOT, commit: str = "HEAD") -> tuple[str | None, dict[str, str]]:
    """The commit's hash and every file's blob name in it (path -> sha1); (None, {}) outside a repository."""
    try:
        sha = _git("rev-parse", commit, root=root).strip()
        listing = _git("ls-tree", "-r", "--full-tree", sha, root=root)
        prefix = _git("rev-parse", "--show-prefix", root=root).strip()
    except (OSError, subprocess.CalledProcessError):
        return None, {}
    blobs = {}
    for line in listing.splitlines():
        meta, _, path = line.partition("\t")
        parts = meta.split()
        if len(parts) == 3 and parts[1] == "blob" and path.startswith(prefix):
            blobs[path[len(prefix):]] = parts[2]
    return sha, blobs


# --- dirty: code that no commit holds -------------------------------------------------------------------------

def ran_uncommitted(record: dict[str, Any], commit: dict[str, str]) -> list[str]:
    """The files a record (its ``blobs``, ``differs_from_commit`` and ``changed_during_run``) says the run executed
    in a version that ``commit`` (path -> git object name) does not hold: those that changed while it ran, and those
    that differed from the run's commit and differ from ``commit`` too. At record time ``commit`` is the run's own
    commit (an empty list makes the record ``clean``); a checkout's HEAD later, where a file committed since then
    no longer counts. The one definition of a dirty run: the record, the freshness of a result and the results
    site's '(dirty)' mark come from it."""
    blobs = record.get("blobs") or {}
    dirty = set(record.get("changed_during_run") or [])
    dirty |= {n for n in record.get("differs_from_commit") or [] if commit.get(n) != blobs.get(n)}
    return sorted(dirty)


def uncommitted(result: dict[str, Any]) -> bool | None:
    """Whether a result's run executed code its commit does not hold: the ``clean`` flag of its record of what ran
    (:func:`ran_uncommitted` at record time; per file: other uncommitted edits in the tree do not count), else the
    tree-wide dirty flag of its git state; None when neither says."""
    record = result.get("executed")
    if isinstance(record, dict) and record.get("clean") is not None:
        return not bool(record["clean"])
    dirty = ((result.get("environment") or {}).get("git") or {}).get("dirty")
    return None if dirty is None else bool(dirty)


def uncommitted_files(root: Path = ROOT) -> list[str]:
    """Tracked files of the checkout at ``root`` that differ from its commit (empty outside a repository): what
    keeps a checkout from re-making evidence (``harness reproduce``)."""
    try:
        out = _git("status", "--porcelain", "--untracked-files=no", root=root)
    except (OSError, subprocess.CalledProcessError):
        return []
    return [line[3:] for line in out.splitlines() if line.strip()]


# --- the record -----------------------------------------------------------------------------------------------

class Recorder:
    """Hashes a run's files at its start and its end; :meth:`finish` returns the record.

    Making one is cheap (the files' bytes are read and hashed once); :meth:`finish` reads them again, names the
    files that changed meanwhile, compares each file's git object name with the commit's (:func:`ran_uncommitted`
    decides ``clean``) and fingerprints the data. Nothing here judges a change: the cosmetic rule
    (:func:`normalized_source`) is applied later, against a checkout (:mod:`harness.report.freshness`).
    """

    def __init__(self) -> None:
        from harness.ops import ot

        self.t0 = time.perf_counter()
        watch_reads()
        ot.reset_paths()
        self.start_hashes = {n: sha256(b) for n, b in read_files(executed_files()).items()}
        self.spent = time.perf_counter() - self.t0

    def finish(self, *, classes: Iterable[Any], plugin_dirs: Iterable[Path], data: Any, data_root: str | None,
               data_dir: Path | None, device: Any, threads: int, precision: str | None) -> dict[str, Any]:
        """The record (module docstring); ``data_root`` is the dataset root as the task gives it (variables
        unexpanded), ``data_dir`` the folder it names here."""
        import numpy
        import torch

        from harness.ops import native, ot

        t1 = time.perf_counter()
        paths = executed_files(classes, plugin_dirs)
        paths_taken = ot.path_counts()
        if paths_taken.get("native"):
            paths.append(native.SOURCE.resolve())
        contents = read_files(paths)
        files = {n: sha256(b) for n, b in contents.items()}
        blobs = {n: git_blob_sha1(b) for n, b in contents.items()}
        changed = sorted(n for n, h in self.start_hashes.items() if n in files and files[n] != h)
        commit, committed = commit_blobs()
        differs = sorted(n for n in contents if committed.get(n) != blobs[n]) if commit else []
        ran: dict[str, Any] = {"blobs": blobs, "differs_from_commit": differs, "changed_during_run": changed}
        data_record: dict[str, Any] = data_fingerprint(data) if data is not None else {}
        if data_root and data_dir is not None:
            read = files_read_under(data_dir)
            data_record["root"] = str(data_root)
            data_record["files"] = {str(p.relative_to(os.path.abspath(data_dir))): file_sha256(p) for p in read}
        kernels: dict[str, Any] = {"sinkhorn": dict(sorted(paths_taken.items())), "device": str(device),
                                   "threads": threads, "precision": precision or "fp32"}
        if paths_taken.get("native"):
            kernels["native"] = native.build_record()
        record: dict[str, Any] = {
            "files": files, "blobs": blobs, "kernels": kernels,
            "versions": {"torch": torch.__version__, "numpy": numpy.__version__},
            "data": data_record, "commit": commit,
            "clean": None if commit is None else not ran_uncommitted(ran, committed),
            "differs_from_commit": differs, "changed_during_run": changed,
        }
        record["cost_ms"] = round(1000 * (self.spent + time.perf_counter() - t1), 1)
        return record
