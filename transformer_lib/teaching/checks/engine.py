"""The engine of the self-checks: :func:`judge` runs a check's :class:`Entry` on student code.

An Entry holds the reference, the inputs (:class:`Case`) and the known mistakes (:class:`Mistake`).
``judge`` compares outputs and gradients, names the first discrepancy and the mistake that explains
it, and never raises (a KeyboardInterrupt goes through): whatever student code does or returns
becomes a message, formatted defensively, and what a check reads of it is bounded
(:func:`stored_items`). Each side gets its own copy of the arguments; the references run on the
library's and torch's functions as they were when the checks were imported, whatever student code
monkeypatched, and :func:`_isolated` gives the learner back their random streams, functions and
torch settings. Student code runs under a time limit (:func:`_time_limit`): an endless loop fails
the check with a message instead of hanging it.
"""

import contextlib
import copy
import linecache
import math
import random
import signal
import sys
import sysconfig
import threading
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path

import torch
from torch import nn

__all__ = [
    "CheckResult",
    "Case",
    "Mistake",
    "Entry",
    "DEFAULT",
    "Failure",
    "judge",
    "describe",
    "output_and_weights",
    "one_number",
    "knob_mistakes",
    "is_instance",
    "truth",
    "refuse",
    "stored_items",
]


@dataclass
class CheckResult:
    """The outcome of a check: truthy when it passed; prints as its message."""

    name: str
    passed: bool
    message: str

    def __bool__(self) -> bool:
        return self.passed

    def __repr__(self) -> str:
        return self.message


@dataclass
class Case:
    """One set of inputs: ``args`` for the student's code, ``about`` for messages, ``build`` =
    (args, kwargs) for the student's class, and ``inputs``: named tensors whose gradients are
    compared too."""

    args: tuple
    about: str
    build: tuple = ((), {})
    inputs: dict = field(default_factory=dict)


@dataclass
class Mistake:
    """A typical wrong version of the code, called like the reference (a module check passes first
    the reference module, which holds the student's weights), and the hint it earns when it explains
    the output."""

    hint: str
    version: Callable


DEFAULT = "default"  # the variant of a check that has one form only


@dataclass
class Entry:
    """One form of a check (``variant`` names it when the check has several, as
    ``check_causal_mask``'s ``"with_cache"``; the public function picks it explicitly).

    ``reference``: the right function or, when ``builds``, a factory
    ``(student module, *args, **kwargs) -> reference module`` holding the student's weights; or,
    with nothing to compare with, a ``verdict(result, case) -> report`` that raises :class:`Failure`
    when the code fails."""

    check: str  # the public check's name: "check_attention"
    what: str  # how messages name the student's code: "your attention"
    reference: Callable | None
    cases: Callable[[], list[Case]]
    mistakes: list[Mistake] = field(default_factory=list)
    hint: str = ""  # when no known mistake explains the difference
    success: str = ""
    builds: bool = False
    pick: Callable | None = None  # (result, case) -> {part: value}; by default {"output": result}
    run: Callable | None = None  # (code, case) -> result; by default ``code(*case.args)``
    verdict: Callable | None = None
    atol: float = 1e-4
    rtol: float = 1e-5
    variant: str = DEFAULT


class Failure(Exception):
    """Raised inside a check to stop at the first problem, with the message to show."""


class _Stub(Exception):
    """Student code reached an exercise's stub: a ``raise NotImplementedError`` line written by the
    learner. ``code`` is the function whose stub it was (the checked one, or a helper it calls)."""

    def __init__(self, code):
        super().__init__(code.co_name)
        self.code = code


# Where PyTorch, the standard library and installed packages live: a NotImplementedError raised
# there is not a learner's stub (a misspelled ``forward`` makes nn.Module raise one; so does an
# operation a device lacks).
_LIBRARY_DIRS = {
    Path(p).resolve()
    for key in ("stdlib", "purelib", "platlib")
    if (p := sysconfig.get_paths().get(key))
}
_SHOWN: set = set()  # (file, line, category, text) of the student-code warnings already shown


def _stub_code(exc: NotImplementedError):
    """The code object of the learner's function that raised ``exc`` from a
    ``raise NotImplementedError`` line, or None when it was raised elsewhere."""
    tb = exc.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    if tb is None:
        return None
    code, line = tb.tb_frame.f_code, linecache.getline(tb.tb_frame.f_code.co_filename, tb.tb_lineno)
    if any(Path(code.co_filename).resolve().is_relative_to(d) for d in _LIBRARY_DIRS):
        return None
    return code if not line or "raise NotImplementedError" in line else None  # no source: trust it


