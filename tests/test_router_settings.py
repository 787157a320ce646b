"""The router pipeline's settings: one table per stage, each that stage's own run-config
section, shared by `quickstart` and `train router --logs`; the run configs the stages
build from them (what `stages/<stage>/config.toml` holds), and the flat keys of the
earlier shape refused in one line."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest
from click.testing import CliRunner

from studio_align.cli import main
from studio_align.config import apply_overrides, dump_toml, validate
from studio_align.errors import ConfigError, DataError
from studio_align.quickstart.config import QuickstartConfig
from studio_align.router.settings import MOVED, FromLogsConfig, RouterSettings, StageData
from studio_align.router.stages import (
    dpo_run_config,
    grpo_run_config,
    kto_run_config,
    sft_run_config,
    stage_plan,
)
from studio_align.training.dpo_config import DPORunConfig
from studio_align.training.grpo_run_config import GRPORunConfig
from studio_align.training.kto_config import KTORunConfig
from studio_align.training.sft_config import SFTConfig

ROWS = [
    {"request": {"text": f"r{i}", "attachments": []}, "plan": ["audio.music"]} for i in range(5)
]
DATA = StageData(train=ROWS, val=ROWS[:2], compiled=Path("/logs/compiled"))
SFT = Path("/runs/sft/model")


def _settings(cls: type[RouterSettings], *overrides: str) -> RouterSettings:
    base = {"logs": ["/logs"]} if cls is FromLogsConfig else {}
    keys = [o.partition("=")[0] for o in overrides]
    return validate(cls, apply_overrides(base, overrides), source="--set", overridden=keys)


def test_stage_run_configs_carry_the_pipeline_defaults() -> None:
    cfg = QuickstartConfig()
    sft = sft_run_config(Path("/out"), cfg, DATA, None)
    assert (sft.train.steps, sft.train.batch_size, sft.train.log_every) == (300, 64, 20)
    assert dpo_run_config(Path("/out"), cfg, DATA, Path("/sft")).train.batch_size == 32
    assert (sft.optim.learning_rate, sft.optim.warmup_steps, sft.optim.ema_decay) == (
        1e-3,
        20,
        None,
    )
    assert (sft.checkpoint.every, sft.checkpoint.resume, sft.checkpoint.async_save) == (
        0,
        False,
        False,
    )
    assert sft.model.config["num_layers"] == 3 and sft.model.vocab_size == 1024
    assert sft.model.options == {
        "encoder": "use-multilingual-v3",
        "train_encoder": True,
        "conditioning": "pieces+sentence",
    }
    assert sft.run_dir == Path("/out/stages/sft")
    dpo = dpo_run_config(Path("/out"), cfg, DATA, SFT)
    assert (dpo.train.steps, dpo.optim.learning_rate, dpo.optim.warmup_steps) == (150, 1e-4, 15)
    assert (dpo.dpo.beta, dpo.dpo.nll_alpha, dpo.dpo.replay_alpha) == (0.5, 2.0, 4.0)
    assert dpo.model.init_from == SFT and dpo.data.dir == DATA.compiled
    kto = kto_run_config(Path("/out"), cfg, DATA, SFT)
    assert (kto.train.steps, kto.optim.learning_rate, kto.optim.warmup_steps) == (40, 1e-4, 4)
    grpo = grpo_run_config(Path("/out"), cfg, DATA, SFT)
    assert (grpo.train.steps, grpo.train.log_every, grpo.checkpoint.every) == (50, 1, 10)
    assert (grpo.grpo.group_size, grpo.grpo.prompts_per_step, grpo.grpo.beta) == (8, 8, 0.0)
    assert (grpo.optim.learning_rate, grpo.optim.decay, grpo.optim.warmup_steps) == (
        1e-4,
        "constant",
        0,
    )
    assert (cfg.tuned_weight, cfg.eval_batch_size, cfg.calibration.abstain_target) == (
        0.7,
        128,
        0.95,
    )
    assert stage_plan(cfg) == ["sft", "dpo", "grpo"]


@pytest.mark.parametrize("cls", [QuickstartConfig, FromLogsConfig])
def test_dotted_overrides_reach_the_stage_run_configs(cls: type[RouterSettings]) -> None:
    cfg = _settings(
        cls, "sft.steps=200", "sft.optim.learning_rate=5e-4", "dpo.beta=0.3",
        "dpo.optim.warmup_steps=3", "kto.steps=300", "grpo.optim.learning_rate=3e-5",
        "grpo.group_size=4", "calibration.abstain_target=0.9",
    )  # fmt: skip
    sft = sft_run_config(Path("/out"), cfg, DATA, None)
    assert (sft.train.steps, sft.optim.learning_rate, sft.optim.warmup_steps) == (200, 5e-4, 20)
    dpo = dpo_run_config(Path("/out"), cfg, DATA, SFT)
    assert (dpo.dpo.beta, dpo.dpo.nll_alpha, dpo.optim.warmup_steps) == (0.3, 2.0, 3)
    assert dpo.optim.learning_rate == 1e-4  # a sibling of a set key keeps the stage's default
    assert kto_run_config(Path("/out"), cfg, DATA, SFT).optim.warmup_steps == 20  # at most 20
    grpo = grpo_run_config(Path("/out"), cfg, DATA, SFT)
    assert (grpo.optim.learning_rate, grpo.optim.decay, grpo.grpo.group_size) == (
        3e-5,
        "constant",
        4,
    )
    assert cfg.calibration.abstain_target == 0.9
    assert stage_plan(_settings(cls, "grpo.steps=0", "preference='kto'")) == ["sft", "kto"]


def test_each_stage_config_is_what_train_kind_config_takes() -> None:
    cfg = _settings(QuickstartConfig, "train_encoder=true", "dpo.loss_type='ipo'")
    built = {
        SFTConfig: sft_run_config(Path("/out"), cfg, DATA, None),
        DPORunConfig: dpo_run_config(Path("/out"), cfg, DATA, SFT),
        KTORunConfig: kto_run_config(Path("/out"), cfg, DATA, SFT),
        GRPORunConfig: grpo_run_config(Path("/out"), cfg, DATA, SFT),
    }
    for cls, rc in built.items():
        assert validate(cls, tomllib.loads(dump_toml(rc))) == rc
    assert built[DPORunConfig].dpo.loss_type == "ipo"
    # SFT fine-tunes the encoder; the preference stages keep it frozen
    assert built[DPORunConfig].model.options == {}
    assert built[GRPORunConfig].model.options == {}
    sft_more = sft_run_config(Path("/out"), cfg, DATA, SFT)
    assert sft_more.model.init_from == SFT and sft_more.model.options == {"train_encoder": True}


def test_encoder_choices_reach_sft_alone() -> None:
    lora = _settings(QuickstartConfig, "encoder_lora={rank=4, table=true}")
    sft = sft_run_config(Path("/out"), lora, DATA, None)
    assert sft.model.options["encoder_lora"] == {"rank": 4, "alpha": 16.0, "table": True}
    assert dpo_run_config(Path("/out"), lora, DATA, SFT).model.options == {}
    # the from-scratch router: no encoder options, so the task trains a BPE tokenizer
    scratch = sft_run_config(
        Path("/out"), _settings(QuickstartConfig, "encoder='none'"), DATA, None
    )
    assert scratch.model.options == {} and scratch.model.preset == "router"
    assert validate(SFTConfig, tomllib.loads(dump_toml(sft))) == sft
    with pytest.raises(ConfigError, match=r"encoder_lora\.rank"):
        _settings(QuickstartConfig, "encoder_lora={rank=0}")


def test_calibration_sets_are_packaged_validation_sets() -> None:
    cfg = _settings(QuickstartConfig, "calibration.sets=['handwritten_val', 'handwritten_val11']")
    assert cfg.calibration.sets == ("handwritten_val", "handwritten_val11")
    assert QuickstartConfig().calibration.sets == ("handwritten_val",)
    with pytest.raises(ConfigError, match=r"calibration\.sets.*handwritten_v1"):
        _settings(QuickstartConfig, "calibration.sets=['handwritten_v1']")  # an evaluation set


def test_what_the_data_lacks_changes_the_stage() -> None:
    cfg = QuickstartConfig()
    no_labels = StageData(train=[], val=[], compiled=Path("/c"))
    assert dpo_run_config(Path("/o"), cfg, no_labels, SFT).dpo.replay_alpha == 0.0  # no replay
    base = StageData(train=ROWS, val=ROWS, compiled=Path("/c"), base=Path("/hf"))
    assert sft_run_config(Path("/o"), cfg, base, None).model.base == Path("/hf")
    assert dpo_run_config(Path("/o"), cfg, base, None).model.base == Path("/hf")
    with pytest.raises(ConfigError, match="no router checkpoint"):
        dpo_run_config(Path("/o"), cfg, DATA, None)
    with pytest.raises(ConfigError, match="needs compiled logs"):
        kto_run_config(Path("/o"), cfg, StageData(train=ROWS, val=ROWS), SFT)


@pytest.mark.parametrize("cls", [QuickstartConfig, FromLogsConfig])
def test_a_flat_key_of_the_earlier_shape_names_its_new_place(cls: type[RouterSettings]) -> None:
    for old, new in MOVED.items():
        with pytest.raises(ConfigError) as e:
            _settings(cls, f"{old}=1")
        assert f"`{old}` is now `{new}`" in str(e.value) and "\n" not in str(e.value)


def _run(args: list[str]) -> tuple[int, str]:
    res = CliRunner().invoke(main, args)
    return res.exit_code, res.output


def test_old_keys_stop_both_commands_in_one_line(tmp_path: Path) -> None:
    old = tmp_path / "old.toml"
    old.write_text('logs = ["/nowhere"]\ndpo_beta = 0.3\n', encoding="utf-8")
    cases = {
        "`sft_steps` is now `sft.steps`": ["quickstart", "--out", str(tmp_path / "q"),
                                           "--set", "sft_steps=200"],
        "`grpo_group` is now `grpo.group_size`": ["train", "router", "--logs", str(tmp_path),
                                                  "--out", str(tmp_path / "o"),
                                                  "--set", "grpo_group=4"],
        f"{old}: `dpo_beta` is now `dpo.beta`": ["train", "router", "--config", str(old),
                                                 "--out", str(tmp_path / "o")],
    }  # fmt: skip
    for needle, args in cases.items():
        code, output = _run(args)
        lines = [ln for ln in output.splitlines() if ln.strip()]
        assert code == 2, (needle, code, output)
        assert needle in output and "Traceback" not in output, output
        assert len(lines) == 1, output
    assert not (tmp_path / "q").exists() and not (tmp_path / "o").exists()  # nothing ran


@pytest.mark.parametrize("cls", [QuickstartConfig, FromLogsConfig])
@pytest.mark.parametrize("key", ["batch_size", "eval_batch_size"])
def test_a_zero_batch_is_refused_before_anything_trains(
    cls: type[RouterSettings], key: str
) -> None:
    with pytest.raises(ConfigError) as e:
        _settings(cls, f"{key}=0")
    assert key in str(e.value) and "\n" not in str(e.value)


def test_examples_given_beside_logs_without_labels_are_what_sft_trains_on() -> None:
    """Labelled rows from `--examples` count as SFT's (and GRPO's) data when the logs hold
    none: the command used to refuse with "no labelled routing examples"."""
    from studio_align.router.from_logs import _plan

    cfg = _settings(FromLogsConfig, "preference=dpo", "grpo.steps=2")
    records = {"routing_examples": 0, "route_dpo_pairs": 0, "kto_samples": 0}
    counts = {"records": records, "labelled": {"train": 64, "val": 7}}
    run, skipped = _plan(cfg, counts)
    assert run == ["sft", "grpo"]
    assert skipped == ["dpo: skipped (no route_dpo_pairs in the logs)"]
    with pytest.raises(DataError, match="no labelled routing examples"):
        _plan(cfg, {"records": records, "labelled": {"train": 0, "val": 0}})
