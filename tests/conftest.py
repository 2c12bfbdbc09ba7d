"""Shared fixtures: a simulated item bank, and scores under the continuous model drawn by the engine's
simulation module (lm_eval_adaptive/engine/evaluation/simulation.py: no test draws scores of its own)."""

from __future__ import annotations

import math
import os

# litellm must read its bundled price map, never the network: set before anything imports it.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import numpy as np  # noqa: E402
import pytest  # noqa: E402

from lm_eval_adaptive.engine.irt.bank import ItemBank  # noqa: E402
from lm_eval_adaptive.engine.irt.response_model import ContinuousResponseModel  # noqa: E402
from lm_eval_adaptive.engine.evaluation.simulation import draw_scores  # noqa: E402

SIM_K = 0.1
SIM_N_ITEMS = 500


def make_sim_bank(n_items: int = SIM_N_ITEMS, k: float = SIM_K, seed: int = 0,
                  b_sd: float = 1.5, scaling: str = "global", likelihood: str = "quasi") -> ItemBank:
    """An ItemBank built directly: b ~ N(0, b_sd), range [0, 1], 100 input / 50 output tokens."""
    rng = np.random.default_rng(seed)
    b = rng.normal(0.0, b_sd, n_items)
    return ItemBank(
        item_ids=np.array([f"item{i:04d}" for i in range(n_items)], dtype=object),
        b=b,
        model=ContinuousResponseModel(k=k, likelihood=likelihood),
        scaling=scaling,
        lo=0.0,
        hi=1.0,
        input_tokens=100.0,
        output_tokens=50.0,
        task="sim-task",
        metric="sim-metric",
    )


def simulate_scores(theta, b, k: float = SIM_K, rng: np.random.Generator | None = None) -> np.ndarray:
    """Continuous scores under the model at k: y = clip(Normal(μ, k·μ(1-μ)), 0, 1), μ = logistic(θ - b)
    (:func:`~lm_eval_adaptive.engine.evaluation.simulation.draw_scores`; θ and b broadcast)."""
    rng = rng if rng is not None else np.random.default_rng()
    return draw_scores(ContinuousResponseModel(k=k), theta, b, rng)


@pytest.fixture
def sim_bank() -> ItemBank:
    return make_sim_bank()


@pytest.fixture
def simulate():
    """The score simulator (see :func:`simulate_scores`)."""
    return simulate_scores


@pytest.fixture(scope="module")
def replay_server():
    """The replay endpoint over ../shared/data, with litellm's provider settings pointing at it.

    The harness's `litellm` model reaches it as model ``openai/<SYSTEM>`` through
    ``OPENAI_API_BASE`` / ``OPENAI_API_KEY``; skipped when the real data is absent.
    """
    from lm_eval_adaptive.data.data_root import data_root
    from lm_eval_adaptive.errors import InputError

    try:
        data_root()
    except InputError as e:
        pytest.skip(f"real data not available: {e}")
    from lm_eval_adaptive.replay.server import ReplayServer

    saved = {k: os.environ.get(k) for k in ("OPENAI_API_BASE", "OPENAI_API_KEY")}
    with ReplayServer() as srv:
        os.environ["OPENAI_API_BASE"] = srv.url
        os.environ["OPENAI_API_KEY"] = "replay"
        yield srv
    for k, v in saved.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


class HarnessTaskStub:
    """A stand-in harness task: its documents and metric names (what ``bind_bank`` reads)."""

    def __init__(self, docs, metrics=("bleu", "chrf")):
        self.eval_docs = docs
        self._metrics = metrics

    def aggregation(self):
        return {m: None for m in self._metrics}


#: like WMT24: the field `id` is the line number, one more than the position (line 0 is a canary)
WMT_LIKE = HarnessTaskStub([{"id": str(k + 1), "source": f"text {k}"} for k in range(50)])


def assert_nested_close(expected, got, path: str = "", *, rel: float = 1e-9, abs_: float = 1e-12) -> None:
    """``got`` equals ``expected`` in every dict key, list length and non-number, and to ``rel``
    (relative) or ``abs_`` in every float (NaN equals NaN); ``path`` names where a difference is."""
    if isinstance(expected, dict):
        assert set(expected) == set(got), path
        for k in expected:
            assert_nested_close(expected[k], got[k], f"{path}.{k}", rel=rel, abs_=abs_)
    elif isinstance(expected, list):
        assert len(expected) == len(got), path
        for k, (x, y) in enumerate(zip(expected, got)):
            assert_nested_close(x, y, f"{path}[{k}]", rel=rel, abs_=abs_)
    elif isinstance(expected, float) and isinstance(got, (int, float)) and not isinstance(got, bool):
        if math.isnan(expected):
            assert math.isnan(got), path
        else:
            assert got == pytest.approx(expected, rel=rel, abs=abs_), path
    else:
        assert expected == got, path


def build_banks_module():
    """benchmarks/build_banks.py as a module (the script that builds the shipped banks)."""
    import importlib.util
    import sys
    from pathlib import Path

    spec = importlib.util.spec_from_file_location(
        "build_banks", Path(__file__).resolve().parents[1] / "benchmarks" / "build_banks.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("build_banks", mod)
    spec.loader.exec_module(mod)
    return mod
