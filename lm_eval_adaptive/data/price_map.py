"""Where prices come from: litellm's price map, costs files, and the systems of the bundled benchmarks.

Prices come from, in order of precedence (:func:`price_for`):

1. explicit overrides (a costs file, :func:`load_costs_file`, or a ``--price`` option);
2. the system name itself read as a litellm model id (``gpt-4o-mini``);
3. :data:`SYSTEM_TO_LITELLM`, which names the API product behind the systems of the
   bundled benchmarks (WMT24 submissions, AlpacaEval models), priced by the installed litellm
   or, where it no longer lists the product, by :data:`SNAPSHOT_PRICES` (:func:`mapped_price`);
4. a default: for the tables of the bundled benchmarks (``backtest``)
   :data:`~lm_eval_adaptive.data.prices.DEFAULT_PRICE` ($1.00 / 1M input tokens, $3.00 / 1M
   output tokens); for live models the one ``--price default=IN,OUT`` states, or an error.

The live commands (``run --adaptive``, ``rank``, ``refresh``, ``--dry-run``) and ``demo`` share one
policy (:class:`PricePolicy`, :func:`resolve_prices`): a model with no known price is refused, every
such model named in one error with the ``--price`` line to add, unless ``--price default=IN,OUT``
prices them (source :data:`DEFAULT_SOURCE`; :func:`priced_by_default` says which, and every command
reports them). ``demo``, offline and spending nothing, has ``--price default=1,3`` as its default.
A model the harness runs in this process (:data:`LOCAL_MODEL_TYPES`: ``hf``, ``vllm``, ``sglang``, ...)
buys nothing: it is free (source :data:`LOCAL_SOURCE`) unless ``--price NAME=IN,OUT`` prices it by name
(``--price default`` does not: that prices models without a known price, and a local one has one).
Every model the harness reaches over HTTP (``litellm``, ``openai-*``, ``anthropic-*``, and also
``local-completions`` / ``local-chat-completions``, whose ``base_url`` may be a paid proxy) needs a price.

litellm's price map is read offline: ``LITELLM_LOCAL_MODEL_COST_MAP=True`` is set (unless
the caller set it otherwise), so the copy bundled with the installed litellm is used and nothing is
fetched. That copy is read as a JSON file (:func:`bundled_price_map`: the map litellm loads, its
aliases expanded) without importing litellm, which takes seconds; litellm itself is asked only when
the caller set ``LITELLM_LOCAL_MODEL_COST_MAP`` to something else (litellm then fetches the map).
"""

from __future__ import annotations

import csv
import functools
import importlib.util
import io
import json
import math
import os
import shlex
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lm_eval_adaptive.data.files import read_bytes
from lm_eval_adaptive.data.prices import DEFAULT_PRICE, Price
from lm_eval_adaptive.errors import InputError

__all__ = ["SYSTEM_TO_LITELLM", "SNAPSHOT_PRICES", "SNAPSHOT_SOURCE", "mapped_price", "litellm_price", "price_for",
           "model_price", "parse_prices", "PRICE_SYNTAX", "DEFAULT_KEY", "DEFAULT_SOURCE", "PricePolicy", "price_policy",
           "resolve_prices", "priced_by_default", "bundled_price_map", "load_costs_file", "LOCAL_MODEL_TYPES",
           "LOCAL_SOURCE", "is_local_model_type"]


