"""The README's claims that point at code: every test it names exists, so a renamed or deleted test cannot leave
the README promising a proof that is no longer there."""

import ast
import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")


def _test_functions(path: pathlib.Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return {node.name for node in ast.walk(tree) if isinstance(node, ast.FunctionDef) and node.name.startswith("test")}


def test_every_test_the_readme_names_exists():
    named = re.findall(r"`(tests/[\w/]+\.py)::(\w+)`", README)
    assert len(named) >= 10, "the README's table of today's pieces names its tests"
    missing = [f"{file}::{name}" for file, name in named if name not in _test_functions(ROOT / file)]
    assert not missing, f"the README names tests that do not exist: {missing}"


def test_the_shipped_translation_models_scores_in_the_readme_are_its_metrics():
    import json

    metrics = json.loads((ROOT / "transformer_lib/data_files/translation_model/metrics.json").read_text())
    assert f"test BLEU {metrics['beam4']['bleu']:.1f} with beam search" in README
    assert f"greedy {metrics['greedy']['bleu']:.1f}" in README
    assert f"chrF {metrics['beam4']['chrf']:.1f} and {metrics['greedy']['chrf']:.1f}" in README
    assert f"scores {metrics['copy_source']['bleu']:.1f}" in README
