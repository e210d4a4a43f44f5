"""Rate constraints: builders, smallest partition, tensor functions (specs/raco_dp.md §1.4-2.7)."""

import pickle

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from numpy.testing import assert_allclose, assert_array_equal

from skdp.fairness._builders import (
    DemographicParity,
    EqualizedOdds,
    EqualOpportunity,
    FalseNegativeRate,
    FalsePositiveRate,
    PositiveRateBound,
)
from skdp.fairness._compiled import CompiledConstraints, make_constraints
from skdp.fairness._rate_constraint import RateConstraint
from skdp.fairness._rates import (
    TorchConstraints,
    cell_histogram,
    cell_weights,
    constraint_values,
    evaluate_constraints,
    evaluate_hard_constraints,
    local_set_sizes,
)
from skdp.fairness._subsets import Subset


def _local_set_atoms(compiled, m):
    return set(zip(*np.nonzero(compiled.local_sets[m])))


def _check_partition(compiled):
    """Remark 1: cells are the atoms of the sigma-algebra of the local sets."""
    K, G = compiled.n_classes, compiled.n_groups
    masks = compiled.local_sets.reshape(compiled.n_local_sets, K * G)
    cells = compiled.atom_cell.reshape(-1)
    used = masks.any(0)
    assert_array_equal(cells >= 0, used)  # unused atoms dropped, used ones kept
    for q in range(compiled.n_cells):
        members = np.flatnonzero(cells == q)
        assert members.size > 0
        # same membership inside a cell, and S records it
        assert (masks[:, members] == masks[:, members[:1]]).all()
        assert_array_equal(compiled.membership[:, q], masks[:, members[0]])
    # distinct cells differ: Q is minimal
    signatures = {tuple(compiled.membership[:, q]) for q in range(compiled.n_cells)}
    assert len(signatures) == compiled.n_cells
    assert compiled.n_cells == len({tuple(masks[:, a]) for a in np.flatnonzero(used)})
    # every local set is the union of its cells
    for m in range(compiled.n_local_sets):
        union = np.isin(cells, np.flatnonzero(compiled.membership[m]))
        assert_array_equal(union, masks[m])


# --------------------------------------------------------------------- builders
def test_demographic_parity_binary_two_groups():
    c = make_constraints(DemographicParity(0.1), None, n_classes=2, n_groups=2)
    assert (c.n_constraints, c.n_local_sets, c.n_cells) == (4, 2, 2)
    assert_array_equal(c.atom_cell, [[0, 1], [0, 1]])
    assert_array_equal(c.membership, np.eye(2))
    assert c.local_set_names == ("Z=0", "Z!=0")
    assert c.names == (
        "DP[group=0, class=0]", "DP[group=0, class=1]",
        "DP[group=1, class=0]", "DP[group=1, class=1]",
    )
    # set 0 = {Z=0}, set 1 = {Z!=0} = {Z=1}
    expected = np.zeros((4, 2, 2))
    expected[0] = [[1, 0], [-1, 0]]
    expected[1] = [[0, 1], [0, -1]]
    expected[2] = [[-1, 0], [1, 0]]
    expected[3] = [[0, -1], [0, 1]]
    assert_array_equal(c.coefficients, expected)
    assert_array_equal(c.tolerance, [0.1] * 4)
    _check_partition(c)


def test_demographic_parity_three_groups_three_classes():
    c = make_constraints("demographic_parity", 0.2, n_classes=3, n_groups=3)
    assert (c.n_constraints, c.n_local_sets, c.n_cells) == (9, 6, 3)
    assert_array_equal(c.atom_cell, np.tile(np.arange(3), (3, 1)))  # cell = group
    # local sets alternate {Z=z}, {Z!=z}
    assert c.local_set_names == ("Z=0", "Z!=0", "Z=1", "Z!=1", "Z=2", "Z!=2")
    for z in range(3):
        assert_array_equal(c.membership[2 * z], np.eye(3)[z])
        assert_array_equal(c.membership[2 * z + 1], 1 - np.eye(3)[z])
        for k in range(3):
            j = 3 * z + k
            assert c.names[j] == f"DP[group={z}, class={k}]"
            expected = np.zeros((6, 3))
            expected[2 * z, k], expected[2 * z + 1, k] = 1, -1
            assert_array_equal(c.coefficients[j], expected)
    _check_partition(c)