# System names of the bundled benchmarks -> litellm model ids (keys of litellm.model_cost).
# Only systems whose API product is clear are mapped; the rest (open-weight models with
# many hosts, research systems, ONLINE-* engines) fall back to the default price.
# Where litellm no longer lists the provider's own id, the id of another host selling the
# same model at the same list price is used (noted per line).
# tests/test_costs.py checks that every id here has both prices in the installed litellm.
SYSTEM_TO_LITELLM: dict[str, str] = {
    # --- WMT24 General MT (LLMs collected by the organisers, mid-2024) ---
    # "GPT-4" of WMT24: priced as the product of that name (which GPT-4 snapshot WMT used is not recorded here).
    "GPT-4": "gpt-4",
    # Claude 3.5 Sonnet (June 2024); Anthropic's own id is gone from litellm, Bedrock's
    # has the same list price ($3 / $15).
    "Claude-3.5": "anthropic.claude-3-5-sonnet-20240620-v1:0",
    # Mistral Large before Mistral Large 2 (2407 appeared after the collection).
    "Mistral-Large": "mistral.mistral-large-2402-v1:0",
    # Command R+ (04-2024) at Cohere's original list price ($3 / $15).
    "CommandR-plus": "azure/command-r-plus",
    # Phi-3-medium's first-party API is Azure AI (4k and 128k variants cost the same).
    "Phi-3-Medium": "azure_ai/Phi-3-medium-4k-instruct",
    # Not mapped: Gemini-1.5-Pro (no Gemini 1.5 entry in litellm's map), Llama3-70B and
    # Aya23 (open weights, no single API product), all other submissions.
    # --- AlpacaEval (judge/ and outputs/ model names) ---
    "gpt-3.5-turbo-1106": "gpt-3.5-turbo-1106",
    "gpt35_turbo_instruct": "gpt-3.5-turbo-instruct",
    # Claude 2.0 and 2.1 share a list price ($8 / $24); litellm keeps only 2.1 (Bedrock).
    "claude-2": "anthropic.claude-v2:1",
    "claude-2.1_verbose": "anthropic.claude-v2:1",
    # Claude Instant 1.2 is Bedrock's anthropic.claude-instant-v1 ($0.80 / $2.40).
    "claude-instant-1.2": "anthropic.claude-instant-v1",
    # AlpacaEval's "gpt4" is gpt-4-0314, same list price as gpt-4 ($30 / $60).
    "gpt4": "gpt-4",
    "gpt4_1106_preview": "gpt-4-1106-preview",
    "gpt4_1106_preview_concise": "gpt-4-1106-preview",
    "gpt4_1106_preview_verbose": "gpt-4-1106-preview",
    "gpt-4-0125-preview": "azure/gpt-4-0125-preview",
    "mistral-large-2402": "mistral.mistral-large-2402-v1:0",
    "Meta-Llama-3.1-70B-Instruct-Turbo": "together_ai/meta-llama/Meta-Llama-3.1-70B-Instruct-Turbo",
    "Meta-Llama-3.1-8B-Instruct-Turbo": "together_ai/meta-llama/Meta-Llama-3.1-8B-Instruct-Turbo",
    # Not mapped: text_davinci_003 / text_davinci_001 (retired, not in litellm's map),
    # open-weight models (alpaca-7b, vicuna, Mixtral, ...) and NullModel.
}


#: Where :data:`SNAPSHOT_PRICES` were read.
SNAPSHOT_SOURCE = "litellm-1.80.0"

#: USD per million (input, output) tokens of every id in :data:`SYSTEM_TO_LITELLM`, as the price map
#: bundled with litellm 1.80.0 (the oldest litellm this package allows) lists them. Newer litellm
#: releases drop retired products (1.110 has neither ``azure/command-r-plus`` nor
#: ``azure_ai/Phi-3-medium-4k-instruct``); a mapped system is then priced from this snapshot
#: instead of falling to the default, so the bundled benchmarks cost the same whatever litellm
#: a fresh install resolves. tests/test_costs.py checks that every mapped id is here.
SNAPSHOT_PRICES: dict[str, tuple[float, float]] = {
    "anthropic.claude-3-5-sonnet-20240620-v1:0": (3.0, 15.0),
    "anthropic.claude-instant-v1": (0.8, 2.4),
    "anthropic.claude-v2:1": (8.0, 24.0),
    "azure/command-r-plus": (3.0, 15.0),
    "azure/gpt-4-0125-preview": (10.0, 30.0),
    "azure_ai/Phi-3-medium-4k-instruct": (0.17, 0.68),
    "gpt-3.5-turbo-1106": (1.0, 2.0),
    "gpt-3.5-turbo-instruct": (1.5, 2.0),
    "gpt-4": (30.0, 60.0),
    "gpt-4-1106-preview": (10.0, 30.0),
    "mistral.mistral-large-2402-v1:0": (8.0, 24.0),
    "together_ai/meta-llama/Meta-Llama-3.1-70B-Instruct-Turbo": (0.88, 0.88),
    "together_ai/meta-llama/Meta-Llama-3.1-8B-Instruct-Turbo": (0.18, 0.18),
}


