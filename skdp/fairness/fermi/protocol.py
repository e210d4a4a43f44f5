"""The DP-FERMI protocol: what crosses the boundary between the server and a
silo, and the rules both sides apply to it.

A silo (:class:`skdp.federated.FermiSilo`, on its owner's machine) and the
server (:class:`skdp.DPFERMIClassifier`, in process or through a Flower
engine) both import this module, and nothing in it imports either of them:

* the public settings a server sends before training, under the version
  :data:`PROTOCOL`; from them and its own record count a silo builds its own
  release plan (:func:`fermi_release_plan`), calibrates its own noise
  (:func:`silo_privacy_report`) and sets its noise scales for the broadcast
  priors (:func:`silo_noise`);
* the messages: :class:`Broadcast` (``W`` and the priors, each round, with
  the tables a silo derives from them), :class:`SiloMessages` (a silo's
  noisy, normalized sums) and, after the last round, each silo's noisy
  check of the returned model (counts of (group, true class, predicted
  class) and its clipped log-loss sum);
* each silo's randomness (:class:`SiloRandomness`): stateless, seeded from
  ``(seed, silo, round)`` (noise) and ``(seed, silo, chunk of rounds)``
  (batches), or drawn from the operating system.

How the protocol changes: :data:`PROTOCOL` names the version of the settings
and messages. A change that alters what a silo computes or releases, or the
meaning of a field, bumps it (a silo refuses a server that speaks another
version, and a server a silo whose ``hello`` names another); new settings
fields are added with defaults that keep the old meaning; fields are never
removed within a version. Version 2 added the model check
(``settings["model_check"]``, the ``check`` request). Version 3 added
privacy units: a silo that holds unit ids (a person's records) says so in
its ``hello`` (``n_units`` in place of ``n_records``, and ``protocol``),
the settings of such a run carry ``units`` and ``max_records_per_unit``,
and the silo bounds, samples and weighs by units
(:func:`silo_unit_bounds`); every release keeps its sensitivity, with
units in place of records. Version 4 draws each silo's Poisson batches a
chunk of rounds at a time (one host synchronisation per chunk on a GPU) from
a sampling stream of its own (:meth:`SiloRandomness.sampling`), and each
round's noise from that round's stream: seeded runs of version 3 and 4 give
different batches.
"""

import math
from dataclasses import dataclass

import numpy as np
import torch

from ...models import CHECK_SHARE
from ...privacy import (
    BatchReleases,
    InitialRelease,
    Release,
    ReleasePlan,
    SecureGenerator,
    UnitBounds,
    bound_units,
    uniform_,
)
from ._ermi import w_gradient_clip, w_gradient_replace_sensitivity

#: Privacy units a silo may accept (it chooses; see :class:`skdp.federated.SiloPolicy`).
PRIVACY_UNITS = ("record", "sensitive_attribute")

#: Version of the public settings a silo accepts (``settings["protocol"]``).
PROTOCOL = "skdp-dp-fermi/4"

#: Shares of each round's privacy (GDP ``mu^2``) per release: the model
#: gradient, the W-gradient and the monitoring vector.
_THETA_SHARE, _W_SHARE, _MONITOR_SHARE = 0.78, 0.2, 0.02

#: Share of the whole budget (GDP ``mu^2``) spent on the one-off noisy group
#: counts behind ``group_priors="private"``.
_PRIOR_SHARE = 0.02

#: Share of the whole budget (GDP ``mu^2``) spent on the one-off noisy class
#: counts of ``class_weight="balanced"`` (``settings["class_counts"]``).
CLASS_COUNT_SHARE = 0.02


#: Per-record clamps of the monitored loss and psi values.
LOSS_BOUND, PSI_BOUND = 5.0, 2.0


