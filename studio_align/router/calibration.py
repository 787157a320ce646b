"""Calibrated confidence, an unfamiliarity score and the router's `abstain` decision.

Fitted once on validation data after training and saved beside the checkpoint
(`calibration.json` + `calibration_ood.npz`), so `Router.load` serves with it.

Design choices:
- Temperature scaling per decoding step: a plan's confidence is the product over its
  steps of softmax(z / T) at the chosen token, with z the logits masked to what the plan
  grammar allows. Greedy decoding is unchanged by T (argmax is), so calibration never
  changes a plan. T is fitted by grid search to minimise the log-loss of "the decoded
  plan is right" on validation: the quantity the confidence claims to be.
- Unfamiliarity (out-of-distribution) score: class-conditional Mahalanobis distance
  (Lee et al., 2018) of the request's hidden state at the `<plan>` position from the
  training requests, classes being gold plans, one shared covariance with shrinkage.
  It sees what the confidence cannot: a request unlike anything trained on, on which a
  confident plan is a guess.
- Optionally (`fit_calibration(unfamiliarity_in_confidence=True)`), the confidence
  itself hears the unfamiliarity: `sigmoid(a * logit(p_T) + b * u + c)`, one logistic
  model fitted on the same validation rows (Platt scaling with an out-of-distribution
  feature). Temperature alone scales every request's confidence alike, so a request far
  from the training data keeps a confident wrong plan; with `b <= 0` a stranger request
  is never more trusted than a familiar one with the same log-odds. Plans never change.
- One decision from both: abstain with `unfamiliar_request` when the distance exceeds
  `ood_threshold`, else with `low_confidence` when the calibrated confidence is below
  `confidence_threshold`. Both thresholds are chosen together on validation: among a
  few distance quantiles, the pair that keeps the most requests at the target selective
  accuracy (`selective.threshold_for`).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from studio_align.errors import CheckpointError
from studio_align.router.evaluate import plan_signature
from studio_align.router.selective import coverage_at, threshold_for

CALIBRATION_FILE = "calibration.json"
OOD_FILE = "calibration_ood.npz"
TEMPERATURES = tuple(float(t) for t in np.round(np.exp(np.linspace(np.log(0.5), np.log(8), 41)), 4))
OOD_QUANTILES = (0.9, 0.95, 0.98, 0.99, 1.0)


def _log_softmax(z: np.ndarray) -> np.ndarray:
    m = np.max(z, axis=-1, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)
    return z - m - np.log(np.sum(np.exp(z - m), axis=-1, keepdims=True))


def _logit(p: np.ndarray) -> np.ndarray:
    q = np.clip(np.asarray(p, np.float64), 1e-6, 1 - 1e-6)
    return np.log(q / (1 - q))


def _sigmoid(z: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-z))


def plan_logprob(
    step_logits: np.ndarray, actions: np.ndarray, temperature: float = 1.0
) -> np.ndarray:
    """Log-probability of each plan at `temperature`.

    `step_logits` [N, K, V]: logits at each completion step, -inf where the grammar forbids;
    `actions` [N, K]: the chosen token ids, -1 after the plan's `<eos>`."""
    valid = actions >= 0
    lp = _log_softmax(step_logits / temperature)
    picked = np.take_along_axis(lp, np.maximum(actions, 0)[..., None], axis=-1)[..., 0]
    return np.where(valid, picked, 0.0).sum(axis=-1)


def _log_loss(conf: np.ndarray, correct: np.ndarray) -> float:
    p = np.clip(conf, 1e-6, 1 - 1e-6)
    return float(-np.mean(correct * np.log(p) + (1 - correct) * np.log(1 - p)))


def fit_temperature(step_logits: np.ndarray, actions: np.ndarray, correct: Sequence[bool]) -> float:
    """The grid temperature minimising the log-loss of plan correctness."""
    c = np.asarray(correct, np.float64)
    losses = [_log_loss(np.exp(plan_logprob(step_logits, actions, t)), c) for t in TEMPERATURES]
    return TEMPERATURES[int(np.argmin(losses))]


def scale_confidence(conf: Sequence[float] | np.ndarray, temperature: float) -> np.ndarray:
    """Top-label temperature scaling: the confidence's log-odds divided by `temperature`.
    For a model whose plan distribution is not a softmax of its own (a mixture of routers)."""
    return _sigmoid(_logit(np.asarray(conf, np.float64)) / temperature)


