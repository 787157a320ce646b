"""Simulated creators whose hidden preferences differ from the labelled data.

The labelled demo data says "make a video of X" routes to `wan.text_to_video`. Real
creators disagree in systematic ways, and a router tuned on their logs should learn it.
Each simulated creator carries hidden taste flags:

- `music_on_video`: a plan whose final output is a video gets `audio.music` appended
  (unless it already makes audio, the request attached audio, or the plan is full);
- `runway_restyle`: video restyling by `grading.film` or image editing before
  animation is re-routed to `runway.video_to_video` (`[grading.film]` on a video ->
  `[runway.video_to_video]`; `[ideogram.edit_image, wan.image_to_video]` and
  `[wan.image_to_video, grading.film]` -> `[wan.image_to_video, runway.video_to_video]`).

Most creators hold each flag (80% / 75% by default), a minority does not, so the best
any single router can do is agree with the majority; agreement with each creator's own
preferred plan is the evaluation target (`preferred_plan`).

A deployed router proposes plans (the labelled gold plan, replaced by a random valid
plan with a small probability), and each creator reacts: proposed == preferred is
accepted (rarely abandoned); otherwise re-routed to the preferred plan, abandoned, or,
rarely, accepted anyway. The result is docs/design.md `route` events, JSON Lines, that
`studio_align.data` validates and compiles (re-routes -> DPO pairs, accepted and
abandoned -> KTO samples, accepted/re-routed finals -> labelled examples).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from studio_align.catalog import Catalog, default_catalog
from studio_align.simulate.router.phrases import EDIT, GRADE, I2V, INTENTS, MUSIC, V2V, Intent
from studio_align.simulate.router.requests import LANGS, Split, make_example, render_request

VIDEO_AUDIO = ("video", "audio")


@dataclass(frozen=True)
class Creator:
    id: str
    music_on_video: bool
    runway_restyle: bool
    zh_fraction: float  # language this creator mostly writes in

    def preferred_plan(
        self, plan: Sequence[str], attachments: Sequence[str], catalog: Catalog, max_steps: int = 3
    ) -> list[str]:
        """This creator's preferred plan for a request whose labelled plan is `plan`."""
        out = list(plan)
        if self.runway_restyle:
            if out == [GRADE] and "video" in attachments:
                out = [V2V]
            elif out == [GRADE, MUSIC] and "video" in attachments:
                out = [V2V, MUSIC]
            elif out in ([EDIT, I2V], [I2V, GRADE]):
                out = [I2V, V2V]
        if self.music_on_video and len(out) < max_steps and "audio" not in attachments:
            makes = [catalog.get(s).makes for s in out]
            last = next((m for m in reversed(makes) if m is not None), None)
            if last == "video" and "audio" not in makes:
                out.append(MUSIC)
        return out


def majority_plans(
    rows: Sequence[dict[str, Any]], catalog: Catalog | None = None
) -> list[dict[str, Any]]:
    """`rows` (labelled examples) relabelled with the majority creator's preferred plan.

    The majority holds both taste flags, so this is the plan the best single router
    would give; accuracy against it says whether a tuned router moved towards creators
    on requests it was not tuned on (the held-out and handwritten sets) without
    forgetting the rest, which accuracy against the original labels cannot tell apart.
    """
    cat = catalog or default_catalog()
    maj = Creator("majority", music_on_video=True, runway_restyle=True, zh_fraction=0.5)
    return [
        {**r, "plan": maj.preferred_plan(r["plan"], r["request"].get("attachments", []), cat)}
        for r in rows
    ]


def make_creators(
    n: int, *, seed: int = 0, p_music: float = 0.8, p_runway: float = 0.75, prefix: str = "c"
) -> list[Creator]:
    rng = random.Random(f"creators:{seed}:{prefix}")
    return [
        Creator(
            id=f"{prefix}{i:03d}",
            music_on_video=rng.random() < p_music,
            runway_restyle=rng.random() < p_runway,
            zh_fraction=rng.choice([0.1, 0.5, 0.9]),
        )
        for i in range(n)
    ]


