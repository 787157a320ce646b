"""The sections every trainer's run config shares: `[train]`, `[optim]`, `[mesh]`,
`[checkpoint]`, `[distributed]`, `[model]`, `[data]`.

Pydantic models only, without JAX: `studio-align config show` and `train KIND --help`
read them without importing the trainers; each trainer's module re-exports its own."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field, model_validator

from studio_align.config import Strict
from studio_align.errors import ConfigError
from studio_align.models.mesh_config import MeshConfig

OptimizerName = Literal["adamw", "adam", "sgd", "lion", "adafactor"]


DecayName = Literal["cosine", "linear", "constant"]


class OptimConfig(Strict):
    """`[optim]`: optimizer, schedule and clipping."""

    name: OptimizerName = "adamw"
    learning_rate: float = Field(3e-4, gt=0)
    warmup_steps: int = Field(0, ge=0)
    decay: DecayName = "cosine"
    decay_steps: int | None = Field(None, ge=1)  # None: the run's remaining steps after warm-up
    final_lr_ratio: float = Field(0.1, ge=0, le=1)  # lr at the end of decay, as a fraction
    weight_decay: float = Field(0.0, ge=0)
    decay_all: bool = False  # also decay vectors/scalars (norm scales, biases)
    b1: float = Field(0.9, ge=0, lt=1)
    b2: float = Field(0.999, ge=0, lt=1)
    eps: float = Field(1e-8, gt=0)
    momentum: float = Field(0.0, ge=0, lt=1)  # sgd only
    nesterov: bool = False  # sgd only
    clip_grad_norm: float | None = Field(1.0, ge=0)  # 0 (or None): no clipping
    # a moving average of the weights, exported instead of the last step's (`ema.py`)
    ema_decay: float | None = Field(None, gt=0, lt=1)
    # per-group learning rates: {"encoder": 0.1} multiplies the update (so the learning
    # rate and decoupled weight decay) of every parameter whose path has a part named
    # "encoder"; a parameter in several groups gets the product
    lr_scale: dict[str, Annotated[float, Field(ge=0)]] = Field(default_factory=dict)


class CheckpointConfig(Strict):
    """`[checkpoint]`: where, how often and how many checkpoints to keep."""

    enabled: bool = True  # false: no checkpoints at all (the run cannot resume)
    dir: Path | None = None  # default: RUN_DIR/checkpoints
    every: int = Field(100, ge=0)  # 0: only the final step
    keep: int = Field(3, ge=1)
    resume: bool = True  # continue from the latest checkpoint in `dir` if there is one
    async_save: bool = True


class DistributedConfig(Strict):
    """`[distributed]`: multi-process JAX. Off by default (one process, all local devices)."""

    enabled: bool = False
    coordinator_address: str | None = None  # "host:port" of process 0; None: auto-detect
    num_processes: int | None = Field(None, ge=1)
    process_id: int | None = Field(None, ge=0)
    local_device_ids: list[int] | None = None
    initialization_timeout: int = Field(300, ge=1)  # seconds to wait for every process
    heartbeat_timeout: int = Field(100, ge=1)  # seconds of silence before a peer is lost
    shutdown_timeout: int = Field(300, ge=1)  # seconds the final barrier waits at exit
    cpu_collectives: str = "gloo"  # CPU backends' cross-process collectives (gloo | mpi)


class TrainConfig(Strict):
    """`[train]`: how long, how big, how often to log and evaluate."""

    steps: int | None = Field(None, ge=1, le=10**9)  # optimizer steps; wins over epochs
    epochs: float | None = Field(None, gt=0)  # needs a source with `steps_per_epoch`
    batch_size: int = Field(16, ge=1, le=1 << 20)  # examples per step (all micro-batches)
    grad_accum: int = Field(1, ge=1)  # micro-batches per step
    seed: int = 0
    log_every: int = Field(10, ge=1)
    eval_every: int = Field(0, ge=0)  # 0: evaluate at the end only (when there is an eval)
    progress: bool = True  # stderr: a bar on a TTY, else a heartbeat line every 20 s
    metrics_hook: bool = True  # fire `studio_align_on_metrics` through the plugin host

    @model_validator(mode="after")
    def _accum_divides(self) -> TrainConfig:
        if self.batch_size % self.grad_accum:
            raise ValueError(
                f"batch_size ({self.batch_size}) must be a multiple of grad_accum ({self.grad_accum})"
            )
        return self

    def total_steps(self, steps_per_epoch: int | None = None) -> int:
        if self.steps is not None:
            return self.steps
        if self.epochs is not None:
            if steps_per_epoch is None:
                raise ConfigError(
                    "train.epochs needs a batch source of known length; set train.steps"
                )
            return max(1, round(self.epochs * steps_per_epoch))
        raise ConfigError("set train.steps or train.epochs")


class TrainRunConfig(Strict):
    """The sections every trainer's run config shares; trainers add `[model]`, `[data]`..."""

    run_dir: Path | None = Path("runs/run")  # None: nothing written (metrics, checkpoints)
    train: TrainConfig = TrainConfig()
    optim: OptimConfig = OptimConfig()
    mesh: MeshConfig = MeshConfig()
    checkpoint: CheckpointConfig = CheckpointConfig()
    distributed: DistributedConfig = DistributedConfig()


class ModelSection(Strict):
    """`[model]`: where the model starts; the task interprets it.

    `init_from` continues a saved checkpoint (e.g. an SFT run's `model/`, also the
    default reference); `base` starts from a local Hugging Face Gemma 3 directory in
    `base_dtype`; otherwise a `preset` (sized to the tokenizer) with `config` overrides is
    built fresh, with the tokenizer at `tokenizer` or one trained on the data
    (`vocab_size`). `lora` (LoraConfig fields) trains adapters only.
    """

    preset: Literal["tiny", "router", "gemma3_270m", "none"] = "router"
    config: dict[str, Any] = Field(default_factory=dict)
    lora: dict[str, Any] | None = None
    init_from: Path | None = None
    base: Path | None = None
    base_dtype: Literal["float32", "bfloat16"] = "float32"
    reference: Path | None = None  # default: init_from (or the base itself)
    tokenizer: Path | None = None  # tokenizer.json; None: the checkpoint's, or trained here
    vocab_size: int = Field(2048, ge=64)  # for a tokenizer trained here
    options: dict[str, Any] = Field(default_factory=dict)  # task-specific knobs


class RecordsSection(Strict):
    """`[data]`: a compiled-logs directory, or explicit JSONL files (which win)."""

    dir: Path | None = None  # output of `studio-align data compile`
    train: Path | None = None
    heldout: Path | None = None
    max_len: int | None = Field(default=None, ge=4)  # packed length; None: longest, rounded to 8
    eval_batch_size: int = Field(default=64, ge=1)