def fit_confidence_temperature(conf: Sequence[float], correct: Sequence[bool]) -> float:
    """The grid temperature minimising the log-loss of correctness under `scale_confidence`."""
    c = np.asarray(correct, np.float64)
    losses = [_log_loss(scale_confidence(conf, t), c) for t in TEMPERATURES]
    return TEMPERATURES[int(np.argmin(losses))]


def fit_logistic(
    x: np.ndarray, y: Sequence[bool] | np.ndarray, *, l2: float = 1e-2, iters: int = 50
) -> tuple[np.ndarray, float]:
    """Weights and bias of an L2-regularised logistic regression (Newton's method on
    standardised features; the bias is not penalised). Small and exact: calibration fits
    a few parameters on a few hundred validation rows."""
    x = np.asarray(x, np.float64)
    t = np.asarray(y, np.float64)
    mu, sd = x.mean(axis=0), x.std(axis=0)
    sd = np.where(sd > 0, sd, 1.0)
    z = np.column_stack([(x - mu) / sd, np.ones(len(x))])
    w = np.zeros(z.shape[1])
    reg = np.full(z.shape[1], l2 * len(x))
    reg[-1] = 0.0
    for _ in range(iters):
        p = _sigmoid(z @ w)
        grad = z.T @ (p - t) + reg * w
        hess = (z * (p * (1 - p))[:, None]).T @ z + np.diag(reg) + 1e-9 * np.eye(len(w))
        step = np.linalg.solve(hess, grad)
        w -= step
        if np.max(np.abs(step)) < 1e-10:
            break
    weights = w[:-1] / sd
    return weights, float(w[-1] - np.sum(weights * mu))


def fit_confidence_model(
    confidence: np.ndarray, unfamiliarity: np.ndarray, correct: Sequence[bool]
) -> tuple[float, float, float]:
    """(slope, ood_weight, bias) of `sigmoid(slope * logit(conf) + ood_weight * u + bias)`
    fitted to plan correctness; `ood_weight` is clamped to <= 0 (refitting without it).
    Validation that is all right or all wrong has no logistic fit (the bias runs off to
    infinity): the identity is kept, so the temperature alone decides."""
    ok = np.asarray(correct, bool)
    if ok.all() or not ok.any():
        return 1.0, 0.0, 0.0
    lo = _logit(confidence)
    (a, b), c = fit_logistic(np.column_stack([lo, unfamiliarity]), correct)
    if b > 0:
        (a,), c = fit_logistic(lo[:, None], correct)
        b = 0.0
    return float(a), float(b), float(c)


# -- unfamiliarity ----------------------------------------------------------------------------


@dataclass
class OODModel:
    """Class-conditional Gaussian over hidden states with a shared precision matrix."""

    means: np.ndarray  # [C, D]
    precision: np.ndarray  # [D, D]

    @classmethod
    def fit(
        cls,
        hidden: np.ndarray,
        labels: Sequence[str],
        *,
        min_count: int = 5,
        shrinkage: float = 0.1,
    ) -> OODModel:
        h = np.asarray(hidden, np.float64)
        keys = sorted(set(labels))
        means, centred = [], []
        for k in keys:
            idx = [i for i, lab in enumerate(labels) if lab == k]
            if len(idx) < min_count:
                continue
            mu = h[idx].mean(axis=0)
            means.append(mu)
            centred.append(h[idx] - mu)
        if not means:
            raise ValueError("no class has enough examples to fit the unfamiliarity model")
        x = np.concatenate(centred)
        cov = x.T @ x / max(1, len(x) - 1)
        cov = (1 - shrinkage) * cov + shrinkage * np.trace(cov) / cov.shape[0] * np.eye(
            cov.shape[0]
        )
        return cls(np.stack(means).astype(np.float32), np.linalg.inv(cov).astype(np.float32))

    def score(self, hidden: np.ndarray) -> np.ndarray:
        """Distance to the nearest class (sqrt of the Mahalanobis form); higher = stranger."""
        d = np.asarray(hidden, np.float32)[:, None, :] - self.means[None]  # [N, C, D]
        # one BLAS product, then a row-wise dot: the three-operand einsum ran as a plain
        # loop, ~80 ms for a batch of 8 on a loaded core (most of a served request's p50)
        m = np.einsum("ncd,ncd->nc", d @ self.precision, d)
        return np.sqrt(np.maximum(m.min(axis=1), 0.0))


