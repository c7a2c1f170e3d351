"""``python -m transformer_lib.grade SUBMISSION... --out FOLDER``: a class's notebooks, graded.

Each submission (a notebook file; a folder of them, one student per file; or a folder of folders,
one student per folder) is identified (its title cell, its file name, or the exercises it defines),
executed in a fresh kernel in a fresh folder of its own, then graded: every checked exercise of its
notebook (the registry, :mod:`.checks.registry`) is run through its check in a clean Python process.
The grader writes ``FOLDER/gradebook.csv`` (one row per submission), ``FOLDER/points.csv`` (one row
per submission and exercise, for nbgrader, Otter-Grader or a spreadsheet) and
``FOLDER/feedback/<student>.md`` (each exercise's verdict and hint, and why a cell did not run).

How a definition reaches its check, and why
-------------------------------------------
The kernel's run only tells the student how their notebook ran; it never sets a grade. After it,
the grader reads the submission's *source*: for each exercise it takes the last top-level ``def`` or
``class`` of the exercise's name (``my_attention``) in the code cells, and, by their names, the
top-level statements it needs (helper functions, classes, imports, assignments it reads), found
with :mod:`symtable`. A fresh process (``python -I``, an empty folder, a private copy of this
package made after the kernel died, no solutions folder, no ``PYTHONPATH``) imports the checks, then
forks one child per exercise: the child executes only those statements in an empty namespace and
calls the check from the registry (never a name the student's code can rebind). The one exercise
whose cell passes the check a value (notebook 10's ``results``) is graded with the check's own
default for it (the committed ``results/table3.csv``), never the value the kernel computed.

Threat model (the student's notebook is arbitrary code; the teacher runs the grader as themself)
-----------------------------------------------------------------------------------------------
Guaranteed, whatever the notebook contains:

- Output is never read for a grade: a printed "✅ passed" earns nothing.
- Nothing done in the kernel reaches a grade: replacing or wrapping ``tl.checks.*``, editing the
  library in memory or on disk (the kernel has its own copy), setting globals; the kernel is killed,
  with its process group, before grading starts.
- Top-level statements that are not definitions (``tl.checks.check_x = ...``, calls, loops) are
  never executed by the grading process; imports of ``solutions`` and imports that bind an
  exercise's name are skipped; a name bound only by an assignment is not a definition (0 points).
- Code that runs at definition or call time in the grading child and replaces a function or class
  attribute of ``transformer_lib``, ``torch`` or the standard modules the checks use (including a
  function's ``__code__``), or exits, earns 0 for that exercise: the child's verdict counts only if
  it exits with a random status drawn for it, and the modules are compared before and after.
- Each exercise runs in its own child, with only the statements its definition reads: an attack
  in one exercise's code costs that exercise (and any exercise whose code uses it) only.
- Limits: a per-cell and a per-notebook wall-clock limit, a per-exercise limit, a memory limit
  (``RLIMIT_AS``) and a file-size limit in the kernel and the grading processes, outputs cut at a
  size, a killed kernel recorded, never fatal. The run always ends: every wait has a deadline.
- A relative path one or two levels up (``../``, ``../../``) stays in the submission's own
  temporary folder, which holds no other submission and no solution and is deleted afterwards
  (deeper, it is the file system of the first point below).

Not guaranteed (a determined attacker with arbitrary code in a process of the teacher's user):

- The file system is not sandboxed: code can read or write any file the teacher's user can, by
  absolute path (another student's original notebook, the course's ``solutions/`` folder when the
  grader runs inside the repository). Grade in a container or as a user that sees only the
  submissions (GitHub Classroom does: each student's repository in its own runner).
- The network guard is Python-level (``socket`` refuses non-loopback addresses); ``ctypes`` or a
  subprocess gets around it. For a hard guarantee run the grader in a container started with
  ``--network none``.
- Code in the grading child runs inside the check's process: it can walk the stack, patch objects
  the snapshot does not cover (a tensor's storage, a closure's cell) or find the random status. The
  snapshot stops the simple forgeries, not all.
- A process that leaves the kernel's process group (``setsid``) may outlive the kernel.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import csv
import dataclasses
import hashlib
import json
import os
import re
import resource
import secrets
import select
import shutil
import signal
import subprocess
import symtable
import sys
import tempfile
import time
import types
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path

__all__ = ["Limits", "Report", "Verdict", "grade", "main"]

PACKAGE = Path(__file__).resolve().parents[1]  # transformer_lib/
COURSE = PACKAGE.parent  # the repository root, when the grader runs from a clone
FIXED_COLUMNS = ("student", "notebook")
TAIL_COLUMNS = ("score", "max_score", "status", "submission")
POINTS_COLUMNS = (
    "student",
    "notebook",
    "exercise",
    "name",
    "check",
    "points",
    "max_points",
    "hint",
)
# The imports every notebook's first code cells make: a definition may use them even where the
# student's copy lost its import cell.
DEFAULT_IMPORTS = (
    "import math\nimport torch\nfrom torch import nn\nimport torch.nn.functional as F\n"
    "import transformer_lib as tl\n"
)
_NOTEBOOK_NAME = re.compile(r"(?<!\d)(\d\d)_[A-Za-z]")  # "Copy of 01_attention (2).ipynb" -> 01
_STUB_NAME = re.compile(r"(my_\w+|My\w+)")


@dataclasses.dataclass(frozen=True)
class Limits:
    """What one submission may use: seconds per cell, per notebook and per exercise's check, the
    memory of each process in GiB, the bytes of output kept per cell, and whether to run it."""

    cell_s: float = 300.0
    notebook_s: float = 900.0
    exercise_s: float = 120.0
    memory_gib: float = 8.0
    output_bytes: int = 100_000
    execute: bool = True


@dataclasses.dataclass
class Verdict:
    """One exercise's outcome: ``passed`` None when it was not graded."""

    column: str  # "01.1 check_attention": the gradebook's column
    name: str  # "my_attention"
    passed: bool | None
    message: str