def _release_sensitivities(privacy_unit, max_grad_norm):
    """Sensitivities of the releases in the release plan's units, and the
    plan's neighbouring relation.

    The W-gradient sum is released divided by a per-record bound that
    depends on the group priors (``w_scale`` of :func:`_w_scale`), so its
    sensitivity is 1 whatever the priors: the plan can be calibrated before
    the priors are released, and its noise is then multiplied back.

    ``"record"``: add/remove-one records. The clipped model-gradient sum
    moves by ``max_grad_norm``, the scaled W-gradient sum by 1, the
    monitoring sum (three coordinates in [-1, 1]) by ``sqrt(3)`` and the
    histogram of group counts by 1.

    ``"sensitive_attribute"``: one record's group is replaced (features and
    label are public). The plan doubles every sensitivity under
    ``"replace"``, so each is half its replace-one bound: ``psi``'s clipped
    gradient sum moves by ``2 C`` (passed ``C``), the scaled W-gradient sum
    by 1, the monitoring sum by at most ``2 sqrt(3)`` and the counts by
    ``sqrt(2)`` (one count down, one up).

    The model check (counts of (group, true class, predicted class) and the
    clipped log-loss sum divided by its bound) moves by ``sqrt(2)`` when a
    record is added or removed (one count, at most 1 on the sum), and by
    ``sqrt(3)`` when a record's group is replaced (two counts; the loss does
    not depend on the group, but the bound is kept simple).
    """
    if privacy_unit == "record":
        return {"theta": max_grad_norm, "w": 1.0, "monitor": math.sqrt(3.0),
                "group_counts": 1.0, "model_check": math.sqrt(2.0)}, "add_remove"
    return {"theta": max_grad_norm, "w": 0.5, "monitor": math.sqrt(3.0),
            "group_counts": math.sqrt(2.0) / 2.0,
            "model_check": math.sqrt(3.0) / 2.0}, "replace"


def w_noise_scale(privacy_unit, priors, w_clip):
    """The bound by which the W-gradient sum is divided before release: the
    per-record clipping bound (``"record"``), or the change of one record's
    W-gradient when its group is replaced (``"sensitive_attribute"``), never
    below the clipping bound, so that the noise does not vanish (with one
    group nothing can be replaced and the change is 0)."""
    if privacy_unit == "record":
        return w_clip
    return max(w_gradient_replace_sensitivity(priors), w_clip)


def unit_description(max_records_per_unit):
    """How reports name the privacy unit of a run with unit ids (the name
    :class:`~skdp.privacy.UnitBounds` gives it).

    >>> from skdp.fairness.fermi.protocol import unit_description
    >>> unit_description(4)
    'unit (max_records_per_unit=4)'
    """
    empty = np.zeros(0)
    return UnitBounds(codes=empty.astype(np.int64), n_units=0,
                      max_records=int(max_records_per_unit), kept=empty.astype(bool),
                      factors=empty).description


def fermi_release_plan(settings, n_records=None):
    """The release plan of one DP-FERMI fit from its public settings.

    Per round on each silo's batch: the clipped model-gradient sum, the
    scaled clipped W-gradient sum and the monitoring sum, one joint
    mechanism; once before training (``settings["private_priors"]``), the
    noisy group counts; once before training (``settings["class_counts"]``,
    default False, in-process engine only, ``privacy_unit="record"``: with
    the sensitive-attribute unit the labels are public), the noisy class
    counts of ``class_weight="balanced"``; once after training
    (``settings["model_check"]``, default False), the check of the returned
    model. A silo builds it from the settings the server sends
    and its own record count (``n_records``), and calibrates its own noise
    (:func:`silo_privacy_report`).

    With ``settings["units"]`` (the silos hold unit ids) the plan is the
    same, about units: every per-record term of every release is weighted by
    its unit factor (:func:`silo_unit_bounds`), so a whole unit moves each
    release by at most the sensitivity of one record; rates are over units,
    ``n_records`` is the silo's number of units, and the report names the
    unit.

    Parameters
    ----------
    settings : dict
        ``privacy_unit``, ``max_grad_norm``, ``rounds``, ``sampling_rate``
        or ``batch_size`` (one of them None), ``private_priors``,
        ``accountant``; ``units`` and ``max_records_per_unit`` with units.
    n_records : int or None
        The silo's public size: records, or units with ``settings["units"]``.

    Returns
    -------
    skdp.privacy.ReleasePlan
    """
    sensitivities, neighboring = _release_sensitivities(
        settings["privacy_unit"], float(settings["max_grad_norm"])
    )
    if settings.get("batch_size") is not None:
        batch = {"batch_size": float(settings["batch_size"])}  # rate b / n_j in each silo
    else:
        batch = {"sampling_rate": float(settings["sampling_rate"])}
    releases = [
        Release("theta", sensitivity=sensitivities["theta"], share=_THETA_SHARE),
        Release("w", sensitivity=sensitivities["w"], share=_W_SHARE),
        Release("monitor", sensitivity=sensitivities["monitor"], share=_MONITOR_SHARE),
    ]
    initial = []
    if settings["private_priors"]:
        initial.append(InitialRelease(
            "group_counts", sensitivity=sensitivities["group_counts"], budget_share=_PRIOR_SHARE,
        ))
    if settings.get("class_counts", False) and settings["privacy_unit"] == "record":
        initial.append(InitialRelease("class_counts", sensitivity=1.0,
                                      budget_share=CLASS_COUNT_SHARE))
    if settings.get("model_check", False):
        initial.append(InitialRelease(
            "model_check", sensitivity=sensitivities["model_check"], budget_share=CHECK_SHARE,
        ))
    unit = "record"
    if settings.get("units", False):
        unit = unit_description(settings["max_records_per_unit"])
    return ReleasePlan(
        BatchReleases(releases, steps=int(settings["rounds"]), **batch), initial=initial,
        neighboring=neighboring, accountant=settings["accountant"],
        n_records=None if n_records is None else int(n_records), privacy_unit=unit,
    )