# -- the decision -----------------------------------------------------------------------------


@dataclass
class Calibration:
    """Temperature, thresholds and the unfamiliarity model; `decide` abstains or not."""

    temperature: float = 1.0
    confidence_threshold: float = 0.0
    ood_threshold: float = float("inf")
    target_accuracy: float = 0.95
    slope: float = 1.0
    ood_weight: float = 0.0
    bias: float = 0.0
    ood: OODModel | None = None
    fitted_on: dict[str, Any] = field(default_factory=dict)

    def confidence(self, step_logits: np.ndarray, actions: np.ndarray) -> np.ndarray:
        return np.exp(plan_logprob(step_logits, actions, self.temperature))

    def unfamiliarity(self, hidden: np.ndarray) -> np.ndarray:
        if self.ood is None:
            return np.zeros(len(hidden))
        return self.ood.score(hidden)

    def adjust(self, confidence: np.ndarray, unfamiliarity: np.ndarray) -> np.ndarray:
        """The served confidence: the temperature-scaled one, through the fitted logistic
        model of log-odds and unfamiliarity when there is one (identity by default)."""
        if (self.slope, self.ood_weight, self.bias) == (1.0, 0.0, 0.0):
            return np.asarray(confidence, np.float64)
        z = self.slope * _logit(confidence) + self.ood_weight * np.asarray(unfamiliarity)
        return _sigmoid(z + self.bias)

    def decide(self, confidence: float, unfamiliarity: float) -> str | None:
        """None to route, else the reason to abstain."""
        if unfamiliarity > self.ood_threshold:
            return "unfamiliar_request"
        if confidence < self.confidence_threshold:
            return "low_confidence"
        return None

    def keep_scores(
        self, confidence: Sequence[float], unfamiliarity: Sequence[float]
    ) -> np.ndarray:
        """One score per request ranking by trust: the confidence, minus 1 when unfamiliar, so
        a risk-coverage curve drops unfamiliar requests first."""
        c = np.asarray(confidence, np.float64)
        u = np.asarray(unfamiliarity, np.float64)
        return c - (u > self.ood_threshold).astype(np.float64)

    # -- persistence ---------------------------------------------------------------------------

    def save(self, directory: str | Path) -> Path:
        d = Path(directory)
        d.mkdir(parents=True, exist_ok=True)
        meta = {k: v for k, v in asdict(self).items() if k != "ood"}
        meta["ood_threshold"] = None if not np.isfinite(self.ood_threshold) else self.ood_threshold
        meta["format"] = 1
        (d / CALIBRATION_FILE).write_text(json.dumps(meta, indent=1), encoding="utf-8")
        if self.ood is not None:
            np.savez(d / OOD_FILE, means=self.ood.means, precision=self.ood.precision)
        return d / CALIBRATION_FILE

    @classmethod
    def load(cls, directory: str | Path) -> Calibration | None:
        """The saved calibration of a checkpoint directory, or None when it has none."""
        f = Path(directory) / CALIBRATION_FILE
        if not f.exists():
            return None
        try:
            meta = json.loads(f.read_text(encoding="utf-8"))
            ood = None
            if (Path(directory) / OOD_FILE).exists():
                z = np.load(Path(directory) / OOD_FILE)
                ood = OODModel(z["means"], z["precision"])
            thr = meta.get("ood_threshold")
            return cls(
                temperature=float(meta["temperature"]),
                confidence_threshold=float(meta["confidence_threshold"]),
                ood_threshold=float("inf") if thr is None else float(thr),
                target_accuracy=float(meta.get("target_accuracy", 0.95)),
                slope=float(meta.get("slope", 1.0)),
                ood_weight=float(meta.get("ood_weight", 0.0)),
                bias=float(meta.get("bias", 0.0)),
                ood=ood,
                fitted_on=dict(meta.get("fitted_on", {})),
            )
        except (json.JSONDecodeError, KeyError, TypeError, ValueError, OSError) as e:
            raise CheckpointError(f"{f}: invalid calibration ({e})") from e