def test_demographic_parity_nine_groups_gives_eighteen_constraints():
    c = make_constraints("demographic_parity", 0.05, n_classes=2, n_groups=9)
    assert (c.n_constraints, c.n_cells) == (18, 9)


def test_demographic_parity_pairwise():
    c = make_constraints(DemographicParity(0.1, variant="pairwise"), None, 2, 3)
    assert (c.n_constraints, c.n_local_sets, c.n_cells) == (12, 3, 3)
    assert c.names[0] == "DP[group=0 vs 1, class=0]"
    _check_partition(c)


def test_single_group_gives_no_group_constraint():
    for builder in ("demographic_parity", "equalized_odds", "equal_opportunity"):
        c = make_constraints(builder, 0.1, n_classes=2, n_groups=1)
        assert (c.n_constraints, c.n_local_sets, c.n_cells) == (0, 0, 0)
        assert_array_equal(c.atom_cell, [[-1], [-1]])
        t = c.to_torch(dtype=torch.float64)
        hist = torch.zeros((0, 2), dtype=torch.float64)
        assert constraint_values(hist, t).shape == (0,)
        assert cell_weights(hist, torch.zeros(0, dtype=torch.float64), t).shape == (0, 2)
        assert evaluate_hard_constraints(c, [0, 1], [1, 1], [0, 0]).shape == (0,)
    assert make_constraints("false_negative_rate", 0.1, 2, 1).n_constraints == 1


def test_equalized_odds_binary_two_groups():
    c = make_constraints(EqualizedOdds(0.1), None, n_classes=2, n_groups=2)
    assert (c.n_constraints, c.n_local_sets, c.n_cells) == (8, 4, 4)
    assert_array_equal(c.atom_cell, [[0, 1], [2, 3]])
    assert c.local_set_names == ("Y=0, Z=0", "Y=0, Z!=0", "Y=1, Z=0", "Y=1, Z!=0")
    assert_array_equal(c.membership, np.eye(4))
    assert c.names[5] == "EO[group=1, label=0, class=1]"
    # EO[group=1, label=0, class=1] = P_1(Y=0, Z=1) - P_1(Y=0, Z!=1); {Y=0,Z=1} is set 1
    expected = np.zeros((4, 2))
    expected[1, 1], expected[0, 1] = 1, -1
    assert_array_equal(c.coefficients[5], expected)
    _check_partition(c)


def test_equalized_odds_three_classes_three_groups():
    c = make_constraints("equalized_odds", 0.1, n_classes=3, n_groups=3)
    assert (c.n_constraints, c.n_local_sets, c.n_cells) == (27, 18, 9)
    assert_array_equal(c.atom_cell, np.arange(9).reshape(3, 3))  # cell = y * G + z
    assert (np.abs(c.coefficients).sum(axis=(1, 2)) == 2).all()
    assert (c.coefficients.sum(axis=(1, 2)) == 0).all()
    _check_partition(c)
    pairwise = make_constraints(EqualizedOdds(0.1, variant="pairwise"), None, 3, 3)
    assert (pairwise.n_constraints, pairwise.n_cells) == (54, 9)


