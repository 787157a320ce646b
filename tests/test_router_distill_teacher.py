"""The router ensemble as a distillation teacher: its token conditionals are exactly the
mixture of the members' plan distributions, over the student's own ids."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from flax import nnx

from studio_align.catalog import default_catalog
from studio_align.models.config import ModelConfig
from studio_align.models.transformer import Transformer
from studio_align.router.checkpoint import save_router
from studio_align.router.distill import RouterTeacher
from studio_align.router.ensemble import save_ensemble
from studio_align.router.format import build_tokenizer, encode_plan
from studio_align.router.router import Router

TEXTS = ["animate this photo and add music", "make a poster", "把这张图做成视频", "upscale it"]
REQUESTS = [
    {"text": "animate this photo and add lo-fi music", "attachments": ["image"]},
    {"text": "make a poster for my show", "attachments": []},
]
PLANS = [["wan.image_to_video", "audio.music"], ["ideogram.text_to_image"]]


@pytest.fixture(scope="module")
def ensemble(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[Path], object]:
    root = tmp_path_factory.mktemp("teacher")
    catalog = default_catalog()
    dirs = []
    for seed, vocab in ((0, 300), (1, 320)):  # members with different tokenizers
        tok = build_tokenizer(TEXTS * 3, catalog, vocab_size=vocab)
        model = Transformer(ModelConfig.tiny(tok.vocab_size), rngs=nnx.Rngs(seed))
        save_router(root / f"r{seed}", model, tok, catalog, max_steps=3)
        dirs.append(root / f"r{seed}")
    student_tok = build_tokenizer(TEXTS, catalog, vocab_size=280)
    return save_ensemble(dirs, root / "ens"), dirs, student_tok


@pytest.mark.slow  # over 7 s on two cores; default suite under 15 minutes
def test_ensemble_teacher_is_the_mixture_of_plan_probabilities(ensemble) -> None:  # type: ignore[no-untyped-def]
    ens, dirs, student_tok = ensemble
    catalog = default_catalog()
    plans, reqs = PLANS, REQUESTS
    teacher = RouterTeacher(ens, student_tok, catalog)
    comps = [encode_plan(student_tok, p) for p in plans]
    ids, logps = teacher.distributions([{"requests": r} for r in reqs], comps, width=4)
    assert ids.shape == logps.shape == (len(plans), 4, len(catalog.names) + 1)
    # the student's ids of the plan alphabet
    assert set(np.unique(ids)) == set(teacher.student_ids.tolist())
    members = [Router.load(d) for d in dirs]
    for i, (req, comp) in enumerate(zip(reqs, comps, strict=True)):
        # chain rule over the mixture's conditionals = the mean of the members' plan probabilities
        picked = [logps[i, t, list(ids[i, t]).index(tok)] for t, tok in enumerate(comp)]
        probs = []
        for m in members:
            prompts, inits = m.encode([req])
            probs.append(
                np.exp(m.plan_logps(prompts, [encode_plan(m.tokenizer, plans[i])], inits)[0])
            )
        want = np.mean(probs)
        assert np.exp(np.sum(picked)) == pytest.approx(want, rel=1e-4)
        # every position is a distribution over the allowed candidates
        for t in range(len(comp)):
            assert np.exp(logps[i, t]).sum() == pytest.approx(1.0, rel=1e-4)


def test_single_router_teacher_and_catalog_check(ensemble) -> None:  # type: ignore[no-untyped-def]
    _, dirs, student_tok = ensemble
    catalog = default_catalog()
    one = RouterTeacher(dirs[0], student_tok, catalog)
    assert len(one.members) == 1
    with pytest.raises(Exception, match="not a plan token"):
        one.distributions([{"requests": REQUESTS[0]}], [[student_tok.token_to_id("<bos>")]], 4)