def silo_privacy_report(settings, n_records):
    """What one silo spends: its plan calibrated for its own record count
    (its number of units with ``settings["units"]``; a non-private report
    when ``settings["epsilon"]`` is None).

    Raises
    ------
    skdp.privacy.PrivacyBudgetError
        When the budget cannot pay for the rounds.
    """
    plan = fermi_release_plan(settings, n_records)
    if settings["epsilon"] is None:
        return plan.non_private(float(settings["delta"]))
    return plan.calibrate(float(settings["epsilon"]), float(settings["delta"]))


def silo_noise(settings, scales, priors):
    """One silo's noise standard deviations on its sums, given the noise
    scales of its report (``{name: scale}``) and the priors the server broadcasts: the W-gradient noise is the
    plan's (on sums divided by ``w_scale``) times ``w_scale``, computed by the
    silo from the same priors it clips with.

    Returns
    -------
    (FermiNoise for one silo, w_clip)
    """
    priors = np.asarray(priors, dtype=np.float64)
    w_clip = w_gradient_clip(priors)
    if settings["epsilon"] is None:
        return FermiNoise(), w_clip
    w_scale = w_noise_scale(settings["privacy_unit"], priors, w_clip)
    return FermiNoise(theta=(scales["theta"],), w=(scales["w"] * w_scale,),
                      monitor=(scales["monitor"],)), w_clip


def theta_noise_factor(privacy_unit, lam):
    """Factor of the model-gradient noise scale: 1 for ``"record"``;
    ``max(|lam|, 1)`` for ``"sensitive_attribute"``.

    With the sensitive-attribute unit the plan's scale is that of the
    clipped psi sum, which enters the message times ``lam``: ``|lam|`` times
    the scale protects the group, and the floor at 1 keeps the clipped loss
    part noised at least as much as its own sensitivity needs, so the
    message never carries a record's gradient without noise.

    >>> from skdp.fairness.fermi.protocol import theta_noise_factor
    >>> theta_noise_factor("record", 0.0), theta_noise_factor("sensitive_attribute", 0.0)
    (1.0, 1.0)
    >>> theta_noise_factor("sensitive_attribute", 3.0)
    3.0
    """
    if privacy_unit == "record":
        return 1.0
    return max(abs(float(lam)), 1.0)


@dataclass(frozen=True)
class FermiNoise:
    """Gaussian noise standard deviations of each silo's releases, on sums.

    ``theta``: on the clipped model-gradient sum (of ``loss + lam * psi``
    for ``privacy_unit="record"``; for ``"sensitive_attribute"`` the scale
    of the clipped ``psi`` sum, which :class:`SiloContext` multiplies by
    ``max(lam, 1)``); ``w``: on the clipped W-gradient sum;
    ``monitor``: on the sum of the normalized monitoring vectors. Tuples with
    one value per silo; None everywhere for non-private training.
    """

    theta: tuple = None
    w: tuple = None
    monitor: tuple = None

    @property
    def private(self):
        return self.theta is not None