@dataclasses.dataclass
class Report:
    """One submission's outcome: its verdicts, how its cells ran, and ``status`` (``graded`` or
    why not)."""

    student: str
    submission: str
    notebook: str = ""  # "01"; empty when it could not be identified
    status: str = "graded"
    verdicts: list[Verdict] = dataclasses.field(default_factory=list)
    cells: list[str] = dataclasses.field(default_factory=list)  # what went wrong while it ran

    @property
    def score(self) -> int:
        return sum(bool(v.passed) for v in self.verdicts)

    @property
    def max_score(self) -> int:
        return len(self.verdicts)


# --- the course: its exercises and notebooks ----------------------------------------------------


def course_exercises() -> dict[str, list]:
    """The registry's exercises by notebook number: ``{"01": [Exercise, ...], ...}``."""
    from .checks import registry

    found: dict[str, list] = {}
    for exercise in registry.exercises():
        found.setdefault(exercise.notebook, []).append(exercise)
    return found


def column(exercise) -> str:
    """The gradebook's column for ``exercise``: ``"01.1 check_attention"``."""
    return f"{exercise.notebook}.{exercise.number} {exercise.check}"


def _title(notebook) -> str:
    """The first markdown heading of a notebook (``# 01 · Attention``), stripped; '' if none."""
    for cell in notebook.get("cells", []):
        if cell.get("cell_type") == "markdown":
            for line in _source(cell).splitlines():
                if line.startswith("# "):
                    return line[2:].strip()
    return ""


def _source(cell) -> str:
    source = cell.get("source", "")
    return "".join(source) if isinstance(source, list) else str(source)


def course_titles(course: Path | None = COURSE) -> dict[str, str]:
    """``{title: number}`` of the course's notebooks (none when the grader has no course folder)."""
    import nbformat

    titles = {}
    for path in sorted((course / "notebooks").glob("[0-9][0-9]_*.ipynb")) if course else []:
        with contextlib.suppress(Exception), warnings_off():
            titles[_title(nbformat.read(path, as_version=4))] = path.name[:2]
    return titles


def identify(notebook, file_name: str, titles: dict[str, str], known: dict[str, list]) -> str:
    """The number of the course notebook that ``notebook`` is a copy of, or '' when none fits:
    its title cell, else its file name (``Copy of 01_attention.ipynb``), else the exercises it
    defines and checks (a renamed file with a retitled first cell)."""
    title = _title(notebook)
    if title in titles and titles[title] in known:
        return titles[title]
    match = _NOTEBOOK_NAME.search(file_name)
    if match and match.group(1) in known:
        return match.group(1)
    code = "\n".join(_source(c) for c in notebook.get("cells", []) if c.get("cell_type") == "code")
    scores = {
        number: sum(
            bool(re.search(rf"\b(def|class) {e.name}\b", code)) and f"{e.check}(" in code
            for e in exercises
        )
        for number, exercises in known.items()
    }
    best = max(scores.values(), default=0)
    winners = [number for number, score in scores.items() if score == best]
    return winners[0] if best and len(winners) == 1 else ""


# --- the submission's source: what each exercise needs ------------------------------------------


@dataclasses.dataclass
class _Statement:
    position: tuple[int, int]  # (cell, statement)
    source: str
    binds: frozenset
    reads: frozenset
    kind: str  # "def", "import", "assign"


def _python_source(source: str) -> str:
    """A cell's source as plain Python: IPython's magics and ``!`` lines turned into calls."""
    from IPython.core.inputtransformer2 import TransformerManager

    try:
        return TransformerManager().transform_cell(source)
    except Exception:
        return source


def _reads(source: str) -> frozenset:
    """The global names a statement reads, at module level or inside its functions and classes."""
    names: set[str] = set()

    def walk(table) -> None:
        for symbol in table.get_symbols():
            if table.get_type() == "module" and symbol.is_referenced():
                names.add(symbol.get_name())
            elif table.get_type() != "module" and symbol.is_global() and symbol.is_referenced():
                names.add(symbol.get_name())
        for child in table.get_children():
            walk(child)

    walk(symtable.symtable(source, "<cell>", "exec"))
    return frozenset(names)


