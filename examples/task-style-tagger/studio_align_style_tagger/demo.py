"""Seeded demo data for the style tagger, plus a ready-to-run SFT config.

`python -m studio_align_style_tagger.demo OUT` writes `OUT/train.jsonl`,
`OUT/heldout.jsonl` (phrasings held out by template, so the figure is not memorisation)
and `OUT/run.toml` for `studio-align train sft --config OUT/run.toml`.
"""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path

SUBJECTS = [
    "a fox in the snow",
    "my cat on a sofa",
    "a city street at night",
    "a lighthouse",
    "two friends laughing",
    "a bowl of ramen",
    "a dragon over mountains",
    "a red bicycle",
    "an old library",
    "a girl with an umbrella",
    "a robot gardener",
    "sunflowers",
]
CUES = {
    "anime": ["anime style", "like a ghibli film", "manga look", "cel shaded anime", "in anime"],
    "photo": [
        "photorealistic",
        "like a dslr photo",
        "realistic photo",
        "35mm film shot",
        "as a real photograph",
    ],
    "watercolor": [
        "watercolor painting",
        "soft watercolour wash",
        "painted in watercolors",
        "aquarelle",
        "loose watercolor sketch",
    ],
    "pixel": [
        "pixel art",
        "8-bit sprite",
        "retro pixel style",
        "16 bit game art",
        "low-res pixels",
    ],
    "3d": ["3d render", "blender style render", "octane 3d", "clay 3d model", "cgi render"],
}
TEMPLATES = [
    "{s}, {c}",
    "{c} of {s}",
    "make {s} {c} please",
    "i want {s} in {c}",
    "{s} -- {c}",
    "can you draw {s}, {c}?",
]


def examples(n: int, *, seed: int, templates: list[str]) -> list[dict[str, str]]:
    rng = random.Random(seed)
    rows = []
    for _ in range(n):
        style = rng.choice(sorted(CUES))
        text = rng.choice(templates).format(s=rng.choice(SUBJECTS), c=rng.choice(CUES[style]))
        rows.append({"text": text, "style": style})
    return rows


def write_demo(out: Path, *, seed: int = 0, steps: int = 120) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    splits = {
        "train": examples(600, seed=seed, templates=TEMPLATES[:4]),
        "heldout": examples(150, seed=seed + 1, templates=TEMPLATES[4:]),
    }
    for name, rows in splits.items():
        lines = "".join(json.dumps(r) + "\n" for r in rows)
        (out / f"{name}.jsonl").write_text(lines, encoding="utf-8")
    run = out / "run.toml"
    run.write_text(
        f'task = "style-tagger"\nrun_dir = "{(out / "run").as_posix()}"\n\n'
        '[model]\npreset = "tiny"\nvocab_size = 300\n\n'
        f'[data]\ntrain = "{(out / "train.jsonl").as_posix()}"\n'
        f'heldout = "{(out / "heldout.jsonl").as_posix()}"\n\n'
        f"[train]\nsteps = {steps}\nbatch_size = 32\nlog_every = 20\nprogress = false\n\n"
        "[optim]\nlearning_rate = 3e-3\nwarmup_steps = 10\n\n"
        "[checkpoint]\nevery = 0\n",
        encoding="utf-8",
    )
    return run


if __name__ == "__main__":
    print(write_demo(Path(sys.argv[1] if len(sys.argv) > 1 else "style-tagger-demo")))
