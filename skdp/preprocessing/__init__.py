"""Private preprocessing: scalers, encoder and imputer whose fitted state is DP.

Each step learns its state under differential privacy (or from public
bounds and categories, at no cost) and reports ``epsilon_``, ``delta_``,
``dp_event_`` and ``privacy_report_`` like every skdp estimator, so that
:func:`skdp.model_selection.spent` can add a whole pipeline up into one epsilon.
"""

from ..exceptions import PrivacyLeakWarning
from ._encoder import DPOneHotEncoder
from ._imputer import DPSimpleImputer
from ._minmax_scaler import DPMinMaxScaler
from ._standard_scaler import DPStandardScaler

__all__ = [
    "DPMinMaxScaler",
    "DPOneHotEncoder",
    "DPSimpleImputer",
    "DPStandardScaler",
    "PrivacyLeakWarning",
]
