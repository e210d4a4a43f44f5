"""skdp: differentially private scikit-learn estimators with constraints."""

__version__ = "0.1.0.dev0"
