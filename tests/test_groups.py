"""Tests of sensitive-feature validation and group encoding (skdp._groups)."""

import pickle

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from skdp._groups import check_sensitive_features, encode_groups, select_columns

pd = pytest.importorskip("pandas")


# ------------------------------------------------------------ check_sensitive_features
@pytest.mark.parametrize(
    "values, expected_shape",
    [
        (["a", "b", "a"], (3, 1)),
        (np.array([1, 2, 3]), (3, 1)),
        (np.array([[1, 0], [2, 1], [3, 0]]), (3, 2)),
        ([[1, "x"], [2, "y"], [3, "x"]], (3, 2)),
    ],
)
def test_check_sensitive_features_shapes(values, expected_shape):
    out = check_sensitive_features(values, 3)
    assert out.shape == expected_shape


def test_check_sensitive_features_pandas():
    frame = pd.DataFrame({"sex": ["f", "m", "f"], "age": [30, 40, 50]})
    out = check_sensitive_features(frame, 3)
    assert out.shape == (3, 2)
    assert out.dtype == object
    assert out[:, 0].tolist() == ["f", "m", "f"]
    assert out[:, 1].tolist() == [30, 40, 50]
    series = pd.Series([1.5, 2.5, 1.5], name="s")
    np.testing.assert_array_equal(check_sensitive_features(series, 3)[:, 0], [1.5, 2.5, 1.5])
    numeric = pd.DataFrame({"a": [1, 2], "b": [3, 4]})
    assert check_sensitive_features(numeric, 2).dtype.kind == "i"


def test_check_sensitive_features_n_samples_none_skips_length_check():
    assert check_sensitive_features([1, 2], None).shape == (2, 1)


def test_wrong_length_message_names_argument_and_lengths():
    with pytest.raises(ValueError) as info:
        check_sensitive_features([0, 1, 0], 5, name="groups_of_rows")
    message = str(info.value)
    assert "groups_of_rows" in message
    assert "3 entries" in message and "5 rows" in message
    assert "one entry per row of X" in message


@pytest.mark.parametrize(
    "values",
    [
        ["a", None, "b"],
        [1.0, np.nan, 2.0],
        np.array(["2020-01-01", "NaT", "2020-01-02"], dtype="datetime64[D]"),
        pd.Series([1, pd.NA, 2], dtype="Int64"),
        pd.DataFrame({"a": [1, 2, 3], "b": ["x", None, "y"]}),
        pd.Series(pd.Categorical(["x", None, "y"])),
    ],
)
def test_missing_values_raise(values):
    with pytest.raises(ValueError, match=r"missing value.*\(None/NaN\)"):
        encode_groups(values, 3)


@pytest.mark.parametrize(
    "values, match",
    [
        ([], "is empty"),
        (np.empty((0, 2)), "is empty"),
        (np.empty((3, 0)), "no columns"),
        ("group", "got the scalar 'group'"),
        (np.zeros((2, 2, 2)), r"1-D .* or 2-D"),
        (sp.csr_matrix(np.eye(3)), "sparse"),
        (None, "is None"),
    ],
)
def test_bad_inputs_raise(values, match):
    with pytest.raises(ValueError, match=match):
        check_sensitive_features(values, None)


# ------------------------------------------------------------------- encode_groups
def test_encode_strings_sorted():
    codes, groups = encode_groups(["b", "a", "c", "b"], 4)
    assert groups.dtype == object
    assert groups.tolist() == ["a", "b", "c"]
    np.testing.assert_array_equal(codes, [1, 0, 2, 1])
    assert codes.dtype == np.int64


def test_encode_ints_bools_floats():
    codes, groups = encode_groups(np.array([3, 1, 3]))
    assert groups.tolist() == [1, 3] and codes.tolist() == [1, 0, 1]
    assert all(type(g) is int for g in groups)
    codes, groups = encode_groups(np.array([True, False, True]))
    assert groups.tolist() == [False, True] and codes.tolist() == [1, 0, 1]
    codes, groups = encode_groups([0.5, 0.25])
    assert groups.tolist() == [0.25, 0.5] and codes.tolist() == [1, 0]


def test_encode_mixed_types_keeps_them_apart():
    # numpy would turn [1, "1"] into two equal strings; they are different groups.
    codes, groups = encode_groups([1, "1", "a", 2.5, 1])
    assert groups.tolist() == [1, 2.5, "1", "a"]  # numbers before strings
    np.testing.assert_array_equal(codes, [0, 2, 3, 1, 0])
    np.testing.assert_array_equal(groups[codes].tolist(), [1, "1", "a", 2.5, 1])


def test_encode_object_column_of_unorderable_labels():
    labels = np.empty(3, dtype=object)
    labels[:] = [frozenset({1}), frozenset({2}), frozenset({1})]
    codes, groups = encode_groups(labels)
    assert len(groups) == 2
    assert codes[0] == codes[2] != codes[1]


def test_encode_pandas_categorical_and_series():
    series = pd.Series(pd.Categorical(["y", "x", "y"], categories=["y", "x"]))
    codes, groups = encode_groups(series, 3)
    assert groups.tolist() == ["x", "y"]
    np.testing.assert_array_equal(codes, [1, 0, 1])


def test_encode_several_columns_gives_sorted_tuples():
    frame = pd.DataFrame({"sex": ["m", "f", "m", "f"], "race": [2, 1, 1, 1]})
    codes, groups = encode_groups(frame, 4)
    assert groups.tolist() == [("f", 1), ("m", 1), ("m", 2)]
    np.testing.assert_array_equal(codes, [2, 0, 1, 0])
    # Same from a 2-D list and a 2-D object array.
    rows = frame.to_numpy().tolist()
    codes_list, groups_list = encode_groups(rows, 4)
    np.testing.assert_array_equal(codes_list, codes)
    assert groups_list.tolist() == groups.tolist()


