"""The fit core shared by every skdp estimator, one concern per module.

* :mod:`~skdp._fit.template`: :class:`~skdp._fit.template.BaseDPEstimator`
  and the fit sequence every estimator runs;
* :mod:`~skdp._fit.classifier`, :mod:`~skdp._fit.regressor`: labels and
  targets, predictions;
* :mod:`~skdp._fit.releases`: the one-off releases of a fit outside its
  training steps (class counts, target scale, score calibration, model
  check), as objects;
* :mod:`~skdp._fit.state`: the typed state a fit carries between stages;
* :mod:`~skdp._fit.private_fit`: the randomness of a fit, spending its plan
  and the fitted privacy attributes (shared with private preprocessing);
* :mod:`~skdp._fit.warm_start`, :mod:`~skdp._fit.weights`,
  :mod:`~skdp._fit.units`, :mod:`~skdp._fit.columns`, :mod:`~skdp._fit.rows`,
  :mod:`~skdp._fit.calibration`: warm starts, record weights, privacy units,
  fit-only columns, row access and blockwise scoring, the calibration maths.

The package imports nothing itself, so that a module of it that needs no
scikit-learn (the releases' statistics) can be imported without the rest.
"""
