"""Sphinx configuration for the skdp documentation."""

import skdp

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
]
autosummary_generate = True
autodoc_default_options = {"members": True, "inherited-members": False}
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False
numpydoc_validation_checks = set()
templates_path = []
exclude_patterns = ["_build", "generated/*.rst~"]
html_theme = "alabaster"
html_static_path = []
intersphinx_mapping = {}
nitpicky = False
suppress_warnings = ["autosummary.import_cycle"]