def test_equal_opportunity():
    c = make_constraints(EqualOpportunity(0.05), None, n_classes=2, n_groups=2)
    assert (c.n_constraints, c.n_local_sets, c.n_cells) == (2, 2, 2)
    assert_array_equal(c.atom_cell, [[-1, -1], [0, 1]])  # only positives
    assert_array_equal(c.coefficients[0], [[0, 1], [0, -1]])
    assert_array_equal(c.coefficients[1], [[0, -1], [0, 1]])  # the other direction
    c3 = make_constraints(EqualOpportunity(0.05), None, n_classes=3, n_groups=3)
    assert (c3.n_constraints, c3.n_local_sets, c3.n_cells) == (6, 6, 3)
    assert_array_equal(c3.atom_cell, [[-1] * 3, [0, 1, 2], [-1] * 3])
    assert c3.names[3] == "EqOpp[rest vs group=0, class=1]"
    assert_array_equal(c3.coefficients[3], -c3.coefficients[0])
    _check_partition(c3)
    # binary EqOpp is EO restricted to Y = 1 (up to duplicates)
    y_pred = np.random.default_rng(0).integers(0, 2, 200)
    y_true = np.random.default_rng(1).integers(0, 2, 200)
    groups = np.random.default_rng(2).integers(0, 2, 200)
    eo = make_constraints("equalized_odds", 0.1, 2, 2)
    eo_pos = [j for j, name in enumerate(eo.names) if "label=1" in name]
    assert set(np.round(evaluate_hard_constraints(c, y_true, y_pred, groups), 12)) == set(
        np.round(evaluate_hard_constraints(eo, y_true, y_pred, groups)[eo_pos], 12)
    )


def test_false_negative_rate_binary_drops_negatives():
    c = make_constraints(FalseNegativeRate(0.2), None, n_classes=2, n_groups=2)
    assert (c.n_constraints, c.n_local_sets, c.n_cells) == (1, 1, 1)
    assert_array_equal(c.atom_cell, [[-1, -1], [0, 0]])
    assert_array_equal(c.membership, [[1.0]])
    assert_array_equal(c.coefficients, [[[1.0, 0.0]]])  # P_0(D[Y=1]) = FNR
    assert c.names == ("FNR[class=1]",)
    # the paper's k = 0 constraint P_k(D[Y != k]) compiles to the same arrays
    paper = make_constraints(RateConstraint([(Subset(exclude_labels=0), 0, 1.0)], 0.2), None, 2, 2)
    for attr in ("atom_cell", "membership", "coefficients", "tolerance"):
        assert_array_equal(getattr(paper, attr), getattr(c, attr))
    both = make_constraints(FalseNegativeRate(0.2, classes=[0, 1]), None, 2, 2)
    assert (both.n_constraints, both.n_cells) == (2, 2)
    assert_array_equal(both.atom_cell, [[0, 0], [1, 1]])


def test_false_negative_rate_multiclass_and_per_group():
    c = make_constraints(FalseNegativeRate(0.3), None, n_classes=3, n_groups=2)
    assert (c.n_constraints, c.n_cells) == (3, 3)  # every class by default
    assert_array_equal(c.coefficients[1], [[0, 0, 0], [1, 0, 1], [0, 0, 0]])
    per_group = make_constraints(FalseNegativeRate([0.1, 0.2], groups="all"), None, 2, 2)
    assert per_group.names == ("FNR[group=0, class=1]", "FNR[group=1, class=1]")
    assert_array_equal(per_group.atom_cell, [[-1, -1], [0, 1]])
    assert_array_equal(per_group.tolerance, [0.1, 0.2])


def test_false_positive_rate():
    c = make_constraints(FalsePositiveRate(0.1), None, n_classes=2, n_groups=3)
    assert (c.n_constraints, c.n_cells) == (1, 1)
    assert_array_equal(c.atom_cell, [[0, 0, 0], [-1, -1, -1]])
    assert_array_equal(c.coefficients, [[[0.0, 1.0]]])
    multi = make_constraints(FalsePositiveRate(0.1, pos_label=2), None, 3, 1)
    assert_array_equal(multi.atom_cell, [[0], [0], [-1]])
    assert_array_equal(multi.coefficients, [[[0, 0, 1.0]]])


