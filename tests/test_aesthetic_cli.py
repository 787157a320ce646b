"""`studio-align train reward`: config file, --set overrides, exit code on the gate."""

from __future__ import annotations

import json

from click.testing import CliRunner

from studio_align.cli import main
from studio_align.simulate.grading.creator import WARM_TASTE, SimulatedCreator, write_creator_logs


def test_train_reward_command(tmp_path):
    log = write_creator_logs(
        tmp_path / "logs",
        [(SimulatedCreator("warm", WARM_TASTE, 1.0), 40, 0)],
        seed=2,
        size=(20, 20),
    )
    cfg = tmp_path / "run.toml"
    cfg.write_text(
        f'logs = ["{log}"]\nout = "{tmp_path / "rm"}"\nheldout_fraction = 0.4\n'
        '[encoder]\nname = "color-stats"\noptions = {size = 20}\n'
        "[train]\nsteps = 60\n[gate]\nmin_heldout_accuracy = 0.5\n"
    )
    runner = CliRunner()
    ok = runner.invoke(main, ["train", "reward", "--config", str(cfg), "--json"])
    assert ok.exit_code == 0, ok.output
    rep = json.loads(ok.stdout)
    assert rep["gate"]["passed"] and rep["heldout"]["pairs"] > 0
    refused = runner.invoke(
        main, ["train", "reward", "--config", str(cfg), "--set", "gate.min_heldout_accuracy=1.0"]
    )
    assert refused.exit_code == 2
    assert "below the quality floor 1.000" in refused.output
    typo = runner.invoke(main, ["train", "reward", "--config", str(cfg), "--set", "head.hiden=3"])
    assert typo.exit_code == 2 and "head.hiden" in typo.output
