"""List shape comments on a line of their own instead of at the end of their tensor line.

A shape comment is NOTATION.md's ``# (B, h, T_q, d_k)``: a parenthesised tuple of axis symbols. It
belongs at the end of the line that makes the tensor; pushed onto a line of its own (as a mechanical
rewrap did), it describes nothing.

Usage: ``python tools/shape_comments.py [PATH ...]`` (default: transformer_lib); prints
``file:line: comment`` for each such comment and exits 1 if there are any.
"""

import re
import sys
import tokenize
from pathlib import Path

# one axis: a symbol (B, T_q, d_k, 2), an expression of symbols (d_k/2, t + 1, A*W) or "..."
AXIS = r"(?:\.\.\.|[A-Za-z_0-9]+(?:\s*[*/+-]\s*[A-Za-z_0-9]+)*)"
SHAPE = re.compile(rf"#\s*\(\s*(?:{AXIS}\s*,\s*)*{AXIS}\s*,?\s*\)")
NOT_CODE = {tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT}
NOT_CODE |= {tokenize.ENCODING, tokenize.ENDMARKER}


def is_shape(comment: str) -> bool:
    """Whether a comment starts with a shape tuple (more than one axis, or one axis and a comma)."""
    match = SHAPE.match(comment)
    return bool(match) and "," in match.group()


def own_line_shapes(path: Path) -> list[tuple[int, str]]:
    """The (line, comment) of every shape comment in ``path`` with no code before it on its line."""
    found = []
    with tokenize.open(path) as file:
        tokens = list(tokenize.generate_tokens(file.readline))
    code_lines = {
        row
        for tok in tokens
        if tok.type not in NOT_CODE
        for row in range(tok.start[0], tok.end[0] + 1)
    }
    for tok in tokens:
        if tok.type == tokenize.COMMENT and tok.start[0] not in code_lines and is_shape(tok.string):
            found.append((tok.start[0], tok.string))
    return found


def main(argv: list[str]) -> int:
    roots = [Path(arg) for arg in argv] or [Path("transformer_lib")]
    files = sorted(f for root in roots for f in ([root] if root.is_file() else root.rglob("*.py")))
    count = 0
    for path in files:
        for line, comment in own_line_shapes(path):
            print(f"{path}:{line}: {comment}")
            count += 1
    print(f"{count} shape comment(s) on a line of their own", file=sys.stderr)
    return 1 if count else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