def _type_name(value) -> str:
    """``type(value).__name__``, or "object" when even that cannot be read (a metaclass may make
    ``__name__`` raise anything, a BaseException too)."""
    try:
        name = type(value).__name__
        return str.__str__(name) if isinstance(name, str) else "object"
    except KeyboardInterrupt:
        raise
    except BaseException:
        return "object"


def is_instance(value, kinds) -> bool:
    """``isinstance(value, kinds)``, False where student code makes it raise (an object whose
    ``__class__`` property raises): checks that pick their entry by the kind of code run it before
    :func:`judge`'s guard."""
    try:
        return isinstance(value, kinds)
    except KeyboardInterrupt:
        raise
    except BaseException:
        return False


def truth(value) -> bool | None:
    """``bool(value)`` for a check's option, or None where ``bool()`` raises or returns no bool."""
    try:
        answer = bool(value)
    except KeyboardInterrupt:
        raise
    except BaseException:
        return None
    return answer if answer is True or answer is False else None


def refuse(check: str, message: str) -> CheckResult:
    """The failed result of a check that cannot even start (an option it cannot read)."""
    return CheckResult(check, False, f"❌ {check}: {message}")


def stored_items(value, limit: int) -> list | None:
    """The items a tuple or list holds, at most ``limit + 1`` of them, read from its storage
    (``tuple.__iter__``), never through methods a subclass overrides (an ``__iter__`` or
    ``__len__`` that never ends or lies); None for anything else. A check reads student results
    through it, so that what it reads is bounded: more than ``limit`` items is a wrong answer."""
    for kind in (tuple, list):
        if issubclass(type(value), kind):
            items = []
            for item in kind.__iter__(value):
                items.append(item)
                if len(items) > limit:
                    break
            return items
    return None


def _text(value, how: Callable = str) -> str:
    """``how(value)`` (``str`` or ``repr``) for a message; an object whose ``str()`` or ``repr()``
    raises, or returns no string, is named by its type instead: student code may hand back
    anything."""
    try:
        text = how(value)
    except KeyboardInterrupt:
        raise
    except BaseException:
        text = None
    return text if isinstance(text, str) else f"<{_type_name(value)} that cannot be printed>"


def _failure(what: str, exc: BaseException) -> Failure:
    text = _text(exc).strip().rstrip(".")
    return Failure(
        f"{what} raised {_type_name(exc)}{': ' + text if text else ''}. {_hint_for_exception(exc)}"
    )


# The seconds of student code a check allows, all its calls together. The reference solutions
# (solutions/) use at most 0.5 s of it (check_generate's my_generate; one thread, on a 2-core
# machine shared with other jobs): a slow laptop or a correct but loopy answer is far from it. The
# training in check_table3_row is the check's own code, not the learner's, and does not count.
TIME_LIMIT_S = 15.0
_AGAIN_S = 0.25  # a swallowed alarm (a bare `except:` in the loop) rings again this soon
# torch's first broadcast_shapes, which the library's argument checks call, imports sympy (a second
# or more): done here, so that no learner's time limit pays for it
torch.broadcast_shapes((1,), (1,))


class _Timeout(BaseException):
    """The time limit's alarm, raised inside student code. A BaseException, as KeyboardInterrupt
    is: an ``except Exception`` in student code lets it through."""


@dataclass
class _Alarm:
    """The time limit under way: ``armed`` while student code runs under it (one at a time: a
    check run inside student code runs under the outer limit), until ``deadline``
    (``time.monotonic()``); ``fired`` once it has rung; ``foreign`` when the learner's own SIGALRM
    came in meanwhile (their timer ran out just before the limit replaced it)."""

    armed: bool = False
    fired: bool = False
    foreign: bool = False
    deadline: float = 0.0


_ALARM = _Alarm()


def _ring(signum, frame) -> None:
    """SIGALRM's handler while a limit is armed: raise :class:`_Timeout` in the running code, and
    ring again soon, should that code swallow it and go on. A SIGALRM before the deadline is the
    learner's own: noted (it is raised again once their handler is back) and the limit kept."""
    if not _ALARM.armed:
        return
    left = _ALARM.deadline - time.monotonic()
    if left > 0 and not _ALARM.fired:
        _ALARM.foreign = True
        signal.setitimer(signal.ITIMER_REAL, left)
        return
    _ALARM.fired = True
    signal.setitimer(signal.ITIMER_REAL, _AGAIN_S)
    raise _Timeout


def _can_limit() -> bool:
    """Whether a time limit can be set here: ``signal.setitimer`` exists (not on Windows), this is
    the main thread (the only one a signal handler may be set in and runs in), and the current
    SIGALRM handler was set from Python (so that it can be put back)."""
    return (
        hasattr(signal, "setitimer")
        and threading.current_thread() is threading.main_thread()
        and signal.getsignal(signal.SIGALRM) is not None
    )