def fit_thresholds(
    cal: Calibration,
    confidence: Sequence[float] | np.ndarray,
    unfamiliarity: Sequence[float] | np.ndarray,
    correct: Sequence[bool] | np.ndarray,
    *,
    target: float,
) -> Calibration:
    """Choose (ood_threshold, confidence_threshold) on validation: the pair that keeps the
    most requests at `target` selective accuracy (ties: the laxer distance threshold)."""
    c = np.asarray(confidence, np.float64)
    u = np.asarray(unfamiliarity, np.float64)
    ok = np.asarray(correct, bool)
    best: tuple[float, float, float] = (-1.0, float("inf"), float("inf"))
    for q in sorted(OOD_QUANTILES, reverse=True):
        t_ood = float("inf") if q >= 1.0 or cal.ood is None else float(np.quantile(u, q))
        keep = u <= t_ood
        scores = np.where(keep, c, -1.0)
        cov = coverage_at(scores, ok, target)
        if cov > best[0]:
            thr = threshold_for(scores, ok, target)
            best = (cov, t_ood, max(thr, 0.0) if np.isfinite(thr) else 1.0 + 1e-9)
    cal.ood_threshold, cal.confidence_threshold = best[1], best[2]
    cal.target_accuracy = target
    return cal


def kept_rows(
    rows: list[dict[str, Any]], plans: list[list[str]], reference: list[list[str]]
) -> list[dict[str, Any]]:
    """The validation `rows` whose tuned plan (`plans`) equals the reference router's.

    Why: a preference stage moves the router towards what creators chose where that differs
    from the label, so on the rows whose plan the stage changed the label no longer says
    what is right. Abstain thresholds fitted against labels there count the preference as
    an error and make the served router refuse it."""
    return [r for r, p, q in zip(rows, plans, reference, strict=True) if list(p) == list(q)]


def agreed_rows(
    router: Any, reference: Any, rows: list[dict[str, Any]], *, batch_size: int, min_rows: int = 40
) -> list[dict[str, Any]]:
    """`kept_rows` of `router` against the `reference` router (both `Router`s) on `rows`,
    or all of `rows` when fewer than `min_rows` are kept (too few to fit thresholds on)."""
    requests = [r["request"] for r in rows]
    plans, _ = router.route_raw(requests, batch_size=batch_size)
    ref, _ = reference.route_raw(requests, batch_size=batch_size)
    kept = kept_rows(rows, plans, ref)
    return kept if len(kept) >= min_rows else rows


def fit_calibration(
    router: Any,
    train: Sequence[dict[str, Any]],
    validation: Sequence[dict[str, Any]],
    *,
    target: float = 0.95,
    n_train: int = 2000,
    batch_size: int = 128,
    unfamiliarity_in_confidence: bool = False,
) -> Calibration:
    """Fit temperature, the unfamiliarity model (on up to `n_train` training examples) and
    the abstention thresholds (on `validation`) for `router`; sets `router.calibration`.
    `unfamiliarity_in_confidence`: also fit the logistic confidence model (module doc)."""
    rows = list(train)[:n_train]
    hidden = router.plan_states([r["request"] for r in rows], batch_size=batch_size)
    ood = OODModel.fit(hidden, [plan_signature(r["plan"]) for r in rows])
    logits, actions, hid, correct = [], [], [], []
    id_to_step = dict(zip(router.grammar.step_ids, router.catalog.names, strict=True))
    for s in range(0, len(validation), batch_size):
        chunk = list(validation[s : s + batch_size])
        comps, an = router.analyse([r["request"] for r in chunk])
        logits.append(an.step_logits)
        actions.append(an.actions)
        hid.append(an.hidden)
        for r, c in zip(chunk, comps, strict=True):
            correct.append([id_to_step[t] for t in c if t in id_to_step] == list(r["plan"]))
    lg, ac = np.concatenate(logits), np.concatenate(actions)
    temp = fit_temperature(lg, ac, correct)
    cal = Calibration(temperature=temp, ood=ood)
    conf = cal.confidence(lg, ac)
    unfam = cal.unfamiliarity(np.concatenate(hid))
    if unfamiliarity_in_confidence and cal.ood is not None:
        cal.slope, cal.ood_weight, cal.bias = fit_confidence_model(conf, unfam, correct)
        conf = cal.adjust(conf, unfam)
    fit_thresholds(cal, conf, unfam, correct, target=target)
    cal.fitted_on = {
        "validation": len(validation),
        "validation_accuracy": float(np.mean(correct)) if correct else float("nan"),
        "train_for_ood": len(rows),
    }
    router.calibration = cal
    return cal