@dataclass
class Broadcast:
    """What the server sends each silo every round besides the model.

    ``W`` (M, k, l), ``inv_sqrt`` = 1/sqrt(priors) (M, k), and ``tables``
    (2 l, M k + 1), class-major lookups by ERMI cell: rows ``0 .. l-1`` the
    coefficients of ``psi + 1 = <F, c>``
    (:func:`~skdp.fairness.fermi._ermi.ermi_coefficients`), rows ``l .. 2l-1`` the
    table of per-record W-gradient norms
    (:func:`~skdp.fairness.fermi._ermi.w_gradient_sq_table`).
    """

    W: torch.Tensor
    inv_sqrt: torch.Tensor
    tables: torch.Tensor = None

    def refresh(self):
        n_strata, n_groups, n_classes = self.W.shape
        n_cells = n_strata * n_groups
        if self.tables is None:
            self.tables = self.W.new_zeros((2 * n_classes, n_cells + 1))
        inv = self.inv_sqrt.unsqueeze(-1)
        col_sq = (self.W * self.W).sum(1, keepdim=True)
        cross = self.W * inv * 2.0
        # ermi_coefficients: 2 W / sqrt(pi) - |W_u|^2; w_gradient_sq_table:
        # 1 / pi - 2 W / sqrt(pi) + |W_u|^2 (same values, fewer passes)
        self.tables[:n_classes, :n_cells] = (cross - col_sq).view(n_cells, n_classes).T
        self.tables[n_classes:, :n_cells] = (
            (inv * inv - cross + col_sq).clamp_(min=0.0).view(n_cells, n_classes).T
        )
        return self


@dataclass
class SiloMessages:
    """Noisy messages of ``N`` silos, each already divided by the silo's
    expected batch size: ``theta`` (list aligned with the model parameters,
    each with a leading silo axis), ``w`` (N, M, k, l) and ``monitor``
    (N, 3): normalized mean loss, mean psi and clipped fraction."""

    theta: list
    w: torch.Tensor
    monitor: torch.Tensor


# ------------------------------------------------------------ randomness
#: Round index of a silo's one-off release of noisy group counts.
PRIORS_ROUND = -1

#: Round index of a silo's one-off release of noisy class counts (a
#: stream of its own: no run has that many rounds).
CLASS_COUNTS_ROUND = 2**31 - 2

#: Round index of a silo's check of the returned model (after every round:
#: no run has that many).
CHECK_ROUND = 2**31 - 1

#: Round index of a silo's draw of the records each privacy unit keeps.
UNITS_ROUND = 2**31 - 3

#: Spawn key of the streams of a silo's Poisson batches
#: (:meth:`SiloRandomness.sampling`).
_SAMPLING_STREAM = 1


#: At most this many rounds of Poisson batches are drawn at once ...
SAMPLING_CHUNK_ROUNDS = 256

#: ... and about this many sampled records (int64 indices) at most, so that
#: a chunk of large batches stays small next to the data.
SAMPLING_CHUNK_RECORDS = 2**21


