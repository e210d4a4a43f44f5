"""Sphinx configuration for the skdp documentation."""

import os
import re

import skdp

# The HTML diagrams of estimators in the gallery link to the API pages of
# this build (skdp._doc_link): the gallery's pages sit one level below.
os.environ.setdefault("SKDP_DOCS_URL", "..")

project = "skdp"
author = "skdp developers"
copyright = "2026, skdp developers"
release = skdp.__version__
version = release

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.intersphinx",
    "sphinx.ext.mathjax",
    "numpydoc",
    "sphinx_gallery.gen_gallery",
]

# The examples gallery: every examples/plot_*.py is run at build time and
# rendered with its output and figures (CI builds it with warnings as
# errors, so an example that fails or warns fails the build). Others are
# shown without running. Examples read the data embedded in the package.
# Two examples run at a time (SKDP_DOCS_JOBS sets how many).
sphinx_gallery_conf = {
    "examples_dirs": "../examples",
    "gallery_dirs": "auto_examples",
    "filename_pattern": r"/plot_",
    "abort_on_example_error": True,
    "download_all_examples": False,
    "show_memory": False,
    "min_reported_time": 1,
    "parallel": int(os.environ.get("SKDP_DOCS_JOBS", "2")),
}

# API pages: autosummary generates one page per object into docs/generated/
# (git-ignored) from the templates in docs/_templates/autosummary/.
autosummary_generate = True
autodoc_default_options = {"members": True}
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False
numpydoc_validation_checks = set()
templates_path = ["_templates"]
exclude_patterns = ["_build", "_templates", "generated/*.rst~", "auto_examples/*.ipynb"]

html_theme = "alabaster"
html_static_path = []

# The build must work offline (CI has no network), so no intersphinx
# inventories are fetched; cross-references to scikit-learn, numpy or torch
# objects render as plain code.
intersphinx_mapping = {}
nitpicky = False
suppress_warnings = ["autosummary.import_cycle"]

# Methods that skdp estimators inherit from scikit-learn (score, get_params,
# set_fit_request, ...) keep scikit-learn's docstrings, which point to labels
# and glossary terms of scikit-learn's own documentation (":ref:`User Guide
# <metadata_routing>`", ":term:`meta-estimator`"). Those targets do not exist
# here and, without intersphinx, cannot be resolved; render them as text.
_SKLEARN_XREF = re.compile(r":(?:ref|term):`(?:([^`<]*?)\s*<[^`>]*>|([^`]*))`")


def _sklearn_xrefs_as_text(app, what, name, obj, options, lines):
    module = getattr(obj, "__module__", None) or ""
    if not module.startswith("sklearn"):
        return
    for i, line in enumerate(lines):
        lines[i] = _SKLEARN_XREF.sub(lambda m: m.group(1) or m.group(2), line)


def setup(app):
    app.connect("autodoc-process-docstring", _sklearn_xrefs_as_text)