@contextlib.contextmanager
def _time_limit():
    """Run the body (student code) with what is left of the check's :data:`TIME_LIMIT_S`
    (:class:`_Run`'s ``seconds``; a full one outside a check); yields whether this limit is the
    one that answers for a :class:`_Timeout` (False inside a limit already armed: the outer one
    does).

    On POSIX, in the main thread (a Jupyter kernel runs cells there): ``signal.setitimer`` arms
    SIGALRM, whose handler raises :class:`_Timeout` in student code and, if that code swallows it
    (a bare ``except:``), raises it again every :data:`_AGAIN_S` s; once it has rung, the body
    ends in :class:`_Timeout` whatever the code did next (returned a right answer, raised another
    error), so a late answer never passes. The previous handler and timer are put back after (a
    timer that ran out meanwhile rings then). Where that is not possible (Windows, another thread,
    a handler set outside Python) student code runs without a limit. Not stopped: one call into C
    that does not return (a huge matrix product ends first, then the alarm rings), and an endless
    loop that catches every exception (``except BaseException:`` or a bare ``except:`` inside it)
    swallows each alarm, as it swallows Ctrl-C."""
    if _ALARM.armed or not _can_limit():
        yield False
        return
    run = _RUNS[-1] if _RUNS else None
    seconds = max(run.seconds if run else TIME_LIMIT_S, 1e-3)
    previous = signal.signal(signal.SIGALRM, _ring)
    start = time.monotonic()
    _ALARM.fired, _ALARM.foreign, _ALARM.deadline = False, False, start + seconds
    _ALARM.armed = True
    delay, interval = signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield True
    finally:
        while True:  # the alarm may ring once more before it is off
            try:
                _ALARM.armed = False
                signal.setitimer(signal.ITIMER_REAL, 0)
                break
            except _Timeout:
                continue
        spent = time.monotonic() - start
        signal.signal(signal.SIGALRM, previous)
        if delay:
            signal.setitimer(signal.ITIMER_REAL, max(delay - spent, 1e-6), interval)
        if _ALARM.foreign:
            signal.raise_signal(signal.SIGALRM)
        if run:
            run.seconds -= spent
        if _ALARM.fired:
            raise _Timeout


def _too_slow(what: str) -> Failure:
    return Failure(
        f"{what} did not return within the {TIME_LIMIT_S:g} s this check gives your code (all "
        "its calls together), so the check stopped it: an endless loop (a `while` whose condition "
        "never turns False, a `break` never reached) or a far too slow approach (a Python loop "
        "over every element where one tensor operation does it). Hint: run it by hand on a small "
        "input; if it does not finish, interrupt the kernel and read where it stopped."
    )


def _call(what: str, fn: Callable, *args, **kwargs):
    """Run student code under the check's time limit (:func:`_time_limit`); turn its exceptions, a
    timeout, and a softmax without an axis, into a friendly failure. Its other warnings are shown
    (once each), whether or not it raised."""
    caught: list = []
    answers = False  # whether this call's time limit answers for a timeout
    try:
        with (
            warnings.catch_warnings(record=True) as caught,
            torch.enable_grad(),
            _as_learner(),
            _time_limit() as answers,
        ):
            warnings.simplefilter("always")
            return fn(*args, **kwargs)
    except _Timeout:
        if not answers:  # a call inside student code: the outer limit answers
            raise
        raise _too_slow(what) from None
    except NotImplementedError as exc:
        code = _stub_code(exc)
        raise (_Stub(code) if code else _failure(what, exc)) from None
    except KeyboardInterrupt:
        raise
    except BaseException as exc:  # any error in student code becomes a message (exit() too)
        raise _failure(what, exc) from None
    finally:
        _show(what, caught)  # outside catch_warnings, so that they reach the learner


def _show(what: str, caught: list) -> None:
    """Fail on a softmax without ``dim``; show every other warning once, as it would be without the
    check."""
    for warning in caught:
        text = _text(warning.message)
        if "Implicit dimension choice for softmax" in text:
            raise Failure(
                f"{what} called softmax without `dim`, so PyTorch guessed an axis (for a 4-D "
                "tensor it picks dim=1: in attention, the heads). Hint: always pass `dim`; in "
                "attention, `scores.softmax(dim=-1)` normalises each query's row over the keys."
            )
        key = (_text(warning.filename), _text(warning.lineno), _text(warning.category), text)
        if key not in _SHOWN:
            _SHOWN.add(key)
            # a learner who turned warnings into errors gets no error here, nor does a warning that
            # cannot print
            with contextlib.suppress(Exception):
                warnings.warn_explicit(
                    warning.message, warning.category, warning.filename, warning.lineno
                )