def mapped_price(system: str) -> Price | None:
    """The price of a system of the bundled benchmarks (:data:`SYSTEM_TO_LITELLM`), None if unmapped.

    The installed litellm's price of the mapped id; where that litellm no longer lists it, the
    :data:`SNAPSHOT_PRICES` entry (source ``litellm-1.80.0:ID``); None when neither has it.
    """
    mapped = SYSTEM_TO_LITELLM.get(system)
    if mapped is None:
        return None
    price = litellm_price(mapped)
    if price is not None:
        return price
    snap = SNAPSHOT_PRICES.get(mapped)
    return None if snap is None else Price.per_million(*snap, source=f"{SNAPSHOT_SOURCE}:{mapped}")


#: The price map file litellm bundles (what it loads with ``LITELLM_LOCAL_MODEL_COST_MAP=True``).
_BUNDLED_MAP = "model_prices_and_context_window_backup.json"


@functools.lru_cache(maxsize=1)
def bundled_price_map() -> Mapping[str, Any] | None:
    """litellm's bundled price map as litellm loads it offline, read from its JSON file without importing
    litellm: every row, a row ``alias_of`` another served as that row, and each name of a row's
    ``aliases`` list served as the row (litellm's alias expansion). None when litellm is not
    installed there or the caller set ``LITELLM_LOCAL_MODEL_COST_MAP`` to fetch the map
    (tests/test_price_options.py checks it against ``litellm.model_cost``)."""
    if os.environ.get("LITELLM_LOCAL_MODEL_COST_MAP", "True").strip().lower() != "true":
        return None
    spec = importlib.util.find_spec("litellm")  # finds the package; imports nothing
    where = list(spec.submodule_search_locations or []) if spec is not None else []
    path = next((Path(d) / _BUNDLED_MAP for d in where if (Path(d) / _BUNDLED_MAP).is_file()), None)
    if path is None:
        return None
    try:
        raw = json.loads(path.read_bytes())
    except (OSError, ValueError):
        return None
    rows = {k: v for k, v in raw.items() if isinstance(v, dict) and k != "fallback_generalizations"}  # rules, not a model
    table = {k: v for k, v in rows.items() if not isinstance(v.get("alias_of"), str)}
    for k, v in rows.items():
        target = v.get("alias_of")
        if isinstance(target, str) and target in table and k not in table:
            table[k] = table[target]
    for k, v in list(table.items()):
        if isinstance(v.get("aliases"), list) and not isinstance(rows[k].get("alias_of"), str):
            for a in v["aliases"]:
                if isinstance(a, str) and a not in table:
                    table[a] = v
    return table


def _model_cost() -> Mapping[str, Any]:
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # litellm too, when it is imported later
    table = bundled_price_map()
    if table is not None:
        return table
    import litellm  # noqa: PLC0415 - slow import: only when litellm is to fetch its map

    return litellm.model_cost


