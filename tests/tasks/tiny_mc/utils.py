"""Loader of the tiny multiple-choice test task: the documents of tiny_mc.jsonl beside this file."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def load_tiny_mc(**kwargs: Any):
    """A ``DatasetDict`` with one ``test`` split (``custom_dataset``; extra keyword arguments ignored)."""
    import datasets

    path = Path(__file__).with_name("tiny_mc.jsonl")
    docs = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return datasets.DatasetDict({"test": datasets.Dataset.from_list(docs)})