def test_positive_rate_bound():
    c = make_constraints(PositiveRateBound(lower=0.3, upper=0.8), None, 2, 2)
    assert (c.n_constraints, c.n_cells) == (2, 1)
    assert_array_equal(c.atom_cell, [[0, 0], [0, 0]])
    assert_array_equal(c.coefficients[:, 0], [[0, 1], [0, -1]])
    assert_array_equal(c.tolerance, [0.8, -0.3])
    hist = torch.tensor([[6.0, 4.0]], dtype=torch.float64)
    assert_allclose(constraint_values(hist, c).numpy() - c.tolerance, [0.4 - 0.8, -0.4 + 0.3])
    per_group = make_constraints(PositiveRateBound(upper=0.5, groups=[1]), None, 2, 3)
    assert per_group.names == ("PositiveRate[group=1, class=1] <= 0.5",)
    assert_array_equal(per_group.atom_cell, [[-1, 0, -1], [-1, 0, -1]])


def test_make_constraints_mixed_list_and_tolerance_split():
    tol = [0.1, 0.2, 0.3, 0.4, 0.5]
    c = make_constraints(
        ["demographic_parity", PositiveRateBound(upper=0.9), "false_negative_rate"], tol, 2, 2
    )
    assert c.n_constraints == 6
    assert_array_equal(c.tolerance, [0.1, 0.2, 0.3, 0.4, 0.9, 0.5])
    assert c.names[-1] == "FNR[class=1]"
    _check_partition(c)
    assert make_constraints(c, None, 2, 2) is c
    assert make_constraints(None, 0.1, 2, 2).n_constraints == 0


def test_builders_repr_equality_and_names():
    assert repr(EqualOpportunity(0.05)) == "EqualOpportunity(tolerance=0.05, pos_label=1)"
    assert DemographicParity([0.1, 0.2]) == DemographicParity((0.1, 0.2))
    assert Subset(groups=[1, 1]) == Subset(groups=1)
    assert repr(Subset()) == "Subset()"
    c = make_constraints("demographic_parity", 0.1, 2, 2, class_names=["no", "yes"],
                         group_names=["f", "m"])
    assert c.names[1] == "DP[group=f, class=yes]"
    rc = RateConstraint([(Subset(groups=0), 1, 2.0), (Subset(exclude_groups=0), 1, -0.5)], 0.1)
    assert rc.label() == "2*P_1(Z=0) - 0.5*P_1(Z!=0)"


# ------------------------------------------------------------- Remark 1 (property)
@settings(max_examples=80, deadline=None)
@given(
    n_classes=st.integers(2, 4),
    n_groups=st.integers(1, 4),
    data=st.data(),
)
def test_smallest_partition_property(n_classes, n_groups, data):
    n_atoms = n_classes * n_groups
    n_sets = data.draw(st.integers(1, 6))
    masks = [
        data.draw(
            st.lists(st.booleans(), min_size=n_atoms, max_size=n_atoms).filter(any)
        )
        for _ in range(n_sets)
    ]
    terms = [
        (np.reshape(mask, (n_classes, n_groups)), data.draw(st.integers(0, n_classes - 1)),
         data.draw(st.sampled_from([-1.0, 0.5, 1.0])))
        for mask in masks
    ]
    split = data.draw(st.integers(1, len(terms)))
    # large tolerance so feasibility never fails
    rcs = [RateConstraint(terms[:split], 10.0)] + (
        [RateConstraint(terms[split:], 10.0)] if split < len(terms) else []
    )
    c = make_constraints(rcs, None, n_classes, n_groups)
    assert c.n_local_sets == len({np.asarray(m).tobytes() for m in masks})
    _check_partition(c)


def test_overlapping_local_sets_generate_atoms():
    # {Y=1} and {Z=0} overlap: atoms {Y=1,Z=0}, {Y=1,Z!=0}, {Y=0,Z=0}; {Y=0,Z!=0} unused
    rc = RateConstraint([(Subset(labels=1), 1, 1.0), (Subset(groups=0), 1, -1.0)], 0.1)
    c = make_constraints(rc, None, 2, 3)
    assert c.n_cells == 3
    assert_array_equal(c.atom_cell, [[0, -1, -1], [1, 2, 2]])
    _check_partition(c)


# ------------------------------------------------------------------- histogram
simplex_row = st.lists(st.floats(0, 1), min_size=3, max_size=3).map(
    lambda v: np.asarray(v) / sum(v) if sum(v) > 0 else np.array([1.0, 0.0, 0.0])
)


