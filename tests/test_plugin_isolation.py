"""Issue 13, defects 8 and 9: a corrupt latest checkpoint falls back to the previous good
one; a hanging, exiting or raising plugin stops nothing it should not."""

from __future__ import annotations

import asyncio
import json
import threading
from pathlib import Path

import jax.numpy as jnp
import numpy as np
import pytest

from studio_align.errors import CheckpointError, PluginError, RewardError
from studio_align.plugins import PluginHost
from studio_align.rewards import Reward
from studio_align.scoring import score_batch
from studio_align.training.checkpoint import Checkpointer

# -- 8. checkpoint fallback ----------------------------------------------------------------------


def _save_steps(d: Path, steps: list[int]) -> Checkpointer:
    ck = Checkpointer(d, every=1, keep=5, async_save=False)
    for s in steps:
        ck.save(s, {"params": {"w": jnp.full((4,), float(s))}}, {"step": s, "data_position": s})
    ck.wait()
    return ck


@pytest.mark.parametrize("damage", ["meta json", "arrays"])
def test_corrupt_latest_checkpoint_falls_back_to_previous(tmp_path: Path, damage: str) -> None:
    _save_steps(tmp_path, [1, 2]).close()
    step2 = tmp_path / "2"
    if damage == "meta json":
        for f in (step2 / "meta").rglob("*"):
            if f.is_file():
                f.write_text("{torn")
    else:
        for f in (step2 / "params").rglob("*"):
            if f.is_file() and f.stat().st_size > 0:
                f.write_bytes(f.read_bytes()[:7])
    ck = Checkpointer(tmp_path, every=1, keep=5, async_save=False)
    assert ck.latest_step() == 2
    trees, record = ck.restore(2, {"params": {"w": jnp.zeros((4,))}})
    assert record["step"] == 1  # the previous good one
    np.testing.assert_array_equal(np.asarray(trees["params"]["w"]), np.full((4,), 1.0))
    assert len(ck.fallbacks) == 1 and "/2: cannot restore" in ck.fallbacks[0]
    assert ck.latest_step() == 1 and (tmp_path / "2.corrupt").is_dir()  # set aside
    ck.save(2, {"params": {"w": jnp.ones((4,))}}, {"step": 2, "data_position": 2})  # resumes
    ck.wait()
    assert ck.latest_step() == 2
    ck.close()


def test_a_model_mismatch_is_an_error_not_a_fallback(tmp_path: Path) -> None:
    ck = _save_steps(tmp_path, [1, 2])
    with pytest.raises(CheckpointError, match="does not match"):
        ck.restore(2, {"params": {"w": jnp.zeros((5,))}})
    assert ck.fallbacks == [] and ck.latest_step() == 2
    ck.close()


# -- 9. plugin isolation ---------------------------------------------------------------------------


def test_a_hanging_reward_times_out_naming_its_plugin() -> None:
    release = threading.Event()

    def hangs(plans):
        release.wait(60)
        return [1.0] * len(plans)

    async def hangs_async(plans):
        await asyncio.sleep(60)
        return [1.0] * len(plans)

    try:
        for fn in (hangs, hangs_async):
            r = Reward("slow", fn, plugin="sleepy-plugin")
            with pytest.raises(RewardError, match=r"'slow' \(plugin sleepy-plugin\) timed out"):
                score_batch([r], columns={"plans": [["a"]]}, timeout_s=0.2)
        fast = Reward("slow", hangs, plugin="p", timeout_s=0.1)  # per-reward override
        with pytest.raises(RewardError, match=r"timed out after 0\.1 s"):
            score_batch([fast], columns={"plans": [["a"]]}, timeout_s=None)
    finally:
        release.set()


def test_sys_exit_in_a_reward_or_hook_is_an_error_not_an_exit() -> None:
    def exits(plans):
        raise SystemExit(0)

    async def exits_async(plans):
        raise SystemExit(4)

    for fn in (exits, exits_async):
        with pytest.raises(RewardError, match=r"\(plugin quitter\) called sys.exit"):
            score_batch([Reward("q", fn, plugin="quitter")], columns={"plans": [["a"]]})

    class Quitter:
        def studio_align_register_rewards(self, register):
            raise SystemExit(3)

    h = PluginHost()
    h.register(Quitter(), name="quitter")
    with pytest.raises(PluginError, match=r"'quitter' called sys.exit\(3\)"):
        h.rewards  # noqa: B018


def test_a_failing_metrics_hook_is_counted_not_fatal(tmp_path: Path) -> None:
    seen: list[int] = []

    class Broken:
        def studio_align_on_metrics(self, step):
            raise RuntimeError("logger down")

    class Fine:
        def studio_align_on_metrics(self, step):
            seen.append(step)

    class Exits:
        def studio_align_on_metrics(self, step):
            raise SystemExit(1)

    h = PluginHost()
    for name, p in (("broken", Broken()), ("fine", Fine()), ("exits", Exits())):
        h.register(p, name=name)
    for step in range(3):
        h.fire_metrics(run="r", step=step, metrics={"loss": 1.0})
    assert seen == [0, 1, 2]
    assert h.metrics_hook_failures == {"broken": 3, "exits": 3}
    json.dumps(h.metrics_hook_failures)  # reportable as is
