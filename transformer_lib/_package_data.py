"""The one way to the data that ships inside the package, ``transformer_lib/data_files/`` (listed as
package data in ``pyproject.toml``): notebook 11's corpus, notebook 12's pairs and trained model,
and notebook 10's Table 3 are found from an installed copy as from a source checkout, with no
network. It sits at the bottom of the layering, beside ``_arguments``: every family may use it."""

from importlib import resources
from pathlib import Path

__all__ = ["package_data"]


def package_data(*parts: str) -> Path:
    """The path of ``data_files/<parts>`` inside the package, e.g.
    ``package_data("table3", "paper_table3.csv")``; it is not checked to exist."""
    return Path(str(resources.files(__package__).joinpath("data_files", *parts)))
