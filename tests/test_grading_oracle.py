"""The demo's oracle grade: a maximiser of the simulated creator's utility."""

from __future__ import annotations

import numpy as np

from studio_align.simulate.grading.oracle import oracle_grade
from studio_align.simulate.grading.platform import demo_creators
from studio_align.simulate.grading.scenes import make_scene
from studio_align.verticals.grading.renderer import N_PARAMS, render


def test_oracle_beats_every_start_and_follows_the_taste():
    rng = np.random.default_rng(0)
    photo = make_scene(rng, (32, 32)).astype(np.float32)
    creators = demo_creators()
    starts = [np.zeros(N_PARAMS, np.float32), rng.uniform(-0.5, 0.5, N_PARAMS).astype(np.float32)]
    grades = {}
    for name in ("dara", "chen"):  # bright and soft vs dark and contrasty
        sc = creators[name]
        g = oracle_grade(sc, photo, starts)
        u = sc.utility(render(np.stack([photo] * 3), np.stack([g, *starts])))
        assert u[0] >= u[1:].max() and u[0] > u[1] + 1.0
        grades[name] = g
    bright = render(np.stack([photo] * 2), np.stack([grades["dara"], grades["chen"]]))
    assert bright[0].mean() > bright[1].mean()  # dara's oracle is the brighter picture
