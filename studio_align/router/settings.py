"""The router pipeline's settings, the inputs of `train router --logs`, the data its stages
read and what a pipeline run returns.

Design choices:
- One table per stage, and each is that stage's own run-config section: `[dpo]` is
  `train dpo`'s `[dpo]` (`DPOConfig`), `[kto]` is `KTOConfig`, `[grpo]` is `GRPOConfig`,
  each with the stage's `steps` and its `[<stage>.optim]` (`OptimConfig`); `[sft]` has
  SFT's steps, optimizer and segmentation noise. `stages.py` builds each stage's run
  config (`stages/<stage>/config.toml`) from them. What every stage shares (seed, batch
  size, model, encoder, the mixing weight) sits at the top, `[calibration]` after the stages.
- Defaults are the pipeline's own; where one was measured, its comment gives the measured
  effect and the study in docs/experiments/.
- The flat keys of the earlier shape (`sft_steps`, `dpo_beta`, ...) are not accepted: each
  is named in one error with the key it became (`MOVED`).
- Pydantic and dataclasses only: no JAX, so `config show router` is cheap. The quickstart's
  config extends `RouterSettings`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator
from pydantic_core import PydanticCustomError

from studio_align.config import Strict
from studio_align.models.encoders.adapters import EncoderLora
from studio_align.router import eval as packaged
from studio_align.training.dpo_config import DPOConfig
from studio_align.training.grpo_config import GRPOConfig
from studio_align.training.kto_config import KTOConfig
from studio_align.training.run_config import DecayName, OptimConfig


class SFTOptim(OptimConfig):
    """`[sft.optim]`: SFT's `[optim]`; unless set, warm-up is a tenth of the steps, at most 20."""

    learning_rate: float = Field(1e-3, gt=0)
    # export a moving average of the weights; measured effect of 0.99 and 0.995: -0.8 point
    # on hand-written validation, so off (docs/experiments/router-weight-ema-wide-lexicon-seed-vote.md)
    ema_decay: float | None = Field(None, gt=0, lt=1)


class PreferenceOptim(OptimConfig):
    """`[dpo.optim]`, `[kto.optim]`: the stage's `[optim]`; unless set, warm-up is a tenth
    of the steps, at most 20."""

    learning_rate: float = Field(1e-4, gt=0)


class GRPOOptim(OptimConfig):
    """`[grpo.optim]`: GRPO's `[optim]`, at a constant learning rate."""

    learning_rate: float = Field(1e-4, gt=0)
    decay: DecayName = "constant"


MAX_WARMUP = 20  # a stage's warm-up, unless set: a tenth of its steps, at most this