def statements(cells: list[str]) -> list[_Statement]:
    """The top-level definitions, imports and plain assignments of the code cells, in order.
    Imports of ``solutions`` and imports that bind an exercise-like name (``my_*``, ``My*``) are
    left out: an exercise is graded on the code written for it."""
    found = []
    for index, cell in enumerate(cells):
        source = _python_source(cell)
        try:
            tree = ast.parse(source)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            continue
        for number, node in enumerate(tree.body):
            binds: set[str] = set()
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                kind, binds = "def", {node.name}
            elif isinstance(node, ast.Import | ast.ImportFrom):
                if isinstance(node, ast.ImportFrom):
                    modules = [node.module or ""]
                else:
                    modules = [alias.name for alias in node.names]
                binds = {(a.asname or a.name).split(".")[0] for a in node.names}
                if any(m.split(".")[0] == "solutions" for m in modules) or "*" in binds:
                    continue
                if any(_STUB_NAME.fullmatch(name) for name in binds):
                    continue
                kind = "import"
            elif isinstance(node, ast.Assign | ast.AnnAssign) and node.value is not None:
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                names = [t for x in targets for t in ast.walk(x) if isinstance(t, ast.expr)]
                if not all(isinstance(t, ast.Name | ast.Tuple | ast.List) for t in names):
                    continue  # an attribute or item: that changes an object, not a name
                kind, binds = "assign", {t.id for t in names if isinstance(t, ast.Name)}
            else:
                continue
            text = ast.get_source_segment(source, node, padded=True) or ""
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
                text = "\n".join(source.splitlines()[first - 1 : node.end_lineno])
            try:
                reads = _reads(text)
            except (SyntaxError, ValueError, RecursionError, MemoryError):
                continue
            found.append(_Statement((index, number), text, frozenset(binds), reads, kind))
    return found


def needed(found: list[_Statement], name: str) -> list[_Statement] | None:
    """The statements that define ``name`` (its last ``def``/``class``) with those it reads,
    transitively, in notebook order; None when the notebook has no such definition."""
    definitions = [s for s in found if name in s.binds and s.kind == "def"]
    if not definitions:
        return None
    chosen = {definitions[-1].position: definitions[-1]}
    todo = [definitions[-1]]
    while todo:
        statement = todo.pop()
        for read in statement.reads - statement.binds:
            binders = [s for s in found if read in s.binds]
            before = [s for s in binders if s.position < statement.position]
            pick = (before or binders or [None])[-1]
            if pick is not None and pick.position not in chosen:
                chosen[pick.position] = pick
                todo.append(pick)
    return [chosen[key] for key in sorted(chosen)]


# --- limits inside the kernel and the grading process -------------------------------------------


def _limit(memory_bytes: int, file_bytes: int) -> None:
    """Cap this process's address space and the size of a file it writes (children inherit)."""
    for kind, value in ((resource.RLIMIT_AS, memory_bytes), (resource.RLIMIT_FSIZE, file_bytes)):
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(kind, (value, value))


def _guard_network() -> None:
    """Refuse every socket connection and datagram to an address other than loopback (a Unix
    socket is allowed): the grader's own small guard, in this process."""
    import ipaddress
    import socket

    def local(address) -> bool:
        if not isinstance(address, tuple):
            return True  # AF_UNIX path
        host = str(address[0])
        if host in ("localhost", ""):
            return True
        try:
            return ipaddress.ip_address(host.split("%")[0]).is_loopback
        except ValueError:
            return False  # a host name: it would be resolved over the network

    def refuse(address):
        raise OSError(f"network disabled by the grader: {address!r} is not this machine")

    base = socket.socket

    class GuardedSocket(base):
        def connect(self, address):
            return super().connect(address) if local(address) else refuse(address)

        def connect_ex(self, address):
            return super().connect_ex(address) if local(address) else refuse(address)

        def sendto(self, data, *args):
            address = args[-1]
            return super().sendto(data, *args) if local(address) else refuse(address)

    def getaddrinfo(host, *args, **kwargs):
        if local((host,)):
            return original_getaddrinfo(host, *args, **kwargs)
        return refuse(host)

    original_getaddrinfo = socket.getaddrinfo
    socket.socket = GuardedSocket
    socket.getaddrinfo = getaddrinfo


def _kernel_main(memory_bytes: int, file_bytes: int) -> None:
    """The kernel's launcher: limits and the network guard, then an IPython kernel."""
    _limit(memory_bytes, file_bytes)
    _guard_network()
    from ipykernel import kernelapp

    kernelapp.launch_new_instance()


# --- a private copy of the package, for the kernel and for the grading process -------------------


def _copy_course(into: Path) -> str:
    """Copy this package and the course's ``results/`` files into ``into`` (the layout of the
    repository, so that ``results/table3.csv`` is found), return a digest of what was copied."""
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    shutil.copytree(PACKAGE, into / PACKAGE.name, ignore=ignore)
    results = COURSE / "results"
    (into / "results").mkdir(exist_ok=True)
    for path in results.glob("*.*") if results.is_dir() else []:
        if path.is_file():
            shutil.copy2(path, into / "results" / path.name)
    return _digest(into)


def _digest(folder: Path) -> str:
    """A hash of every file's path and content under ``folder``."""
    digest = hashlib.sha256()
    for path in sorted(
        p for p in folder.rglob("*") if p.is_file() and "__pycache__" not in p.parts
    ):
        digest.update(str(path.relative_to(folder)).encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


def _environment(home: Path) -> dict[str, str]:
    """A minimal environment: no PYTHONPATH, no teacher's folders; one thread; CPU only."""
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(home),
        "LANG": os.environ.get("LANG", "C.UTF-8"),
        "OMP_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
        "MALLOC_ARENA_MAX": "2",
        "CUDA_VISIBLE_DEVICES": "",
        "MPLCONFIGDIR": str(home / ".matplotlib"),
        "PYDEVD_DISABLE_FILE_VALIDATION": "1",
    }
    (home / ".matplotlib").mkdir(parents=True, exist_ok=True)
    cache = Path(os.environ.get("MPLCONFIGDIR", Path.home() / ".cache" / "matplotlib"))
    for font_list in cache.glob("fontlist-*.json") if cache.is_dir() else []:
        shutil.copy2(font_list, home / ".matplotlib" / font_list.name)  # no font-cache rebuild
    return env