def _random_valid_plan(
    attachments: Sequence[str], catalog: Catalog, rng: random.Random
) -> list[str]:
    plan: list[str] = []
    for _ in range(rng.choice([1, 1, 2])):
        plan.append(rng.choice(catalog.allowed_next(attachments, plan)))
    return plan


@dataclass(frozen=True)
class SimConfig:
    n_creators: int = 40
    sessions_per_creator: int = 4
    requests_per_session: int = 8
    deployed_noise: float = 0.1  # probability the deployed router proposes a random plan
    p_reroute: float = 0.75  # disagreeing creator fixes the plan...
    p_abandon: float = 0.15  # ...or gives up (else accepts anyway)
    p_abandon_agree: float = 0.03  # an agreeable plan is sometimes abandoned anyway
    split: Split = "train"  # which phrasing templates requests use


def simulate_route_logs(
    creators: Sequence[Creator],
    *,
    seed: int = 0,
    config: SimConfig | None = None,
    catalog: Catalog | None = None,
    intents: Sequence[Intent] = INTENTS,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(route events, preferred examples) for `creators`.

    Route events are docs/design.md `route` lines. Preferred examples are labelled routing
    examples whose plan is the creator's own preferred plan, with `creator`, `session`
    and `gold_plan` (the labelled data's plan) alongside: the agreement evaluation set.
    """
    cfg = config or SimConfig()
    cat = catalog or default_catalog()
    rng = random.Random(f"routes:{seed}:{cfg.split}")
    t0 = datetime(2026, 11, 1, 9, 0, tzinfo=UTC)
    events: list[dict[str, Any]] = []
    preferred: list[dict[str, Any]] = []
    for creator in creators:
        for s in range(cfg.sessions_per_creator):
            session = f"{creator.id}-s{s}"
            ts = t0 + timedelta(days=rng.randrange(28), minutes=rng.randrange(600))
            for _ in range(cfg.requests_per_session):
                intent = rng.choice(intents)
                lang = "zh" if rng.random() < creator.zh_fraction else LANGS[0]
                ex = make_example(intent, render_request(intent, lang, rng, split=cfg.split))
                atts = ex["request"]["attachments"]
                want = creator.preferred_plan(ex["plan"], atts, cat)
                if rng.random() < cfg.deployed_noise:
                    proposed = _random_valid_plan(atts, cat, rng)
                else:
                    proposed = list(ex["plan"])
                ev: dict[str, Any] = {
                    "type": "route",
                    "id": f"r{len(events):06d}",
                    "ts": ts.isoformat().replace("+00:00", "Z"),
                    "creator": creator.id,
                    "session": session,
                    "request": ex["request"],
                    "proposed": proposed,
                }
                u = rng.random()
                if proposed == want:
                    ev["outcome"] = "abandoned" if u < cfg.p_abandon_agree else "accepted"
                elif u < cfg.p_reroute:
                    ev.update(outcome="rerouted", final=want)
                elif u < cfg.p_reroute + cfg.p_abandon:
                    ev["outcome"] = "abandoned"
                else:
                    ev["outcome"] = "accepted"
                events.append(ev)
                preferred.append(
                    {
                        "request": ex["request"],
                        "plan": want,
                        "gold_plan": ex["plan"],
                        "creator": creator.id,
                        "session": session,
                    }
                )
                ts += timedelta(seconds=rng.randrange(20, 400))
    return events, preferred


def demo_creator_data(
    *, seed: int = 0, n_train_creators: int = 40, n_eval_creators: int = 12
) -> dict[str, list[dict[str, Any]]]:
    """Route logs of training creators, plus preferred plans of unseen creators.

    The evaluation creators are new people (drawn from the same population of tastes)
    writing with held-out phrasings, so agreement is not inflated by memorised lines.
    """
    train_creators = make_creators(n_train_creators, seed=seed, prefix="c")
    eval_creators = make_creators(n_eval_creators, seed=seed, prefix="e")
    logs, train_pref = simulate_route_logs(train_creators, seed=seed)
    _, eval_pref = simulate_route_logs(
        eval_creators, seed=seed + 1, config=SimConfig(split="heldout", deployed_noise=0.0)
    )
    return {"route_logs": logs, "train_preferred": train_pref, "eval_preferred": eval_pref}