@settings(max_examples=80, deadline=None)
@given(
    rows=st.lists(simplex_row, min_size=0, max_size=12),
    cells=st.lists(st.integers(-1, 3), min_size=12, max_size=12),
    extra_row=simplex_row,
    extra_cell=st.integers(-1, 3),
    hard=st.booleans(),
)
def test_histogram_l1_sensitivity(rows, cells, extra_row, extra_cell, hard):
    """Adding (or removing) one record moves the histogram by at most 1 in l1."""
    probs = np.array(rows + [extra_row]).reshape(-1, 3)
    if hard:
        probs = np.eye(3)[probs.argmax(1)]
    cells = np.array(cells[: len(rows)] + [extra_cell])
    probs_t = torch.tensor(probs, dtype=torch.float64)
    cells_t = torch.tensor(cells)
    with_one = cell_histogram(probs_t, cells_t, 4)
    without = cell_histogram(probs_t[:-1], cells_t[:-1], 4)
    assert with_one.shape == (4, 3)
    assert float((with_one - without).abs().sum()) <= 1.0 + 1e-9


def test_cell_histogram_ignores_unused_and_is_differentiable():
    probs = torch.tensor([[0.3, 0.7], [0.6, 0.4], [0.5, 0.5]], requires_grad=True)
    hist = cell_histogram(probs, torch.tensor([1, -1, 1], dtype=torch.int32), 2)
    assert_allclose(hist.detach().numpy(), [[0, 0], [0.8, 1.2]], atol=1e-7)
    hist[1, 1].backward()
    assert_allclose(probs.grad.numpy(), [[0, 1], [0, 0], [0, 1]])


# ----------------------------------------------------------- constraint values
def _random_data(rng, n, n_classes, n_groups):
    return (rng.integers(0, n_classes, n), rng.integers(0, n_classes, n),
            rng.integers(0, n_groups, n))


@pytest.mark.parametrize("constraint, K, G", [
    ("demographic_parity", 2, 2), ("demographic_parity", 3, 4), ("equalized_odds", 3, 3),
    ("equal_opportunity", 2, 3), ("false_negative_rate", 3, 2), ("false_positive_rate", 2, 2),
])
def test_one_hot_histogram_gives_hard_rates(constraint, K, G):
    rng = np.random.default_rng(0)
    y, pred, z = _random_data(rng, 500, K, G)
    c = make_constraints(constraint, 0.1, K, G)
    cells = torch.as_tensor(c.assign_cells(y, z))
    onehot = torch.nn.functional.one_hot(torch.as_tensor(pred), K).double()
    hist = cell_histogram(onehot, cells, c.n_cells)
    from_hist = constraint_values(hist, c.to_torch(dtype=torch.float64)).numpy()
    assert_allclose(from_hist, evaluate_hard_constraints(c, y, pred, z), atol=1e-12)
    # soft evaluation of one-hot rows is the hard one
    assert_allclose(evaluate_constraints(c, y, onehot.numpy(), z), from_hist, atol=1e-12)


def test_demographic_parity_gap_matches_direct_rates():
    rng = np.random.default_rng(1)
    y, pred, z = _random_data(rng, 400, 2, 2)
    c = make_constraints("demographic_parity", 0.1, 2, 2)
    values = evaluate_hard_constraints(c, y, pred, z)
    gap = pred[z == 0].mean() - pred[z == 1].mean()  # P(Yhat=1|Z=0) - P(Yhat=1|Z=1)
    assert_allclose(values, [-gap, gap, gap, -gap], atol=1e-12)
    eo = make_constraints("equalized_odds", 0.1, 2, 2)
    j = eo.names.index("EO[group=0, label=1, class=1]")
    tpr_gap = pred[(z == 0) & (y == 1)].mean() - pred[(z == 1) & (y == 1)].mean()
    assert_allclose(evaluate_hard_constraints(eo, y, pred, z)[j], tpr_gap, atol=1e-12)
    fnr = make_constraints("false_negative_rate", 0.1, 2, 2)
    assert_allclose(evaluate_hard_constraints(fnr, y, pred, z), [np.mean(pred[y == 1] == 0)])