# --- running the notebook -----------------------------------------------------------------------


def _cut(text: str, size: int = 300) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= size else text[: size - 1] + "…"


def _output_capped_client(limits: Limits) -> type:
    """An nbclient ``NotebookClient`` class that keeps at most ``limits.output_bytes`` of output
    per cell, with a note on stderr where it cut (a student's loop that prints for ever must not
    fill the grader's memory)."""
    from nbclient import NotebookClient

    class Client(NotebookClient):
        """Keeps at most ``limits.output_bytes`` of output per cell."""

        kept: dict = {}

        def output(self, outs, msg, display_id, cell_index):
            out = super().output(outs, msg, display_id, cell_index)
            if out is None:
                return out
            size = len(str(out.get("text", ""))) + sum(
                len(str(v)) for v in out.get("data", {}).values()
            )
            used = self.kept.get(cell_index, 0) + size
            self.kept[cell_index] = used
            if used > limits.output_bytes:
                del outs[-1]
                note = f"[output cut by the grader at {limits.output_bytes:,} characters]\n"
                if not outs or outs[-1].get("text") != note:
                    outs.append({"output_type": "stream", "name": "stderr", "text": note})
            return out

    return Client


def _kernel_manager(sandbox: Path, limits: Limits):
    """An asynchronous manager of the grader's kernel: ``python -I`` that puts ``sandbox`` first
    on ``sys.path`` and runs :func:`_kernel_main` under ``limits.memory_gib``; its kernel spec and
    its ipc socket live in ``sandbox/kernels``. (A blocking manager would block the timeouts' event
    loop.)"""
    from jupyter_client.kernelspec import KernelSpecManager
    from jupyter_client.manager import AsyncKernelManager

    memory = int(limits.memory_gib * 2**30)
    specs = sandbox / "kernels" / "tl-grade"
    specs.mkdir(parents=True)
    boot = (
        f"import sys; sys.path.insert(0, {str(sandbox)!r}); "
        f"from transformer_lib.teaching.grade import _kernel_main; _kernel_main({memory}, {2**30})"
    )
    spec = {"argv": [sys.executable, "-I", "-c", boot, "-f", "{connection_file}"]}
    spec |= {"display_name": "grader", "language": "python"}
    (specs / "kernel.json").write_text(json.dumps(spec))
    return AsyncKernelManager(
        kernel_name="tl-grade",
        kernel_spec_manager=KernelSpecManager(kernel_dirs=[str(specs.parent)]),
        transport="ipc",
        ip=str(sandbox / "kernels" / "socket"),
    )


def _cell_problems(client, notebook, limits: Limits, deadline: float) -> Iterator[str]:
    """Run ``notebook``'s code cells in order on ``client``'s started kernel, each under
    ``limits.cell_s`` and all before ``deadline`` (``time.monotonic``); yield what went wrong as it
    happens. The first timeout or kernel death ends the run: the cells after it are not run."""
    from nbclient.exceptions import CellTimeoutError, DeadKernelError

    for index, cell in enumerate(notebook.cells):
        if cell.cell_type != "code":
            continue
        left = deadline - time.monotonic()
        if left <= 1:
            yield (
                f"the notebook ran past its {limits.notebook_s:.0f} s: cell {index} and "
                "the cells after it were not run"
            )
            return
        client.timeout = max(1, int(min(limits.cell_s, left)))
        try:
            client.execute_cell(cell, index)
        except CellTimeoutError:
            yield (
                f"cell {index} ran past {client.timeout} s and was stopped; the cells "
                "after it were not run"
            )
            return
        except DeadKernelError:
            yield (
                f"the kernel died in cell {index} (os._exit, a crash, or the "
                f"{limits.memory_gib:g} GiB memory limit); the cells after it were not run"
            )
            return
        expected = "raises-exception" in cell.get("metadata", {}).get("tags", [])
        for out in cell.get("outputs", []):
            if out.get("output_type") == "error" and not expected:
                yield f"cell {index} raised {out.get('ename')}: {_cut(out.get('evalue'))}"


def execute(notebook, sandbox: Path, limits: Limits) -> list[str]:
    """Run ``notebook`` in a fresh kernel whose folder is ``sandbox/notebooks`` (``../results``
    and ``../checkpoints`` as in the repository); return what went wrong, cell by cell. The kernel
    and its process group are killed at the end."""
    manager = _kernel_manager(sandbox, limits)
    workdir = sandbox / "notebooks"
    client = _output_capped_client(limits)(
        notebook,
        km=manager,
        timeout=int(limits.cell_s),
        allow_errors=True,
        startup_timeout=120,
        record_timing=False,
        resources={"metadata": {"path": str(workdir)}},
    )
    client.kept = {}
    problems: list[str] = []
    deadline = time.monotonic() + limits.notebook_s
    group = None
    try:
        with client.setup_kernel(env=_environment(sandbox / "home")):
            with contextlib.suppress(Exception):
                group = os.getpgid(manager.provisioner.process.pid)
            for problem in _cell_problems(client, notebook, limits, deadline):
                problems.append(problem)  # one by one: kept if the client fails after it
    except Exception as exc:  # the kernel did not start, or the client failed: say so
        problems.append(f"the notebook could not be run: {type(exc).__name__}: {_cut(exc)}")
    finally:
        if group is not None:
            with contextlib.suppress(OSError):
                os.killpg(group, signal.SIGKILL)
    return problems


