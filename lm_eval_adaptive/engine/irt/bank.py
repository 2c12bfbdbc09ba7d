"""Item banks: calibrated item parameters, the scaling of raw scores, and their JSON file.

A bank is what calibration produces and what every adaptive run consumes: item ids,
difficulties b, one response model (k and a = 1/√k for continuous scores), the ranges
used to map a raw metric value into [0, 1], token counts for costs, every dropped item
with its reason, and diagnostics. The file is versioned JSON; its content hash is the
bank's id, so results can say exactly which bank produced them (like sacrebleu's
signature).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping

import numpy as np

from lm_eval_adaptive import __version__
from lm_eval_adaptive.atomic import atomic_write_text
from lm_eval_adaptive.data.files import read_json
from lm_eval_adaptive.engine.irt.factor_model import FactorModel
from lm_eval_adaptive.engine.irt.response_model import (
    ResponseModel,
    response_model_from_dict,
)
from lm_eval_adaptive.errors import BankError, InputError

__all__ = ["ItemBank", "BANK_FORMAT", "BANK_VERSION", "SCALINGS", "K_RANGE", "joint_item_ids"]

BANK_FORMAT = "lm-eval-adaptive/item-bank"
#: The range a continuous bank's noise k may take: calibration floors k at 1e-6; below it the
#: items' information (1/k) overflows the estimators, and a k above 100 makes every item
#: carry next to no information.
K_RANGE = (1e-6, 100.0)
BANK_VERSION = 1
#: "global": one (min, max) over all calibration observations (the reference code);
#: "per_item": each item's own (min, max) over calibration models (the paper's data prep).
SCALINGS = ("global", "per_item")


@dataclass(eq=False)
class ItemBank:
    """A calibrated item bank (see module docstring). Arrays are aligned by item."""

    item_ids: np.ndarray
    b: np.ndarray
    model: ResponseModel
    scaling: str
    lo: np.ndarray
    hi: np.ndarray
    input_tokens: np.ndarray
    output_tokens: np.ndarray
    task: str | None = None
    metric: str | None = None
    dropped: list = field(default_factory=list)
    diagnostics: dict = field(default_factory=dict)
    calibration: dict = field(default_factory=dict)
    #: The model error the bank's self-check measured (engine/evaluation/model_error.py): ``ability_sd`` is
    #: added in quadrature to every ability SE, ``full_task_sd`` (metric units) to full-task
    #: intervals; ``*_misfit`` are the same for a model the person-fit statistic flags.
    model_error: dict = field(default_factory=dict)
    #: Per-item discrimination and guessing of a 2PL/3PL bank (``model.per_item``); None otherwise.
    a: np.ndarray | None = None
    c: np.ndarray | None = None
    #: A linear factor model of the calibration answers (engine/irt/factor_model.py; 0/1 banks calibrated on
    #: enough models): the full-task estimate predicts the unseen items with it. None: the response
    #: model's curves predict them.
    factors: FactorModel | None = None

    def __post_init__(self):
        """Validate: messages name the field as the bank file spells it (``items.b[3]``)."""
        self.item_ids = np.asarray(self.item_ids, dtype=object)
        n = self.item_ids.size
        if n == 0:
            raise BankError("the bank has no items")
        if self.item_ids.shape != (n,):
            raise BankError("items.id must be a flat list of item ids")
        if self.scaling not in SCALINGS + ("none",):
            raise BankError(f"unknown scaling {self.scaling!r}; expected one of {SCALINGS + ('none',)}")
        per_item = self.scaling == "per_item"
        lo_name, hi_name = ("items.min", "items.max") if per_item else ("scaling.min", "scaling.max")
        self.b = _aligned(self.b, n, "items.b", broadcast=False)
        self.lo = _aligned(self.lo, n, lo_name)
        self.hi = _aligned(self.hi, n, hi_name)
        self.input_tokens = _aligned(self.input_tokens, n, "items.input_tokens")
        self.output_tokens = _aligned(self.output_tokens, n, "items.output_tokens")
        _require(np.isfinite(self.b), self.b, "items.b", "difficulties must be finite")
        _require(np.isfinite(self.lo), self.lo, lo_name, "score ranges must be finite", indexed=per_item)
        _require(np.isfinite(self.hi), self.hi, hi_name, "score ranges must be finite", indexed=per_item)
        if not per_item and (np.any(self.lo != self.lo[0]) or np.any(self.hi != self.hi[0])):
            raise BankError(f"{self.scaling} scaling takes one score range for every item")
        bad = np.flatnonzero(~(self.hi > self.lo))
        if bad.size:
            i = int(bad[0])
            where = f"[{i}]" if per_item else ""
            raise BankError(f"{hi_name}{where} {float(self.hi[i])!r} is not above {lo_name}{where} "
                            f"{float(self.lo[i])!r}: "
                            "every item needs a score range with max > min")
        for name in ("input_tokens", "output_tokens"):
            v = getattr(self, name)
            _require(np.isnan(v) | (np.isfinite(v) & (v >= 0)), v, f"items.{name}",
                     "token counts must be finite and >= 0 (null if unknown)")
        if len(set(self.item_ids.tolist())) != n:
            raise BankError("item ids must be unique")
        self._check_item_parameters(n)
        if self.factors is not None and self.factors.n_items != n:
            raise BankError(f"factors: {self.factors.n_items} items, the bank has {n}")
        k = self.k
        if k is not None and not (isinstance(k, (int, float, np.floating)) and K_RANGE[0] <= k <= K_RANGE[1]):
            raise BankError(f"response_model.k is {k!r}: the noise of a continuous bank must be a finite number "
                            f"in [{K_RANGE[0]:g}, {K_RANGE[1]:g}] (calibration gives such values)")
        self._index = None
        self._hash = None

    def _check_item_parameters(self, n: int) -> None:
        """A 2PL/3PL bank needs items.a > 0 (and items.c in [0, 1), 0 for 2PL); other banks have neither."""
        if not self.model.per_item:
            if self.a is not None or self.c is not None:
                raise BankError(f"items.a/items.c are per-item parameters of a 2PL/3PL bank, "
                                f"not of a {self.model.kind!r} one")
            return
        if self.a is None:
            raise BankError(f"a {self.model.kind} bank needs items.a (one discrimination per item)")
        self.a = _aligned(self.a, n, "items.a")
        self.c = np.zeros(n) if self.c is None else _aligned(self.c, n, "items.c")
        _require(np.isfinite(self.a) & (self.a > 0), self.a, "items.a", "discriminations must be finite and > 0")
        _require(np.isfinite(self.c) & (self.c >= 0) & (self.c < 1), self.c, "items.c",
                 "guessing parameters must lie in [0, 1)")
        if self.model.kind == "2pl":
            _require(self.c == 0, self.c, "items.c", "a 2pl bank has no guessing (c = 0); use 3pl")

    # ------------------------------------------------------------------ basics
    @property
    def n_items(self) -> int:
        return int(self.item_ids.size)

    @property
    def k(self) -> float | None:
        return getattr(self.model, "k", None)

    @property
    def discrimination(self) -> float:
        """The bank's discrimination a (2PL/3PL: the mean of the items' a)."""
        if self.model.per_item:
            return float(np.mean(self.a))
        return self.model.discrimination

    def item_params(self, items=slice(None)) -> dict:
        """Keyword arguments of the response model's methods for bank ``items`` besides b: ``a``
        and ``c`` of a 2PL/3PL bank, nothing for a one-parameter bank."""
        if not self.model.per_item:
            return {}
        return {"a": self.a[items], "c": self.c[items]}

    def information(self, theta: float, items=slice(None)) -> np.ndarray:
        """Fisher information of bank ``items`` (default: all) at ability ``theta``."""
        return self.model.information(theta, self.b[items], **self.item_params(items))

    @property
    def selection_information(self):
        """For the selector: None when information falls with |θ - b| alone (one-parameter
        banks: the nearest difficulties are the most informative), else :meth:`information`."""
        return self.information if self.model.per_item else None

    def set_model_error(self, correction: dict) -> None:
        """Store the self-check's correction (engine/evaluation/model_error.py; {} for none), checked."""
        self.model_error = _model_error(correction)
        self._hash = None

    def ability_error_sd(self, misfit: bool = False) -> float:
        """Model-error SD added in quadrature to an ability SE (0: no correction); ``misfit``: for a
        model the person-fit statistic flags."""
        me = self.model_error
        return float(me.get("ability_sd_misfit", me.get("ability_sd", 0.0)) if misfit else me.get("ability_sd", 0.0))

    def full_task_error_sd(self, misfit: bool = False) -> float:
        """Model-error SD of a full-task estimate, in the metric's units (0: no correction)."""
        me = self.model_error
        return float(me.get("full_task_sd_misfit", me.get("full_task_sd", 0.0)) if misfit
                     else me.get("full_task_sd", 0.0))

    @property
    def prior_mean(self) -> float:
        """METHOD.md §3: the prior on θ is centred at the median difficulty (computed once per ``b``)."""
        cached = getattr(self, "_prior_mean", None)
        if cached is None or cached[0] is not self.b:
            cached = self._prior_mean = (self.b, float(np.median(self.b)))
        return cached[1]

    def positions(self, ids) -> np.ndarray:
        """Bank positions of item ids, −1 for an id the bank does not hold."""
        if self._index is None:
            self._index = {v: i for i, v in enumerate(self.item_ids.tolist())}
        ids = [str(x) for x in np.atleast_1d(np.asarray(ids, dtype=object))]
        return np.fromiter((self._index.get(x, -1) for x in ids), dtype=np.int64, count=len(ids))

    def index_of(self, ids) -> np.ndarray:
        """Bank positions of item ids; a BankError names ids the bank does not hold."""
        ids = [str(x) for x in np.atleast_1d(np.asarray(ids, dtype=object))]
        out = self.positions(ids)
        if np.any(out < 0):
            missing = [ids[i] for i in np.flatnonzero(out < 0)[:5]]
            reason = {d["id"]: d["reason"] for d in self.dropped}
            notes = [f"{m!r}" + (f" (dropped at calibration: {reason[m]})" if m in reason else "")
                     for m in missing]
            raise BankError(f"{int((out < 0).sum())} item(s) not in the bank "
                            f"{self.describe()}: {', '.join(notes)}")
        return out

    def scale(self, item, raw) -> np.ndarray:
        """Map raw metric values of bank items ``item`` into [0, 1] with the stored ranges (clipped)."""
        item = np.asarray(item)
        raw = np.asarray(raw, dtype=float)
        y = (raw - self.lo[item]) / (self.hi[item] - self.lo[item])
        return np.clip(y, 0.0, 1.0)

    def unscale(self, item, y) -> np.ndarray:
        """Inverse of :meth:`scale` (for reporting predicted raw metric values)."""
        item = np.asarray(item)
        return self.lo[item] + np.asarray(y, dtype=float) * (self.hi[item] - self.lo[item])

    def describe(self) -> str:
        parts = [p for p in (self.task, self.metric) if p]
        return f"'{'/'.join(parts) or 'unnamed'}' ({self.bank_id})"

    def check_compatible(self, *, task: str | None = None, metric: str | None = None) -> None:
        """Raise BankError if the bank was made for another task or metric."""
        if task is not None and self.task is not None and task != self.task:
            raise BankError(f"bank {self.describe()} was calibrated for task {self.task!r}, not {task!r}")
        if metric is not None and self.metric is not None and metric != self.metric:
            raise BankError(f"bank {self.describe()} was calibrated for metric {self.metric!r}, not {metric!r}")

    # ------------------------------------------------------------- serialise
    def to_dict(self) -> dict:
        if self.scaling == "global" or self.scaling == "none":
            scaling = {"kind": self.scaling, "min": float(self.lo[0]), "max": float(self.hi[0])}
        else:
            scaling = {"kind": self.scaling}

        def col(a):
            return [None if not np.isfinite(v) else round(float(v), 6) for v in a]

        items = {"id": [str(x) for x in self.item_ids], "b": [round(float(v), 10) for v in self.b],
                 "input_tokens": col(self.input_tokens), "output_tokens": col(self.output_tokens)}
        if self.model.per_item:
            items["a"] = [round(float(v), 10) for v in self.a]
            items["c"] = [round(float(v), 10) for v in self.c]
        if self.scaling == "per_item":
            items["min"] = [float(v) for v in self.lo]
            items["max"] = [float(v) for v in self.hi]
        return {
            "format": BANK_FORMAT,
            "version": BANK_VERSION,
            "task": self.task,
            "metric": self.metric,
            "response_model": self.model.to_dict(),
            "scaling": scaling,
            "n_items": self.n_items,
            "items": items,
            "dropped": list(self.dropped),
            "diagnostics": self.diagnostics,
            "calibration": self.calibration,
            **({"model_error": dict(self.model_error)} if self.model_error else {}),
            **({"factors": self.factors.to_dict()} if self.factors is not None else {}),
        }

    @property
    def bank_id(self) -> str:
        """Short content hash: the same items, parameters and ranges give the same id."""
        if self._hash is None:
            d = self.to_dict()
            content = {k: d[k] for k in ("task", "metric", "response_model", "scaling", "items", "model_error",
                                         "factors")
                       if k in d}
            blob = json.dumps(content, sort_keys=True, separators=(",", ":")).encode()
            self._hash = "sha256:" + hashlib.sha256(blob).hexdigest()[:16]
        return self._hash

    def save(self, path) -> Path:
        """Write the bank as JSON atomically (a temp file renamed into place)."""
        path = Path(path)
        d = self.to_dict()
        d["bank_id"] = self.bank_id
        d["created_by"] = f"lm-eval-adaptive {__version__}"
        text = json.dumps(d, indent=1, allow_nan=False)
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(path, text)
        return path

    @classmethod
    def from_dict(cls, d: dict, *, source: str = "<memory>") -> "ItemBank":
        if not isinstance(d, dict) or d.get("format") != BANK_FORMAT:
            raise BankError(f"not an lm-eval-adaptive item bank (missing format {BANK_FORMAT!r})", path=source)
        if d.get("version") != BANK_VERSION:
            raise BankError(f"bank format version {d.get('version')!r} is not supported "
                            f"(this lm-eval-adaptive reads version {BANK_VERSION})", path=source)
        try:
            items = _field(d, "items", dict)
            ids = _field(items, "id", list, "items.id")
            n = len(ids)
            for i, x in enumerate(ids):
                if not isinstance(x, str):
                    raise BankError(f"malformed item bank: items.id[{i}] is {x!r}, not a string")
            rm = _field(d, "response_model", dict)
            try:
                model = response_model_from_dict(rm)
            except (KeyError, TypeError, ValueError) as e:
                raise BankError(f"response_model: {type(e).__name__}: {e}") from None
            sc = _field(d, "scaling", dict)
            kind = sc.get("kind")
            if kind == "per_item":
                lo, hi = _numbers(items, "min", n), _numbers(items, "max", n)
            else:
                lo, hi = _number(sc, "min", "scaling.min"), _number(sc, "max", "scaling.max")
            stated = d.get("n_items", n)
            if stated != n:
                raise BankError(f"n_items is {stated!r} but items.id holds {n} ids")
            for key, kind_ in (("task", str), ("metric", str), ("dropped", list),
                               ("diagnostics", dict), ("calibration", dict)):
                if d.get(key) is not None and not isinstance(d[key], kind_):
                    raise BankError(f"malformed item bank: {key} is not {_JSON_KIND[kind_]}")
            for i, e in enumerate(d.get("dropped") or []):
                if not (isinstance(e, dict) and isinstance(e.get("id"), str) and isinstance(e.get("reason"), str)):
                    raise BankError(f"malformed item bank: dropped[{i}] needs a string id and reason")
            bank = cls(item_ids=np.array(ids, dtype=object), b=_numbers(items, "b", n),
                       model=model, scaling=kind, lo=lo, hi=hi,
                       input_tokens=_numbers(items, "input_tokens", n, required=False),
                       output_tokens=_numbers(items, "output_tokens", n, required=False),
                       task=d.get("task"), metric=d.get("metric"), dropped=d.get("dropped") or [],
                       diagnostics=d.get("diagnostics") or {}, calibration=d.get("calibration") or {},
                       model_error=_model_error(d.get("model_error")),
                       a=_numbers(items, "a", n) if model.per_item else None,
                       c=_numbers(items, "c", n) if model.per_item and "c" in items else None,
                       factors=_factors(d.get("factors"), n))
        except BankError as e:
            raise BankError(str(e), path=source) from None
        except (KeyError, TypeError, ValueError) as e:  # pragma: no cover - the checks above come first
            raise BankError(f"malformed item bank: {type(e).__name__}: {e}", path=source) from None
        stored = d.get("bank_id")
        if stored is not None and stored != bank.bank_id:
            raise BankError(f"bank content does not match its id {stored} (edited by hand?)", path=source)
        return bank

    @classmethod
    def load(cls, path) -> "ItemBank":
        path = Path(path)
        if not path.exists():
            raise BankError("item bank file not found", path=str(path))
        try:
            d = read_json(path, what="item bank")  # under the input size limit; .gz inflated in chunks
        except BankError:
            raise
        except InputError as e:
            raise BankError(str(e).removeprefix(f"{e.path}: "), path=e.path) from None
        return cls.from_dict(d, source=str(path))


