"""docs/architecture.rst describes the code as it is: every hook the fit
sequence calls, and every module of the package, is named on the page."""

import ast
import inspect
import pathlib
import textwrap

import pytest

import skdp
from skdp._fit.template import BaseDPEstimator

ROOT = pathlib.Path(skdp.__file__).parent
PAGE = (ROOT.parent / "docs" / "architecture.rst").read_text()


def _self_calls(function):
    """Names of the methods ``function`` calls on ``self``."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(function)))
    names = set()
    for node in ast.walk(tree):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and isinstance(node.func.value, ast.Name) and node.func.value.id == "self"):
            names.add(node.func.attr)
        # a hook passed as a callable (self._calibrate to _timed)
        if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                and node.value.id == "self" and node.attr.startswith("_")
                and callable(getattr(BaseDPEstimator, node.attr, None))):
            names.add(node.attr)
    return names


def test_every_hook_of_the_fit_sequence_is_on_the_page():
    hooks = _self_calls(BaseDPEstimator._fit_private)
    assert {"_plan", "_calibrate", "_train", "_store_fitted"} <= hooks
    missing = sorted(name for name in hooks if f"``{name}``" not in PAGE)
    assert not missing, f"docs/architecture.rst does not name {missing}"


def _modules():
    for path in sorted(ROOT.rglob("*.py")):
        if path.name == "__init__.py" or "data" in path.relative_to(ROOT).parts:
            continue
        yield path.relative_to(ROOT)


@pytest.mark.parametrize("module", list(_modules()), ids=str)
def test_every_module_is_in_the_layout(module):
    layout = PAGE[PAGE.index("The layout"):PAGE.index("One shape for every algorithm")]
    assert module.stem in layout, f"the layout of docs/architecture.rst lacks {module}"