# --- grading: a clean process, one child per exercise --------------------------------------------


def _snapshot() -> dict:
    """The identity of every attribute (and function code) of the modules the checks rely on, and
    of the classes they define: what student code must not replace."""
    import builtins
    import math

    import torch

    modules = [builtins, math, torch, torch.nn, torch.nn.functional, torch.testing, torch.linalg]
    modules += [m for n, m in list(sys.modules.items()) if n.startswith("transformer_lib") and m]
    owners = [*modules, torch.Tensor, torch.nn.Module, torch._C.TensorBase]
    seen, index = {}, 0
    while index < len(owners):  # the classes that transformer_lib defines join the list
        owner, index = owners[index], index + 1
        name = getattr(owner, "__qualname__", None) or getattr(owner, "__name__", "?")
        for attr, value in list(vars(owner).items()):
            code = value.__code__ if isinstance(value, types.FunctionType) else None
            defaults = value.__defaults__ if isinstance(value, types.FunctionType) else None
            seen[(name, attr)] = (id(value), id(code), id(defaults), value)
            defined_here = isinstance(owner, types.ModuleType) and owner.__name__.startswith(
                "transformer_lib"
            )
            if defined_here and isinstance(value, type) and value not in owners:
                owners.append(value)
    return seen


def _replaced(before: dict, after: dict) -> list[str]:
    """The attributes of two snapshots that differ. PyTorch wraps some functions in place on first
    use (``torch.manual_seed``); a wrapper of the old function whose code is PyTorch's own is not a
    replacement."""
    import torch

    home = str(Path(torch.__file__).parent)
    changed = []
    for key, (*ids, new) in after.items():
        if key not in before or before[key][:3] == tuple(ids):
            continue
        old = before[key][3]
        code = getattr(new, "__code__", None)
        if getattr(new, "__wrapped__", None) is old and str(
            getattr(code, "co_filename", "")
        ).startswith(home):
            continue
        changed.append(".".join(key))
    return sorted(changed)


