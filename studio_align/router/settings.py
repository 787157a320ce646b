"""The router pipeline's settings (SFT, DPO, KTO, GRPO and their evaluation), the inputs of
`train router --logs`, and what a pipeline run returns. Pydantic and dataclasses only: no
JAX, so `config show router` is cheap. The quickstart's config extends `RouterSettings`."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import Field

from studio_align.config import Strict


class RouterSettings(Strict):
    """The router stages' tuned settings: model, steps and learning rates of SFT, DPO, KTO
    and GRPO, evaluation batch and abstain target. Shared by the quickstart and
    `train router --logs` (`from_logs.py`), so both train with the same defaults."""

    seed: int = 0
    vocab_size: int = Field(1024, ge=300)
    # 3 layers, not 2: leave-templates-out validation 0.853 -> 0.890 (docs/router.md)
    model: dict[str, Any] = Field(
        default_factory=lambda: {
            "d_model": 128, "num_layers": 3, "num_heads": 4, "num_kv_heads": 1,
            "head_dim": 32, "d_ff": 512, "max_seq_len": 128,
        }
    )  # fmt: skip
    # the router reads requests through this pretrained encoder (`models.conditioned`):
    # both hand-written validation sets 0.915 after 300 SFT steps, against 0.858-0.864 for
    # the from-scratch router after 800 (docs/router.md). "none": the from-scratch decoder
    # with a BPE tokenizer trained on the requests (set sft_steps = 800 with it)
    encoder: Literal["use-multilingual-v3", "none"] = "use-multilingual-v3"
    # fine-tune the encoder's layers above its (frozen) piece table too: with refusals in
    # the data, hand-written validation (272 requests, 2 seeds) 0.899 -> 0.928, SFT 2.5x
    # slower (docs/experiments/router-refusals-and-encoder-fine-tuning.md)
    train_encoder: bool = True
    batch_size: int = 32
    # 300 x 32 examples: validation above was measured at 300 (the encoder reads every
    # request at every step; 300 steps took 33 s at load 2-4)
    sft_steps: int = 300
    sft_lr: float = 1e-3
    # export a moving average of SFT's weights (`[optim] ema_decay`); off: 0.99 and 0.995
    # lost 0.8 point on hand-written validation (docs/experiments/router-weight-ema-wide-lexicon-seed-vote.md)
    sft_ema_decay: float | None = None
    # segmentation noise on SFT's requests (`RouterTask(split_prob=)`); off: little gain on
    # validation (docs/experiments/router-unfamiliarity-confidence-segmentation-noise.md)
    sft_split_prob: float = Field(0.0, ge=0.0, lt=1.0)
    preference: Literal["dpo", "kto", "dpo+kto", "none"] = "dpo"
    dpo_steps: int = 150
    dpo_beta: float = 0.5
    dpo_lr: float = 1e-4
    # RPO: + alpha * NLL of the chosen (creator-preferred) plans; 150 steps at 1e-4 with
    # alpha 2 chosen on the compiled logs' held-out creators (docs/router.md)
    dpo_nll_alpha: float = 2.0
    # replay: + alpha * SFT loss on the generator-labelled SFT training requests beside DPO
    # (`training/replay.py`; 0 = off). 4, chosen on validation over 2 seeds: the final
    # router's forgetting on hand-written validation 4.95 -> 2.25 points, pooled -2.2,
    # creators' agreement -1.9 points (docs/experiments/router-sft-replay-during-dpo.md)
    dpo_replay_alpha: float = Field(4.0, ge=0.0)
    kto_steps: int = 40
    kto_lr: float = 1e-4
    grpo_steps: int = 50
    grpo_group: int = 8
    grpo_prompts: int = 8
    grpo_lr: float = 1e-4
    grpo_beta: float = 0.0  # KL penalty to the stage's starting router
    # each preference stage delivers w * tuned + (1 - w) * SFT weights (WiSE-FT; 1 = off);
    # 0.7: the largest w at which both DPO and GRPO forget <= 2 points on the validation
    # agreed subset in held-out phrasings (held-out clauses + handwritten_val: 1.4 / -1.6;
    # at 0.8 DPO forgets 3.0) while creators' held-out finals rise 0.638 -> 0.789 / 0.776
    # (docs/experiments/router-forgetting-and-serving-with-memory.md; the training-phrasing
    # split cannot show forgetting)
    tuned_weight: float = Field(0.7, ge=0.0, le=1.0)
    eval_batch_size: int = 128
    # abstain thresholds are fitted on validation for this selective accuracy (docs/router.md)
    abstain_target: float = Field(0.95, gt=0.0, le=1.0)
    # the confidence also hears the unfamiliarity score (`fit_calibration`); off: little gain
    # on validation (docs/experiments/router-unfamiliarity-confidence-segmentation-noise.md)
    unfamiliarity_in_confidence: bool = False


class FromLogsConfig(RouterSettings):
    """The settings of `train router --logs`: the quickstart's router settings, then the inputs.

    Flat, so `--set sft_steps=200` means what it means for `quickstart`.
    """

    logs: list[Path] = Field(min_length=1)  # event logs: *.jsonl files or directories
    examples: list[Path] = Field(default_factory=list)  # extra labelled {"request", "plan"} files
    log_examples: bool = True  # also SFT on the logs' own labels (accepted / final plans)
    val: list[Path] = Field(default_factory=list)  # validation examples; none: a tenth set aside
    eval: dict[str, Path] = Field(default_factory=dict)  # extra evaluation sets, name = file
    base: Path | None = None  # a Hugging Face Gemma 3 directory to start from
    init_from: Path | None = None  # a router checkpoint to start from
    heldout_fraction: float = Field(0.2, ge=0.0, lt=1.0)  # of (creator, session) groups
    check_images: bool = True  # logged image paths must exist (as `data compile`)


@dataclass
class StageResult:
    stage: str
    status: str = "ok"
    seconds: float = 0.0
    eval_seconds: float = 0.0
    checkpoint: str | None = None  # the router this stage delivers (evaluated)
    trained: str | None = None  # what it trained (differs when mixed with SFT)
    figures: dict[str, Any] = field(default_factory=dict)

    def row(self) -> dict[str, Any]:
        f = self.figures
        nan = float("nan")
        return {
            "stage": self.stage,
            "status": self.status,
            "seconds": round(self.seconds, 1),
            "eval_seconds": round(self.eval_seconds, 1),
            "heldout_exact": f.get("heldout", {}).get("exact_plan_accuracy", nan),
            "creator_agreement": f.get("creators", {}).get("exact_plan_accuracy", nan),
            "handwritten_exact": f.get("handwritten", {}).get("exact_plan_accuracy", nan),
            "handwritten_v2_exact": f.get("handwritten_v2", {}).get("exact_plan_accuracy", nan),
            "handwritten_v2_ece": f.get("handwritten_v2", {}).get("ece", nan),
            "heldout_majority_exact": f.get("heldout_majority", {}).get("exact_plan_accuracy", nan),
            "handwritten_majority_exact": f.get("handwritten_majority", {}).get(
                "exact_plan_accuracy", nan
            ),
            "validity_rate": min(
                (v["validity_rate"] for v in f.values() if "validity_rate" in v), default=nan
            ),
            "checkpoint": self.checkpoint,
        }


@dataclass
class PipelineResult:
    out: Path
    stages: list[StageResult]
    router: Path | None
    report: Path | None
    missing: list[str]