def _hint_for_exception(exc: BaseException) -> str:
    text = _text(exc)
    if 'missing the required "forward" function' in text:
        return (
            "Hint: the method must be called `forward` (check its spelling) and be indented inside "
            "the class."
        )
    if isinstance(exc, SystemExit):
        return (
            "Hint: a check runs your code; `exit()` or `sys.exit()` in it stops the check, not "
            "only your code."
        )
    if "Boolean value of Tensor with more than one" in text:
        return (
            "Hint: `if mask:` asks a whole tensor for one True/False; write `if mask is not None:`."
        )
    # what Module.__init__ sets up
    internals = ("'_modules'", "'_parameters'", "'_buffers'", "'training'")
    if "before Module.__init__" in text or any(
        f"has no attribute {name}" in text for name in internals
    ):
        return "Hint: the first line of `__init__` must be `super().__init__()`."
    if "shape" in text or "size" in text or "dimension" in text:
        return (
            "Hint: print the shapes of the inputs and of each intermediate tensor; compare with "
            "the shape comments."
        )
    return "Hint: run it by hand on a small input and read the error's last line."


def describe(value) -> str:
    """A result in a few words: its shape for a tensor, else its type's name; never raises."""
    try:
        if value is None:
            return "None"
        if isinstance(value, torch.Tensor):
            return str(tuple(value.shape))
    except KeyboardInterrupt:
        raise
    except BaseException:
        return f"a {_type_name(value)} whose shape cannot be read"
    return _type_name(value)


def _pair(want: float, have: float) -> tuple[str, str]:
    """``want`` and ``have`` with enough significant digits (4 at least) that the two read
    differently."""
    for digits in range(4, 18):
        shown = f"{want:.{digits}g}", f"{have:.{digits}g}"
        if shown[0] != shown[1]:
            return shown
    return f"{want!r}", f"{have!r}"


def _differs(got: dict, expected: dict, atol: float, rtol: float) -> str | None:
    """The first difference between two results' parts (parts missing from ``got`` are skipped), or
    None."""
    for part, want in expected.items():
        have = got.get(part, want)
        if have is None:
            return f"your {part}: None (a missing `return`?)."
        if not isinstance(have, torch.Tensor):
            return f"your {part}: expected a tensor {tuple(want.shape)}, got {_type_name(have)}."
        if have.shape != want.shape:
            return f"your {part}: shape {tuple(have.shape)}, expected {tuple(want.shape)}."
        if (have.dtype == torch.bool) != (want.dtype == torch.bool):
            return f"your {part}: dtype {have.dtype}, expected {want.dtype}."
        if have.is_complex() and not want.is_complex():
            return (
                f"your {part}: dtype {have.dtype}, complex numbers; expected real ones "
                f"({want.dtype}): nothing here needs an imaginary part (look for a `j` literal "
                "such as `7j`, or `torch.complex`)."
            )
        have, want = have.detach().double(), want.detach().double()
        wrong = ~torch.isclose(have, want, atol=atol, rtol=rtol, equal_nan=True)
        if wrong.any():
            index = tuple(torch.nonzero(wrong)[0].tolist())
            if have.isnan().any() and not want.isnan().any():
                return (
                    f"your {part}: NaN at index {index} (the first) where the reference has a "
                    "number."
                )
            shown = _pair(float(want[index]), float(have[index]))
            return f"your {part}: at index {index} expected {shown[0]}, got {shown[1]}."
    return None


def _zero_nan(result: dict) -> dict:
    """NaN as 0: a fully masked row is NaN in one way of writing a bug and 0 in another; it is the
    same bug."""
    return {
        k: v.nan_to_num(0.0) if isinstance(v, torch.Tensor) and v.is_floating_point() else v
        for k, v in result.items()
    }


def _output(result, case=None) -> dict:
    return {"output": result}


def output_and_weights(result, case=None) -> dict:
    """``output`` or ``(output, weights)``: the forms attention code may return (a tuple read from
    its storage, whatever a subclass's ``__len__`` or ``__getitem__`` say)."""
    items = stored_items(result, 2) if issubclass(type(result), tuple) else None
    if items is not None and len(items) == 2:
        return {"output": items[0]} | ({"weights": items[1]} if items[1] is not None else {})
    return {"output": result}


