"""The README's claims that point at code: every test it names exists, so a renamed or deleted test
cannot leave the README promising a proof that is no longer there."""

import ast
import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")


def _test_functions(path: pathlib.Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return {
        node.name
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef) and node.name.startswith("test")
    }


def test_every_test_the_readme_names_exists():
    named = re.findall(r"`(tests/[\w/]+\.py)::(\w+)`", README)
    assert len(named) >= 10, "the README's table of today's pieces names its tests"
    missing = [
        f"{file}::{name}" for file, name in named if name not in _test_functions(ROOT / file)
    ]
    assert not missing, f"the README names tests that do not exist: {missing}"


def test_the_shipped_translation_models_scores_in_the_readme_are_its_metrics():
    import json

    metrics = json.loads(
        (ROOT / "transformer_lib/data_files/translation_model/metrics.json").read_text()
    )
    assert f"test BLEU {metrics['beam4']['bleu']:.1f} with beam search" in README
    assert f"greedy {metrics['greedy']['bleu']:.1f}" in README
    assert f"chrF {metrics['beam4']['chrf']:.1f} and {metrics['greedy']['chrf']:.1f}" in README
    assert f"scores {metrics['copy_source']['bleu']:.1f}" in README
    for point in metrics["curve"]:  # the test-BLEU curve of the kept weights
        assert f"{point['test_bleu_beam4']:.1f} after {point['minutes']:g}" in README
    assert f"trained {metrics['curve'][-1]['step']:,} steps" in README


def _library_table() -> list[tuple[str, list[str]]]:
    """(folder, modules) of each row of the README's library table, in order."""
    section = README.split("## The library", 1)[1].split("\n## ", 1)[0]
    rows, folder = [], ""
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) < 3 or cells[1] in ("module", "---"):
            continue
        folder = cells[0].strip("`/") if cells[0] else folder
        rows.append(("" if folder == "(top)" else folder, re.findall(r"`(\w+)/?`", cells[1])))
    return rows


def test_the_library_table_lists_every_module_in_its_folder_and_import_order():
    lib = ROOT / "transformer_lib"
    rows = _library_table()
    listed = {(folder, m) for folder, modules in rows for m in modules}
    on_disk = {
        (p.parent.relative_to(lib).as_posix().replace(".", ""), p.stem)
        for p in lib.glob("**/*.py")
        if p.stem != "__init__" and "checks" not in p.relative_to(lib).parts
    } | {("teaching", "checks")}
    assert listed == on_disk, (
        f"README rows without a module: {listed - on_disk}; modules without a row: "
        f"{on_disk - listed}"
    )
    for folder in {f for f, _ in rows if f}:
        order = [m for f, modules in rows if f == folder for m in modules]
        for i, module in enumerate(order):
            path = (
                lib / folder / (f"{module}/__init__.py" if module == "checks" else f"{module}.py")
            )
            later = order[i + 1 :]
            imported = set(re.findall(r"^\s*from \.(\w+) import", path.read_text(), re.M))
            imported |= {
                n.strip()
                for line in re.findall(r"^\s*from \. import (.+)$", path.read_text(), re.M)
                for n in line.split(",")
            }
            assert not imported & set(later), (
                f"{folder}/{module} imports {imported & set(later)}, listed below it"
            )
