"""The HTML representation of every public skdp estimator links to its API
page when the documentation's root is known, and to nothing otherwise."""

import re
from pathlib import Path

import pytest
from sklearn.pipeline import make_pipeline
from sklearn.utils import estimator_html_repr

import skdp
from skdp import model_selection, preprocessing
from skdp._doc_link import DOCS_URL_VARIABLE, public_path

API = Path(__file__).resolve().parents[1] / "docs" / "api.rst"
ESTIMATORS = [getattr(skdp, name) for name in skdp.__all__
              if isinstance(getattr(skdp, name), type) and name.startswith("DP")]
ESTIMATORS += [getattr(preprocessing, name) for name in preprocessing.__all__
               if name.startswith("DP")]
ESTIMATORS += [model_selection.PrivateGridSearchCV, model_selection.PrivateRandomizedSearchCV]


def _instance(cls):
    if issubclass(cls, model_selection._private_search.BasePrivateSearchCV):
        grid = {"epsilon": [1.0]}
        return cls(skdp.DPSGDClassifier(), grid)
    return cls()


@pytest.mark.parametrize("cls", ESTIMATORS, ids=lambda c: c.__name__)
def test_every_estimator_links_to_its_api_page(cls, monkeypatch):
    monkeypatch.setenv(DOCS_URL_VARIABLE, "https://docs.example.org/skdp/")
    link = _instance(cls)._get_doc_link()
    assert link == f"https://docs.example.org/skdp/generated/{public_path(cls)}.html"
    # the page the link names is one the docs build generates: the API
    # reference lists the name under the module it documents
    module, name = public_path(cls).rsplit(".", 1)
    sections = re.split(r"^\.\. module:: ", API.read_text(), flags=re.MULTILINE)
    listed = {section.split()[0]: section for section in sections[1:]}
    assert re.search(rf"^   {name}$", listed[module], flags=re.MULTILINE)


def test_no_link_without_a_documentation_root(monkeypatch):
    monkeypatch.delenv(DOCS_URL_VARIABLE, raising=False)
    html = estimator_html_repr(make_pipeline(preprocessing.DPStandardScaler(),
                                             skdp.DPSGDClassifier()))
    assert not [url for url in re.findall(r'href="([^"]+)"', html) if "skdp" in url]
    monkeypatch.setenv(DOCS_URL_VARIABLE, "..")
    html = estimator_html_repr(make_pipeline(preprocessing.DPStandardScaler(),
                                             skdp.DPSGDClassifier()))
    assert "../generated/skdp.DPSGDClassifier.html" in html
    assert "../generated/skdp.preprocessing.DPStandardScaler.html" in html
