"""Links from the HTML representation of skdp's estimators to their API
pages (the "?" in the corner of an estimator's box in a notebook).

skdp's documentation is built with Sphinx (``docs/``); wherever it is
served, set the environment variable ``SKDP_DOCS_URL`` to its root and
every skdp estimator links to its page under ``<root>/generated/``. The
gallery of the built docs sets it to the relative root, so its diagrams
link to the pages next to them. Without the variable there is no link (no
address that might not exist).
"""

import importlib
import os

#: Environment variable holding the root URL of skdp's built documentation.
DOCS_URL_VARIABLE = "SKDP_DOCS_URL"


def public_path(cls):
    """Dotted name under which ``cls`` is documented: ``skdp.<name>`` when
    the package exports it at the top, else its first public module.

    >>> from skdp import DPSGDClassifier
    >>> from skdp.preprocessing import DPStandardScaler
    >>> from skdp._doc_link import public_path
    >>> public_path(DPSGDClassifier), public_path(DPStandardScaler)
    ('skdp.DPSGDClassifier', 'skdp.preprocessing.DPStandardScaler')
    """
    if getattr(importlib.import_module("skdp"), cls.__name__, None) is cls:
        return f"skdp.{cls.__name__}"
    parts = []
    for part in cls.__module__.split("."):
        if part.startswith("_"):
            break
        parts.append(part)
    return ".".join(parts + [cls.__name__])


class DocLinkMixin:
    """scikit-learn's documentation-link hooks pointed at skdp's API pages.

    >>> import os
    >>> from skdp import DPSGDClassifier
    >>> os.environ["SKDP_DOCS_URL"] = "https://docs.example.org/skdp/"
    >>> DPSGDClassifier()._get_doc_link()
    'https://docs.example.org/skdp/generated/skdp.DPSGDClassifier.html'
    >>> del os.environ["SKDP_DOCS_URL"]
    >>> DPSGDClassifier()._get_doc_link()
    ''
    """

    _doc_link_module = "skdp"

    @property
    def _doc_link_template(self):
        root = os.environ.get(DOCS_URL_VARIABLE, "")
        if not root:
            return ""
        return root.rstrip("/") + "/generated/{public_path}.html"

    def _doc_link_url_param_generator(self):
        return {"public_path": public_path(type(self))}
