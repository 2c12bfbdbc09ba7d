"""Dataset loaders and per-document scoring for the WMT24 task YAMLs in this folder.

The data are read at run time from the project's data directory (the environment
variable ``LM_EVAL_ADAPTIVE_DATA``, else ``../shared/data`` next to the repository; see
``lm_eval_adaptive.data.data_root.data_root``), or from ``--metadata '{"data_root": "..."}'``.
No data text lives in the repository.

Docs are ``{"id", "source", "reference", "domain"}``, where ``id`` is the segment's
0-based line number as a string -- the item id of ``lm_eval_adaptive.data.wmt24.load_wmt24``.
Canary lines and lines with an empty reference are skipped exactly as there, so doc
positions and ids match the response tables the adaptive engine calibrates on.
"""

from __future__ import annotations

from typing import Any

from lm_eval_adaptive.data.data_root import data_root as _data_root
from lm_eval_adaptive.data.files import read_lines
from lm_eval_adaptive.errors import InputError
from lm_eval_adaptive.harness.metrics import sentence_bleu, sentence_chrf

#: Target language of each pair (selects sacrebleu's BLEU tokenizer).
TARGET_LANG = {"en-de": "de", "en-es": "es", "en-ja": "ja", "en-zh": "zh"}


def wmt24_docs(pair: str, root: str | None = None) -> list[dict[str, str]]:
    """The WMT24 docs of ``pair`` (canary lines and empty references skipped)."""
    if pair not in TARGET_LANG:
        raise InputError(f"unknown WMT24 pair {pair!r}; valid: {', '.join(TARGET_LANG)}")
    base = _data_root(root) / "wmt24" / pair
    paths = [base / "source.txt", base / "reference.txt", base / "documents.tsv"]
    for p in paths:
        if not p.is_file():
            raise InputError("required file not found", path=str(p))
    source, refs, documents = (read_lines(p) for p in paths)
    for p, lines in ((paths[1], refs), (paths[2], documents)):
        if len(lines) != len(source):
            raise InputError(f"has {len(lines)} lines, source.txt has {len(source)}",
                             path=str(p))
    docs = []
    for i, (src, ref, doc) in enumerate(zip(source, refs, documents)):
        domain = doc.split("\t", 1)[0].strip().lower()
        if domain == "canary" or ref.strip() == "":
            continue
        docs.append({"id": str(i), "source": src, "reference": ref, "domain": domain})
    return docs


def load_wmt24(pair: str, data_root: str | None = None, **_: Any):
    """A ``DatasetDict`` with one ``test`` split: the docs of ``pair``.

    Called by the harness as ``custom_dataset(**metadata, **dataset_kwargs)``; the
    extra keyword arguments (``version``, ``config_source``, ...) are ignored.
    """
    import datasets

    docs = wmt24_docs(pair, data_root)
    return datasets.DatasetDict({"test": datasets.Dataset.from_list(docs)})


def load_wmt24_en_de(**kwargs: Any):
    return load_wmt24("en-de", **kwargs)


def load_wmt24_en_es(**kwargs: Any):
    return load_wmt24("en-es", **kwargs)


def load_wmt24_en_ja(**kwargs: Any):
    return load_wmt24("en-ja", **kwargs)


def load_wmt24_en_zh(**kwargs: Any):
    return load_wmt24("en-zh", **kwargs)


def score_translation(doc: dict[str, Any], results: list[str], lang: str | None) -> dict[str, float]:
    """Sentence BLEU and chrF (each in [0, 1]) of the generation against the reference.

    ``bleu`` is *sentence* BLEU, the per-document score the adaptive engine uses; the
    task's aggregate is the mean of these, which is not corpus BLEU.
    """
    hyp = (results[0] if results else "").strip()
    ref = doc["reference"]
    return {"bleu": sentence_bleu(hyp, ref, lang=lang), "chrf": sentence_chrf(hyp, ref)}


def process_results_en_de(doc, results):
    return score_translation(doc, results, "de")


def process_results_en_es(doc, results):
    return score_translation(doc, results, "es")


def process_results_en_ja(doc, results):
    return score_translation(doc, results, "ja")


def process_results_en_zh(doc, results):
    return score_translation(doc, results, "zh")
