"""``python -m solutions.exercise_table``: write the README's exercise table (For teachers).

The table is generated from the registry, never edited by hand: one row per
:class:`~transformer_lib.teaching.checks.registry.Exercise` of ``solutions.EXERCISES``.
``tests/test_solutions.py`` fails, naming this command, when the README's table differs.
"""

import pathlib
import sys

import solutions

README = pathlib.Path(__file__).resolve().parent.parent / "README.md"
HEADER = (
    "| notebook | exercise | what is asked | graded by `tl.checks.` |\n| --- | --- | --- | --- |\n"
)


def markdown_table() -> str:
    """The table: a header, then one row per exercise, in notebook order."""
    rows = [
        f"| {e.notebook} | {e.number} | `{e.name}`: {e.asked} | `{e.graded_by}` |\n"
        for e in solutions.EXERCISES
    ]
    return HEADER + "".join(rows)


def rewrite(readme: str) -> str:
    """``readme`` with its exercise table (``HEADER`` up to the first non-row line) replaced."""
    start = readme.index(HEADER)
    end = start + len(HEADER)
    while readme.startswith("|", end):
        end = readme.index("\n", end) + 1
    return readme[:start] + markdown_table() + readme[end:]


def main() -> int:
    old = README.read_text()
    new = rewrite(old)
    if new != old:
        README.write_text(new)
    print(f"{'updated' if new != old else 'unchanged'}: the exercise table in {README.name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
