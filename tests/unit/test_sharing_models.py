"""Sharing models: the paper's worked numbers, hand-worked graphs (docs/models.md), bounds."""

from __future__ import annotations

import pytest

from hpcvar.errors import UsageError
from hpcvar.models.sharing import ModelLimitError, conflict_components, explain, maxmin_shares, penalties, stopgo_states

FIG5 = [("0", "2"), ("0", "1"), ("0", "3"), ("1", "2"), ("3", "2"), ("1", "0")]  # a..f, examples/schemes/fig5


def star_out(k):
    return [("0", str(i)) for i in range(1, k + 1)]


def star_in(k):
    return [(str(i), "0") for i in range(1, k + 1)]


# ---- myrinet

def test_myrinet_figure6_penalties():
    rows = explain(FIG5, "myrinet")
    assert [r["states"] for r in rows] == [5] * 6
    assert [r["coefficient"] for r in rows] == [1, 2, 2, 2, 2, 3]
    assert [r["min_coefficient"] for r in rows] == [1, 1, 1, 2, 2, 2]
    assert penalties(FIG5, "myrinet") == [5, 5, 5, 2.5, 2.5, 2.5]


def test_myrinet_states_are_the_documented_ones():
    # states {a,f} {b,d} {b,e,f} {c,d} {c,e,f}: coefficient of f = 3 (in three of them)
    n, coef = stopgo_states(FIG5, list(range(6)), 100)
    assert (n, coef) == (5, [1, 2, 2, 2, 2, 3])


@pytest.mark.parametrize("pairs,expected", [
    ([("0", "1"), ("1", "2")], [1, 1]),                           # full duplex: A->B and B->C do not conflict
    ([("0", "1"), ("2", "1")], [2, 2]),                           # incoming pair: states {a} {b}
    ([("0", "1"), ("0", "2"), ("3", "1"), ("3", "2")], [2] * 4),  # square: states {a,d} {b,c}
    ([("0", "1"), ("0", "2"), ("3", "2")], [2, 2, 2]),            # path a-b-c: states {a,c} {b}
    (star_out(4), [4] * 4),
    ([("0", "1"), ("1", "0")], [1, 1]),                           # both directions of one link
])
def test_myrinet_hand_worked(pairs, expected):
    assert penalties(pairs, "myrinet") == expected


def test_myrinet_components_are_independent():
    pairs = FIG5 + [(f"x{i}", f"y{j}") for i, j in ((0, 0), (0, 1))]
    assert conflict_components(pairs) == [[0, 1, 2, 3, 4, 5], [6, 7]]
    assert penalties(pairs, "myrinet") == [5, 5, 5, 2.5, 2.5, 2.5, 2, 2]


def test_myrinet_too_many_states_is_refused_not_hung():
    # a perfect matching structure: 2 x k grid of sources/destinations has k! states
    pairs = [(f"s{i}", f"d{j}") for i in range(9) for j in range(9)]
    with pytest.raises(ModelLimitError) as e:
        penalties(pairs, "myrinet", {"max_states": 1000})
    assert "sample" in e.value.todo
    got = penalties(pairs, "myrinet", {"method": "sample", "samples": 20000, "seed": 3})
    assert all(8.5 < p < 10.0 for p in got)  # by symmetry every communication sends in 1/9 of the states


def test_myrinet_sample_that_never_draws_a_communication_is_an_error_not_an_infinite_penalty():
    """8 senders into one node: each state has one of them send; 3 samples cannot draw all 8. The penalty of one
    never drawn is unknown (1 / 0), and was printed as inf; it is an error naming --samples."""
    pairs = [(f"s{i}", "d") for i in range(8)]
    with pytest.raises(ModelLimitError, match=r"drew no state in which one of the 8 communications of a conflict "
                                              r"component sends \(3 samples\)") as e:
        penalties(pairs, "myrinet", {"method": "sample", "samples": 3})
    assert e.value.where == "--samples" and "exact" in e.value.todo
    assert penalties(pairs, "myrinet", {"method": "sample", "samples": 2000}) == pytest.approx([8] * 8, rel=0.2)


def test_myrinet_sample_exact_on_a_star():
    assert penalties(star_out(3), "myrinet", {"method": "sample", "samples": 3000}) == pytest.approx([3] * 3,
                                                                                                       rel=0.1)


# ---- gige

@pytest.mark.parametrize("k", [2, 3, 4, 6])
def test_gige_pure_conflicts_give_k_beta(k):
    assert penalties(star_out(k), "gige") == pytest.approx([0.75 * k] * k)
    assert penalties(star_in(k), "gige") == pytest.approx([0.75 * k] * k)
    assert penalties(star_out(k), "gige", {"beta": 0.9}) == pytest.approx([0.9 * k] * k)


