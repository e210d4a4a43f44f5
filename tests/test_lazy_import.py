"""``import skdp`` loads its packages on first use: one estimator does not
import every algorithm, the audits, the searches or the federated engines
(about 0.18 s of the import of ``DPSGDClassifier`` alone), and what the
eager package offered is still there."""

import json
import subprocess
import sys

import pytest

import skdp


def _loaded_after(statement):
    """The skdp modules, and whether torch is, loaded in a fresh interpreter
    after ``statement``."""
    code = (f"import json, sys\n{statement}\n"
            "print(json.dumps([sorted(m for m in sys.modules if m.startswith('skdp')),"
            " 'torch' in sys.modules]))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return json.loads(out.stdout.splitlines()[-1])


def test_import_skdp_loads_nothing_else():
    modules, torch_loaded = _loaded_after("import skdp")
    assert modules == ["skdp"] and not torch_loaded


def test_one_estimator_does_not_load_the_others():
    modules, _ = _loaded_after("from skdp import DPSGDClassifier")
    assert "skdp.linear_model" in modules
    for other in ("skdp.fairness", "skdp.robust", "skdp.bilevel", "skdp.audit",
                  "skdp.model_selection", "skdp.federated"):
        assert not any(m == other or m.startswith(other + ".") for m in modules), other


def test_the_flower_engine_is_found_without_importing_its_package_first():
    # skdp.federated registers engine="flower-simulation"; the eager package
    # imported it at ``import skdp``, the lazy one when the engine is asked for
    modules, _ = _loaded_after(
        "from skdp.fairness.fermi._server import engine\n"
        "assert engine('flower-simulation').__name__ == 'fit_in_simulation'")
    assert "skdp.federated" in modules


@pytest.mark.parametrize("name", skdp.__all__)
def test_every_public_name_resolves(name):
    value = getattr(skdp, name)
    assert name in dir(skdp)
    if name != "__version__":
        assert value.__name__ == name and value.__module__.startswith("skdp.")


def test_subpackages_are_attributes_and_unknown_names_fail():
    assert skdp.audit.__name__ == "skdp.audit"
    assert skdp.model_selection.spent is not None
    with pytest.raises(AttributeError, match="no attribute 'DPSVM'"):
        skdp.DPSVM