# ------------------------------------------------------------------ validation helpers
_JSON_KIND = {dict: "an object", list: "an array", str: "a string"}


def _field(d: dict, key: str, kind: type, name: str | None = None):
    """``d[key]``, which must be a JSON value of ``kind``; BankError naming the field otherwise."""
    name = name or key
    if key not in d:
        raise BankError(f"malformed item bank: missing field {name}")
    value = d[key]
    if not isinstance(value, kind):
        raise BankError(f"malformed item bank: {name} is not {_JSON_KIND[kind]}")
    return value


def _is_number(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def _number(d: dict, key: str, name: str) -> float:
    if key not in d:
        raise BankError(f"malformed item bank: missing field {name}")
    if not _is_number(d[key]):
        raise BankError(f"malformed item bank: {name} is {d[key]!r}, not a number")
    return float(d[key])


def _numbers(items: dict, key: str, n: int, *, required: bool = True) -> np.ndarray:
    """Column ``items.<key>`` as floats (null -> NaN; absent -> NaN when not required)."""
    name = f"items.{key}"
    if key not in items or (items[key] is None and not required):
        if required:
            raise BankError(f"malformed item bank: missing field {name}")
        return np.full(n, np.nan)
    values = _field(items, key, list, name)
    for i, x in enumerate(values):
        if x is not None and not _is_number(x):
            raise BankError(f"malformed item bank: {name}[{i}] is {x!r}, not a number")
    if len(values) != n:
        raise BankError(f"{name} has {len(values)} values, items.id has {n} (the columns differ in length)")
    return np.array([np.nan if x is None else x for x in values], dtype=float)


def _aligned(value, n: int, name: str, *, broadcast: bool = True) -> np.ndarray:
    """A float array of shape ``(n,)``; a scalar is repeated when ``broadcast``."""
    try:
        arr = np.asarray(value, dtype=float)
    except (TypeError, ValueError):
        raise BankError(f"{name} must hold numbers") from None
    if arr.ndim == 0 and broadcast:
        return np.full(n, float(arr))
    if arr.shape != (n,):
        raise BankError(f"{name} has {arr.size} values, items.id has {n} (the columns differ in length)")
    return arr.copy()


def _require(ok: np.ndarray, values: np.ndarray, name: str, rule: str, *, indexed: bool = True) -> None:
    """BankError naming the first value (``name[i]``, or ``name`` when one value is shared) not ``ok``."""
    bad = np.flatnonzero(~ok)
    if bad.size:
        i = int(bad[0])
        if not indexed:
            raise BankError(f"{name} is {float(values[i])!r}: {rule}")
        more = f" (and {bad.size - 1} more)" if bad.size > 1 else ""
        raise BankError(f"{name}[{i}] is {float(values[i])!r}{more}: {rule}")


def _factors(v, n: int) -> FactorModel | None:
    """The bank file's optional ``factors`` block, checked."""
    if v is None:
        return None
    try:
        return FactorModel.from_dict(v, n)
    except ValueError as e:
        raise BankError(f"malformed item bank: {e}") from None


_MODEL_ERROR_SDS = ("ability_sd", "full_task_sd", "ability_sd_misfit", "full_task_sd_misfit")


def _model_error(v) -> dict:
    """The bank file's ``model_error`` block, checked (every SD a finite number ≥ 0)."""
    if v is None:
        return {}
    if not isinstance(v, dict):
        raise BankError("malformed item bank: model_error is not an object")
    if "se_factor" in v:
        raise BankError("model_error.se_factor: this bank was written before the "
                        "additive model-error correction; calibrate it again")
    for key in _MODEL_ERROR_SDS:
        x = v.get(key)
        if x is None:
            continue
        if isinstance(x, bool) or not isinstance(x, (int, float)) or not np.isfinite(x) or x < 0:
            raise BankError(f"model_error.{key} is {x!r}: it must be a finite number >= 0")
    return dict(v)


def joint_item_ids(banks: Mapping[str, ItemBank]) -> list[str]:
    """The item ids every bank has, in the first bank's order (the joint items of a several-metric run)."""
    banks = list(banks.values())
    common = set.intersection(*(set(map(str, b.item_ids.tolist())) for b in banks))
    return [str(i) for i in banks[0].item_ids.tolist() if str(i) in common]
