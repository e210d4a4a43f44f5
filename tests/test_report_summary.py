"""Readable privacy reports: PrivacyReport.summary, str, to_frame and the
notebook HTML repr, on fitted estimators' ``privacy_report_``."""

import dataclasses
import pickle
import sys

import numpy as np
import pytest

from skdp import DPRateConstrainedClassifier, DPSGDClassifier
from skdp.datasets import make_fair_classification
from skdp.privacy import BatchReleases, PrivacyReport, Release, ReleasePlan


@pytest.fixture(scope="module")
def data():
    return make_fair_classification(n_samples=1500, n_features=4, random_state=0)


@pytest.fixture(scope="module")
def dpsgd_report(data):
    X, y, _ = data
    return DPSGDClassifier(epsilon=1.0, max_steps=60, random_state=0).fit(X, y).privacy_report_


@pytest.fixture(scope="module")
def raco_report(data):
    X, y, g = data
    model = DPRateConstrainedClassifier(tolerance=0.5, epsilon=2.0, max_steps=20,
                                        random_state=0)
    return model.fit(X, y, sensitive_features=g).privacy_report_


@pytest.fixture(scope="module")
def public_report(data):
    X, y, _ = data
    return DPSGDClassifier(epsilon=None, max_steps=20, random_state=0).fit(X, y).privacy_report_


def _check_release_lines(report, text):
    for name, noise in report.noise.items():
        line = next(ln for ln in text.splitlines() if ln.strip().startswith(f"{name}:"))
        assert noise.mechanism in line
        assert f"sensitivity {noise.sensitivity:.4g}" in line
        assert f"noise std {noise.std:.4g}" in line
        assert f"noise multiplier {noise.multiplier:.4g}" in line


def test_summary_of_a_dpsgd_report(dpsgd_report):
    report = dpsgd_report
    text = report.summary()
    assert isinstance(text, str) and 4 <= len(text.splitlines()) <= 12
    assert text.splitlines()[0].startswith("PrivacyReport: private")
    assert f"epsilon={report.epsilon:.4g}" in text and "delta=1e-05" in text
    assert "accountant: pld" in text and "add or remove one record" in text
    _check_release_lines(report, text)
    (steps,), (rate,) = report.steps, report.sampling_rates
    assert f"{steps} steps at sampling rate {rate:.4g}" in text
    assert str(report) == text  # print(report) is readable
    assert repr(report).startswith("PrivacyReport(epsilon=")  # the repr is unchanged


def test_summary_of_a_rate_constrained_report_lists_every_release(raco_report):
    report = raco_report
    assert len(report.noise) > 1  # gradient, histogram, ... on the same batch
    text = str(report)
    _check_release_lines(report, text)
    assert "gradient" in text and "histogram" in text


def test_summary_of_a_non_private_fit(public_report):
    report = public_report
    assert not report.private
    text = report.summary()
    first = text.splitlines()[0]
    assert "not private" in first and "epsilon=inf" in first
    assert "gradient: no noise" in text
    assert "training:" in text
    assert "not private" in report._repr_html_()


def test_to_frame_has_one_row_per_release(dpsgd_report, raco_report, public_report):
    pytest.importorskip("pandas")
    for report in (dpsgd_report, raco_report):
        frame = report.to_frame()
        assert list(frame.index) == list(report.noise)
        assert frame.index.name == "release"
        for name, noise in report.noise.items():
            assert frame.loc[name, "mechanism"] == noise.mechanism
            assert frame.loc[name, "sensitivity"] == noise.sensitivity
            assert frame.loc[name, "noise_multiplier"] == noise.multiplier
            assert frame.loc[name, "noise_scale"] == noise.scale
            assert frame.loc[name, "noise_std"] == noise.std
    frame = public_report.to_frame()
    assert list(frame.index) == ["gradient"]
    assert np.isnan(frame.loc["gradient", "noise_std"])


def test_to_frame_without_pandas_says_how_to_install_it(dpsgd_report, monkeypatch):
    monkeypatch.setitem(sys.modules, "pandas", None)  # import pandas raises ImportError
    with pytest.raises(ImportError, match="pip install pandas"):
        dpsgd_report.to_frame()
    assert "gradient" in dpsgd_report.summary()  # the text summary needs nothing


def test_html_repr_is_a_table_with_escaped_text(raco_report):
    out = raco_report._repr_html_()
    assert "<table>" in out and out.count("<tr>") == 1 + len(raco_report.noise)
    for name in raco_report.noise:
        assert f"<td>{name}</td>" in out
    plan = ReleasePlan(BatchReleases([Release("<b>grad&</b>", sensitivity=1.0)],
                                     steps=10, sampling_rate=0.1))
    out = plan.calibrate(1.0, 1e-5)._repr_html_()
    assert "<b>grad" not in out and "&lt;b&gt;grad&amp;&lt;/b&gt;" in out


def test_summary_of_several_batches_and_of_no_release():
    plan = ReleasePlan([
        BatchReleases([Release("gradient", sensitivity=1.0)], steps=50, sampling_rate=0.02),
        BatchReleases([Release("anchor", sensitivity=2.0, mechanism="laplace")], steps=5,
                      sampling_rate=1.0, name="anchor"),
    ])
    text = plan.calibrate(2.0, 1e-5).summary()
    assert "batch 0: 50 steps at sampling rate 0.02" in text
    assert "batch 1: 5 steps at sampling rate 1" in text
    assert "anchor: laplace, sensitivity 2" in text
    empty = PrivacyReport(epsilon=0.0, delta=0.0, dp_event=None, accountant="pld",
                          neighboring="replace", noise={}, steps=(), sampling_rates=())
    assert "releases: none" in empty.summary()
    assert "replace one record" in empty.summary()
    assert "No releases" in empty._repr_html_()


def test_report_stays_frozen_and_picklable(raco_report):
    with pytest.raises(dataclasses.FrozenInstanceError):
        raco_report.epsilon = 0.0
    copy = pickle.loads(pickle.dumps(raco_report))
    assert copy == raco_report
    assert copy.summary() == raco_report.summary()
    assert copy._repr_html_() == raco_report._repr_html_()
