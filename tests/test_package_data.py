"""The data the notebooks and the checks read ships inside the package, and is read when first
used: importing the library opens no data file (tests/test_wheel.py reads each from a wheel)."""

import subprocess
import sys
from pathlib import Path

from transformer_lib.applications import experiments as ex

ROOT = Path(__file__).resolve().parent.parent


def test_the_committed_grid_ships_as_a_copy_of_results_table3():
    """``results/table3.csv`` is where ``make experiments`` writes; the package carries a copy for
    notebook 10's check. After a new run: ``cp results/table3.csv
    transformer_lib/data_files/table3/table3.csv``."""
    assert ex.COMMITTED_CSV.read_bytes() == (ROOT / "results" / "table3.csv").read_bytes(), (
        "results/table3.csv changed: copy it to transformer_lib/data_files/table3/table3.csv"
    )
    package = ROOT / "transformer_lib"
    assert ex.COMMITTED_CSV.is_relative_to(package) and ex.PAPER_CSV.is_relative_to(package)
    assert not (ROOT / "results" / "paper_table3.csv").exists()  # one copy: the package's


def test_the_paper_table_is_read_on_first_use_not_at_import():
    code = (
        "import transformer_lib as tl\n"
        "from transformer_lib.applications import experiments as ex\n"
        "tl.checks  # the checks import the experiments module too\n"
        "assert ex.paper_table3.cache_info().currsize == 0, 'read at import'\n"
        "assert ex.PAPER_TABLE3['base']['PPL_dev'] == 4.92\n"
        "assert ex.paper_table3.cache_info().currsize == 1\n"
        "assert ex.PAPER_TABLE3 is ex.paper_table3()\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr[-2000:]