@functools.lru_cache(maxsize=None)
def litellm_price(model_id: str) -> Price | None:
    """The price litellm's bundled map gives for ``model_id``; None if unknown or unpriced."""
    if not isinstance(model_id, str) or not model_id or model_id == "sample_spec":
        return None
    entry = _model_cost().get(model_id)
    if not isinstance(entry, Mapping):
        return None
    inp = entry.get("input_cost_per_token")
    out = entry.get("output_cost_per_token")
    try:
        price = Price(inp, out, f"litellm:{model_id}")
    except ValueError:  # missing (None), non-numeric or negative
        return None
    try:  # reasoning tokens priced apart (litellm's cost calculator prices them so)
        return Price(inp, out, price.source, entry.get("output_cost_per_reasoning_token"))
    except ValueError:
        return price


def price_for(
    name: str,
    *,
    overrides: Mapping[str, Price] | None = None,
    default: Price | None = DEFAULT_PRICE,
) -> Price:
    """The price of system ``name``.

    Order: ``overrides[name]``; ``name`` as a litellm id; :func:`mapped_price` of ``name``;
    ``default``. With ``default=None`` an unknown name raises :class:`InputError`.
    """
    if overrides and name in overrides:
        return overrides[name]
    price = litellm_price(name)
    if price is not None:
        return price
    price = mapped_price(name)
    if price is not None:
        return price
    if default is None:
        raise InputError(f"no known price for model {name!r}; give one with --costs or --price")
    return default


# ---------------------------------------------------------------------------
# Live models: --price and the price of a model id
# ---------------------------------------------------------------------------

PRICE_SYNTAX = "MODEL=IN,OUT (USD per million input,output tokens)"


def parse_prices(specs, *, bare: str | None = None) -> dict[str, Price]:
    """The ``--price`` values of ``run``, ``rank`` and ``refresh``: ``MODEL=IN,OUT`` each.

    ``MODEL`` is a model's name or id (a judge model's too); IN and OUT are USD per million
    input and output tokens. With ``bare`` (``run``'s one model), a bare ``IN,OUT`` prices
    that model. Raises :class:`InputError` naming the bad value.
    """
    out: dict[str, Price] = {}
    for s in specs or []:
        name, sep, vals = str(s).rpartition("=")
        if not sep and bare is not None:
            name, vals = bare, str(s)
        try:
            if not name.strip():
                raise ValueError
            parts = [float(x) for x in vals.split(",")]
            if len(parts) != 2 or not all(math.isfinite(v) and v >= 0 for v in parts):
                raise ValueError
        except ValueError:
            shown = PRICE_SYNTAX if bare is None else f"{PRICE_SYNTAX}, or IN,OUT for the model"
            raise InputError(f"--price {s!r}: expected {shown}") from None
        out[name.strip()] = Price.per_million(parts[0], parts[1], source="--price")
    return out


def model_price(model_id: str, *, name: str | None = None, overrides: Mapping[str, Price] | None = None,
                default: Price | None = None) -> Price:
    """The price of the live model ``model_id`` (shown as ``name``), for ``run``, ``rank`` and ``refresh``.

    Order: ``overrides`` (``--price``) under the name, the id or the id without its provider
    prefix (``openai/GPT-4`` → ``GPT-4``); litellm's price map by the id, then by the id
    without its prefix; the known systems of :data:`SYSTEM_TO_LITELLM` by the name, the bare
    id or the id; ``default``. With ``default=None`` an unknown model raises
    :class:`InputError` naming the ``--price`` to give.
    """
    price = _known_price(model_id, name, overrides)
    if price is not None:
        return price
    if default is not None:
        return default
    label = repr(name) + (f" ({model_id})" if name and name != model_id else "") if name else repr(model_id)
    raise InputError(f"no known price for model {label} in litellm's price map; give one with "
                     f"--price {_price_arg(name or model_id)} (USD per million input,output tokens), or "
                     f"--price {DEFAULT_KEY}=IN,OUT for every model without a known price")


def _price_arg(name: str) -> str:
    return shlex.quote(f"{name}=IN,OUT")


