"""Make the Python source that notebook 11 trains on, shipped with the package: a fixed snapshot of
the top-level ``*.py`` files of CPython 3.11's standard library.

    python tools/make_python_stdlib_snapshot.py [STDLIB_FOLDER]

``STDLIB_FOLDER`` defaults to the running interpreter's standard library
(``sysconfig.get_paths()["stdlib"]``), which must be CPython 3.11.7's, the version the snapshot
was taken from. The script writes, into ``transformer_lib/data_files/python_stdlib/``:

- ``python_stdlib_3.11.7.tar.gz``: every ``*.py`` file at the top of the folder (no
  sub-folders), as it is on disk, in name order; a tar file (USTAR) whose members carry no time,
  owner or permissions of this machine, compressed with gzip level 9 and no time stamp;
- ``README.md``: what the snapshot is, where it came from, how it was made, its size and checksums;
- ``LICENSE.md``: the attribution and CPython's licence (the source folder's ``LICENSE.txt``,
  verbatim), which must travel with the files.

It prints the SHA-256 of the uncompressed tar file, which ``PYTHON_SOURCE_SHA256`` in
``transformer_lib/training/data.py`` must equal (the library checks the file against it on every
read). Running it again on the same folder writes the same bytes. Before the snapshot, notebook 11
read these files from the running interpreter, so its corpus changed with the Python version; the
snapshot holds exactly the files Python 3.11.7 had, so the text is what the notebook read on 3.11.
gzip (not xz, about a fifth smaller here) because ``zlib`` is in every Python, while ``lzma`` is an
optional part of CPython that some builds lack.
"""

import argparse
import gzip
import hashlib
import io
import platform
import sys
import sysconfig
import tarfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # the library of this checkout, not an installed copy

from transformer_lib.training.data import (  # noqa: E402
    PYTHON_SOURCE_ATTRIBUTION,
    PYTHON_SOURCE_FILE,
    PYTHON_SOURCE_VERSION,
)

OUT_DIR = ROOT / "transformer_lib" / "data_files" / "python_stdlib"

README = """# Python source (CPython {version}'s standard library), as shipped with transformer_lib

Attribution: **{attribution}**; see LICENSE.md.

Notebook 11 trains its character-level language models on this text (`tl.PythonSourceCorpus()`).
Before the snapshot, the notebook read the running interpreter's standard library, so another
Python version gave another corpus; this fixed copy gives every machine the same text.

`{file}`: a tar file of {count} files, {text_bytes:,} bytes of UTF-8 text, gzip level 9 with no
time stamp; {gz_bytes:,} bytes. They are every `*.py` file at the top of the standard-library folder
(`sysconfig.get_paths()["stdlib"]`; no sub-folders such as `json/` or `email/`) of CPython
{version} ({implementation}, {build}), as it was on disk, unchanged. Made by
`python tools/make_python_stdlib_snapshot.py` run with that Python: the members in name order, each
with time 0, owner 0 and mode 644, so the same folder gives the same bytes. {generated}

SHA-256 of the uncompressed tar file: `{tar_sha}`
(`transformer_lib.training.data.PYTHON_SOURCE_SHA256`; the library checks it on every read).
SHA-256 of the .gz file as written here: `{gz_sha}`
(another zlib may write other bytes for the same tar file).

The split into train, validation and test is by file, from a hash of the file's name
(`PythonSourceCorpus`): {splits}.

The files, in order: {names}.
"""

LICENSE_HEADER = """# Licence of the Python source files in this folder

The files in `{file}` are the top-level `*.py` files of the standard library of CPython {version},
unchanged.

Attribution: **{attribution}**.

Licence: the Python Software Foundation License Version 2 (the PSF licence, https://docs.python.org/3/license.html),
under which the Python Software Foundation distributes CPython; its full text, with the history of
the software and the licences of earlier releases that it refers to, follows as CPython {version}
ships it (`LICENSE.txt` of the standard-library folder). Anything that ships these files, or a part
of them, must carry this notice.

---

"""


def snapshot(folder: Path) -> tuple[bytes, list[str]]:
    """The uncompressed tar file of ``folder``'s top-level ``*.py`` files, and their names."""
    paths = sorted(folder.glob("*.py"))
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.USTAR_FORMAT) as tar:
        for path in paths:
            data = path.read_bytes()
            data.decode("utf-8")  # every file is UTF-8 text: fail here, not in the library
            info = tarfile.TarInfo(path.name)
            info.size, info.mtime, info.mode = len(data), 0, 0o644
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue(), [path.name for path in paths]


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folder", nargs="?", default=sysconfig.get_paths()["stdlib"])
    args = parser.parse_args(argv)
    if platform.python_version() != PYTHON_SOURCE_VERSION:
        sys.exit(
            f"run this with CPython {PYTHON_SOURCE_VERSION} (the snapshot's version), got "
            f"{platform.python_version()}"
        )
    folder = Path(args.folder)
    tar_bytes, names = snapshot(folder)
    gz_bytes = gzip.compress(tar_bytes, compresslevel=9, mtime=0)
    OUT_DIR.mkdir(parents=True, exist_ok=True)
    (OUT_DIR / PYTHON_SOURCE_FILE).write_bytes(gz_bytes)

    from transformer_lib.training.data import PythonSourceCorpus

    corpus = PythonSourceCorpus(root=folder)  # the same names and text as the snapshot
    splits = ", ".join(
        f"{name} {len(corpus.files[name])} files ({len(corpus.text[name]):,} characters)"
        for name in corpus.SPLITS
    )
    text_bytes = sum(len(p.read_bytes()) for p in sorted(folder.glob("*.py")))
    tar_sha = hashlib.sha256(tar_bytes).hexdigest()
    (OUT_DIR / "README.md").write_text(
        README.format(
            version=PYTHON_SOURCE_VERSION,
            attribution=PYTHON_SOURCE_ATTRIBUTION,
            file=PYTHON_SOURCE_FILE,
            count=len(names),
            text_bytes=text_bytes,
            gz_bytes=len(gz_bytes),
            implementation=platform.python_implementation(),
            build=platform.python_build()[1],
            tar_sha=tar_sha,
            gz_sha=hashlib.sha256(gz_bytes).hexdigest(),
            splits=splits,
            names=", ".join(f"`{name}`" for name in names),
            generated=" ".join(
                f"`{name}` is written when CPython is built: it holds that build's settings "
                "(compiler flags, install paths)."
                for name in names
                if name.startswith("_sysconfigdata")
            ),
        ),
        encoding="utf-8",
    )
    licence = (folder / "LICENSE.txt").read_text(encoding="utf-8")
    (OUT_DIR / "LICENSE.md").write_text(
        LICENSE_HEADER.format(
            file=PYTHON_SOURCE_FILE,
            version=PYTHON_SOURCE_VERSION,
            attribution=PYTHON_SOURCE_ATTRIBUTION,
        )
        + "```text\n"
        + licence
        + "```\n",
        encoding="utf-8",
    )
    print(f"{len(names)} files, {len(tar_bytes):,} bytes of tar, {len(gz_bytes):,} bytes gzip")
    print(f"SHA-256 of the tar file: {tar_sha} (PYTHON_SOURCE_SHA256 must equal it)")


if __name__ == "__main__":
    main()