def one_number(part: str) -> Callable:
    """A pick that reads a Python, NumPy (``np.float32`` is no ``float``) or one-element torch
    number as the tensor ``part``: a schedule's learning rate, a parameter count."""

    def pick(result, case=None) -> dict:
        if result is None:
            return {part: None}  # _differs says "a missing `return`?"
        try:
            if isinstance(result, bool | str | bytes):
                raise TypeError
            value = float(result.detach() if isinstance(result, torch.Tensor) else result)
        except Exception:
            raise Failure(
                f"your {part} should be one number, got {describe(result)} "
                f"{_text(result, repr)[:60]}."
            ) from None
        return {part: torch.tensor(value, dtype=torch.float64)}

    return pick


def knob_mistakes(version: Callable, bugs: list[tuple[str, dict]]) -> list[Mistake]:
    """One :class:`Mistake` per ``(hint, knobs)``: ``version`` (a mistakes' version function) with
    those knobs set. The lists of bugs that several checks meet (attention's inside multi-head
    attention) are written once."""
    return [Mistake(hint, partial(version, **knobs)) for hint, knobs in bugs]


def _prepare(entry: Entry, student, case: Case):
    """(the student's callable, the reference); a class is built from ``case.build``."""
    if not entry.builds:
        return student, entry.reference
    if not (isinstance(student, type) and issubclass(student, nn.Module)):
        if isinstance(student, nn.Module):
            raise Failure(
                f"pass the class itself, not an instance: `{_type_name(student)}`, without `(...)`."
            )
        raise Failure(
            f"expected a class that subclasses nn.Module, got {_text(student, repr)[:60]}."
        )
    args, kwargs = case.build
    shown = ", ".join([*map(str, args), *(f"{k}={v}" for k, v in kwargs.items())])
    name = _text(getattr(student, "__name__", "your class"))
    module = _call(f"{name}({shown})", student, *args, **kwargs)
    _call(f"{name}.eval()", module.eval)
    reference = entry.reference(module, *args, **kwargs).eval()
    return module, reference


_IMMUTABLE = (
    int,
    float,
    complex,
    bool,
    str,
    bytes,
    type(None),
    type,
    range,
    slice,
    torch.dtype,
    torch.device,
)


def _fresh(value, memo: dict):
    """The student's own copy of a case's arguments: each tensor cloned (still connected to the
    original's graph; one tensor passed twice, as ``x, x, x``, is one clone passed twice), tuples
    and lists searched, any other object (a module, a config) deep-copied, so that what student code
    changes there, the reference never sees."""
    if isinstance(value, torch.Tensor):
        if id(value) not in memo:
            memo[id(value)] = value.clone()
        return memo[id(value)]
    if isinstance(value, tuple | list):
        return type(value)(_fresh(item, memo) for item in value)
    if isinstance(value, _IMMUTABLE) or callable(value) and not isinstance(value, nn.Module):
        return value
    try:
        return copy.deepcopy(value)
    except Exception:  # an object that cannot be copied is shared, as before
        return value


def _tensors(value) -> list:
    """The tensors in ``value``, tuples and lists searched, in order."""
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, tuple | list):
        return [tensor for item in value for tensor in _tensors(item)]
    return []


def _check_inputs_unchanged(entry: Entry, case: Case, private: tuple) -> None:
    """Fail, naming the argument, when student code changed an input tensor in place (``q /= ...``,
    ``q.div_()``): the caller's tensor would change (in self-attention ``q``, ``k`` and ``v`` are
    even one tensor). The message serves every check, so its hint is not about attention alone."""
    for position, (mine, original) in enumerate(
        zip(_tensors(private), _tensors(case.args), strict=False), 1
    ):
        try:
            same = mine.shape == original.shape and torch.equal(mine.detach(), original.detach())
        except Exception:
            same = False
        if not same:
            raise Failure(
                f"{case.about}: {entry.what} changed its input tensor number {position}, "
                f"{describe(original)}, in place (`x /= ...`, `x.div_(...)`, `x[...] = ...`, "
                "`masked_fill_`): the caller's tensor changes too (in self-attention q, k and v "
                "are even one tensor). Hint: compute a new tensor, `x = x / c`, "
                "`y = x.masked_fill(...)`, or `.clone()` first."
            )


def _pick_and_run(entry: Entry) -> tuple[Callable, Callable]:
    """How the entry reads a result and calls code; by default ``{"output": result}`` and
    ``code(*case.args)``."""
    return entry.pick or _output, entry.run or (lambda code, case: code(*case.args))