def sampling_chunk_rounds(expected_batch, max_records_per_unit=1):
    """Rounds per chunk of a silo's Poisson batches: at most
    :data:`SAMPLING_CHUNK_ROUNDS`, and about :data:`SAMPLING_CHUNK_RECORDS`
    sampled records per chunk (an expected batch of ``expected_batch``
    records, or units of at most ``max_records_per_unit`` records each).
    From public values only, so that every engine cuts the rounds alike.

    >>> from skdp.fairness.fermi.protocol import sampling_chunk_rounds
    >>> sampling_chunk_rounds(600.0), sampling_chunk_rounds(40000.0)
    (256, 52)
    """
    records = max(1.0, float(expected_batch) * int(max_records_per_unit))
    return int(max(1, min(SAMPLING_CHUNK_ROUNDS, SAMPLING_CHUNK_RECORDS // math.ceil(records))))


class SiloRandomness:
    """One silo's source of sampling and noise.

    Seeded (``seed`` an int): the noise of round ``r`` of silo ``j`` comes
    from a torch generator seeded from ``(seed, j, r)`` (:meth:`at`), and
    the Poisson batches of chunk ``c`` of its rounds from one seeded from
    ``(seed, j, c)`` in another stream (:meth:`sampling`), both through
    numpy's ``SeedSequence``, so a silo needs no state between rounds and
    every engine (in process, Flower simulation, Flower deployment) draws
    the same batches and noise. ``seed=None``: every draw comes from the
    operating system's CSPRNG (:class:`~skdp.privacy.SecureGenerator`);
    nothing can replay it, not even the server.

    Parameters
    ----------
    seed : int or None
    silo : int
        Index of the silo (its ``partition-id`` in a Flower federation).
    device : str or torch.device, default="cpu"

    Examples
    --------
    >>> from skdp.fairness.fermi.protocol import SiloRandomness
    >>> import torch
    >>> def draw(silo, round_index):
    ...     return torch.empty(2).normal_(generator=SiloRandomness(0, silo).at(round_index))
    >>> bool((draw(0, 3) == draw(0, 3)).all()), bool((draw(0, 3) == draw(1, 3)).any())
    (True, False)
    >>> SiloRandomness(None, 0).secure
    True
    """

    def __init__(self, seed, silo, device="cpu"):
        self.seed = None if seed is None else int(seed)
        self.silo = int(silo)
        self.device = torch.device(device)
        self._secure = SecureGenerator(self.device) if self.seed is None else None
        self._generator = None
        self._sampling_generator = None

    @property
    def secure(self):
        return self.seed is None

    def at(self, round_index):
        """The generator of round ``round_index`` (``PRIORS_ROUND`` for the
        group counts released before training)."""
        if self._secure is not None:
            return self._secure
        state = np.random.SeedSequence(
            [self.seed, self.silo, int(round_index) + 1]
        ).generate_state(1, dtype=np.uint64)[0]
        if self._generator is None:
            self._generator = torch.Generator(device=self.device)
        # a fresh state each round: the generator object is reused, its
        # stream is not
        self._generator.manual_seed(int(state >> np.uint64(1)))
        return self._generator

    def sampling(self, chunk_index):
        """The generator of the Poisson batches of chunk ``chunk_index`` of
        the rounds (:func:`sampling_chunk_rounds` rounds each): a stream of
        its own, apart from every stream of :meth:`at` (numpy keys it by a
        spawn key, which pads the entropy so that it matches no key
        without one)."""
        if self._secure is not None:
            return self._secure
        state = np.random.SeedSequence(
            [self.seed, self.silo], spawn_key=(_SAMPLING_STREAM, int(chunk_index))
        ).generate_state(1, dtype=np.uint64)[0]
        if self._sampling_generator is None:
            self._sampling_generator = torch.Generator(device=self.device)
        self._sampling_generator.manual_seed(int(state >> np.uint64(1)))
        return self._sampling_generator


def silo_randomness(seed, n_silos, device="cpu"):
    """:class:`SiloRandomness` of silos ``0 .. n_silos - 1``."""
    return [SiloRandomness(seed, j, device) for j in range(int(n_silos))]


# ------------------------------------------------------------ privacy units
def new_units_token(randomness):
    """What a silo keeps (on its side) to draw the same unit subsets in every
    request of a run: None for seeded randomness (the subsets come from the
    stream at :data:`UNITS_ROUND`), else a secret 53-bit integer from the
    operating system's CSPRNG, drawn once at setup."""
    if not randomness.secure:
        return None
    word = uniform_(torch.empty(1, dtype=torch.float64), randomness.at(UNITS_ROUND))
    return int(float(word[0]) * 2.0**53)


def silo_unit_bounds(codes, n_units, max_records_per_unit, randomness, token=None):
    """The records each privacy unit of one silo keeps, and their factors.

    At most ``max_records_per_unit`` records of each unit, a random subset
    drawn independently of the records' values, each kept record weighing
    ``1 / min(|u|, k)`` (:func:`~skdp.privacy.bound_units`). A silo computes
    it for its own records only (a unit never spans two silos), from its own
    randomness: the stream at :data:`UNITS_ROUND` when seeded (so every
    engine keeps the same records), or a torch generator seeded by the
    secret ``token`` of :func:`new_units_token`, so that a silo answering
    each request in a new process keeps the same subsets all run long.

    Parameters
    ----------
    codes : array-like of int, shape (n_records,)
        Unit of each of the silo's records, in ``0 .. n_units - 1``.
    n_units : int
    max_records_per_unit : int
    randomness : SiloRandomness
    token : int or None

    Returns
    -------
    skdp.privacy.UnitBounds
    """
    if token is None:
        generator = randomness.at(UNITS_ROUND)
    else:
        generator = torch.Generator(device=randomness.device).manual_seed(int(token))
    return bound_units(codes, int(n_units), int(max_records_per_unit), generator)