def test_gige_reproduces_figure2_beta():
    # beta = 1.5 / 2 = 2.25 / 3 = 0.75 (section V-A)
    assert penalties(star_out(2), "gige")[0] / 2 == pytest.approx(0.75)
    assert penalties(star_out(3), "gige")[0] / 3 == pytest.approx(0.75)


def test_gige_hand_worked_strong_sets():
    # a: 0->1, b: 0->2, c: 3->2. C_o^m(0) = {b} (its destination receives twice), C_i^m(2) = {b}
    b, go, gi = 0.75, 0.115, 0.036
    rows = explain([("0", "1"), ("0", "2"), ("3", "2")], "gige")
    assert [r["strong_out"] for r in rows] == [False, True, True]
    assert [r["strong_in"] for r in rows] == [True, True, False]
    assert rows[0]["penalty"] == pytest.approx(2 * b * (1 - go / 1))
    assert rows[1]["penalty"] == pytest.approx(max(2 * b * (1 + go * (2 - 1)), 2 * b * (1 + gi * (2 - 1))))
    assert rows[2]["penalty"] == pytest.approx(2 * b * (1 - gi / 1))


def test_gige_figure4_gamma_formulas_invert():
    # the paper's gamma_o = 1 - t_a / (3 beta t_ref): a leaves a node of out-degree 3 and is not strongly slowed
    pairs = [("0", "1"), ("0", "2"), ("0", "5"), ("6", "5"), ("6", "3"), ("4", "3"), ("7", "3")]
    params = {"beta": 0.8, "gamma_out": 0.1, "gamma_in": 0.05}
    p = penalties(pairs, "gige", params)
    assert 1 - p[0] / (3 * 0.8) == pytest.approx(0.1)
    assert 1 - p[6] / (3 * 0.8) == pytest.approx(0.05)


def test_gige_never_below_one():
    assert min(penalties(star_out(2), "gige", {"beta": 0.3})) == 1.0


# ---- maxmin

@pytest.mark.parametrize("k", [1, 2, 3, 5])
def test_maxmin_star_shares(k):
    assert maxmin_shares(star_out(k)) == pytest.approx([1 / k] * k)
    assert penalties(star_in(k), "maxmin") == pytest.approx([k] * k)


def test_maxmin_bottleneck_frees_capacity():
    # a,b leave 0; c also enters 2 from 3 with 2 receiving b: shares 1/2 each; d alone from 3 -> 4 gets 1/2 left
    shares = maxmin_shares([("0", "1"), ("0", "2"), ("3", "2"), ("3", "4")])
    assert shares == pytest.approx([0.5, 0.5, 0.5, 0.5])
    shares = maxmin_shares([("0", "1"), ("0", "2"), ("0", "3"), ("4", "3"), ("4", "5")])
    assert shares == pytest.approx([1 / 3, 1 / 3, 1 / 3, 1 / 2, 1 / 2])  # d, e share what is left at 4


def test_maxmin_fills_each_conflict_component_alone():
    """A component's shares are the doubles it gets alone, whatever else shares the network at the same time (so
    the replay core may recompute only the components a change touches). One filling of all would not give
    them: 3 -> 0 shares no link with the others, but would grow by each round's increment (1/4, then 1/12, ...)
    to 0.9999999999999999 instead of its whole link."""
    pairs = [("5", "4"), ("6", "2"), ("0", "4"), ("3", "0"), ("4", "7"), ("5", "4"), ("6", "4"), ("6", "7"), ("5", "7")]
    shares = maxmin_shares(pairs)
    assert shares[3] == 1.0
    comps = conflict_components(pairs)
    assert len(comps) == 2
    for comp in comps:
        assert [shares[k] for k in comp] == maxmin_shares([pairs[k] for k in comp])  # exactly
    assert shares == pytest.approx([1 / 4, 5 / 12, 1 / 4, 1, 1 / 3, 1 / 4, 1 / 4, 1 / 3, 1 / 3])


# ---- bad input

@pytest.mark.parametrize("comms,what", [
    ([], "no communication"),
    ([("0", "0")], "to itself"),
    ([("0",)], r"not a \(src, dst\) pair"),
])
def test_bad_communications(comms, what):
    with pytest.raises(UsageError, match=what):
        penalties(comms, "gige")


def test_bad_model_and_params():
    with pytest.raises(UsageError, match="unknown model"):
        penalties([("0", "1")], "token-ring")
    with pytest.raises(UsageError, match="no parameter 'alpha'"):
        penalties([("0", "1")], "gige", {"alpha": 1})
    with pytest.raises(UsageError, match="beta must be positive"):
        penalties([("0", "1")], "gige", {"beta": 0})
