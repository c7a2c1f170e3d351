"""Notebook 11's corpus is a snapshot shipped with the package, the same text on every Python: never
the running interpreter's own standard library."""

import gzip
import hashlib

import pytest

import transformer_lib as tl
from transformer_lib.training import data

# The snapshot's tar file (data_files/python_stdlib/README.md gives the same number).
SNAPSHOT_SHA256 = "ff8f02a2005df922b31a62a08f88d0049062b2b97b711cc4435e406d8740e68e"
# Each split's text, as notebook 11 read it from Python 3.11.7's standard library before the
# snapshot: the snapshot changed no character of the corpus, so no trained number moved.
SPLIT_SHA256 = {
    "train": "fc0d7cf459516d6422c20241fcfd2023b85a40184692bbfd45418c328571a07c",
    "valid": "3d5f52b4b0ea3958262a6d2a8d233f0b059085c7940040b0d1f206205a07af63",
    "test": "5b8146252a7a031ff3f8135777f5d8cb2b2afab055c51f149e6104c6964e9538",
}


def test_the_shipped_snapshot_is_pinned():
    path = data.shipped_python_source_path()
    assert data.PYTHON_SOURCE_SHA256 == SNAPSHOT_SHA256
    assert hashlib.sha256(gzip.decompress(path.read_bytes())).hexdigest() == SNAPSHOT_SHA256
    assert path.stat().st_size < 2_000_000  # the package stays small
    folder = path.parent
    readme = (folder / "README.md").read_text(encoding="utf-8")
    licence = (folder / "LICENSE.md").read_text(encoding="utf-8")
    assert SNAPSHOT_SHA256 in readme and data.PYTHON_SOURCE_FILE in readme
    assert data.PYTHON_SOURCE_ATTRIBUTION in readme and data.PYTHON_SOURCE_ATTRIBUTION in licence
    assert "PYTHON SOFTWARE FOUNDATION LICENSE VERSION 2" in licence


def test_the_corpus_text_is_what_notebook_11_read_and_needs_no_interpreter_files(monkeypatch):
    import sysconfig

    # the running interpreter's standard library is not read: point it nowhere
    monkeypatch.setattr(sysconfig, "get_paths", lambda *a, **k: {"stdlib": "/nowhere"})
    corpus = tl.PythonSourceCorpus()
    assert corpus.source == data.shipped_python_source_path()
    for split, digest in SPLIT_SHA256.items():
        assert hashlib.sha256(corpus.text[split].encode()).hexdigest() == digest, split
    assert [len(corpus.files[split]) for split in corpus.SPLITS] == [143, 11, 14]
    assert len(corpus.vocab) == 101


def test_a_damaged_or_missing_snapshot_is_a_clear_error(monkeypatch, tmp_path):
    damaged = tmp_path / data.PYTHON_SOURCE_FILE
    raw = gzip.decompress(data.shipped_python_source_path().read_bytes())
    damaged.write_bytes(gzip.compress(raw.replace(b"import", b"imp0rt", 1)))
    monkeypatch.setattr(data, "shipped_python_source_path", lambda: damaged)
    with pytest.raises(ValueError, match="does not hold the shipped Python source"):
        tl.PythonSourceCorpus()
    damaged.write_bytes(b"not gzip")
    with pytest.raises(ValueError, match="not a readable gzip file"):
        tl.PythonSourceCorpus()
    damaged.unlink()
    with pytest.raises(FileNotFoundError, match="package data is missing"):
        tl.PythonSourceCorpus()


def test_a_folder_of_your_own_reads_its_files(tmp_path):
    snapshot = data.read_python_source()
    for name in list(snapshot)[:40]:
        (tmp_path / name).write_text(snapshot[name], encoding="utf-8")
    corpus = tl.PythonSourceCorpus(root=tmp_path, min_chars=1_000)
    assert corpus.source == tmp_path
    assert sorted(sum(corpus.files.values(), [])) == sorted(list(snapshot)[:40])


def test_the_tool_remakes_the_same_bytes_from_python_3_11_7():
    """tools/make_python_stdlib_snapshot.py, on the standard library it was made from, gives the
    shipped tar file byte for byte (only where CPython 3.11.7 runs the tests)."""
    import platform
    import runpy
    import sysconfig
    from pathlib import Path

    if platform.python_version() != data.PYTHON_SOURCE_VERSION:
        pytest.skip(f"the snapshot comes from CPython {data.PYTHON_SOURCE_VERSION}")
    tool = Path(__file__).resolve().parent.parent / "tools" / "make_python_stdlib_snapshot.py"
    snapshot = runpy.run_path(str(tool))["snapshot"]
    tar_bytes, names = snapshot(Path(sysconfig.get_paths()["stdlib"]))
    assert hashlib.sha256(tar_bytes).hexdigest() == SNAPSHOT_SHA256
    assert names == list(data.read_python_source())
