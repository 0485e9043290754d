r"""Four offline corpora of different statistics for the LR range-test benchmark, generated from a seed.

Each is a :class:`foundry_ext.demo_data.Corpus` (written by :func:`foundry_ext.demo_data.write_demo_data`: a
byte-level BPE tokenizer of at most 512 tokens and MDS shards of ``SEQ_LEN``-token rows), deterministic for a seed
on every machine (``random.Random`` seeded with a string hashes it with SHA-512):

- ``grammar``: the demo's own documents (agreement sentences, arithmetic in words, counting, a recalled fact).
- ``arithmetic``: equations on digits, ``37 + 48 = 85. 6 * 7 = 42.``: a fixed format around one hard token (the
  result) per equation, memorised from an addition / multiplication table.
- ``copy``: a random string of syllables, ``|``, then the same string again: the first half is incompressible
  (uniform over 48 syllables), the second half is fully predictable by copying from the context.
- ``zipf``: natural-text-like: 2000 made-up words whose frequencies follow Zipf's law,
  :math:`p(r) \propto r^{-1.1}` for the word of rank :math:`r`, with a bigram structure (each word has 4 favoured
  successors, taken half of the time), in sentences of 4-14 words: a heavy tail of rare words and subword tokens.

These live with the benchmark, not in the package: they are ground truth for the benchmark and its quick test,
not a product feature. ``python bench/corpora.py DIR`` writes all four under ``DIR/<name>``.
"""

from __future__ import annotations

import itertools
import random
import sys
from collections.abc import Iterator
from pathlib import Path

from foundry_ext.demo_data import GRAMMAR, Corpus, generate_documents, write_demo_data

SEQ_LEN = 64
TRAIN_SEQUENCES = 8192  # 100 range-test batches of 32 rows stay within one epoch
VAL_SEQUENCES = 256

_SYLLABLES = [c + v for c in "bdfgklmnprstvz" for v in "aeiou"][:48]


def _rng(name: str, seed: int, split: str) -> random.Random:
    return random.Random(f"foundry-ext-bench-corpus/{name}/{seed}/{split}")


def arithmetic_documents(seed: int, split: str) -> Iterator[str]:
    """Endless documents of 3-8 equations: ``a + b = c``, ``a - b = c`` (0-99) and ``a * b = c`` (0-12)."""
    rng = _rng("arithmetic", seed, split)
    while True:
        equations = []
        for _ in range(rng.randint(3, 8)):
            op = rng.choice("+-*")
            if op == "*":
                a, b = rng.randint(0, 12), rng.randint(0, 12)
                c = a * b
            else:
                a, b = rng.randint(0, 99), rng.randint(0, 99)
                if op == "-":
                    a, b = max(a, b), min(a, b)
                c = a + b if op == "+" else a - b
            equations.append(f"{a} {op} {b} = {c}.")
        yield " ".join(equations)


def copy_documents(seed: int, split: str) -> Iterator[str]:
    """Endless documents ``s1 s2 ... sn | s1 s2 ... sn.``: n = 4-16 syllables drawn uniformly from 48."""
    rng = _rng("copy", seed, split)
    while True:
        text = " ".join(rng.choice(_SYLLABLES) for _ in range(rng.randint(4, 16)))
        yield f"{text} | {text}."


def _zipf_lexicon() -> tuple[list[str], list[float], list[list[int]]]:
    """2000 distinct made-up words (1-4 syllables), Zipf weights, and 4 favoured successors per word (fixed)."""
    rng = random.Random("foundry-ext-bench-corpus/zipf/lexicon")
    words: list[str] = []
    seen: set[str] = set()
    while len(words) < 2000:
        word = "".join(rng.choice(_SYLLABLES) for _ in range(rng.choice((1, 2, 2, 3, 3, 4))))
        if word not in seen:
            seen.add(word)
            words.append(word)
    weights = [1.0 / (rank + 1) ** 1.1 for rank in range(len(words))]
    successors = [rng.choices(range(len(words)), weights=weights, k=4) for _ in words]
    return words, list(itertools.accumulate(weights)), successors


def zipf_documents(seed: int, split: str) -> Iterator[str]:
    """Endless documents of 2-6 sentences of 4-14 words: Zipf unigrams mixed half and half with fixed bigrams."""
    words, cumulative, successors = _zipf_lexicon()
    rng = _rng("zipf", seed, split)
    population = range(len(words))
    while True:
        sentences = []
        for _ in range(rng.randint(2, 6)):
            current = rng.choices(population, cum_weights=cumulative)[0]
            sentence = [current]
            for _ in range(rng.randint(3, 13)):
                if rng.random() < 0.5:
                    current = rng.choice(successors[current])
                else:
                    current = rng.choices(population, cum_weights=cumulative)[0]
                sentence.append(current)
            sentences.append(" ".join(words[i] for i in sentence) + ".")
        yield " ".join(sentences)


def _corpus(name: str, documents: object) -> Corpus:
    return Corpus(name, documents, SEQ_LEN, TRAIN_SEQUENCES, VAL_SEQUENCES)  # type: ignore[arg-type]


CORPORA: dict[str, Corpus] = {
    "grammar": _corpus("grammar-64", generate_documents),
    "arithmetic": _corpus("arithmetic", arithmetic_documents),
    "copy": _corpus("copy", copy_documents),
    "zipf": _corpus("zipf", zipf_documents),
}
assert GRAMMAR.documents is CORPORA["grammar"].documents  # the demo's documents, in 64-token rows


def write(root: Path, name: str, seed: int = 17) -> Path:
    """Write (or reuse) corpus ``name`` under ``root / name``; the folder a YAML's ``data_local`` points at."""
    return write_demo_data(root / name, seed=seed, corpus=CORPORA[name]).path


if __name__ == "__main__":
    out = Path(sys.argv[1])
    for corpus_name in CORPORA:
        print(corpus_name, write(out, corpus_name))
