"""Several routers routing as one: each proposes its plan, all of them vote by probability.

Why: on hand-written requests a single small router's mistakes are mostly *unstable*: a
router trained from another seed (other generated data, other initial weights, other
batch order) fixes about as many requests as it breaks
(docs/experiments/router-weight-ema-wide-lexicon-seed-vote.md). Their
mistakes disagree, so a mixture of them is right more often than any one: on the 176
hand-written validation requests, three default routers voting scored 0.903 against
their 0.858 mean, and three fresh ones 0.852 against 0.822.

How `route` decides, per request:
- every member decodes its own greedy plan under the grammar (its usual `route_raw`);
- every distinct proposed plan is scored by every member: its constrained, renormalised
  probability, so a member also has a say on the plans it did not propose. A member's
  probability of its own plan is its decoding's; only the plans it did not propose take
  a scoring pass (`Router.plan_logps`, batched), so requests all members agree on (most
  of them) cost one decode per member and nothing more;
- the plan with the highest *mean* probability wins, and that mean is its confidence (the
  mixture's probability of the plan, comparable across requests for ECE and abstention).

Calibration: `fit_temperature(examples)` fits one temperature on the mixture confidence's
log-odds (`calibration.scale_confidence`, grid log-loss, on a validation split), and
`route` applies it. A single router's temperature rescales its step logits; a mixture has
no logits of its own, so its top-label confidence is scaled instead.

A checkpoint is a directory holding the members' router checkpoints as subdirectories and
`ensemble.json` (`{"members": ["m0", "m1", ...], "temperature": 1.0}`); `save_ensemble`
writes it, `save_temperature` updates the temperature.
Member names are plain subdirectory names: a name with a separator, `..`, or a link that
leads outside the directory is refused with one line, and nothing outside is opened.

Costs, measured in docs/router.md: training is one SFT run per member, and routing is
one decode per member plus scoring passes for the requests they disagree on. The
unfamiliarity (OOD) score, abstention and the exemplar memory are single-router features
so far.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from studio_align.errors import CheckpointError
from studio_align.router.calibration import fit_confidence_temperature, scale_confidence
from studio_align.router.format import encode_plan
from studio_align.router.router import Router
from studio_align.textfiles import read_json_object

ENSEMBLE_FILE = "ensemble.json"


def is_ensemble(path: str | Path) -> bool:
    return (Path(path) / ENSEMBLE_FILE).is_file()


def _read(f: Path) -> dict[str, Any]:
    meta = read_json_object(f, CheckpointError)
    if "members" not in meta:
        raise CheckpointError(f"{f}: not a router ensemble (no 'members')")
    return meta


def ensemble_temperature(path: str | Path) -> float:
    f = Path(path) / ENSEMBLE_FILE
    t = _read(f).get("temperature", 1.0)
    if isinstance(t, bool) or not isinstance(t, int | float) or not 0 < t < 1e3:
        raise CheckpointError(f"{f}: 'temperature' must be a positive number, not {t!r}")
    return float(t)


def member_dirs(path: str | Path) -> list[Path]:
    """The member checkpoint directories an `ensemble.json` names, each checked to lie
    inside `path` (after resolving links) before anything in it is opened."""
    root = Path(path)
    f = root / ENSEMBLE_FILE
    names = _read(f)["members"]
    if not isinstance(names, list) or not names:
        raise CheckpointError(f"{f}: 'members' must be a non-empty list of subdirectory names")
    base = root.resolve()
    out = []
    for name in names:
        bad = not isinstance(name, str) or name in ("", ".", "..") or "/" in name or "\\" in name
        d = root / str(name)
        if bad or d.resolve().parent != base:
            raise CheckpointError(f"{f}: member {name!r} is not a subdirectory of {root}")
        out.append(d)
    return out


def check_members(members: Sequence[str | Path], out: str | Path) -> None:
    """Refuse, before anything is written, an ensemble that would be wrong or destroy
    something: a member given twice, or `out` a member, inside one, holding one, or a
    folder that already has files in it."""
    root = Path(out).resolve()
    seen: dict[Path, Path] = {}
    for m in members:
        r = Path(m).resolve()
        if r in seen:
            raise CheckpointError(f"{m}: given twice (as {seen[r]}); members must differ")
        seen[r] = Path(m)
        if root == r or root.is_relative_to(r) or r.is_relative_to(root):
            raise CheckpointError(
                f"--out {out}: overlaps the member {m}; write the ensemble to a new folder"
            )
    if root.is_dir() and any(root.iterdir()):
        raise CheckpointError(f"--out {out}: not empty; write the ensemble to a new folder")


def save_ensemble(members: Sequence[str | Path], out: str | Path) -> Path:
    """Copy router checkpoints `members` into the new folder `out` as `m0`, `m1`, ... and
    write `ensemble.json` (`check_members` says what is refused)."""
    check_members(members, out)
    root = Path(out)
    root.mkdir(parents=True, exist_ok=True)
    names = []
    for i, src in enumerate(members):
        name = f"m{i}"
        shutil.copytree(src, root / name)
        names.append(name)
    save_temperature(root, 1.0, names)
    return root


def save_temperature(path: str | Path, temperature: float, names: list[str] | None = None) -> None:
    """Write `ensemble.json` with `temperature` (the members already named there by default)."""
    f = Path(path) / ENSEMBLE_FILE
    names = names if names is not None else [d.name for d in member_dirs(path)]
    meta = {"members": names, "temperature": temperature}
    f.write_text(json.dumps(meta, indent=1), encoding="utf-8")


class RouterEnsemble:
    """Routers that share a catalog, routing by their mean plan probability (module doc)."""

    calibration: Any = None  # the evaluation glue's checks: a plain route, no decisions
    memory: Any = None

    def __init__(self, members: Sequence[Router], temperature: float = 1.0) -> None:
        if not members:
            raise CheckpointError("a router ensemble needs at least one member")
        names = [tuple(m.catalog.names) for m in members]
        if any(n != names[0] for n in names):
            raise CheckpointError("router ensemble: the members route over different catalogs")
        self.members = list(members)
        self.catalog = members[0].catalog
        self.temperature = temperature

    @classmethod
    def load(cls, path: str | Path, **kwargs: Any) -> RouterEnsemble:
        members = [Router.load(d, **kwargs) for d in member_dirs(path)]
        return cls(members, temperature=ensemble_temperature(path))

    def route(
        self, requests: Sequence[Any], *, batch_size: int = 64
    ) -> tuple[list[list[str]], list[float]]:
        """Plans and calibrated confidences (`temperature` applied to the mixture's)."""
        plans, confs = self.route_raw(requests, batch_size=batch_size)
        if self.temperature == 1.0:
            return plans, confs
        return plans, [float(c) for c in scale_confidence(confs, self.temperature)]

    def fit_temperature(self, examples: Sequence[dict[str, Any]], *, batch_size: int = 64) -> float:
        """Fit and set the temperature on labelled validation examples; returns it."""
        plans, confs = self.route_raw([e["request"] for e in examples], batch_size=batch_size)
        correct = [list(p) == list(e["plan"]) for p, e in zip(plans, examples, strict=True)]
        self.temperature = fit_confidence_temperature(confs, correct)
        return self.temperature

    def route_raw(
        self, requests: Sequence[Any], *, batch_size: int = 64
    ) -> tuple[list[list[str]], list[float]]:
        """Plans and the mixture's own confidences for `requests`."""
        routed = [m.route_raw(requests, batch_size=batch_size) for m in self.members]
        cands: list[list[tuple[str, ...]]] = []
        for i in range(len(requests)):
            seen = dict.fromkeys(tuple(p[i]) for p, _ in routed)  # first proposer's order
            cands.append(list(seen))
        flat = [(i, c) for i, cs in enumerate(cands) for c in cs]
        probs = np.zeros(len(flat))
        for m, (proposed, own) in zip(self.members, routed, strict=True):
            # a member's probability of its own plan is its decoding's: score only the others
            todo = []
            for k, (i, c) in enumerate(flat):
                if tuple(proposed[i]) == c:
                    probs[k] += own[i]
                else:
                    todo.append(k)
            if not todo:
                continue
            prompts, inits = m.encode(requests)
            for s in range(0, len(todo), batch_size):
                chunk = [flat[k] for k in todo[s : s + batch_size]]
                lp = m.plan_logps(
                    [prompts[i] for i, _ in chunk],
                    [encode_plan(m.tokenizer, c) for _, c in chunk],
                    [inits[i] for i, _ in chunk],
                )
                probs[todo[s : s + batch_size]] += np.exp(lp)
        probs /= len(self.members)
        plans: list[list[str]] = []
        confs: list[float] = []
        k = 0
        for cs in cands:
            j = int(np.argmax(probs[k : k + len(cs)]))  # ties: the first proposal
            plans.append(list(cs[j]))
            confs.append(float(probs[k + j]))
            k += len(cs)
        return plans, confs


def load_any_router(path: str | Path, **kwargs: Any) -> Router | RouterEnsemble:
    """A router checkpoint or an ensemble directory, whichever `path` holds."""
    return RouterEnsemble.load(path, **kwargs) if is_ensemble(path) else Router.load(path, **kwargs)
