"""Make the English-French pairs that the package ships, from the distributor's ``fra.txt``.

    python tools/make_tatoeba_subset.py [FRA_TXT] [--max-words 15]

``FRA_TXT`` is manythings.org/anki's ``fra.txt`` of 2019-04-07 (``English<TAB>French`` lines, from
tatoeba.org; default ``/work/shared/data/tatoeba-fra-eng/fra.txt``). The script writes, into
``transformer_lib/data_files/tatoeba_fra_eng/``:

- ``pairs.tsv.gz``: every pair whose English side has at most ``--max-words`` words (split on
  spaces), both sides cleaned by ``transformer_lib.training.translation_corpus.normalise_text``, a
  pair that cleaning made empty or a repeat of an earlier pair dropped, in the distributor's order;
  gzip level 9 with no time stamp;
- ``README.md``: how the file was made, its size in bytes, its checksums and the split sizes;
- ``LICENSE.md``: the attribution and the licence (CC-BY 2.0), which must travel with the data.

It prints the SHA-256 of the decompressed text, which ``translation_corpus.SHIPPED_TEXT_SHA256``
must equal (the library checks the file against it). Running it again on the same ``fra.txt`` writes
the same text. gzip (not xz, which would be about a third smaller) because ``zlib`` is in every
Python, while ``lzma`` is an optional part of CPython that some builds (pyenv without liblzma) lack.
"""

import argparse
import gzip
import hashlib
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # the library of this checkout, not an installed copy

from transformer_lib.training.translation_corpus import (  # noqa: E402
    ATTRIBUTION,
    LICENCE_URL,
    SHIPPED_FILE,
    normalise_text,
    split_pairs,
)

DEFAULT_SOURCE = Path("/work/shared/data/tatoeba-fra-eng/fra.txt")
OUT_DIR = ROOT / "transformer_lib" / "data_files" / "tatoeba_fra_eng"

LICENSE_TEXT = f"""# Licence of the sentence pairs in this folder

The sentence pairs in `{SHIPPED_FILE}` are a subset of the English-French file of
www.manythings.org/anki (2019-04-07), built from the sentences of the Tatoeba Project (tatoeba.org).

Attribution: **{ATTRIBUTION}**.

Licence: Creative Commons Attribution 2.0 Generic (CC-BY 2.0), {LICENCE_URL}
(the Tatoeba Project's terms of use: https://tatoeba.org/eng/terms_of_use).

Changes made: pairs with more than the stated number of English words were left out, the text was
normalised (Unicode NFC, one kind of space, typographic apostrophes as `'`, invisible characters removed) and
repeated pairs were dropped; see README.md. Anything that ships these sentences, or a part of them, must carry
this attribution and the link to the licence.
"""


def make_subset(lines: list[str], max_words: int) -> tuple[list[tuple[str, str]], dict[str, int]]:
    """The kept pairs and a count of what was dropped, and why."""
    pairs, seen = [], set()
    dropped = {"longer": 0, "empty": 0, "repeated": 0}
    for number, line in enumerate(lines, start=1):
        fields = line.split("\t")
        if len(fields) < 2:
            raise ValueError(f"line {number}: expected English<TAB>French, got {line!r}")
        # later fields: none in 2019-04-07
        english, french = normalise_text(fields[0]), normalise_text(fields[1])
        if len(english.split()) > max_words:
            dropped["longer"] += 1
        elif not english or not french:
            dropped["empty"] += 1
        elif (english, french) in seen:
            dropped["repeated"] += 1
        else:
            seen.add((english, french))
            pairs.append((english, french))
    return pairs, dropped


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "source", nargs="?", type=Path, default=DEFAULT_SOURCE, help="the distributor's fra.txt"
    )
    parser.add_argument(
        "--max-words", type=int, default=15, help="keep pairs with at most this many English words"
    )
    args = parser.parse_args()

    source_bytes = args.source.read_bytes()
    lines = [line for line in source_bytes.decode("utf-8").split("\n") if line]
    pairs, dropped = make_subset(lines, args.max_words)
    text = "".join(f"{en}\t{fr}\n" for en, fr in pairs).encode("utf-8")
    packed = gzip.compress(text, compresslevel=9, mtime=0)
    splits = split_pairs(pairs)

    OUT_DIR.mkdir(parents=True, exist_ok=True)
    (OUT_DIR / SHIPPED_FILE).write_bytes(packed)
    (OUT_DIR / "LICENSE.md").write_text(LICENSE_TEXT, encoding="utf-8")
    text_sha, packed_sha = hashlib.sha256(text).hexdigest(), hashlib.sha256(packed).hexdigest()
    readme = f"""# English-French sentence pairs (Tatoeba), as shipped with transformer_lib

Attribution: **{ATTRIBUTION}** ({LICENCE_URL}); see LICENSE.md.

`{SHIPPED_FILE}`: {len(pairs):,} lines `English<TAB>French`, UTF-8, gzip; {len(packed):,} bytes
({len(text):,} bytes of text). Made by `python tools/make_tatoeba_subset.py --max-words {args.max_words}` from
manythings.org/anki's `fra.txt` of 2019-04-07 ({len(lines):,} pairs, {len(source_bytes):,} bytes, SHA-256
`{hashlib.sha256(source_bytes).hexdigest()}`):

- kept: pairs whose English side has at most {args.max_words} words (split on spaces), in the file's order
  (which is by English length); {dropped["longer"]:,} longer pairs left out;
- both sides cleaned by `transformer_lib.training.translation_corpus.normalise_text`: Unicode NFC; every space
  character (French typography's narrow no-break space before `! ? ; :`, the no-break space, the thin space) a
  plain space; zero-width spaces and soft hyphens removed; `’` and `‘` as `'`; runs of spaces as one;
- dropped: {dropped["empty"]:,} pairs with an empty side and {dropped["repeated"]:,} repeats of an earlier pair
  after cleaning.

SHA-256 of the decompressed text: `{text_sha}` (`translation_corpus.SHIPPED_TEXT_SHA256`; the library checks
it on every read). SHA-256 of the .gz file as written here: `{packed_sha}` (another zlib may write other bytes
for the same text).

Splits (`translation_corpus.split_pairs`, seed 0): train {len(splits["train"]):,}, valid
{len(splits["valid"]):,}, test {len(splits["test"]):,} pairs. Pairs that share their English or their French
sentence (ignoring case and punctuation) form a group; whole groups are held out, in the order of a SHA-256 of
their text, so no held-out sentence appears in training on either side, on any machine.
"""
    (OUT_DIR / "README.md").write_text(readme, encoding="utf-8")
    print(
        f"wrote {OUT_DIR / SHIPPED_FILE}: {len(pairs):,} pairs, {len(packed):,} bytes; dropped "
        f"{dropped}"
    )
    print(f"text SHA-256 {text_sha}")
    print("splits: " + ", ".join(f"{name} {len(p):,}" for name, p in splits.items()))


if __name__ == "__main__":
    main()