def _default_warmup(optim: OptimConfig, steps: int) -> None:
    """Unless `[<stage>.optim] warmup_steps` is set: a tenth of the stage's steps, at most 20."""
    if "warmup_steps" not in optim.model_fields_set:
        optim.warmup_steps = min(MAX_WARMUP, steps // 10)


class SFTStage(Strict):
    """`[sft]`: supervised fine-tuning on the labelled routing examples (`train sft`)."""

    # x batch_size examples, each seen once (the quickstart generates that many); measured
    # effect with the encoder: both hand-written validation sets 0.915 at 300
    # (docs/experiments/router-pretrained-encoder.md). 0: no SFT (`--init-from` or `--base`)
    steps: int = Field(300, ge=0)
    # examples per SFT step (the preference stages keep the shared `batch_size`); measured
    # effect of 64 against 32 at 300 steps: the four hand-written validation sets (368
    # requests, 6 seeds) 0.900 -> 0.920 exact, no set lower, SFT 1.6x the time
    # (docs/experiments/router-encoder-lr-colloquial-corrections.md)
    batch_size: int = Field(64, ge=1)
    # segmentation noise on the requests (`RouterTask(split_prob=)`); measured effect: little
    # gain on validation, so off (docs/experiments/router-unfamiliarity-confidence-segmentation-noise.md)
    split_prob: float = Field(0.0, ge=0.0, lt=1.0)
    optim: SFTOptim = Field(default_factory=SFTOptim)

    @model_validator(mode="after")
    def _warmup(self) -> SFTStage:
        _default_warmup(self.optim, self.steps)
        return self


class DPOStage(DPOConfig):
    """`[dpo]`: DPO on the re-route pairs: `train dpo`'s `[dpo]`, with the stage's steps and optimizer."""

    beta: float = Field(0.5, gt=0)
    # RPO: + alpha * NLL of the chosen (creator-preferred) plans; measured effect at 150 steps
    # of 1e-4: agreement with validation creators' finals 0.875 (alpha 1: 0.871)
    # (docs/experiments/router-quickstart-figures.md)
    nll_alpha: float = Field(2.0, ge=0)
    # + alpha * SFT loss on SFT's training requests beside DPO (`training/replay.py`; 0 = off);
    # measured effect of 4: the final router's forgetting on hand-written validation
    # 4.95 -> 2.25 points (docs/experiments/router-sft-replay-during-dpo.md)
    replay_alpha: float = Field(4.0, ge=0)
    steps: int = Field(150, ge=1)  # the stage's `[train] steps`
    optim: PreferenceOptim = Field(default_factory=PreferenceOptim)

    @model_validator(mode="after")
    def _warmup(self) -> DPOStage:
        _default_warmup(self.optim, self.steps)
        return self


class KTOStage(KTOConfig):
    """`[kto]`: KTO on accepted and abandoned routes: `train kto`'s `[kto]`, with the stage's
    steps and optimizer."""

    steps: int = Field(40, ge=1)  # the stage's `[train] steps`
    optim: PreferenceOptim = Field(default_factory=PreferenceOptim)

    @model_validator(mode="after")
    def _warmup(self) -> KTOStage:
        _default_warmup(self.optim, self.steps)
        return self


class GRPOStage(GRPOConfig):
    """`[grpo]`: GRPO on the creators' endorsed plans: `train grpo`'s `[grpo]`, with the
    stage's steps (its `[train] steps`) and optimizer."""

    steps: int = Field(50, ge=0)  # the stage's `[train] steps`; 0: no GRPO stage
    optim: GRPOOptim = Field(default_factory=GRPOOptim)

    @model_validator(mode="before")
    @classmethod
    def _moved(cls, data: Any) -> Any:
        """Replaces `GRPOConfig`'s check that `steps` lives in `[train]`: a stage section
        carries its own steps, and the stage writes them to its run config's `[train]`."""
        return data


class CalibrationSettings(Strict):
    """`[calibration]`: each stage's router is calibrated on validation (`fit_calibration`)."""

    # abstain thresholds are fitted on validation for this selective accuracy
    abstain_target: float = Field(0.95, gt=0.0, le=1.0)
    # the confidence also hears the unfamiliarity score; measured effect: little gain on
    # validation, so off (docs/experiments/router-unfamiliarity-confidence-segmentation-noise.md)
    unfamiliarity_in_confidence: bool = False
    # the packaged hand-written validation sets (`router.eval`) the calibration is fitted
    # on, with the generator's first 80 validation requests; measured effect of adding the
    # long messages of handwritten_val11: wrong served plans on other long messages 0.57 ->
    # 0.21, but served abstention on short validation sets 3 % -> 23 % (3 seeds), so off
    # (docs/experiments/router-calibration-long-rows.md)
    sets: tuple[str, ...] = Field(("handwritten_val",), min_length=1)

    @field_validator("sets")
    @classmethod
    def _packaged(cls, sets: tuple[str, ...]) -> tuple[str, ...]:
        unknown = [n for n in sets if n not in packaged.VAL_SETS]
        if unknown:
            raise ValueError(
                f"not packaged validation sets: {unknown}; choose from {list(packaged.VAL_SETS)}"
            )
        return sets


class PriorSettings(Strict):
    """`[prior]`: the plan prior that re-ranks the plans of requests longer than the
    router's window (`router.prior`), fitted after SFT and carried by every later stage."""

    # a long request's plan is the best of the greedy plan and the prior's `top_k` by
    # log p_router + strength * log p_prior; 0 = no prior. Measured effect of 2.0 with the
    # top 3: long messages 0.38 -> 0.44 exact on the set not chosen on (3 seeds); no other
    # packaged set has a request that long (docs/experiments/router-plan-prior.md)
    strength: float = Field(2.0, ge=0.0)
    top_k: int = Field(3, ge=1)
    # then windows of whole sentences of a long request are decoded alone, and a window's plan
    # wins where log p(plan | window) + windows * log p_prior(plan) beats the request's plan
    # (`router/windows.py`); 0 = no windows. Measured effect of 0.25, chosen on
    # handwritten_val11, on handwritten_val12 (3 seeds): SFT exact 0.458 -> 0.667; the served
    # router abstains on 29 % (31 %) and routes 28 % wrong (35 %); on handwritten_val15,
    # written after, SFT 0.604 -> 0.729. A long request then takes p50 77 ms to route, one at
    # a time on two cores, against 24 (docs/experiments/router-long-windows.md)
    windows: float = Field(0.25, ge=0.0)
    # with windows, only the windows holding the sentence most like a request compete
    # (`router/asks.py`, a detector shipped with the package). Measured effect, chosen on
    # handwritten_val11, on handwritten_val12 and val15 together (3 seeds): SFT exact 0.667 ->
    # 0.808; the served router 0.608 -> 0.666, abstaining on 17.5 % (30.8 %) and routing
    # 22.5 % wrong (25.9 %) (docs/experiments/router-ask-detector.md)
    asks: bool = True


# the flat keys these settings once had -> where each lives now
MOVED = {
    "sft_steps": "sft.steps",
    "sft_lr": "sft.optim.learning_rate",
    "sft_ema_decay": "sft.optim.ema_decay",
    "sft_split_prob": "sft.split_prob",
    "dpo_steps": "dpo.steps",
    "dpo_lr": "dpo.optim.learning_rate",
    "dpo_beta": "dpo.beta",
    "dpo_nll_alpha": "dpo.nll_alpha",
    "dpo_replay_alpha": "dpo.replay_alpha",
    "kto_steps": "kto.steps",
    "kto_lr": "kto.optim.learning_rate",
    "grpo_steps": "grpo.steps",
    "grpo_group": "grpo.group_size",
    "grpo_prompts": "grpo.prompts_per_step",
    "grpo_lr": "grpo.optim.learning_rate",
    "grpo_beta": "grpo.beta",
    "abstain_target": "calibration.abstain_target",
    "unfamiliarity_in_confidence": "calibration.unfamiliarity_in_confidence",
}


class RouterSettings(Strict):
    """The router pipeline's settings: what the stages share, then one table per stage.
    Shared by the quickstart and `train router --logs` (`from_logs.py`), so both train
    with the same defaults."""

    seed: int = 0
    vocab_size: int = Field(1024, ge=300)  # the tokenizer trained on the requests (encoder "none")
    # the decoder; measured effect of 3 layers against 2: leave-templates-out validation
    # 0.890 against 0.853 (docs/experiments/router-quickstart-figures.md)
    model: dict[str, Any] = Field(
        default_factory=lambda: {
            "d_model": 128, "num_layers": 3, "num_heads": 4, "num_kv_heads": 1,
            "head_dim": 32, "d_ff": 512, "max_seq_len": 128,
        }
    )  # fmt: skip
    # the router reads requests through this pretrained encoder (`models.conditioned`);
    # measured effect: both hand-written validation sets 0.915 after 300 SFT steps, against
    # 0.858-0.864 for the from-scratch router after 800 (docs/experiments/router-pretrained-encoder.md).
    # "none": the from-scratch decoder with a BPE tokenizer trained on the requests
    encoder: Literal["use-multilingual-v3", "none"] = "use-multilingual-v3"
    # SFT fine-tunes the encoder's layers above its (frozen) piece table too (the preference
    # stages keep it as SFT left it); measured effect with
    # refusals in the data: hand-written validation (272 requests, 2 seeds) 0.899 -> 0.928,
    # SFT 2.5x slower (docs/experiments/router-refusals-and-encoder-fine-tuning.md)
    train_encoder: bool = True
    # with `train_encoder`, train low-rank adapters on the encoder instead of its weights
    # (`EncoderLora`; `table = true` adapts the piece table too); None: the weights above
    # the table. Measured effect of rank 8: hand-written validation (712 requests, 4 seeds)
    # -1.8 points, -2.5 with the table, same SFT time (docs/experiments/router-encoder-lora.md)
    encoder_lora: EncoderLora | None = None
    # what the decoder reads of the encoder at each position of the request's text
    # (`models.conditioned`): per-piece features and the sentence vector, one of them alone
    conditioning: Literal["pieces+sentence", "sentence", "pieces"] = "pieces+sentence"
    # examples per DPO and KTO step (SFT's: sft.batch_size; GRPO's: grpo.prompts_per_step)
    batch_size: int = Field(32, ge=1)
    # requests per batch when calibrating, evaluating and reporting
    eval_batch_size: int = Field(128, ge=1)
    preference: Literal["dpo", "kto", "dpo+kto", "none"] = "dpo"
    # each preference stage delivers w * tuned + (1 - w) * SFT weights (WiSE-FT; 1 = off);
    # measured effect of 0.7: DPO and GRPO forget at most 2 points on held-out phrasings of
    # validation where creators agree with the labels, while creators' held-out finals rise
    # 0.638 -> 0.789 / 0.776 (docs/experiments/router-forgetting-and-serving-with-memory.md)
    tuned_weight: float = Field(0.7, ge=0.0, le=1.0)
    sft: SFTStage = Field(default_factory=SFTStage)
    dpo: DPOStage = Field(default_factory=DPOStage)
    kto: KTOStage = Field(default_factory=KTOStage)
    grpo: GRPOStage = Field(default_factory=GRPOStage)
    calibration: CalibrationSettings = Field(default_factory=CalibrationSettings)
    prior: PriorSettings = Field(default_factory=PriorSettings)

    @model_validator(mode="before")
    @classmethod
    def _moved(cls, data: Any) -> Any:
        """A flat key of the earlier shape gets one line naming the key it became."""
        if isinstance(data, Mapping):
            old = [k for k in MOVED if k in data]
            if old:
                raise PydanticCustomError(
                    "moved_key",
                    "{moved} (the stages' settings are one table per stage; `studio-align "
                    "config show router` lists them)",
                    {"moved": "; ".join(f"`{k}` is now `{MOVED[k]}`" for k in old)},
                )
        return data


class FromLogsConfig(RouterSettings):
    """The settings of `train router --logs`: the quickstart's router settings, then the
    inputs; `--set sft.steps=200` means what it means for `quickstart`."""

    logs: list[Path] = Field(min_length=1)  # event logs: *.jsonl files or directories
    examples: list[Path] = Field(default_factory=list)  # extra labelled {"request", "plan"} files
    log_examples: bool = True  # also SFT on the logs' own labels (accepted / final plans)
    val: list[Path] = Field(default_factory=list)  # validation examples; none: a tenth set aside
    eval: dict[str, Path] = Field(default_factory=dict)  # extra evaluation sets, name = file
    base: Path | None = None  # a Hugging Face Gemma 3 directory to start from
    init_from: Path | None = None  # a router checkpoint to start from
    heldout_fraction: float = Field(0.2, ge=0.0, lt=1.0)  # of (creator, session) groups
    check_images: bool = True  # logged image paths must exist (as `data compile`)


@dataclass(frozen=True)
class StageData:
    """What the router stages read: the quickstart's simulated platform, or the logs of
    `train router --logs`. Rows are labelled routing examples (`{"request", "plan"}`)."""

    train: list[dict[str, Any]]  # SFT's examples, rehearsed by DPO's replay
    val: list[dict[str, Any]]  # validation: SFT's held-out loss, calibration
    compiled: Path | None = None  # `data compile` output: DPO pairs, KTO samples, GRPO prompts
    eval_sets: dict[str, list[dict[str, Any]]] = field(default_factory=dict)  # scored per stage
    base: Path | None = None  # a Hugging Face directory, for a stage with no router to start from


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
