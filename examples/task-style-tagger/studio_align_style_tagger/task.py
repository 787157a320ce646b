"""The style-tagging task: prompt text -> one style label, on the engine's decoder LM.

A record is `{"text": "...", "style": "anime"}`. The prompt is `<bos>` + the text +
`<sep>`; the completion is the label's own token + `<eos>`, so teacher-forced exact match
on the completion is the tagging accuracy. The tokenizer is a byte-level BPE trained on
the training texts with one special token per label.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import MappingProxyType
from typing import Any, ClassVar, Literal

import jax.numpy as jnp
import numpy as np
from pydantic import BaseModel, ConfigDict

from studio_align.errors import ConfigError
from studio_align.models.bundle import save_model_bundle
from studio_align.models.tokenizer import Tokenizer
from studio_align.tasks import Pair, StartingPoint
from studio_align.training.lm import build_model, trainable_filter

STYLES = ("anime", "photo", "watercolor", "pixel", "3d")
SPECIALS = ["<pad>", "<bos>", "<eos>", "<sep>", *(f"<style:{s}>" for s in STYLES)]


class StyleRecord(BaseModel):
    """One labelled prompt."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    file_stem: ClassVar[str] = "style_examples"  # file name in a compiled directory

    text: str
    style: Literal["anime", "photo", "watercolor", "pixel", "3d"]


class StyleTaggerTask:
    name = "style-tagger"
    algorithms = frozenset({"sft"})
    record_kinds = MappingProxyType({"sft": StyleRecord})

    def start(
        self,
        model: Any,
        *,
        seed: int,
        records: Sequence[Mapping[str, Any]] = (),
        reference: bool = True,
        tokenizer: Any = None,
    ) -> StartingPoint:
        if tokenizer is None and model.init_from is not None:
            tokenizer = Tokenizer.load(model.init_from / "tokenizer.json")
        if tokenizer is None and model.tokenizer is not None:
            tokenizer = Tokenizer.load(model.tokenizer)
        if tokenizer is None:
            if not records:
                raise ConfigError("style-tagger: no training texts to build a tokenizer from")
            texts = [r["text"].lower() for r in records]
            tokenizer = Tokenizer.train(texts, vocab_size=model.vocab_size, special_tokens=SPECIALS)
        net = build_model(model, tokenizer.vocab_size, seed=seed, tokenizer=tokenizer)
        return StartingPoint(model=net, wrt=trainable_filter(net, model), tokenizer=tokenizer)

    def _id(self, tok: Any, token: str) -> int:
        i = tok.token_to_id(token)
        if i is None:
            raise ConfigError(f"style-tagger: the tokenizer lacks {token!r}")
        return int(i)

    def _prompt(self, tok: Any, text: str) -> list[int]:
        return [
            self._id(tok, "<bos>"),
            *tok.encode(text.lower(), allow_special=False),
            self._id(tok, "<sep>"),
        ]

    def sft_pairs(self, start: StartingPoint, records: Sequence[Mapping[str, Any]]) -> list[Pair]:
        tok = start.tokenizer
        eos = self._id(tok, "<eos>")
        return [
            (self._prompt(tok, r["text"]), [self._id(tok, f"<style:{r['style']}>"), eos])
            for r in records
        ]

    def predict(self, start: StartingPoint, texts: Sequence[str]) -> list[str]:
        """The most likely style label for each text (argmax over the label tokens only)."""
        tok = start.tokenizer
        labels = np.asarray([self._id(tok, f"<style:{s}>") for s in STYLES])
        prompts = [self._prompt(tok, t) for t in texts]
        width = max(len(p) for p in prompts)
        tokens = np.full((len(prompts), width), self._id(tok, "<pad>"), np.int32)
        attn = np.zeros_like(tokens, dtype=bool)
        for i, p in enumerate(prompts):
            tokens[i, : len(p)], attn[i, : len(p)] = p, True
        last = attn.sum(1) - 1
        logits = start.model(jnp.asarray(tokens), None, jnp.asarray(attn))
        picked = np.asarray(logits)[np.arange(len(prompts)), last][:, labels]
        return [STYLES[int(k)] for k in picked.argmax(-1)]

    def evaluate(
        self, start: StartingPoint, records: Sequence[Mapping[str, Any]]
    ) -> dict[str, float]:
        pred = self.predict(start, [r["text"] for r in records])
        return {
            "accuracy": float(
                np.mean([p == r["style"] for p, r in zip(pred, records, strict=True)])
            )
        }

    def save(
        self, start: StartingPoint, path: Path, *, trained_by: str, metrics: Mapping[str, float]
    ) -> Path:
        save_model_bundle(path, start.model, start.tokenizer)
        meta = {"task": self.name, "styles": list(STYLES), "trained_by": trained_by,
                "metrics": dict(metrics)}  # fmt: skip
        (Path(path) / "style_tagger.json").write_text(json.dumps(meta, indent=1), "utf-8")
        return Path(path)
