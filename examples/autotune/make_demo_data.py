"""Write the demo routing data the router-SFT autotune example uses.

    python examples/autotune/make_demo_data.py [OUT_DIR] [--n-train 600]

train.jsonl and val.jsonl come from the training phrasings (val selects configs);
heldout.jsonl only from phrasings never seen in training (the final confirmation).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from studio_align.router.data import write_jsonl
from studio_align.simulate.router.requests import demo_splits


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("out", nargs="?", default=str(Path(__file__).with_name("data")))
    ap.add_argument("--n-train", type=int, default=600)
    ap.add_argument("--n-val", type=int, default=150)
    ap.add_argument("--n-heldout", type=int, default=150)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    splits = demo_splits(seed=a.seed, n_train=a.n_train, n_val=a.n_val, n_heldout=a.n_heldout)
    for name, file in (("train", "train"), ("val", "val"), ("heldout", "heldout")):
        print(write_jsonl(Path(a.out) / f"{file}.jsonl", splits[name]))


if __name__ == "__main__":
    main()