def test_noisy_histogram_clamps_denominators():
    c = make_constraints("demographic_parity", 0.1, 2, 2).to_torch(dtype=torch.float64)
    hist = torch.tensor([[2.0, 1.0], [-0.7, 0.2]], dtype=torch.float64)
    assert_allclose(local_set_sizes(hist, c).numpy(), [3.0, 1.0])
    values = constraint_values(hist, c)
    assert torch.isfinite(values).all()
    assert_allclose(values[1].item(), 1 / 3 - 0.2)
    clipped = constraint_values(hist, c, clip_rates=True)
    assert_allclose(clipped[0].item(), 2 / 3 - 0.0)
    with pytest.raises(ValueError, match="min_denominator"):
        constraint_values(hist, c, min_denominator=0.0)


def test_evaluate_zero_division():
    c = make_constraints("equalized_odds", 0.1, 2, 2)
    y, pred, z = [0, 0, 1], [0, 1, 1], [0, 1, 0]  # no record with Y=1, Z=1
    values = evaluate_hard_constraints(c, y, pred, z, zero_division=np.nan)
    label0 = [j for j, name in enumerate(c.names) if "label=0" in name]
    assert np.isfinite(values[label0]).all()
    assert np.isnan(np.delete(values, label0)).all()
    assert np.isfinite(evaluate_hard_constraints(c, y, pred, z)).all()


# -------------------------------------------------------------- cell weights
@pytest.mark.parametrize("constraint, K, G", [
    ("demographic_parity", 2, 3), ("equalized_odds", 3, 2), ("false_negative_rate", 3, 2),
    ("equal_opportunity", 2, 4),
])
def test_gradient_identity(constraint, K, G):
    """d/dtheta sum_j lambda_j Gamma_j(H(theta)), n fixed, = the W-weighted per-sample sum."""
    gen = torch.Generator().manual_seed(0)
    n, d, tau = 64, 5, 2.0
    X = torch.randn(n, d, generator=gen, dtype=torch.float64)
    y = torch.randint(0, K, (n,), generator=gen)
    z = torch.randint(0, G, (n,), generator=gen)
    c = make_constraints(constraint, 0.05, K, G)
    t = c.to_torch(dtype=torch.float64)
    cells = t.atom_cell[y, z]
    lambdas = torch.rand(c.n_constraints, generator=gen, dtype=torch.float64)
    theta = torch.randn(d, K, generator=gen, dtype=torch.float64, requires_grad=True)

    probs = torch.softmax(tau * X @ theta, dim=1)
    hist = cell_histogram(probs, cells, c.n_cells)
    noisy = hist.detach() + torch.randn(hist.shape, generator=gen, dtype=torch.float64)
    sizes = local_set_sizes(noisy, t)  # detached, from a "noisy" histogram
    lagrangian = lambdas @ constraint_values(hist, t, denominators=sizes)
    (grad_autograd,) = torch.autograd.grad(lagrangian, theta)

    weights = cell_weights(noisy, lambdas, t)
    assert_allclose(weights, cell_weights(hist.detach(), lambdas, t, denominators=sizes))
    per_sample_w = torch.cat([weights, torch.zeros(1, K, dtype=torch.float64)])[
        cells.masked_fill(cells < 0, c.n_cells)
    ]
    probs = torch.softmax(tau * X @ theta, dim=1)
    (grad_weights,) = torch.autograd.grad((per_sample_w * probs).sum(), theta)
    assert_allclose(grad_weights.numpy(), grad_autograd.numpy(), rtol=1e-10, atol=1e-12)


