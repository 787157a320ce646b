"""The quickstart loop end to end at toy size: every stage leaves a loadable checkpoint."""

from __future__ import annotations

import json
import threading
import tomllib
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import load_file

from studio_align.quickstart import pipeline
from studio_align.quickstart.config import QuickstartConfig
from studio_align.quickstart.pipeline import run_quickstart
from studio_align.router.router import Router
from studio_align.training.dpo_config import DPORunConfig
from studio_align.training.grpo_run_config import GRPORunConfig
from studio_align.training.kto_config import KTORunConfig
from studio_align.training.sft_config import SFTConfig

TINY = QuickstartConfig.model_validate({
    "n_train": 200, "n_val": 20, "n_heldout": 40, "n_creators": 6, "n_eval_creators": 2,
    "vocab_size": 400, "batch_size": 8, "preference": "dpo+kto", "grading": False,
    "flow": False, "tuned_weight": 0.5,
    "model": {"d_model": 32, "num_layers": 1, "num_heads": 2, "num_kv_heads": 1,
              "head_dim": 16, "d_ff": 64, "max_seq_len": 128},
    "sft": {"steps": 4}, "dpo": {"steps": 2, "beta": 0.3}, "kto": {"steps": 2},
    "grpo": {"steps": 1, "group_size": 2, "prompts_per_step": 2},
})  # fmt: skip
RUN_CONFIGS = {"sft": SFTConfig, "dpo": DPORunConfig, "kto": KTORunConfig, "grpo": GRPORunConfig}


@pytest.mark.slow
def test_quickstart_pipeline_tiny(tmp_path, monkeypatch) -> None:
    # the flow vertical (tested whole in test_quickstart_flow.py) is replaced by one that
    # fails, to see where it runs and that its failure reaches the run's summary
    ran_in: list[str] = []

    def failing_flow(out, cfg, log, missing):
        ran_in.append(threading.current_thread().name)
        missing.append("flow: failed (on purpose)")

    monkeypatch.setattr(pipeline, "run_flow", failing_flow)
    lines: list[str] = []
    res = run_quickstart(tmp_path, TINY.model_copy(update={"flow": True}), log=lines.append)
    assert ran_in == ["verticals"]  # beside the router stages, not in the main thread
    assert res.missing == ["flow: failed (on purpose)"]
    assert [s.stage for s in res.stages] == ["sft", "dpo", "kto", "grpo"]
    assert all(s.status == "ok" for s in res.stages), res.missing
    for s in res.stages:
        Router.load(s.checkpoint)  # each stage leaves a checkpoint eval/serve take
        row = s.row()
        assert row["validity_rate"] == 1.0
        assert 0.0 <= row["creator_agreement"] <= 1.0
    # tuned_weight 0.5: each preference stage delivers the mean of its weights and SFT's,
    # and the next stage trains from the unmixed checkpoint
    sft = load_file(str(Path(res.stages[0].checkpoint) / "params.safetensors"))
    for s in res.stages[1:]:
        assert s.checkpoint != s.trained and Path(s.checkpoint).name == "mixed"
        tuned = load_file(str(Path(s.trained) / "params.safetensors"))
        mixed = load_file(str(Path(s.checkpoint) / "params.safetensors"))
        for k in sft:
            np.testing.assert_allclose(mixed[k], 0.5 * sft[k] + 0.5 * tuned[k], atol=1e-6)
    assert res.router is not None and (res.router / "router.json").exists()
    assert (res.router / "calibration.json").exists()  # fitted on validation, served with it
    assert Router.load(res.router).calibration is not None
    assert res.report is not None and res.report.exists()
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert [r["stage"] for r in summary["stages"]] == ["sft", "dpo", "kto", "grpo"]
    assert any("report:" in line for line in lines)
    assert (tmp_path / "data" / "compiled" / "train" / "route_dpo_pairs.jsonl").exists()
    # each stage's saved run config is its table of the settings, and `train KIND --config` takes it
    saved = {s: tomllib.loads((tmp_path / "stages" / s / "config.toml").read_text())
             for s in RUN_CONFIGS}  # fmt: skip
    for stage, cls in RUN_CONFIGS.items():
        cls.model_validate(saved[stage])
        assert saved[stage]["train"]["steps"] == getattr(TINY, stage).steps
        assert saved[stage]["optim"]["learning_rate"] == getattr(TINY, stage).optim.learning_rate
    assert saved["dpo"]["dpo"]["beta"] == 0.3 and saved["dpo"]["dpo"]["replay_alpha"] == 4.0
    assert (
        saved["grpo"]["grpo"]["group_size"] == 2 and saved["grpo"]["optim"]["decay"] == "constant"
    )
