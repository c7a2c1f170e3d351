"""``python -m transformer_lib.grade SUBMISSION... --out FOLDER``: grade a class's notebooks with
the course's checks (:mod:`transformer_lib.teaching.grade` does the work; see its docstring)."""

import sys

from transformer_lib.teaching.grade import main

if __name__ == "__main__":
    sys.exit(main())