def _known_price(model_id: str, name: str | None, overrides: Mapping[str, Price] | None) -> Price | None:
    """:func:`model_price` without the default: None when the model has no known price."""
    bare = model_id.split("/", 1)[1] if "/" in model_id else None
    keys = [k for k in dict.fromkeys((name, model_id, bare)) if k]
    for k in keys:
        if overrides and k in overrides:
            return overrides[k]
    for k in (model_id, bare):
        price = litellm_price(k) if k else None
        if price is not None:
            return price
    for k in keys:
        price = mapped_price(k)
        if price is not None:
            return price
    return None


#: The harness's model types that run in this process (nothing is bought): free unless ``--price`` names
#: them. Types that call a server (``litellm``, ``openai-*``, ``anthropic-*``, ``local-completions``,
#: ``local-chat-completions``, ``gguf``, ``sglang-generate``, ...) are not here: their server may charge.
LOCAL_MODEL_TYPES = frozenset({
    "hf", "hf-auto", "huggingface", "hf-multimodal", "hf-mistral3", "hf-audiolm-qwen", "steered", "habana",
    "ipex", "vllm", "vllm-vlm", "sglang", "mamba_ssm", "megatron_lm", "nemo_lm", "neuronx", "onnxruntime",
    "onnxruntime-genai", "openvino", "trtllm", "winml", "dummy",
})
#: The source of a local model's price (zero).
LOCAL_SOURCE = "local model"


def is_local_model_type(model_type: str | None) -> bool:
    """Whether the harness's model type ``model_type`` (``--model``) runs in this process (:data:`LOCAL_MODEL_TYPES`)."""
    return isinstance(model_type, str) and model_type.strip() in LOCAL_MODEL_TYPES


#: The ``--price`` key that prices every model without a known price.
DEFAULT_KEY = "default"
#: The source of a price ``--price default=IN,OUT`` gave.
DEFAULT_SOURCE = "--price default"


@dataclass(frozen=True)
class PricePolicy:
    """The ``--price`` values of a command as one policy: per-model prices, and the price of every
    model with no known price (``--price default=IN,OUT``; None: such a model is refused)."""

    overrides: Mapping[str, Price] = field(default_factory=dict)
    default: Price | None = None

    def price(self, model_id: str, *, name: str | None = None) -> Price:
        """The model's price under this policy (:func:`model_price`); InputError when it has none."""
        return model_price(model_id, name=name, overrides=self.overrides, default=self.default)

    def known(self, model_id: str, *, name: str | None = None, model_type: str | None = None) -> Price | None:
        """The model's price under this policy, None when it has none. A local ``model_type``
        (:func:`is_local_model_type`) is free unless ``--price`` names it."""
        if is_local_model_type(model_type):
            keys = [k for k in dict.fromkeys((name, model_id)) if k]
            return next((self.overrides[k] for k in keys if k in self.overrides), Price(0.0, 0.0, LOCAL_SOURCE))
        price = _known_price(model_id, name, self.overrides)
        return price if price is not None else self.default


def price_policy(specs, *, bare: str | None = None) -> PricePolicy:
    """The policy of ``--price`` values (:func:`parse_prices`; ``default=IN,OUT`` is the default)."""
    prices = parse_prices(specs, bare=bare)
    default = prices.pop(DEFAULT_KEY, None)
    if default is not None:
        default = Price(default.input_per_token, default.output_per_token, DEFAULT_SOURCE)
    return PricePolicy(prices, default)


