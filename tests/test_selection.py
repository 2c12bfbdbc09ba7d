"""MaxInfoSelector (windowed) against the brute-force definition."""

from __future__ import annotations

import numpy as np
import pytest

from lm_eval_adaptive.engine.irt.bank import ItemBank
from lm_eval_adaptive.engine.cat.examinee import Examinee
from lm_eval_adaptive.engine.irt.response_model import (
    BernoulliResponseModel,
    ContinuousResponseModel,
)
from lm_eval_adaptive.engine.cat.selection import MaxInfoSelector, select_max_information


def _bank(b, model=None):
    b = np.asarray(b, dtype=float)
    return ItemBank(item_ids=np.array([f"i{j}" for j in range(b.size)], dtype=object), b=b,
                    model=model or ContinuousResponseModel(k=0.1), scaling="global", lo=0.0, hi=1.0,
                    input_tokens=100.0, output_tokens=50.0)


def _random_b(rng, n, kind):
    if kind == "normal":
        return rng.normal(0, 1.5, n)
    if kind == "duplicates":  # few distinct values, many exact duplicates
        return rng.choice(np.round(rng.normal(0, 1.0, max(2, n // 8)), 2), n)
    if kind == "integers":  # symmetric ties around integer/half-integer θ
        return rng.integers(-3, 4, n).astype(float)
    raise AssertionError(kind)


def _administered(sel, mask):
    """The sorted-order mask as a bank-order boolean array."""
    return mask[sel.positions(np.arange(sel.n_items))]


@pytest.mark.parametrize("kind", ["normal", "duplicates", "integers"])
@pytest.mark.parametrize("model", [ContinuousResponseModel(k=0.1), BernoulliResponseModel(a=1.7)],
                         ids=["continuous", "bernoulli"])
def test_windowed_selection_equals_brute_force(kind, model):
    rng = np.random.default_rng(abs(hash(kind)) % 1000)
    checked = 0
    for trial in range(40):
        n = int(rng.integers(1, 120))
        b = _random_b(rng, n, kind)
        bank = _bank(b, model)
        sel = MaxInfoSelector(b)
        e = Examinee(bank, sel)
        # mask a random share of the bank, some by exclude (bulk), some by reserve (one at a time)
        share = rng.uniform(0, 0.95)
        masked = rng.choice(n, size=int(share * n), replace=False)
        half = masked.size // 2
        if half:
            e.exclude(masked[:half])
        for i in masked[half:]:
            e.reserve(int(i))
        assert e.n_taken == masked.size
        assert set(np.flatnonzero(e.taken())) == set(masked.tolist())
        # the same mask in the selector's own layout
        mask = sel.new_mask()
        mask[sel.positions(masked.astype(np.int64))] = True
        admin = _administered(sel, mask)
        assert np.array_equal(admin, e.taken())
        assert e.next_item() == sel.select(e.theta, mask, masked.size)
        thetas = [float(rng.normal(0, 2)), float(b.min() - 3), float(b.max() + 4), float(rng.choice(b)),
                  0.0, 0.5]
        for theta in thetas:
            got = sel.select(theta, mask, masked.size)
            want = select_max_information(model, theta, b, admin)
            if want < 0:
                assert got == -1
                continue
            assert not admin[got]
            info = model.information(theta, b)
            # the chosen item has the maximum information among the unadministered ones
            best = np.max(info[~admin])
            assert info[got] >= best * (1 - 1e-12)
            tied = np.flatnonzero(~admin & (np.abs(np.abs(b - theta) - np.abs(b[want] - theta)) < 1e-12))
            if tied.size == 1:
                assert got == want, (theta, b[got], b[want], got, want)
            else:  # equidistant items: equal information up to rounding, so any of them is a maximum
                assert got in tied
            checked += 1
    assert checked > 100


def test_returns_minus_one_when_exhausted():
    b = np.array([0.3, -1.0, 2.0, 0.3])
    bank = _bank(b)
    sel = MaxInfoSelector(b)
    e = Examinee(bank, sel)
    seen = []
    for _ in range(b.size):
        i = e.next_item()
        assert i >= 0 and i not in seen
        e.record(i, 0.5)
        seen.append(i)
    assert sorted(seen) == [0, 1, 2, 3]
    assert e.next_item() == -1 and e.n_taken == 4 and e.taken().all()
    assert sel.select(0.0, np.ones(4, dtype=bool), 4) == -1
    assert select_max_information(bank.model, 0.0, b, np.ones(4, dtype=bool)) == -1
    e2 = Examinee(bank, sel)
    e2.exclude([0, 1, 2, 3])
    assert e2.next_item() == -1


def test_duplicate_difficulties_go_to_lowest_index():
    b = np.array([1.0, 0.0, 0.0, 0.0, 5.0])
    sel = MaxInfoSelector(b)
    mask = sel.new_mask()
    assert sel.select(0.1, mask, 0) == 1
    mask[sel.positions(1)] = True
    assert sel.select(0.1, mask, 1) == 2
    # equidistant on both sides of θ: lowest bank index too
    b = np.array([1.0, 0.0])
    sel = MaxInfoSelector(b)
    assert sel.select(0.5, sel.new_mask(), 0) == 0
    assert select_max_information(ContinuousResponseModel(k=0.1), 0.5, b, np.zeros(2, dtype=bool)) == 0


def test_brute_force_tie_rule_is_lowest_index():
    b = np.array([1.0, 0.0, 0.0, 0.0, 5.0])
    admin = np.zeros(5, dtype=bool)
    m = ContinuousResponseModel(k=0.1)
    assert select_max_information(m, 0.1, b, admin) == 1
    admin[1] = True
    assert select_max_information(m, 0.1, b, admin) == 2


def test_top_k_picks_only_among_k_nearest_and_covers_them():
    rng = np.random.default_rng(3)
    b = rng.normal(0, 1.5, 200)
    theta, k = 0.37, 5
    sel = MaxInfoSelector(b, top_k=k)
    mask = sel.new_mask()
    mask[sel.positions(np.argsort(np.abs(b - theta))[:3])] = True  # the 3 nearest are masked
    n_used = 3
    admin = _administered(sel, mask)
    free = np.flatnonzero(~admin)
    nearest = set(free[np.argsort(np.abs(b[free] - theta))[:k]].tolist())
    cand = sel.candidates(theta, mask, n_used, k)
    assert set(cand.tolist()) == nearest
    # nearest first
    assert np.all(np.diff(np.abs(b[cand] - theta)) >= 0)
    draws = [sel.select(theta, mask, n_used, np.random.default_rng(s)) for s in range(300)]
    assert set(draws) == nearest
    counts = np.bincount(draws, minlength=b.size)[sorted(nearest)]
    assert counts.min() > 30  # roughly uniform (60 expected each)
    # seeded rng: reproducible
    r1 = [sel.select(theta, mask, n_used, np.random.default_rng(9)) for _ in range(3)]
    assert len(set(r1)) == 1


def test_top_k_larger_than_what_is_left():
    b = np.array([0.0, 1.0, 2.0])
    sel = MaxInfoSelector(b, top_k=10)
    mask = sel.new_mask()
    mask[sel.positions(1)] = True
    draws = {sel.select(0.0, mask, 1, np.random.default_rng(s)) for s in range(50)}
    assert draws == {0, 2}


def test_selector_validation():
    with pytest.raises(ValueError):
        MaxInfoSelector(np.array([]))
    with pytest.raises(ValueError):
        MaxInfoSelector(np.array([0.0, 1.0]), top_k=0)