def _examine(entry: Entry, student) -> str:
    """The success message (or the verdicts' reports) if every case passes; else raises the first
    Failure."""
    pick, run = _pick_and_run(entry)
    reports = []
    for case in entry.cases():
        subject, reference = _prepare(entry, student, case)
        # the student's code must not change the reference's
        private = replace(case, args=_fresh(case.args, {}))
        result = run(partial(_call, entry.what, subject), private)
        _check_inputs_unchanged(entry, case, private.args)
        if entry.verdict:
            reports.append(entry.verdict(result, case))
            continue
        got, expected = pick(result, case), pick(run(reference, case), case)
        problem = _differs(got, expected, entry.atol, entry.rtol)
        if problem:
            explained = _known_mistake(entry, reference, case, got, expected)
            raise Failure(f"{case.about}: {explained or problem + ' ' + entry.hint}")
        if case.inputs:
            _compare_gradients(
                entry, subject, case, next(iter(got.values())), next(iter(expected.values()))
            )
    return " ".join(report for report in reports if report) or entry.success


def _known_mistake(entry: Entry, reference, case: Case, got: dict, expected: dict) -> str | None:
    """The hint of the first known mistake whose output is the student's (None: no known mistake
    explains it)."""
    pick, run = _pick_and_run(entry)
    for mistake in entry.mistakes:
        try:
            wrong = pick(
                run(partial(mistake.version, reference) if entry.builds else mistake.version, case),
                case,
            )
        except Exception:  # a mistake that cannot run on these inputs explains nothing
            continue
        if _differs(wrong, expected, entry.atol, entry.rtol) is None:
            # this mistake changes nothing on these inputs (a mask bug without a mask): it explains
            # nothing
            continue
        if _differs(_zero_nan(got), _zero_nan(wrong), entry.atol, entry.rtol) is None:
            return mistake.hint
    return None


def _compare_gradients(
    entry: Entry, subject, case: Case, got: torch.Tensor, expected: torch.Tensor
) -> None:
    """Gradients with respect to ``case.inputs`` equal the reference's, and every student parameter
    gets one."""
    no_gradient = Failure(
        f"{case.about}: your output carries no gradient: was it computed under `torch.no_grad()`, "
        "or detached? Training needs gradients to flow back through your code."
    )
    if not got.requires_grad:
        raise no_gradient
    inputs = list(case.inputs.values())
    named = dict(subject.named_parameters()) if isinstance(subject, nn.Module) else {}
    # autograd.grad refuses frozen ones
    parameters = {name: p for name, p in named.items() if p.requires_grad}
    weight = torch.randn(
        expected.shape, generator=torch.Generator().manual_seed(1), dtype=expected.dtype
    )
    grads = _call(
        f"{entry.what} (backward)",
        torch.autograd.grad,
        (got * weight).sum(),
        inputs + list(parameters.values()),
        allow_unused=True,
    )
    wanted = torch.autograd.grad((expected * weight).sum(), inputs, allow_unused=True)
    if all(grad is None for grad in grads[: len(inputs)]) and any(
        grad is not None for grad in wanted
    ):
        # a view made under no_grad requires grad but leads back to none of the inputs
        raise no_gradient
    for name, have, want in zip(case.inputs, grads[: len(inputs)], wanted, strict=True):
        part = f"gradient for {name}"
        problem = _differs(
            {part: torch.zeros_like(want) if have is None else have},
            {part: want},
            entry.atol,
            entry.rtol,
        )
        if problem:
            raise Failure(f"{case.about}: the outputs match, but {problem} {entry.hint}")
    frozen = [name for name in named if name not in parameters]
    if frozen:
        raise Failure(
            f"{frozen} have requires_grad=False: they would never train. Hint: leave "
            "parameters trainable."
        )
    unused = [
        name for name, grad in zip(parameters, grads[len(inputs) :], strict=True) if grad is None
    ]
    if unused:
        raise Failure(
            f"no gradient reached {unused}: they would never train. Hint: is every layer "
            "used in forward?"
        )


# --- what student code may change, and what the references must not see ------------------------


def _owners() -> list:
    """The modules and classes whose functions the references call and a learner may monkeypatch:
    torch's namespaces, ``math``, the library's modules (not the checks'), ``torch.Tensor`` and
    the ``nn.Module`` classes of ``torch.nn`` and of the library."""
    modules = [torch, torch.nn.functional, torch.linalg, torch.special, torch.nn.init, math]
    modules += [
        module
        for name, module in sorted(sys.modules.items())
        if isinstance(name, str)
        and (name == "transformer_lib" or name.startswith("transformer_lib."))
        and not name.startswith(__package__)
        and module is not None
    ]
    classes = [torch.Tensor]
    for module in (nn, *modules):
        for value in list(vars(module).values()):
            if isinstance(value, type) and issubclass(value, nn.Module) and value not in classes:
                classes.append(value)
    return modules + classes


_OWNERS = _owners()
_MISSING = object()