def resolve_prices(models: Iterable[tuple], policy: PricePolicy) -> dict[str, Price]:
    """Name → price of each ``(name, model id)`` or ``(name, model id, model type)`` under ``policy`` (a
    local model type is free unless priced, :meth:`PricePolicy.known`). Every model without a price is
    named in one :class:`InputError`, with the ``--price`` line that prices them all."""
    prices, missing = {}, []
    for name, model_id, *rest in models:
        price = policy.known(model_id, name=name, model_type=rest[0] if rest else None)
        if price is None:
            missing.append((name, model_id))
        else:
            prices[name] = price
    if missing:
        shown = ", ".join(n + (f" ({m})" if m != n else "") for n, m in missing)
        many = f"{len(missing)} models" if len(missing) > 1 else "model"
        raise InputError(f"no known price for {many} {shown} (in neither litellm's price map nor this package's "
                         f"benchmark systems); add --price {' '.join(_price_arg(n) for n, _ in missing)} (USD per "
                         f"million input,output tokens), or --price {DEFAULT_KEY}=IN,OUT to price every model "
                         f"without a known price at one default (reported as priced by it)")
    return prices


def priced_by_default(prices: Mapping[str, Price]) -> list[str]:
    """The names whose price is ``--price default``'s, in order."""
    return [n for n, p in prices.items() if p.source == DEFAULT_SOURCE]


# ---------------------------------------------------------------------------
# Costs files
# ---------------------------------------------------------------------------

_PRICE_KEYS = ("input_per_mtok", "output_per_mtok")


def _parse_usd(value: Any, what: str, *, path: str, row: int | None, where: str) -> float:
    if value is None or (isinstance(value, str) and not value.strip()):
        raise InputError(f"{where}: missing {what}", path=path, row=row)
    if isinstance(value, bool):
        raise InputError(f"{where}: {what} is not a number: {value!r}", path=path, row=row)
    try:
        number = float(value.strip() if isinstance(value, str) else value)
    except (TypeError, ValueError):
        raise InputError(
            f"{where}: {what} is not a number: {value!r}", path=path, row=row
        ) from None
    if not math.isfinite(number):
        raise InputError(f"{where}: {what} must be finite, got {value!r}", path=path, row=row)
    if number < 0:
        raise InputError(f"{where}: {what} must be >= 0, got {value!r}", path=path, row=row)
    return number


def _litellm_entry(model_id: Any, *, path: str, row: int | None, where: str) -> Price:
    if not isinstance(model_id, str) or not model_id.strip():
        raise InputError(f"{where}: litellm id must be a non-empty string, got {model_id!r}",
                         path=path, row=row)
    price = litellm_price(model_id.strip())
    if price is None:
        raise InputError(
            f"{where}: unknown litellm id {model_id!r} (not priced in litellm's model map)",
            path=path, row=row,
        )
    return price


def _entry_price(
    model: str,
    litellm_id: Any,
    inp: Any,
    out: Any,
    *,
    path: str,
    row: int | None,
    source: str,
) -> Price:
    where = f"model {model!r}"
    has_litellm = litellm_id is not None and not (isinstance(litellm_id, str) and not litellm_id.strip())
    has_any_price = any(
        v is not None and not (isinstance(v, str) and not v.strip()) for v in (inp, out)
    )
    if has_litellm and has_any_price:
        raise InputError(
            f"{where}: give either a litellm id or input_per_mtok/output_per_mtok, not both",
            path=path, row=row,
        )
    if has_litellm:
        return _litellm_entry(litellm_id, path=path, row=row, where=where)
    input_usd = _parse_usd(inp, "input_per_mtok", path=path, row=row, where=where)
    output_usd = _parse_usd(out, "output_per_mtok", path=path, row=row, where=where)
    return Price.per_million(input_usd, output_usd, source)


