"""The package's folders are a layering: ``_arguments`` (and ``_package_data``) < ``model`` <
``training`` < ``applications`` < ``teaching`` < the top level (``__init__``, ``bench``, ``grade``,
``lm``). A module may import from its own family or an earlier one, never a later one, so the
families form no cycle and each can be read, tested and changed knowing only those below it.

Every import is read from the source with ``ast``: at module level and inside functions (lazy
imports count), relative and absolute, and ``importlib.import_module`` calls with a constant name.
"""

import ast
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "transformer_lib"
FAMILIES = ("_arguments", "model", "training", "applications", "teaching", "top level")
BOTTOM = {"_arguments", "_package_data"}  # the bottom layer: argument checks, package data paths


def _module_name(path: pathlib.Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _family(module: str) -> str:
    """The family of a dotted module name of the package."""
    parts = module.split(".")
    if len(parts) == 1:  # transformer_lib itself: its __init__ imports every family
        return "top level"
    if parts[1] in BOTTOM:
        return "_arguments"
    if parts[1] in FAMILIES:
        return parts[1]
    return "top level"  # bench, grade, lm, ...


def _is_module(name: str) -> bool:
    path = ROOT.joinpath(*name.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def _targets(path: pathlib.Path) -> list[tuple[int, str, str]]:
    """(line, module, what) for every module of the package that ``path`` imports; ``what`` is the
    import as written."""
    name = _module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name, f"import {alias.name}") for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module or ""
            written = "." * node.level + (node.module or "")
            for alias in node.names:
                # `from . import lm` imports the module lm; `from .lm import generate`, lm itself
                submodule = f"{source}.{alias.name}"
                target = submodule if _is_module(submodule) else source
                found.append((node.lineno, target, f"from {written} import {alias.name}"))
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, (ast.Attribute, ast.Name))
            and getattr(node.func, "attr", getattr(node.func, "id", None)) == "import_module"
            and node.args
            and isinstance(node.args[0], ast.Constant)
        ):
            target = node.args[0].value
            if target.startswith("."):  # relative to the package argument: here, this package
                dots = len(target) - len(target.lstrip("."))
                base = package.split(".")
                target = ".".join(base[: len(base) - dots + 1] + [target.lstrip(".")])
            found.append((node.lineno, target, f"import_module({node.args[0].value!r})"))
    return [found for found in found if found[1].split(".")[0] == "transformer_lib"]


def _edges() -> list[tuple[str, int, str, str]]:
    """(module, line, imported module, the import as written) over the whole package."""
    return [
        (_module_name(path), *found)
        for path in sorted(PACKAGE.rglob("*.py"))
        for found in _targets(path)
    ]


def test_the_families_are_known():
    assert _family("transformer_lib.model.lm") == "model"
    assert _family("transformer_lib._package_data") == "_arguments"
    assert _family("transformer_lib.teaching.checks.engine") == "teaching"
    assert _family("transformer_lib.bench") == "top level"
    assert _family("transformer_lib") == "top level"
    edges = _edges()
    assert len(edges) > 100, "the reader finds the package's imports"
    lazy = ("transformer_lib.applications.interop", "transformer_lib.model.lm")
    assert any((a, b) == lazy for a, _, b, _ in edges), "imports inside functions count"


def test_no_module_imports_from_a_later_family():
    rank = {family: i for i, family in enumerate(FAMILIES)}
    upward = [
        f"{module}:{line} ({_family(module)}) {what}: {target} is {_family(target)}"
        for module, line, target, what in _edges()
        if rank[_family(target)] > rank[_family(module)]
    ]
    assert not upward, "imports from a later family:\n" + "\n".join(upward)


def test_the_families_form_no_cycle():
    graph: dict[str, set[str]] = {family: set() for family in FAMILIES}
    for module, _, target, _ in _edges():
        if _family(module) != _family(target):
            graph[_family(module)].add(_family(target))

    def reach(family: str) -> set[str]:
        seen, todo = set(), [family]
        while todo:
            for other in graph[todo.pop()] - seen:
                seen.add(other)
                todo.append(other)
        return seen

    order = FAMILIES.index
    cycles = [(a, b) for a in FAMILIES for b in reach(a) if order(a) < order(b) and a in reach(b)]
    assert not cycles, f"families that import each other (directly or through others): {cycles}"
