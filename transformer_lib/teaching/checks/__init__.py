"""Self-checks for the exercises: ``tl.checks.check_attention(my_attention)`` -> CheckResult.

A check runs the learner's code on inputs that expose the classic bugs, compares outputs and
gradients with the library, and never raises: a stub, an error or a known mistake (with its hint)
becomes one printed paragraph. One job per module: ``nbNN_<name>`` holds one notebook's entries,
checks and exercises, with their single-use cases, references and mistakes' code; :mod:`.registry`
collects them; :mod:`.engine` runs an entry; :mod:`.inputs`, :mod:`.references` and
:mod:`.variants` hold only what several notebooks share. Only the checks and :class:`CheckResult`
are public.
"""

from .engine import CheckResult
from .registry import checks as _public_checks

# The public checks are what the entry files' __all__ name (the registry reads them): a new check
# needs no line here.
globals().update(_public_checks())
__all__ = ["CheckResult", *_public_checks()]