def _no_duplicates(path: str):
    def hook(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        seen: dict[str, Any] = {}
        for key, value in pairs:
            if key in seen:
                raise InputError(f"{key!r} is given twice", path=path)
            seen[key] = value
        return seen

    return hook


def _load_json(text: str, path: str, source: str) -> dict[str, Price]:
    try:
        data = json.loads(text, object_pairs_hook=_no_duplicates(path))
    except json.JSONDecodeError as e:
        raise InputError(
            f"not valid JSON: {e.msg} (line {e.lineno}, column {e.colno})", path=path
        ) from None
    if not isinstance(data, dict):
        raise InputError(
            'expected a JSON object {"model": {"input_per_mtok": ..., "output_per_mtok": ...}}, '
            f"got {type(data).__name__}",
            path=path,
        )
    prices: dict[str, Price] = {}
    for model, spec in data.items():
        if not model.strip():
            raise InputError("empty model name", path=path)
        if isinstance(spec, str):
            prices[model] = _litellm_entry(spec, path=path, row=None, where=f"model {model!r}")
        elif isinstance(spec, dict):
            if "litellm" not in spec and not any(k in spec for k in _PRICE_KEYS):
                raise InputError(
                    f"model {model!r}: needs 'input_per_mtok' and 'output_per_mtok', or "
                    f"'litellm'; got keys {sorted(spec)}",
                    path=path,
                )
            prices[model] = _entry_price(
                model, spec.get("litellm"), spec.get("input_per_mtok"),
                spec.get("output_per_mtok"), path=path, row=None, source=source,
            )
        else:
            raise InputError(
                f"model {model!r}: expected a litellm id (string) or an object with "
                f"input_per_mtok/output_per_mtok, got {spec!r}",
                path=path,
            )
    return prices


def _load_csv(text: str, path: str, source: str) -> dict[str, Price]:
    reader = csv.DictReader(io.StringIO(text, newline=""))
    header = [h.strip() for h in (reader.fieldnames or [])]
    if not header:
        raise InputError("empty CSV file (expected columns model,input_per_mtok,output_per_mtok)",
                         path=path)
    reader.fieldnames = header
    required = ["model"] if "litellm" in header else ["model", *_PRICE_KEYS]
    missing = [c for c in required if c not in header]
    if missing:
        raise InputError(
            f"missing column(s) {', '.join(missing)}; expected model,input_per_mtok,"
            f"output_per_mtok (got {','.join(header)})",
            path=path, row=1,
        )
    prices: dict[str, Price] = {}
    for record in reader:
        row = reader.line_num  # line in the file; the header is row 1
        model = (record.get("model") or "").strip()
        if not model:
            raise InputError("empty model name", path=path, row=row)
        if model in prices:
            raise InputError(f"model {model!r} is given twice", path=path, row=row)
        prices[model] = _entry_price(
            model, record.get("litellm"), record.get("input_per_mtok"),
            record.get("output_per_mtok"), path=path, row=row, source=source,
        )
    return prices


def load_costs_file(path: str | os.PathLike[str]) -> dict[str, Price]:
    """Read per-model prices from a JSON or CSV file.

    JSON: an object mapping model names to ``{"input_per_mtok": 1.0, "output_per_mtok": 3.0}``
    (USD per million tokens), ``{"litellm": "gpt-4o"}`` or ``"gpt-4o"`` (a litellm id).
    CSV: columns ``model,input_per_mtok,output_per_mtok`` (an optional ``litellm`` column may
    name a litellm id instead of the prices); rows are counted as file lines, header = row 1.
    Files ending in ``.json``/``.csv`` are read as such; otherwise a file starting with ``{``
    is JSON. Errors raise :class:`InputError` naming the file, the row or model, and the fault.
    """
    p = Path(path)
    shown = os.fspath(path)
    if not p.exists():
        raise InputError("costs file not found", path=shown)
    if p.is_dir():
        raise InputError("costs file is a directory", path=shown)
    data = read_bytes(p, what="costs file")  # under the input size limit
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise InputError(f"costs file is not UTF-8 text ({e.reason})", path=shown) from None
    source = f"file:{shown}"
    suffix = p.suffix.lower()
    if suffix == ".json" or (suffix != ".csv" and text.lstrip().startswith("{")):
        prices = _load_json(text, shown, source)
    else:
        prices = _load_csv(text, shown, source)
    if not prices:
        raise InputError("no model prices in costs file", path=shown)
    return prices