def test_demographic_parity_weights_closed_form():
    """W[z_i, k] = sum_z lambda_{z,k} (1[z_i=z]/n_z - 1[z_i!=z]/n_{!=z}) (spec §2.4)."""
    G, K = 3, 2
    c = make_constraints("demographic_parity", 0.1, K, G)
    t = c.to_torch(dtype=torch.float64)
    hist = torch.tensor([[3.0, 1.0], [2.0, 2.0], [0.5, 1.5]], dtype=torch.float64)
    lam = torch.arange(1, 7, dtype=torch.float64).reshape(G, K)  # lambda[z, k], group-major
    counts = hist.sum(1)
    expected = torch.zeros(G, K, dtype=torch.float64)
    for zi in range(G):
        for z in range(G):
            denom = counts[z] if zi == z else counts.sum() - counts[z]
            expected[zi] += lam[z] * (1 if zi == z else -1) / denom
    assert_allclose(cell_weights(hist, lam.reshape(-1), t).numpy(), expected.numpy())


# ---------------------------------------------------------------- plumbing
def test_compiled_is_frozen_pickles_and_converts():
    c = make_constraints("equalized_odds", 0.1, 2, 3)
    with pytest.raises(ValueError):
        c.coefficients[0, 0, 0] = 5.0  # read-only
    with pytest.raises(AttributeError):
        c.tolerance = None
    again = pickle.loads(pickle.dumps(c))
    assert isinstance(again, CompiledConstraints) and again.names == c.names
    assert_array_equal(again.atom_cell, c.atom_cell)
    t = c.to_torch(dtype=torch.float32)
    assert isinstance(t, TorchConstraints)
    assert t.membership.dtype == torch.float32 and t.atom_cell.dtype == torch.long
    assert (t.n_cells, t.n_constraints) == (c.n_cells, c.n_constraints)
    hist = torch.ones(c.n_cells, 2, dtype=torch.float64)
    # a CompiledConstraints is converted to the histogram's dtype on the fly
    assert constraint_values(hist, c).dtype == torch.float64
    assert_array_equal(c.assign_cells([0, 1], [2, 0]), [c.atom_cell[0, 2], c.atom_cell[1, 0]])


# ----------------------------------------------------------------- validation
def test_unknown_constraint_name_lists_valid_names():
    with pytest.raises(ValueError, match="demographic_parity.*equal_opportunity|valid names"):
        make_constraints("demographic_partiy", 0.1, 2, 2)
    with pytest.raises(ValueError, match="constraint must be"):
        make_constraints(42, 0.1, 2, 2)


@pytest.mark.parametrize("builder", [
    DemographicParity, EqualizedOdds, EqualOpportunity, FalseNegativeRate, FalsePositiveRate,
])
def test_negative_tolerance_rejected(builder):
    with pytest.raises(ValueError, match=r"tolerance.*>= 0.*PositiveRateBound"):
        builder(-0.1)
    with pytest.raises(ValueError, match="tolerance.*finite"):
        builder(float("nan"))


def test_negative_tolerance_via_string_and_rate_constraint():
    with pytest.raises(ValueError, match="tolerance"):
        make_constraints("demographic_parity", -0.01, 2, 2)
    with pytest.raises(ValueError, match="tolerance is required"):
        make_constraints("demographic_parity", None, 2, 2)
    # a negative right-hand side is fine for a lower bound ...
    lower = RateConstraint([(Subset(), 1, -1.0)], -0.3)
    assert make_constraints(lower, None, 2, 2).tolerance.tolist() == [-0.3]
    # ... but not for a constraint whose left-hand side is never negative
    with pytest.raises(ValueError, match="can never be satisfied"):
        make_constraints(RateConstraint([(Subset(), 1, 1.0)], -0.1), None, 2, 2)
    with pytest.raises(ValueError, match="can never be satisfied"):  # gap >= -1
        make_constraints(RateConstraint(
            [(Subset(groups=0), 1, 1.0), (Subset(groups=1), 1, -1.0)], -1.5), None, 2, 2)
    with pytest.raises(ValueError, match="lower must not exceed upper"):
        PositiveRateBound(lower=0.6, upper=0.5)
    with pytest.raises(ValueError, match=r"upper.*\[0, 1\]"):
        PositiveRateBound(upper=1.5)
    with pytest.raises(ValueError, match="lower=..., upper=..."):
        PositiveRateBound()


