"""How many non-empty sources the shipped English-French model (notebook 12) translates to an empty
string, with and without a minimum output length (issue 35).

For the valid and the test split (1,000 pairs each), greedy decoding and beam search (W = 4) at
length penalties alpha = 0, 0.6 and 1, each with ``min_len=0`` (``<eos>`` may come first: the
decoders' default, as in the paper) and ``min_len=1`` (the translation application's default: at
least one token before ``<eos>``). Every source of both splits is non-empty. Decoding is
deterministic, so the counts are the same on every run.

    OMP_NUM_THREADS=1 python results/empty_translations.py   # -> empty_translations.csv

Nothing is chosen with the test split here: the counts only check that the rule holds on it too.
"""

import csv
import time
from pathlib import Path

import transformer_lib as tl
from transformer_lib.applications import translation as tr

CSV = Path(__file__).with_name("empty_translations.csv")
FIELDS = ["split", "decoder", "alpha", "min_len", "sources", "empty", "bleu", "seconds"]


def main() -> None:
    model, vocab = tr.load_translator(tr.shipped_model_dir())
    corpus = tl.TatoebaCorpus()
    rows = []
    for split, pairs in (("valid", corpus.valid_pairs), ("test", corpus.test_pairs)):
        sources, references = [s for s, _ in pairs], [t for _, t in pairs]
        assert all(s.strip() for s in sources)  # every source is non-empty
        settings = [("greedy", None, 0.6)] + [("beam4", 4, alpha) for alpha in (0.0, 0.6, 1.0)]
        for decoder, width, alpha in settings:
            for min_len in (0, 1):
                started = time.perf_counter()
                hyps = tr.translate(model, vocab, sources, width, alpha, min_len=min_len)
                row = {
                    "split": split,
                    "decoder": decoder,
                    "alpha": alpha if width else "",
                    "min_len": min_len,
                    "sources": len(sources),
                    "empty": sum(not h.strip() for h in hyps),
                    "bleu": round(tr.corpus_bleu(hyps, references), 2),
                    "seconds": round(time.perf_counter() - started, 1),
                }
                print(row, flush=True)
                rows.append(row)
    with CSV.open("w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, FIELDS)
        writer.writeheader()
        writer.writerows(rows)
    print(f"wrote {CSV}")


if __name__ == "__main__":
    main()