def test_encode_against_fitted_groups_gives_minus_one_for_unseen():
    _, groups = encode_groups(["a", "b", "c"])
    codes, returned = encode_groups(["c", "z", "a", "a"], 4, groups=groups)
    np.testing.assert_array_equal(codes, [2, -1, 0, 0])
    assert returned.tolist() == ["a", "b", "c"]
    # numpy scalars match Python labels
    codes, _ = encode_groups(np.array([1, 7]), groups=np.array([1, 2]))
    np.testing.assert_array_equal(codes, [0, -1])


def test_encode_against_fitted_tuple_groups():
    train = np.array([["f", 1], ["m", 2]], dtype=object)
    _, groups = encode_groups(train)
    codes, _ = encode_groups([["m", 2], ["m", 1], ["f", 1]], groups=groups)
    np.testing.assert_array_equal(codes, [1, -1, 0])
    # groups given as a plain list of tuples
    codes, _ = encode_groups([["m", 2]], groups=[("f", 1), ("m", 2)])
    np.testing.assert_array_equal(codes, [1])


def test_encode_against_groups_with_wrong_structure_raises():
    _, one_column = encode_groups(["a", "b"])
    with pytest.raises(ValueError, match="2 columns.*same sensitive columns"):
        encode_groups([["a", 1]], groups=one_column)
    _, two_columns = encode_groups([["a", 1], ["b", 2]])
    with pytest.raises(ValueError, match="1 column.*tuples of 2"):
        encode_groups(["a"], groups=two_columns)
    with pytest.raises(ValueError, match="repeated"):
        encode_groups(["a"], groups=["a", "a"])
    with pytest.raises(ValueError, match="groups is empty"):
        encode_groups(["a"], groups=[])
    with pytest.raises(ValueError, match="1-D"):
        encode_groups(["a"], groups=np.array([["a"]]))


def test_encode_checks_length():
    with pytest.raises(ValueError, match="has 2 entries but X has 3 rows"):
        encode_groups(["a", "b"], 3)


def test_groups_pickle():
    _, groups = encode_groups([["a", 1], ["b", 2]])
    assert pickle.loads(pickle.dumps(groups)).tolist() == groups.tolist()


labels = st.one_of(
    st.lists(st.integers(-3, 3), min_size=1, max_size=30),
    st.lists(st.sampled_from(["a", "b", "c", "d"]), min_size=1, max_size=30),
    st.lists(st.one_of(st.integers(0, 2), st.sampled_from(["0", "x"])), min_size=1, max_size=30),
)


@settings(max_examples=60, deadline=None)
@given(values=labels, seed=st.integers(0, 2**31 - 1))
def test_encoding_roundtrip_and_permutation_invariance(values, seed):
    column = np.empty(len(values), dtype=object)
    column[:] = values
    codes, groups = encode_groups(column)
    # codes index the sorted distinct labels and reproduce every row
    assert codes.min() == 0 and codes.max() == len(groups) - 1
    assert groups[codes].tolist() == list(values)
    assert len(set(groups.tolist())) == len(groups)
    # permuting rows permutes codes and leaves the groups unchanged
    perm = np.random.default_rng(seed).permutation(len(values))
    codes_perm, groups_perm = encode_groups(column[perm])
    assert groups_perm.tolist() == groups.tolist()
    np.testing.assert_array_equal(codes_perm, codes[perm])
    # encoding against the fitted groups gives the same codes
    np.testing.assert_array_equal(encode_groups(column, groups=groups)[0], codes)


@settings(max_examples=40, deadline=None)
@given(rows=st.lists(st.tuples(st.integers(0, 2), st.sampled_from("xyz")), min_size=1,
                     max_size=30))
def test_intersectional_codes_match_tuple_labels(rows):
    codes, groups = encode_groups([list(r) for r in rows])
    assert groups.tolist() == sorted(set(rows))
    assert [groups[c] for c in codes] == rows


# ------------------------------------------------------------------ select_columns
def test_select_columns_dataframe_and_array():
    frame = pd.DataFrame({"x": [0.1, 0.2], "group": ["a", "b"], "race": [1, 2]})
    assert select_columns(frame, "group").tolist() == ["a", "b"]
    assert select_columns(frame, ["group", "race"]).tolist() == [["a", 1], ["b", 2]]
    assert select_columns(frame, 1).tolist() == ["a", "b"]
    array = np.array([[0.0, 1.0, 5.0], [1.0, 0.0, 6.0]])
    assert select_columns(array, -1).tolist() == [5.0, 6.0]
    assert select_columns(array, [0, 2]).shape == (2, 2)
    assert select_columns(sp.csr_matrix(array), 2).tolist() == [5.0, 6.0]


@pytest.mark.parametrize(
    "X, columns, match",
    [
        (pd.DataFrame({"x": [1]}), "group", r"\['group'\] not among the columns"),
        (pd.DataFrame({"x": [1]}), ["x", 0], "not a mix"),
        (np.zeros((2, 2)), "group", "without column names, so the column is gone"),
        (np.zeros((2, 2)), 5, "out of range"),
        (np.zeros((2, 2)), [], "is empty"),
        (np.zeros(2), 0, "must be 2-D"),
    ],
)
def test_select_columns_errors(X, columns, match):
    with pytest.raises(ValueError, match=match):
        select_columns(X, columns)