def test_wrong_length_tolerance_names_j():
    with pytest.raises(ValueError, match="J=4"):
        make_constraints("demographic_parity", [0.1, 0.2, 0.3], 2, 2)
    with pytest.raises(ValueError, match="J=8"):
        make_constraints(EqualizedOdds([0.1] * 3), None, 2, 2)
    with pytest.raises(ValueError, match="string constraints only"):
        make_constraints(DemographicParity(0.1), [0.1, 0.2], 2, 2)


def test_local_set_validation():
    with pytest.raises(ValueError, match="empty"):
        make_constraints(RateConstraint([(Subset(groups=0, exclude_groups=0), 1, 1.0)]), None, 2, 2)
    with pytest.raises(ValueError, match="selects nothing"):
        Subset(labels=[])
    with pytest.raises(ValueError, match="group index 3.*n_groups=2"):
        make_constraints(RateConstraint([(Subset(groups=3), 1, 1.0)], 0.1), None, 2, 2)
    with pytest.raises(ValueError, match="class index 2.*n_classes=2"):
        make_constraints(RateConstraint([(Subset(labels=2), 1, 1.0)], 0.1), None, 2, 2)
    with pytest.raises(ValueError, match="predicted class index 5"):
        make_constraints(RateConstraint([(Subset(), 5, 1.0)], 0.1), None, 2, 2)
    with pytest.raises(ValueError, match="group index 4"):
        make_constraints(FalseNegativeRate(0.1, groups=[4]), None, 2, 2)
    with pytest.raises(ValueError, match="pos_label.*class index 2"):
        make_constraints(EqualOpportunity(0.1, pos_label=2), None, 2, 2)
    with pytest.raises(ValueError, match="finite"):
        RateConstraint([(Subset(), 1, float("inf"))])
    with pytest.raises(ValueError, match="non-negative integer code"):
        Subset(groups=-1)
    with pytest.raises(ValueError, match="at least one"):
        RateConstraint([])
    with pytest.raises(ValueError, match="shape"):
        make_constraints(RateConstraint([(np.ones((3, 2), bool), 1, 1.0)]), None, 2, 2)
    with pytest.raises(ValueError, match="variant"):
        EqualizedOdds(0.1, variant="max_vs_min")
    with pytest.raises(ValueError, match="n_classes"):
        make_constraints("demographic_parity", 0.1, 1, 2)


def test_tensor_function_shape_errors():
    t = make_constraints("demographic_parity", 0.1, 2, 2).to_torch()
    with pytest.raises(ValueError, match="histogram must have shape"):
        constraint_values(torch.ones(3, 2), t)
    with pytest.raises(ValueError, match="lambdas"):
        cell_weights(torch.ones(2, 2), torch.ones(3), t)
    with pytest.raises(ValueError, match="cells"):
        cell_histogram(torch.ones(3, 2), torch.zeros(2, dtype=torch.long), 2)
    with pytest.raises(ValueError, match="groups must hold integer codes"):
        evaluate_hard_constraints(make_constraints("demographic_parity", 0.1, 2, 2),
                                  [0, 1], [0, 1], [0, 5])


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_tensor_functions_on_cuda():
    c = make_constraints("equalized_odds", 0.1, 2, 3)
    t = c.to_torch(device="cuda", dtype=torch.float32)
    probs = torch.softmax(torch.randn(50, 2, device="cuda"), 1)
    cells = t.atom_cell[torch.randint(0, 2, (50,), device="cuda"),
                        torch.randint(0, 3, (50,), device="cuda")]
    hist = cell_histogram(probs, cells, c.n_cells)
    values = constraint_values(hist, t)
    weights = cell_weights(hist, torch.ones(c.n_constraints, device="cuda"), t)
    assert values.device.type == weights.device.type == "cuda"
    assert_allclose(values.cpu().numpy(),
                    constraint_values(hist.cpu().double(), c).numpy(), atol=1e-5)
