"""Distillation on the shared train loop: a tiny LM student learns another LM's token
distributions (a `PolicyTeacher`), half the steps on its own samples, one compile."""

from __future__ import annotations

from pathlib import Path

import jax
import numpy as np
import pytest
from flax import nnx

from studio_align.models.config import ModelConfig
from studio_align.models.transformer import Transformer
from studio_align.testing import toy
from studio_align.training.distill import (
    DistillBatches,
    DistillConfig,
    PolicyTeacher,
    make_distill_loss,
    teacher_outputs,
)
from studio_align.training.loop import TrainRunConfig, train_loop
from studio_align.training.policy import LMPolicy
from studio_align.training.supervised import supervised


def _forward_kl(policy: LMPolicy, student: nnx.Module, teacher: PolicyTeacher, ex: list) -> float:
    batch = policy.pack([e["prompt"] for e in ex], [e["completion"] for e in ex])
    s = np.asarray(jax.nn.log_softmax(policy.completion_logits(student, batch)[0], axis=-1))
    _, t = teacher.distributions(ex, [e["completion"] for e in ex], policy.max_new_tokens)
    m = batch["completion_mask"]
    kl = (np.exp(t) * (t - np.maximum(s, -1e30))).sum(-1)
    return float((kl * m).sum() / m.sum())


@pytest.mark.slow  # two compiles of sampling + step + teacher: minutes under load
def test_student_moves_towards_the_teacher_with_one_compile(tmp_path: Path) -> None:
    policy = LMPolicy(max_prompt_len=4, max_new_tokens=3, pad_id=toy.PAD, eos_id=toy.EOS)
    student = Transformer(ModelConfig.tiny(toy.VOCAB), rngs=nnx.Rngs(0))
    teacher = PolicyTeacher(policy, Transformer(ModelConfig.tiny(toy.VOCAB), rngs=nnx.Rngs(1)))
    prompts, chosen, _ = toy.preference_pairs(32, seed=0)
    ex = [{"prompt": p, "completion": c} for p, c in zip(prompts, chosen, strict=True)]
    ids, logps, hit = teacher_outputs(teacher, ex, 3, cache=tmp_path / "c.npz", key="k")
    assert not hit and teacher_outputs(teacher, ex, 3, cache=tmp_path / "c.npz", key="k")[2]
    cfg = DistillConfig(divergence="forward_kl", on_policy_fraction=0.5)
    src = DistillBatches(policy, teacher, ex, ids, logps, batch_size=8, seed=0,
                         on_policy_fraction=0.5)  # fmt: skip
    assert 0 < sum(src.is_on_policy(s) for s in range(20)) < 20
    before = _forward_kl(policy, student, teacher, ex)
    run = TrainRunConfig.model_validate({
        "run_dir": str(tmp_path / "run"), "train": {"steps": 20, "batch_size": 8,
        "progress": False, "metrics_hook": False}, "checkpoint": {"every": 0},
        "optim": {"learning_rate": 1e-2, "decay": "constant"},
    })  # fmt: skip
    res = train_loop(student, run, supervised(make_distill_loss(policy, cfg), src), name="distill")
    assert res.compiles == 1
    after = _forward_kl(policy, student, teacher, ex)
    assert after < 0.5 * before
