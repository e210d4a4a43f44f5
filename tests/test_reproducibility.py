"""The reproducibility contract of docs/privacy.rst (section Reproducibility).

* Same data, seed, machine and thread count: the same model, bit for bit.
* Another thread count or another CPU kernel path: the same batches, noise,
  step count and epsilon; parameters equal up to float rounding, which
  training amplifies (stated tolerance: 1e-2 of the largest parameter;
  measured 1e-7 for most fits, 1e-3 for RaCO with an MLP, whose prediction
  histograms can count a row on the decision boundary on the other side).

Other CPUs are stood in for by the kernel paths this machine can take: torch's
dispatch (``ATEN_CPU_CAPABILITY=default`` runs its generic kernels instead of
the AVX2/AVX-512 ones) and MKL's (``MKL_ENABLE_INSTRUCTIONS=AVX2``, which
takes another path on Intel CPUs with AVX-512, and ``MKL_CBWR=COMPATIBLE``,
MKL's portable kernels, which differ on any x86 CPU), two of them per fresh
process.
"""

import os
import pickle
import subprocess
import sys
import textwrap

import numpy as np
import pytest

#: The contract's tolerance on parameters, relative to the largest one.
RTOL = 1e-2

FITS = textwrap.dedent('''
    import pickle, sys, warnings
    import numpy as np
    import torch
    from skdp import (DPBilevelLogisticRegression, DPDROClassifier, DPFERMIClassifier,
                      DPRateConstrainedClassifier, DPSGDClassifier, DPSGDRegressor)
    from skdp.datasets import make_fair_classification

    warnings.simplefilter("ignore")
    X, y, g = make_fair_classification(n_samples=4000, n_features=6, random_state=0)
    silos = np.arange(len(y)) % 3
    mlp = dict(hidden_layer_sizes=(32,), random_state=0)
    fits = {
        "dpsgd": (DPSGDClassifier(random_state=0), y, {}),
        "dpsgd_mlp": (DPSGDClassifier(**mlp), y, {}),
        "raco": (DPRateConstrainedClassifier(random_state=0), y, {"sensitive_features": g}),
        "raco_mlp": (DPRateConstrainedClassifier(**mlp), y, {"sensitive_features": g}),
        "fermi_silos": (DPFERMIClassifier(random_state=0), y,
                        {"sensitive_features": g, "silo_ids": silos}),
        "fermi_mlp": (DPFERMIClassifier(**mlp), y, {"sensitive_features": g}),
        "dro": (DPDROClassifier(random_state=0, solver_options={"algorithm": "double_spider"}),
                y, {}),
        "bilevel": (DPBilevelLogisticRegression(random_state=0), y, {}),
        "regressor_mlp": (DPSGDRegressor(**mlp), X[:, 0] - X[:, 1] + y, {}),
    }
    out = {}
    for name, (estimator, target, kwargs) in fits.items():
        estimator.fit(X, target, **kwargs)
        state = estimator.module_state_
        if state is None:
            state = {"coef": estimator.coef_, "intercept": np.atleast_1d(estimator.intercept_)}
        out[name] = {
            "params": {k: np.asarray(v, dtype=np.float64) for k, v in state.items()},
            "epsilon": float(estimator.epsilon_),
            "steps": int(getattr(estimator, "n_steps_", -1)),
            "threads": torch.get_num_threads(),
        }
    with open(sys.argv[1], "wb") as fh:
        pickle.dump(out, fh)
''')

#: Settings that change the float arithmetic but not the seed's promise.
#: Two changes a process: each fresh process costs seconds of imports.
KERNEL_PATHS = {
    "two threads": {"OMP_NUM_THREADS": "2", "MKL_NUM_THREADS": "2"},
    "one thread, MKL compatible kernels": {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
                                           "MKL_CBWR": "COMPATIBLE"},
    "torch generic kernels, MKL AVX2 kernels": {"OMP_NUM_THREADS": "2", "MKL_NUM_THREADS": "2",
                                                "ATEN_CPU_CAPABILITY": "default",
                                                "MKL_ENABLE_INSTRUCTIONS": "AVX2"},
}


def _fit_in_a_fresh_process(tmp_path, name, env_changes):
    env = {k: v for k, v in os.environ.items()
           if k not in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "ATEN_CPU_CAPABILITY",
                        "MKL_ENABLE_INSTRUCTIONS", "MKL_CBWR")}
    env.update(env_changes)
    path = tmp_path / f"{name.replace(' ', '_')}.pkl"
    subprocess.run([sys.executable, "-c", FITS, str(path)], env=env, check=True, timeout=300)
    with open(path, "rb") as fh:
        return pickle.load(fh)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    tmp_path = tmp_path_factory.mktemp("reproducibility")
    return {name: _fit_in_a_fresh_process(tmp_path, name, changes)
            for name, changes in KERNEL_PATHS.items()}


def test_same_seed_machine_and_threads_give_the_same_model_bit_for_bit(tmp_path, runs):
    again = _fit_in_a_fresh_process(tmp_path, "again", KERNEL_PATHS["two threads"])
    for name, fit in runs["two threads"].items():
        assert again[name]["epsilon"] == fit["epsilon"]
        for key, value in fit["params"].items():
            np.testing.assert_array_equal(again[name]["params"][key], value,
                                          err_msg=f"{name}: {key}")


@pytest.mark.parametrize("path", ["one thread, MKL compatible kernels",
                                  "torch generic kernels, MKL AVX2 kernels"])
def test_other_threads_and_kernels_agree_within_the_stated_tolerance(runs, path):
    reference, other = runs["two threads"], runs[path]
    assert {f["threads"] for f in runs["one thread, MKL compatible kernels"].values()} == {1}
    for name, fit in reference.items():
        # public quantities: the same computation in float64
        assert other[name]["steps"] == fit["steps"], name
        np.testing.assert_allclose(other[name]["epsilon"], fit["epsilon"], rtol=1e-9)
        scale = max(np.abs(v).max() for v in fit["params"].values())
        for key, value in fit["params"].items():
            np.testing.assert_allclose(other[name]["params"][key], value, rtol=0.0,
                                       atol=RTOL * scale, err_msg=f"{name}: {key} ({path})")
