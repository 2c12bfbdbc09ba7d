"""Dataset loader and per-document scoring for the AlpacaEval task YAMLs in this folder.

The data are read at run time from the project's data directory (the environment
variable ``LM_EVAL_ADAPTIVE_DATA``, else ``../shared/data`` next to the repository; see
``lm_eval_adaptive.data.data_root.data_root``), or from ``--metadata '{"data_root": "..."}'``.
No data text lives in the repository.

Docs are ``{"id", "instruction", "reference"}``: ``id`` is the AlpacaEval item id as a
string (the item id of ``lm_eval_adaptive.data.alpaca_eval.load_alpaca_eval``), ``reference``
the gpt4_1106_preview answer from ``reference.jsonl`` (items without one are skipped).

The judge (task ``alpaca_eval``) is configured by ``--metadata`` keys, else by the
environment variables that :func:`lm_eval_adaptive.harness.metrics.llm_judge` reads:

* ``judge_model``      (``LM_EVAL_ADAPTIVE_JUDGE_MODEL``) -- litellm model id, required;
* ``judge_api_base``   (``LM_EVAL_ADAPTIVE_JUDGE_API_BASE``) -- OpenAI-compatible endpoint;
* ``judge_reference``  -- show the judge the reference answer (default false);
* ``judge_scale``      -- ``[lo, hi]`` the judge scores on (default ``[0, 1]``).

The API key is never read from metadata (it would be logged with the task config): set
``LM_EVAL_ADAPTIVE_JUDGE_API_KEY`` or the provider's usual variable.
"""

from __future__ import annotations

import os
from typing import Any

from lm_eval_adaptive.data.data_root import data_root as _data_root
from lm_eval_adaptive.data.files import read_jsonl
from lm_eval_adaptive.errors import InputError
from lm_eval_adaptive.harness.metrics import (
    JUDGE_API_BASE_ENV,
    JUDGE_MODEL_ENV,
    declare_judge,
    llm_judge,
    rouge_l,
)

# Judge settings, filled from the task metadata when the dataset is loaded (the
# harness hands metadata to custom_dataset only, not to process_results).
_JUDGE: dict[str, Any] = {"model": None, "api_base": None, "reference": False, "scale": (0, 1)}


def alpaca_eval_docs(root: str | None = None) -> list[dict[str, str]]:
    """AlpacaEval docs in ``items.jsonl`` order; items without a reference answer skipped."""
    base = _data_root(root) / "alpaca_eval"
    refs = {
        str(rec.get("id")).strip(): rec.get("output")
        for rec in read_jsonl(base / "reference.jsonl")
    }
    docs = []
    for rec in read_jsonl(base / "items.jsonl"):
        ident = str(rec.get("id")).strip()
        instruction, reference = rec.get("instruction"), refs.get(ident)
        if not isinstance(instruction, str) or not isinstance(reference, str) or not reference:
            continue
        docs.append({"id": ident, "instruction": instruction, "reference": reference})
    return docs


def load_alpaca_eval(data_root: str | None = None, **_: Any):
    """A ``DatasetDict`` with one ``test`` split of AlpacaEval docs (no judge needed).

    Called by the harness as ``custom_dataset(**metadata, **dataset_kwargs)``; other
    keyword arguments (``version``, ``config_source``, ...) are ignored.
    """
    import datasets

    docs = alpaca_eval_docs(data_root)
    return datasets.DatasetDict({"test": datasets.Dataset.from_list(docs)})


def load_alpaca_eval_judged(
    data_root: str | None = None,
    judge_model: str | None = None,
    judge_api_base: str | None = None,
    judge_reference: bool = False,
    judge_scale: Any = (0, 1),
    **kwargs: Any,
):
    """:func:`load_alpaca_eval`, after setting up the judge (fails before any generation
    when no judge model is configured)."""
    model = judge_model or os.environ.get(JUDGE_MODEL_ENV)
    if not model:
        raise InputError(
            "the alpaca_eval task needs an LLM judge: pass --metadata "
            "'{\"judge_model\": \"<litellm model id>\"}' or set "
            f"{JUDGE_MODEL_ENV} (and {JUDGE_API_BASE_ENV} for a local endpoint); "
            "the task alpaca_eval_rouge_l needs none"
        )
    lo, hi = (float(x) for x in judge_scale)
    declare_judge(model)  # lets lm-eval-adaptive price the judge before any call
    _JUDGE.update(
        model=model,
        api_base=judge_api_base or os.environ.get(JUDGE_API_BASE_ENV) or None,
        reference=bool(judge_reference),
        scale=(lo, hi),
    )
    return load_alpaca_eval(data_root, **kwargs)


def process_results_rouge_l(doc: dict[str, Any], results: list[str]) -> dict[str, float]:
    """ROUGE-L F-measure of the response against the reference answer."""
    response = results[0] if results else ""
    return {"rouge_l": rouge_l(response, doc["reference"])}


def process_results_judge(doc: dict[str, Any], results: list[str]) -> dict[str, float]:
    """The judge's score of the response (verbatim) in [0, 1]."""
    return {"judge": _judge(doc, results[0] if results else "")}


def process_results_judged(doc: dict[str, Any], results: list[str]) -> dict[str, float]:
    """The judge's score of the response (verbatim) in [0, 1], plus ROUGE-L."""
    response = results[0] if results else ""
    return {"judge": _judge(doc, response), "rouge_l": rouge_l(response, doc["reference"])}


def _judge(doc: dict[str, Any], response: str) -> float:
    return llm_judge(
        doc["instruction"],
        response,
        model=_JUDGE["model"],
        api_base=_JUDGE["api_base"],
        reference=doc["reference"] if _JUDGE["reference"] else None,
        scale=_JUDGE["scale"],
    )