def _functions() -> list:
    """What :data:`_OWNERS` hold now: each module's callables, each class's whole namespace."""
    return [
        (
            owner,
            dict(vars(owner))
            if isinstance(owner, type)
            else {name: value for name, value in vars(owner).items() if callable(value)},
        )
        for owner in _OWNERS
    ]


def _put_back(functions: list) -> None:
    """Make :data:`_OWNERS` hold ``functions`` again (a snapshot of :func:`_functions`): what was
    replaced or deleted comes back; a function added to a class (``torch.Tensor.softmax = ...``,
    which hides the built-in method) goes."""
    for owner, saved in functions:
        live = vars(owner)
        for name, value in saved.items():
            if live.get(name, _MISSING) is not value:
                with contextlib.suppress(Exception):
                    setattr(owner, name, value)
        if isinstance(owner, type) and len(live) != len(saved):
            for name in [n for n, v in live.items() if n not in saved and callable(v)]:
                with contextlib.suppress(Exception):
                    delattr(owner, name)


# the functions as they were when the checks were imported: the references always run on these
_PRISTINE = _functions()


_PRINT_OPTIONS = ("precision", "threshold", "edgeitems", "linewidth", "sci_mode")


def _settings() -> dict:
    """torch's global settings that change numbers or messages, as they are now."""
    return {
        "dtype": torch.get_default_dtype(),
        "matmul": torch.get_float32_matmul_precision(),
        "print": {name: getattr(torch._tensor_str.PRINT_OPTS, name) for name in _PRINT_OPTIONS},
        "deterministic": (
            torch.are_deterministic_algorithms_enabled(),
            torch.is_deterministic_algorithms_warn_only_enabled(),
        ),
        "threads": torch.get_num_threads(),
        "anomaly": (torch.is_anomaly_enabled(), torch.is_anomaly_check_nan_enabled()),
        "grad": torch.is_grad_enabled(),
        "tf32": (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32),
        "cudnn": (torch.backends.cudnn.deterministic, torch.backends.cudnn.benchmark),
    }


def _set_tf32(flags: tuple) -> None:
    torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = flags


def _set_cudnn(flags: tuple) -> None:
    torch.backends.cudnn.deterministic, torch.backends.cudnn.benchmark = flags


_SETTERS = {
    "dtype": torch.set_default_dtype,
    "matmul": torch.set_float32_matmul_precision,
    "print": lambda options: torch.set_printoptions(**options),
    "deterministic": lambda flags: torch.use_deterministic_algorithms(flags[0], warn_only=flags[1]),
    "threads": torch.set_num_threads,
    "anomaly": lambda flags: torch.set_anomaly_enabled(*flags),
    "grad": torch.set_grad_enabled,
    "tf32": _set_tf32,
    "cudnn": _set_cudnn,
}


def _restore(settings: dict) -> None:
    """Set what differs from ``settings`` (a :func:`_settings`) back to it."""
    now = _settings()
    for key, value in settings.items():
        if now[key] != value:
            with contextlib.suppress(Exception):
                _SETTERS[key](value)


@dataclass
class _Run:
    """One check under way: the settings every reference runs with, and the functions the
    learner's code sees (the learner's, with what their code patched during the check)."""

    settings: dict
    functions: list
    seconds: float  # what is left of the time limit (TIME_LIMIT_S) for student code


_RUNS: list[_Run] = []  # the check under way (a check that runs a check nests)


@contextlib.contextmanager
def _as_learner():
    """Student code runs with the learner's functions (what they patched before the check, and
    what their code patches, stays theirs); after it, the references' pristine functions and the
    check's settings come back, so that nothing it changed reaches a reference or the verdict."""
    if not _RUNS:
        yield
        return
    run = _RUNS[-1]
    _put_back(run.functions)
    try:
        yield
    finally:
        run.functions = _functions()
        _put_back(_PRISTINE)
        _restore(run.settings)


def default_device() -> torch.device:
    """``torch.get_default_device()``, also on torch 2.4 to 2.6, whose ``get_default_device``
    raises AttributeError after ``torch.set_default_device(None)`` (the documented reset): the
    default is then the CPU."""
    try:
        return torch.get_default_device()
    except AttributeError:
        return torch.device("cpu")


def set_default_device(device) -> None:
    """``torch.set_default_device(device)``, leaving ``torch.get_default_device()`` readable: on
    torch 2.4 to 2.6, ``set_default_device(None)`` leaves a None context behind that it cannot
    read (nor can libraries that call it, such as Hugging Face's)."""
    torch.set_default_device(device)
    context = getattr(torch, "_GLOBAL_DEVICE_CONTEXT", None)
    if device is None and getattr(context, "device_context", "unset") is None:
        del context.device_context


