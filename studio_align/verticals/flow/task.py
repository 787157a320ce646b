"""`FlowTask`: the flow generator as a `studio_align.tasks.Task` (registered as `flow`).

- `start`: the model from `[model] init_from` (a flow checkpoint) or the packaged base
  weights; the reference (unless the trainer says it needs none) is a frozen copy of
  the same weights.
- `grpo`: `grpo_prompts` turns selection records (`prompt` = "vertical: tag, tag",
  `creator`) into one prompt per distinct (tag set, creator); `policy` is a `FlowPolicy`
  over those conditions (`[model] options.sde_steps`, `noise_level`, `guidance`,
  `sde_window`, `ratio_norm`: `SDEConfig`); `reward_context` offers the reward model given as
  `[model] options.aesthetic_model` to the `aesthetic` reward.
- `dpo` (`train dpo --task flow`): Diffusion-DPO is not token-level, so the task gives
  the generic DPO trainer its objective (`dpo_objective`, `tasks.SupportsObjectiveDPO`):
  compiled `selection_pairs` (chosen image ≻ each unchosen one, images read from disk,
  condition from the prompt; `[model] options.creator` keeps one creator's pairs), the
  reference = the starting weights, `dpo.beta` as Diffusion-DPO's beta (thousands: the
  velocity errors are per-pixel means), `[model] options.dpo_anchor` as
  `FlowDPOConfig.anchor` (the velocity anchor to the reference; default 0).
  `diffusion_dpo` is the same for library callers.
- `evaluate`: diversity and Fréchet-distance ratios against the packaged base on the
  held-out tag sets; with a judge (`[model] options.judge`, a reward taken by name from
  the plugin host, and `options.creators`), per creator also the paired win rate under
  it (the demo's judge `flow_taste` is a simulated creator's hidden taste).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from flax import nnx
from PIL import Image

from studio_align.errors import ConfigError, DataError
from studio_align.generation.flow_sampler import SDEConfig
from studio_align.plugins import get_host
from studio_align.tasks import StartingPoint
from studio_align.verticals.flow.align import DPOBatches, FlowDPOConfig, flow_dpo, make_dpo_loss
from studio_align.verticals.flow.checkpoint import BASE_WEIGHTS, clone, load_flow, save_flow
from studio_align.verticals.flow.data import encode, make_dataset
from studio_align.verticals.flow.evaluate import compare, conditions
from studio_align.verticals.flow.policy import FlowPolicy


def parse_prompt(prompt: str) -> tuple[str, tuple[str, ...]]:
    """'storyboard: close-up, night' -> ('storyboard', ('close-up', 'night'))."""
    vertical, _, rest = prompt.partition(":")
    tags = tuple(t.strip() for t in rest.split(",") if t.strip())
    encode(vertical.strip(), tags)  # validates, naming the unknown vertical or tag
    return vertical.strip(), tags


def _read_image(path: str, size: int, where: str) -> np.ndarray:
    try:
        with Image.open(path) as f:
            im = f.convert("RGB")
            if im.size != (size, size):
                im = im.resize((size, size), Image.Resampling.BILINEAR)
            return np.asarray(im, np.float32) / 127.5 - 1.0
    except (OSError, ValueError) as e:
        raise DataError(f"{where}: cannot read image {path}: {e}") from None


def image_pairs(
    records: Sequence[Mapping[str, Any]], *, size: int, creator: str | None = None,
    allow_empty: bool = False,
) -> dict[str, np.ndarray] | None:  # fmt: skip
    """Diffusion-DPO pairs (model space [-1, 1]) from `selection_pairs` records."""
    rows = [r for r in records if creator is None or r.get("creator") == creator]
    if not rows:
        if allow_empty:
            return None
        who = f" of creator {creator!r}" if creator else ""
        raise DataError(f"flow dpo: no selection pairs{who} in the training records")
    xw, xl, v, t = [], [], [], []
    for i, r in enumerate(rows):
        vert, ts = parse_prompt(str(r["prompt"]))
        vid, hot = encode(vert, ts)
        xw.append(_read_image(str(r["chosen_image"]), size, f"record {i} chosen_image"))
        xl.append(_read_image(str(r["rejected_image"]), size, f"record {i} rejected_image"))
        v.append(vid)
        t.append(hot)
    return {"xw": np.stack(xw), "xl": np.stack(xl), "vertical": np.asarray(v, np.int32),
            "tags": np.stack(t).astype(np.float32)}  # fmt: skip


class FlowTask:
    name = "flow"
    algorithms = frozenset({"grpo", "dpo"})
    record_kinds: Mapping[str, str] = {"grpo": "selection_pairs", "dpo": "selection_pairs"}

    def start(
        self, model: Any, *, seed: int, records: Sequence[Mapping[str, Any]] = (),
        reference: bool = True,
    ) -> StartingPoint:  # fmt: skip
        path = getattr(model, "init_from", None) or BASE_WEIGHTS
        flow, meta = load_flow(path)
        options = dict(getattr(model, "options", None) or {})
        return StartingPoint(
            model=flow, reference=clone(flow) if reference else None,
            state={"meta": meta, "options": options, "base": path},
        )  # fmt: skip

    def grpo_prompts(
        self, start: StartingPoint, records: Sequence[Mapping[str, Any]]
    ) -> list[dict[str, Any]]:
        seen: dict[tuple[Any, ...], int] = {}
        sets: list[tuple[str, tuple[str, ...]]] = []
        out = []
        for i, r in enumerate(records):
            if "prompt" not in r:
                raise DataError(f"flow: record {i} has no 'prompt' (\"vertical: tag, tag\")")
            ts = parse_prompt(str(r["prompt"]))
            if ts not in seen:
                seen[ts] = len(sets)
                sets.append(ts)
            key = (ts, r.get("creator"))
            if key not in seen:
                seen[key] = 1
                out.append({"prompt": sets.index(ts), "creators": r.get("creator")})
        start.state["conditions"] = conditions(sets)
        return out

    def policy(self, start: StartingPoint, sampling: Any, *, max_prompt_len: int) -> FlowPolicy:

        verts, tags = start.state["conditions"]
        opts = start.state.get("options", {})
        sde = SDEConfig(
            steps=int(opts.get("sde_steps", 8)),
            noise_level=float(opts.get("noise_level", 0.7)),
            guidance=float(opts.get("guidance", 1.0)),
            window=int(opts.get("sde_window", 0)),
            ratio_norm=bool(opts.get("ratio_norm", False)),
        )
        return FlowPolicy(verts, tags, sde)

    def reward_context(self, start: StartingPoint) -> dict[str, Any]:
        model = start.state.get("options", {}).get("aesthetic_model")
        return {"aesthetic_model": model} if model else {}

    def diffusion_dpo(
        self, start: StartingPoint, pairs: dict[str, np.ndarray], cfg: FlowDPOConfig,
        *, run_dir: str | Path,
    ) -> Any:  # fmt: skip
        return flow_dpo(start.model, start.reference, pairs, cfg, run_dir=run_dir)

    def dpo_objective(
        self, start: StartingPoint, records: Sequence[Mapping[str, Any]], dpo: Any, *,
        batch_size: int, seed: int, heldout: Sequence[Mapping[str, Any]] = (),
    ) -> tuple[Any, Any, Any]:  # fmt: skip
        if dpo.loss_type != "sigmoid":
            raise ConfigError(
                f"dpo.loss_type: task 'flow' trains Diffusion-DPO (loss_type = \"sigmoid\"), "
                f"not {dpo.loss_type!r}"
            )
        opts = start.state.get("options", {})
        anchor = opts.get("dpo_anchor", 0.0)
        if isinstance(anchor, bool) or not isinstance(anchor, int | float) or anchor < 0:
            raise ConfigError(f"model.options.dpo_anchor: a number >= 0, not {anchor!r}")
        size = start.model.cfg.image_size
        creator = opts.get("creator")
        pairs = image_pairs(records, size=size, creator=creator)
        assert pairs is not None  # allow_empty=False raises instead
        loss_fn = make_dpo_loss(start.reference, beta=dpo.beta, anchor=float(anchor))
        held = image_pairs(heldout, size=size, creator=creator, allow_empty=True)
        eval_fn = None
        if held is not None:
            fixed = DPOBatches(held, min(len(held["xw"]), 64), seed)(0)
            step = nnx.jit(lambda m, b: loss_fn(m, b)[1])

            def eval_fn(model: Any) -> dict[str, float]:
                return {k: float(v) for k, v in step(model, fixed).items()}

        return DPOBatches(pairs, batch_size, seed), loss_fn, eval_fn

    def evaluate(
        self, start: StartingPoint, records: Sequence[Mapping[str, Any]]
    ) -> dict[str, float]:
        opts = start.state.get("options", {})
        judge_name, creators = opts.get("judge"), list(opts.get("creators") or ())
        if (judge_name is None) != (not creators):
            raise ConfigError(
                "model.options: 'judge' and 'creators' go together (a judge scores per creator)"
            )
        judge = get_host().reward(str(judge_name)) if judge_name is not None else None
        base, _ = load_flow(start.state["base"])  # what the run started from
        size = base.cfg.image_size
        data = make_dataset(512, seed=0, size=size)[0].astype(np.float32) / 255.0
        out: dict[str, float] = {}
        cache: dict[str, np.ndarray] = {}
        if judge is None:
            rep = compare(base, start.model, data_images=data, n_per_set=8, base_samples=cache,
                          splits=("heldout",))  # fmt: skip
            return {f"heldout/{k}": rep["heldout"][k] for k in ("diversity/ratio", "fd/ratio")}
        for name in creators:
            rep = compare(base, start.model, str(name), judge, data_images=data, n_per_set=8,
                          base_samples=cache, splits=("heldout",))  # fmt: skip
            for k in ("win_rate", "diversity/ratio", "fd/ratio"):
                out[f"{name}/heldout/{k}"] = rep["heldout"][k]
        return out

    def save(
        self, start: StartingPoint, path: Path, *, trained_by: str, metrics: Mapping[str, float]
    ) -> Path:
        return save_flow(start.model, path, {"trained_by": trained_by, "metrics": dict(metrics)})