def _grade_child(exercise, sources: list[str] | None, status: int, channel: int) -> None:
    """In a forked child: run the statements, then the check; report on ``channel``, and exit with
    ``status`` only when the check passed and nothing it relies on was replaced."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    os.dup2(devnull, 2)
    passed, message = False, ""
    try:
        before = _snapshot()
        if sources is None:
            message = (
                f"no `def {exercise.name}` or `class {exercise.name}` found in the notebook's code "
                "cells: the grader grades the exercise's own definition."
            )
        else:
            namespace: dict = {"__name__": "__main__", "__builtins__": __builtins__}
            errors = []
            for source in [DEFAULT_IMPORTS, *sources]:
                try:
                    exec(compile(source, "<submission>", "exec"), namespace)
                except BaseException as exc:
                    errors.append(f"{type(exc).__name__}: {_cut(exc, 200)}")
            code = namespace.get(exercise.name)
            if code is None:
                message = f"{exercise.name} could not be defined ({'; '.join(errors)})."
            else:
                result = exercise.grade(code)
                passed, message = bool(result.passed is True), str(result.message)
                if errors and not passed:
                    message += f" (While defining it: {'; '.join(errors)}.)"
        changed = _replaced(before, _snapshot())
        if changed:
            passed = False
            message = (
                "0 points: the code replaced what the check relies on "
                f"({', '.join(changed[:3])}), so the check's verdict cannot be trusted."
            )
    except BaseException as exc:
        passed, message = False, f"the check could not run: {type(exc).__name__}: {_cut(exc, 200)}"
    with contextlib.suppress(Exception):
        os.write(channel, json.dumps({"message": message}).encode()[:20_000])
    os._exit(status if passed else 1)


def _worker_main() -> None:
    """The grading process: reads the job (JSON) on stdin, writes the verdicts (JSON) on stdout."""
    job = json.loads(sys.stdin.read())
    out = os.dup(1)
    _limit(job["memory_bytes"], 2**28)
    _guard_network()
    import torch

    torch.set_num_threads(1)
    from transformer_lib.teaching.checks import registry

    by_column = {column(e): e for e in registry.exercises()}
    registry.checks()  # the checks are looked up now, before any student code runs
    _snapshot()
    verdicts = []
    for item in job["exercises"]:
        exercise = by_column[item["column"]]
        status = 2 + secrets.randbelow(250)
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: no way back but its channel and its exit status
            os.close(read)
            os.close(out)
            _grade_child(exercise, item["sources"], status, write)
        os.close(write)
        data, deadline, ended = b"", time.monotonic() + job["exercise_s"], False
        while time.monotonic() < deadline and len(data) < 100_000:
            ready, _, _ = select.select([read], [], [], max(0.0, deadline - time.monotonic()))
            if not ready:
                break
            chunk = os.read(read, 65536)
            if not chunk:
                ended = True
                break
            data += chunk
        os.close(read)
        code = None
        while ended and code is None and time.monotonic() < deadline:
            done, status_code = os.waitpid(pid, os.WNOHANG)
            code = status_code if done else time.sleep(0.02)
        if code is None:  # still running (a loop after closing its channel): stop it
            ended = False
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
            _, code = os.waitpid(pid, 0)
        try:
            message = str(json.loads(data.decode())["message"])
        except Exception:
            message = ""
        if not ended:
            passed, message = False, f"the check ran past {job['exercise_s']:g} s and was stopped."
        elif os.WIFSIGNALED(code) or not message:
            passed = False
            message = message or (
                "the grading process died (os._exit, a crash, or the memory limit) before the "
                "check reported."
            )
        else:
            passed = os.WIFEXITED(code) and os.WEXITSTATUS(code) == status
        verdicts.append({"column": item["column"], "passed": passed, "message": message})
    os.write(out, json.dumps(verdicts).encode())


def run_checks(number: str, cells: list[str], known: dict, work: Path, limits: Limits) -> list:
    """Grade every exercise of notebook ``number`` on the definitions in ``cells`` (the code
    cells' sources) in a clean process over a fresh copy of this package; return Verdicts."""
    found = statements(cells)
    items = []
    for exercise in known[number]:
        chosen = needed(found, exercise.name)
        sources = None if chosen is None else [s.source for s in chosen]
        items.append({"column": column(exercise), "sources": sources})
    digest = _copy_course(work / "lib")
    job = {
        "exercises": items,
        "exercise_s": limits.exercise_s,
        "memory_bytes": int(limits.memory_gib * 2**30),
    }
    boot = (
        f"import sys; sys.path.insert(0, {str(work / 'lib')!r}); "
        "from transformer_lib.teaching.grade import _worker_main; _worker_main()"
    )
    (work / "cwd").mkdir()
    env = _environment(work / "home")
    timeout = 120 + limits.exercise_s * len(items)
    names = {column(e): e.name for e in known[number]}
    with subprocess.Popen(
        [sys.executable, "-I", "-c", boot],
        cwd=work / "cwd",
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    ) as process:
        try:
            stdout, _ = process.communicate(json.dumps(job).encode(), timeout=timeout)
            verdicts = json.loads(stdout.decode())
        except Exception as exc:
            with contextlib.suppress(OSError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait()
            why = (
                f"ran past {timeout:g} s"
                if isinstance(exc, subprocess.TimeoutExpired)
                else f"failed (exit status {process.returncode})"
            )
            return [Verdict(item["column"], names[item["column"]], None, "") for item in items], (
                f"not graded: the grading process {why}"
            )
        with contextlib.suppress(OSError):
            os.killpg(process.pid, signal.SIGKILL)
    if _digest(work / "lib") != digest:
        return [Verdict(c, names[c], None, "") for c in names], (
            "not graded: the grader's copy of the library changed while it graded"
        )
    return [
        Verdict(v["column"], names[v["column"]], v["passed"], v["message"]) for v in verdicts
    ], ""


# --- one submission ------------------------------------------------------------------------------


def grade(
    student: str,
    path: Path,
    limits: Limits = Limits(),
    known: dict | None = None,
    titles: dict | None = None,
) -> Report:
    """Identify, run and grade one submission; never raises (what went wrong is its status)."""
    import nbformat

    known = course_exercises() if known is None else known
    titles = course_titles() if titles is None else titles
    report = Report(student, str(path))
    try:
        if not path.is_file():
            report.status = "not graded: not a file"
            return report
        if path.stat().st_size == 0:
            report.status = "not graded: the file is empty"
            return report
        try:
            with warnings_off():
                notebook = nbformat.read(path, as_version=4)
        except Exception as exc:
            report.status = f"not graded: not a notebook ({type(exc).__name__}: {_cut(exc, 120)})"
            return report
        code = [_source(c) for c in notebook.cells if c.get("cell_type") == "code"]
        if not code:
            report.status = "not graded: the notebook has no code cells"
            return report
        report.notebook = identify(notebook, path.name, titles, known)
        if not report.notebook:
            report.status = (
                "not graded: not one of the course's notebooks with exercises (by its title, its "
                "file name and its exercises)"
            )
            return report
        with tempfile.TemporaryDirectory(prefix="tl-grade-") as folder:
            sandbox = Path(folder) / "run"
            if limits.execute:
                _copy_course(sandbox)
                (sandbox / "notebooks").mkdir()
                checkpoint = COURSE / "checkpoints" / "date_model.pt"  # notebook 07 loads it
                if checkpoint.is_file():
                    (sandbox / "checkpoints").mkdir()
                    shutil.copy2(checkpoint, sandbox / "checkpoints" / checkpoint.name)
                for cell in notebook.cells:
                    if cell.cell_type == "code":
                        cell.outputs = []
                report.cells = execute(notebook, sandbox, limits)
            report.verdicts, problem = run_checks(
                report.notebook, code, known, Path(folder) / "grade", limits
            )
        if problem:
            report.status = problem
    except Exception as exc:  # the grader's own failure: one submission's line, never the run's
        report.status = f"not graded: the grader failed ({type(exc).__name__}: {_cut(exc, 200)})"
    return report


@contextlib.contextmanager
def warnings_off():
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


# --- collecting submissions, writing the gradebook and the feedback -----------------------------


def collect(paths: list[Path]) -> list[tuple[str, Path]]:
    """``(student, file)`` for each submission: a file is one student (its stem); a folder's files
    are one student each; a folder's sub-folders are one student each (every notebook inside)."""
    found: list[tuple[str, Path]] = []
    for path in paths:
        if not path.is_dir():
            found.append((path.stem, path))
            continue
        for entry in sorted(path.iterdir()):
            if entry.name.startswith("."):
                continue
            if entry.is_dir():
                notebooks = sorted(
                    p for p in entry.rglob("*.ipynb") if ".ipynb_checkpoints" not in p.parts
                )
                found += [(entry.name, p) for p in notebooks] or [(entry.name, entry)]
            else:
                found.append((entry.stem, entry))
    return found


def _safe(name: str) -> str:
    return re.sub(r"[^\w.-]+", "_", name).strip("._") or "student"


def write_gradebook(reports: list[Report], folder: Path, known: dict) -> list[str]:
    """``folder/gradebook.csv`` and ``folder/points.csv``; return the gradebook's columns."""
    numbers = sorted({r.notebook for r in reports if r.verdicts})
    columns = [column(e) for n in numbers for e in known[n]]
    header = [*FIXED_COLUMNS, *columns, *TAIL_COLUMNS]
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / "gradebook.csv", "w", newline="") as file:
        writer = csv.DictWriter(file, header)
        writer.writeheader()
        for r in reports:
            row = {"student": r.student, "notebook": r.notebook, "status": r.status}
            row |= {v.column: "" if v.passed is None else int(v.passed) for v in r.verdicts}
            graded = r.verdicts and all(v.passed is not None for v in r.verdicts)
            row |= {"score": r.score if graded else "", "max_score": r.max_score or ""}
            row["submission"] = Path(r.submission).name
            writer.writerow(row)
    with open(folder / "points.csv", "w", newline="") as file:
        writer = csv.writer(file)
        writer.writerow(POINTS_COLUMNS)
        for r in reports:
            for v in r.verdicts:
                points = "" if v.passed is None else int(v.passed)
                number, check = v.column.split(" ")
                hint = "" if v.passed else _cut(v.message, 500)
                writer.writerow([r.student, r.notebook, number, v.name, check, points, 1, hint])
    return header


def _sentence(text: str) -> str:
    return text[:1].upper() + text[1:] + ("" if text.endswith(".") else ".")


def feedback(reports: list[Report]) -> str:
    """The Markdown feedback for one student's submissions."""
    lines = [f"# Feedback for {reports[0].student}", ""]
    for r in reports:
        name = Path(r.submission).name
        if not r.verdicts:
            lines += [
                f"## `{name}`: not graded",
                "",
                _sentence(r.status.removeprefix("not graded: ")),
                "",
            ]
            continue
        lines += [f"## Notebook {r.notebook} (`{name}`): {r.score} of {r.max_score}", ""]
        if r.status != "graded":
            lines += [f"**{r.status}.**", ""]
        for v in r.verdicts:
            mark = {True: "✅ passed", False: "❌ not passed", None: "not graded"}[v.passed]
            lines += [f"### Exercise {v.column.split(' ')[0]}: `{v.name}` ({mark})", ""]
            message = v.message.strip() or "(no message)"
            lines += [*(f"> {line}".rstrip() for line in message.splitlines()), ""]
        lines += ["### How the notebook ran", ""]
        lines += [f"- {c}" for c in r.cells] or ["- every cell ran without an error"]
        lines.append("")
    return "\n".join(lines)


def write_feedback(reports: list[Report], folder: Path) -> None:
    """``folder/feedback/<student>.md``: one file per student."""
    by_student: dict[str, list[Report]] = {}
    for r in reports:
        by_student.setdefault(r.student, []).append(r)
    (folder / "feedback").mkdir(parents=True, exist_ok=True)
    for student, own in by_student.items():
        (folder / "feedback" / f"{_safe(student)}.md").write_text(feedback(own))


def summary(reports: list[Report], seconds: float) -> str:
    """One line: how many submissions, how they did, how long it took."""
    graded = [r for r in reports if r.verdicts and r.status == "graded"]
    full = sum(r.score == r.max_score for r in graded)
    none = sum(r.score == 0 for r in graded)
    return (
        f"graded {len(graded)} of {len(reports)} submissions in {seconds:.0f} s: {full} full "
        f"marks, {len(graded) - full - none} partial, {none} none; "
        f"{len(reports) - len(graded)} not graded (see the status column)"
    )


# --- GitHub Classroom ----------------------------------------------------------------------------


def classroom_tests(known: dict | None = None) -> list[dict]:
    """GitHub Classroom's autograding tests (``.github/classroom/autograding.json``): for each
    notebook with exercises, one test that grades the student's copy in ``notebooks/`` (0 points),
    then one test per exercise (1 point) that passes when the gradebook says so."""
    known = course_exercises() if known is None else known
    tests = []
    for number, exercises in known.items():
        out = f".grades/{number}"
        tests.append(
            {
                "name": f"notebook {number}: run and grade it",
                "setup": "make setup TORCH_INDEX=cpu" if not tests else "",
                "run": f"OMP_NUM_THREADS=1 .venv/bin/python -m transformer_lib.grade "
                f"notebooks/{number}_*.ipynb --out {out} --no-progress",
                "input": "",
                "output": "",
                "comparison": "included",
                "timeout": 30,
                "points": 0,
            }
        )
        tests += [
            {
                "name": f"exercise {e.notebook}.{e.number}: {e.name} ({e.check})",
                "setup": "",
                "run": f".venv/bin/python -m transformer_lib.grade --out {out} "
                f"--passed {e.notebook}.{e.number}",
                "input": "",
                "output": "",
                "comparison": "included",
                "timeout": 1,
                "points": 1,
            }
            for e in exercises
        ]
    return tests


def classroom_workflow(known: dict | None = None) -> str:
    """The same tests as a GitHub Actions workflow with Classroom's command grader and reporter
    (copy it to ``.github/workflows/classroom.yml`` of the assignment's template)."""
    tests = classroom_tests(known)
    ids = [re.sub(r"[^a-z0-9]+", "-", t["name"].split(":")[0].lower()).strip("-") for t in tests]
    lines = [
        "# Written by `python -m transformer_lib.grade --write-classroom .github/classroom`:",
        "# copy to .github/workflows/classroom.yml in the assignment's template repository.",
        "name: Autograding Tests",
        "on: [push, repository_dispatch]",
        "permissions:",
        "  checks: write",
        "  actions: read",
        "  contents: read",
        "jobs:",
        "  run-autograding-tests:",
        "    runs-on: ubuntu-latest",
        "    if: github.actor != 'github-classroom[bot]'",
        "    steps:",
        "      - name: Checkout code",
        "        uses: actions/checkout@v4",
    ]
    for test, step in zip(tests, ids, strict=True):
        lines += [
            f"      - name: {json.dumps(test['name'])}",
            f"        id: {step}",
            "        uses: classroom-resources/autograding-command-grader@v1",
            "        with:",
            f"          test-name: {json.dumps(test['name'])}",
            f"          setup-command: {json.dumps(test['setup'])}",
            f"          command: {json.dumps(test['run'])}",
            f"          timeout: {test['timeout']}",
            f"          max-score: {test['points']}",
        ]
    lines += [
        "      - name: Autograding Reporter",
        "        uses: classroom-resources/autograding-grading-reporter@v1",
        "        env:",
        *(f'          {s.upper()}_RESULTS: "${{{{steps.{s}.outputs.result}}}}"' for s in ids),
        "        with:",
        f"          runners: {','.join(ids)}",
    ]
    return "\n".join(lines) + "\n"


def write_classroom(folder: Path) -> None:
    """Write ``autograding.json`` and ``classroom.yml`` into ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    config = {"tests": classroom_tests()}
    (folder / "autograding.json").write_text(
        json.dumps(config, indent=2, ensure_ascii=False) + "\n"
    )
    (folder / "classroom.yml").write_text(classroom_workflow())


# --- the command line ----------------------------------------------------------------------------


def _passed(folder: Path, wanted: str) -> int:
    """Exit status 0 when every row of ``folder/gradebook.csv`` passed exercise ``wanted`` (a
    column, or its ``NN.k`` prefix): a GitHub Classroom test."""
    try:
        with open(folder / "gradebook.csv", newline="") as file:
            rows = list(csv.DictReader(file))
    except OSError:
        print(f"{wanted}: no gradebook in {folder}")
        return 1
    keys = {key for row in rows for key in row if key.split(" ")[0] == wanted or key == wanted}
    ok = bool(rows) and all(any(row.get(key) == "1" for key in keys) for row in rows)
    print(f"{wanted}: {'passed' if ok else 'not passed'}")
    return 0 if ok else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m transformer_lib.grade",
        description="Grade students' notebooks with the course's checks.",
    )
    parser.add_argument("submissions", nargs="*", type=Path, help="notebooks or folders of them")
    parser.add_argument("--out", type=Path, help="folder for the gradebook (required)")
    parser.add_argument("--jobs", type=int, default=1, help="submissions graded side by side")
    defaults = Limits()
    parser.add_argument("--cell-timeout", type=float, default=defaults.cell_s)
    parser.add_argument("--notebook-timeout", type=float, default=defaults.notebook_s)
    parser.add_argument("--exercise-timeout", type=float, default=defaults.exercise_s)
    parser.add_argument("--memory-gib", type=float, default=defaults.memory_gib)
    parser.add_argument(
        "--no-execute", action="store_true", help="grade the definitions without running cells"
    )
    parser.add_argument("--no-progress", action="store_true")
    parser.add_argument(
        "--passed", metavar="EXERCISE", help="only read FOLDER/gradebook.csv: exit 0 if passed"
    )
    parser.add_argument(
        "--write-classroom", type=Path, metavar="FOLDER", help="write GitHub Classroom's config"
    )
    args = parser.parse_args(argv)
    if args.write_classroom:
        write_classroom(args.write_classroom)
        return 0
    if args.out is None:
        parser.error("expected --out FOLDER (where the gradebook goes), got none")
    if args.passed:
        return _passed(args.out, args.passed)
    if not args.submissions:
        parser.error("expected at least one submission (a notebook or a folder), got none")
    if args.jobs < 1:
        parser.error(f"expected --jobs of 1 or more, got {args.jobs}")
    limits = Limits(
        cell_s=args.cell_timeout,
        notebook_s=args.notebook_timeout,
        exercise_s=args.exercise_timeout,
        memory_gib=args.memory_gib,
        execute=not args.no_execute,
    )
    from tqdm.auto import tqdm

    start = time.monotonic()
    known, titles = course_exercises(), course_titles()
    found = collect(args.submissions)
    reports: list[Report | None] = [None] * len(found)
    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        futures = {
            pool.submit(grade, student, path, limits, known, titles): index
            for index, (student, path) in enumerate(found)
        }
        bar = tqdm(total=len(found), unit="submission", disable=args.no_progress, file=sys.stderr)
        for future in as_completed(futures):
            reports[futures[future]] = future.result()
            bar.update()
        bar.close()
    done = [r for r in reports if r is not None]
    write_gradebook(done, args.out, known)
    write_feedback(done, args.out)
    print(summary(done, time.monotonic() - start) + f"; gradebook: {args.out / 'gradebook.csv'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