@contextlib.contextmanager
def _isolated():
    """Inside: gradients on, no autocast, float32 on the CPU, matmuls in full float32 precision,
    random streams seeded 0 (a check says the same thing every time), and the library's and
    torch's functions as they were when the checks were imported (a monkeypatched ``softmax`` or
    library function changes what student code computes, never the reference). After: the
    learner's random streams, functions, default dtype and device, matmul precision, print options,
    deterministic-algorithms flag, thread count, anomaly mode, grad mode and recursion limit as
    they were, whatever student code changed."""
    python_state, numpy = random.getstate(), sys.modules.get("numpy")
    numpy_state = numpy.random.get_state() if numpy else None
    device, recursion = default_device(), sys.getrecursionlimit()
    settings, functions = _settings(), _functions()
    cuda_devices = list(range(torch.cuda.device_count())) if torch.cuda.is_initialized() else []
    try:
        _put_back(_PRISTINE)
        with contextlib.ExitStack() as stack:
            stack.enter_context(torch.random.fork_rng(devices=cuda_devices))
            # not torch.manual_seed: it would also queue a CUDA seed
            torch.default_generator.manual_seed(0)
            random.seed(0)
            if numpy is not None:
                numpy.random.seed(0)
            torch.set_default_dtype(torch.float32)
            torch.set_float32_matmul_precision("highest")
            # innermost: it wins over the learner's default device
            stack.enter_context(torch.device("cpu"))
            stack.enter_context(torch.inference_mode(False))
            stack.enter_context(torch.enable_grad())
            stack.enter_context(torch.autocast("cpu", enabled=False))
            if torch.cuda.is_available():
                stack.enter_context(torch.autocast("cuda", enabled=False))
            _RUNS.append(_Run(_settings(), functions, TIME_LIMIT_S))
            try:
                yield
            finally:
                _RUNS.pop()
    finally:
        _put_back(functions)
        random.setstate(python_state)
        if numpy is not None:
            numpy.random.set_state(numpy_state)
        _restore(settings)
        if default_device() != device:  # student code called torch.set_default_device
            set_default_device(None if device == torch.device("cpu") else device)
        sys.setrecursionlimit(recursion)


def _own_code(student) -> set:
    """The code objects of the student's function, or of every function its class (and its own
    bases) define (a class may set ``__module__`` to anything, None included)."""
    try:
        if not isinstance(student, type):
            code = getattr(student, "__code__", None)
            return {code} if code is not None else set()
        modules = [(c, getattr(c, "__module__", None)) for c in student.__mro__]
        classes = [
            c
            for c, module in modules
            if not (isinstance(module, str) and module.startswith(("torch", "builtins")))
        ]
        return {
            f.__code__
            for c in classes
            for f in vars(c).values()
            if isinstance(getattr(f, "__code__", None), type(_own_code.__code__))
        }
    except Exception:
        return set()


def judge(entry: Entry, student) -> CheckResult:
    """Run ``entry`` on the student's code; the result, named after ``entry.check``, is a message,
    never an error (a KeyboardInterrupt, the learner's own, still stops it; so does the time limit
    of an outer check whose student code runs this one, for that check to report)."""
    try:
        return _judge(entry, student)
    except (KeyboardInterrupt, _Timeout):  # a timeout: of student code that runs this check
        raise
    # the last guard: even formatting what student code handed back failed
    except BaseException as exc:
        return CheckResult(
            entry.check,
            False,
            f"❌ {entry.check}: could not judge your code's result ({_type_name(exc)}). Hint: "
            "return what the exercise asks for, with its shape.",
        )


def _judge(entry: Entry, student) -> CheckResult:
    name = entry.check
    try:
        with _isolated():
            message = _examine(entry, student)
    except _Stub as stub:
        whose = (
            ""
            if stub.code in _own_code(student)
            else f" (`{stub.code.co_name}`, which your code calls)"
        )
        return CheckResult(
            name,
            False,
            f"⏳ {name}: not implemented yet{whose}. Replace `raise NotImplementedError` with "
            "your code and run this cell again.",
        )
    except Failure as failure:
        return CheckResult(name, False, f"❌ {name}: {failure}")
    except (KeyboardInterrupt, _Timeout):
        raise
    # the student's result broke the comparison itself (an odd type, say)
    except BaseException as exc:
        return CheckResult(
            name,
            False,
            f"❌ {name}: could not judge your code's result ({_type_name(exc)}: "
            f"{_text(exc)}). Hint: return what the exercise asks for, with its shape.",
        )
    # a verdict's own report stands alone
    praise = " Well done!" if message == entry.success else ""
    return CheckResult(name, True, f"✅ {name}: {message}{praise}")
