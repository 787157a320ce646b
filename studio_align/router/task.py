"""The intent router as a trainable task (`task = "router"`), registered by `router.plugin`.

Everything the generic trainers need to know about routing lives here: how a request
and a plan become tokens (`router.format`), which tokenizer and catalog a router carries,
the plan grammar its GRPO rollouts decode under, and writing a router checkpoint
(`router.json` + model bundle) that `eval router` and `serve router` take.

Design choices:
- `start` reads one `[model]` section for every algorithm: a router checkpoint
  (`init_from`, whose `router.json` fixes the catalog and plan length), a Hugging Face
  base (its tokenizer plus the router's tokens), or a fresh preset whose tokenizer is
  trained on the training requests.
- The catalog travels in `StartingPoint.state`, so a router is always trained, decoded
  and saved against the catalog its step tokens were made for.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from types import MappingProxyType
from typing import Any

import numpy as np
from flax import nnx
from pydantic import ValidationError

from studio_align.catalog import ATTACHMENT_KINDS, Catalog
from studio_align.errors import ConfigError, DataError
from studio_align.models.bundle import load_model_bundle
from studio_align.models.conditioned import (
    CONDITIONINGS,
    ConditionedConfig,
    EncoderConditionedLM,
    conditioned_wrt,
)
from studio_align.models.config import ModelConfig
from studio_align.models.encoders.adapters import EncoderLora
from studio_align.models.encoders.use import load_use
from studio_align.models.encoders.use_tokenizer import use_tokenizer
from studio_align.models.hf import add_special_tokens
from studio_align.models.tokenizer import Tokenizer
from studio_align.plugins import get_host
from studio_align.router.checkpoint import load_router_meta, save_router
from studio_align.router.distill import RouterTeacher
from studio_align.router.evaluate import evaluate_router
from studio_align.router.format import (
    BOS,
    EOS,
    PAD,
    UNK,
    attachment_token,
    build_tokenizer,
    decode_plan,
    encode_plan,
    encode_prompt,
    request_fields,
    special_tokens,
)
from studio_align.router.grammar import compile_grammar
from studio_align.router.router import Router
from studio_align.tasks import ALGORITHMS, Pair, StartingPoint
from studio_align.training.lm import build_model, trainable_filter
from studio_align.training.policy import LMPolicy
from studio_align.training.run import ModelSection

MIN_PLAN_STEPS = 3


def _get(record: Any, key: str) -> Any:
    return record.get(key) if isinstance(record, Mapping) else getattr(record, key)


def attachments_of(prompt: Iterable[int], tokenizer: Any) -> list[str]:
    """Attachment kinds whose marker tokens occur in an encoded router prompt."""
    ids = set(prompt)
    return [k for k in ATTACHMENT_KINDS if tokenizer.token_to_id(attachment_token(k)) in ids]


class RouterTask:
    """Request -> plan of engine calls, on the engine's decoder LM."""

    name = "router"
    algorithms = frozenset(ALGORITHMS)
    record_kinds = MappingProxyType(
        {
            "sft": "routing_examples",
            "dpo": "route_dpo_pairs",
            "kto": "kto_samples",
            "grpo": "routing_examples",
            "distill": "routing_examples",
        }
    )

    def __init__(
        self, catalog: Catalog | None = None, *, split_prob: float = 0.0, split_seed: int = 0
    ) -> None:
        """`split_prob`: segmentation noise on the requests `sft_pairs` encodes (training
        and held-out loss alike; `format.encode_prompt`), drawn from `split_seed`."""
        if not 0.0 <= split_prob < 1.0:
            raise ConfigError(f"split_prob: {split_prob} is not in [0, 1)")
        self._catalog = catalog
        self.split_prob = split_prob
        self.split_seed = split_seed

    @property
    def catalog(self) -> Catalog:
        """The given catalog, or the plugin host's (default engines plus plugins')."""
        return self._catalog if self._catalog is not None else get_host().catalog

    # -- the starting point ------------------------------------------------------------------

    def start(
        self,
        model: ModelSection,
        *,
        seed: int,
        records: Sequence[Mapping[str, Any]] = (),
        reference: bool = True,
        tokenizer: Any = None,
    ) -> StartingPoint:
        """Policy (trainable), reference (frozen, if asked) and tokenizer from `[model]`."""
        plan_steps = max([MIN_PLAN_STEPS, *(len(r["plan"]) for r in records if r.get("plan"))])
        encoder = model.options.get("encoder")
        if encoder is not None and model.init_from is None and model.base is None:
            return self._on_encoder(model, encoder, seed=seed, max_steps=plan_steps)
        if model.base is not None:
            return self._from_base(model, seed=seed, reference=reference, max_steps=plan_steps)
        if model.init_from is not None:
            return self._from_checkpoint(model, seed=seed, reference=reference,
                                         max_steps=plan_steps, tokenizer=tokenizer)  # fmt: skip
        catalog = self.catalog
        if tokenizer is None and model.tokenizer is not None:
            tokenizer = Tokenizer.load(model.tokenizer)
        if tokenizer is None:
            if not records:
                raise DataError("router: no training requests to build a tokenizer from")
            texts = [request_fields(_get(r, "request"))[0] for r in records]
            tokenizer = build_tokenizer(texts, catalog, vocab_size=model.vocab_size)
        policy = build_model(model, tokenizer.vocab_size, seed=seed, tokenizer=tokenizer)
        return StartingPoint(
            model=policy, reference=None, wrt=trainable_filter(policy, model),
            tokenizer=tokenizer, state={"catalog": catalog, "max_steps": plan_steps},
        )  # fmt: skip

    def _from_checkpoint(
        self, model: ModelSection, *, seed: int, reference: bool, max_steps: int, tokenizer: Any
    ) -> StartingPoint:
        assert model.init_from is not None
        catalog = self.catalog
        if (model.init_from / "router.json").exists():
            meta = load_router_meta(model.init_from)
            catalog = meta["catalog_obj"]
            max_steps = max(max_steps, int(meta["max_steps"]))
        if tokenizer is None:
            tok_path = model.tokenizer or model.init_from / "tokenizer.json"
            if not Path(tok_path).exists():
                raise ConfigError(f"model.init_from: {model.init_from} has no tokenizer.json")
            tokenizer = Tokenizer.load(tok_path)
        policy = build_model(model, tokenizer.vocab_size, seed=seed, tokenizer=tokenizer)
        ref = load_model_bundle(model.reference or model.init_from).model if reference else None
        wrt = trainable_filter(policy, model)
        if isinstance(policy, EncoderConditionedLM):
            wrt = conditioned_wrt(policy.cfg, bool(model.options.get("train_encoder")))
        return StartingPoint(
            model=policy, reference=ref, wrt=wrt,
            tokenizer=tokenizer, state={"catalog": catalog, "max_steps": max_steps},
        )  # fmt: skip

    def _on_encoder(
        self, model: ModelSection, encoder: str, *, seed: int, max_steps: int
    ) -> StartingPoint:
        """A fresh decoder over the router's tokens that reads the text through a pretrained
        encoder (`models.conditioned`); `[model] options.train_encoder` fine-tunes the
        encoder too (default: frozen, see docs/router.md for the measurement), through
        low-rank adapters when `options.encoder_lora` asks for them (`EncoderLora`), and
        `options.conditioning` says what the decoder reads of it (`ConditionedConfig`)."""
        if encoder != "use-multilingual-v3":
            raise ConfigError(
                f"model.options.encoder: {encoder!r} is not a known encoder "
                "(known: 'use-multilingual-v3')"
            )
        catalog = self.catalog
        specials = special_tokens(catalog)
        tok = use_tokenizer(specials, roles={"pad": PAD, "bos": BOS, "eos": EOS, "unk": UNK})
        fields = {**model.config, "vocab_size": len(specials)}
        try:
            decoder = getattr(ModelConfig, model.preset)(**fields)
        except (AttributeError, ValueError, TypeError) as e:
            raise ConfigError(f"model.config: {e}") from None
        conditioning = model.options.get("conditioning", "pieces+sentence")
        if conditioning not in CONDITIONINGS:
            raise ConfigError(
                f"model.options.conditioning: {conditioning!r} is not one of "
                + ", ".join(map(repr, CONDITIONINGS))
            )
        lora = model.options.get("encoder_lora")
        try:
            encoder_lora = None if lora is None else EncoderLora.model_validate(lora)
        except ValidationError as e:
            err = e.errors()[0]
            where = ".".join(str(p) for p in err["loc"])
            raise ConfigError(f"model.options.encoder_lora.{where}: {err['msg']}") from None
        cfg = ConditionedConfig(
            decoder=decoder, text_start_id=tok.bos_id, conditioning=conditioning,
            encoder_lora=encoder_lora,
        )  # fmt: skip
        policy = EncoderConditionedLM(cfg, rngs=nnx.Rngs(seed), encoder=load_use())
        wrt = conditioned_wrt(cfg, bool(model.options.get("train_encoder")))
        return StartingPoint(model=policy, reference=None, wrt=wrt, tokenizer=tok,
                             state={"catalog": catalog, "max_steps": max_steps})  # fmt: skip

    def _from_base(
        self, model: ModelSection, *, seed: int, reference: bool, max_steps: int
    ) -> StartingPoint:
        assert model.base is not None
        if model.init_from is not None:
            raise ConfigError("model.base: do not combine with model.init_from")
        catalog = self.catalog
        tok = Tokenizer.load(model.tokenizer or model.base)
        add_special_tokens(tok, special_tokens(catalog))
        policy = build_model(model, tok.vocab_size, seed=seed, tokenizer=tok)
        ref = None
        if reference:
            ref = (
                load_model_bundle(model.reference).model
                if model.reference is not None
                else build_model(model, tok.vocab_size, seed=seed, tokenizer=tok, lora=False)
            )
        wrt = nnx.LoRAParam if model.lora is not None else nnx.Param
        return StartingPoint(model=policy, reference=ref, wrt=wrt, tokenizer=tok,
                             state={"catalog": catalog, "max_steps": max_steps})  # fmt: skip

    # -- records -> token ids ------------------------------------------------------------------

    def sft_pairs(self, start: StartingPoint, records: Sequence[Mapping[str, Any]]) -> list[Pair]:
        tok = start.tokenizer
        rng = np.random.default_rng(self.split_seed) if self.split_prob > 0 else None
        pairs: list[Pair] = []
        for i, ex in enumerate(records):
            if "request" not in ex or "plan" not in ex:
                raise DataError(f"routing example {i}: needs 'request' and 'plan'")
            prompt = encode_prompt(tok, ex["request"], rng=rng, split_prob=self.split_prob)
            pairs.append((prompt, encode_plan(tok, ex["plan"])))
        return pairs

    def preference_pairs(
        self, start: StartingPoint, records: Sequence[Mapping[str, Any]]
    ) -> tuple[list[Sequence[int]], list[Sequence[int]], list[Sequence[int]]]:
        tok = start.tokenizer
        prompts: list[Sequence[int]] = []
        chosen: list[Sequence[int]] = []
        rejected: list[Sequence[int]] = []
        for r in records:
            prompts.append(encode_prompt(tok, _get(r, "request")))
            chosen.append(encode_plan(tok, _get(r, "chosen")))
            rejected.append(encode_plan(tok, _get(r, "rejected")))
        return prompts, chosen, rejected

    def kto_samples(
        self, start: StartingPoint, records: Sequence[Mapping[str, Any]]
    ) -> tuple[list[Sequence[int]], list[Sequence[int]], list[bool]]:
        """Route samples only (accepted = desirable, abandoned = not); ratings are skipped."""
        tok = start.tokenizer
        prompts: list[Sequence[int]] = []
        completions: list[Sequence[int]] = []
        desirable: list[bool] = []
        for r in records:
            if _get(r, "kind") != "route":
                continue
            prompts.append(encode_prompt(tok, _get(r, "request")))
            completions.append(encode_plan(tok, _get(r, "plan")))
            desirable.append(bool(_get(r, "desirable")))
        return prompts, completions, desirable

    def grpo_prompts(
        self, start: StartingPoint, records: Sequence[Mapping[str, Any]]
    ) -> list[dict[str, Any]]:
        tok = start.tokenizer
        return [
            {
                "prompt": encode_prompt(tok, ex["request"]),
                "requests": ex["request"],
                "gold_plans": ex["plan"],
            }
            for ex in records
        ]

    # -- distillation ----------------------------------------------------------------------------

    def distill_examples(
        self, start: StartingPoint, records: Sequence[Mapping[str, Any]]
    ) -> list[dict[str, Any]]:
        """Labelled examples as prompt + gold plan ids, with the request for the teacher."""
        tok = start.tokenizer
        return [
            {"prompt": encode_prompt(tok, ex["request"]), "completion": encode_plan(tok, ex["plan"]),
             "requests": ex["request"], "gold_plans": ex["plan"]}
            for ex in records
        ]  # fmt: skip

    def distill_teacher(self, start: StartingPoint, path: Any) -> RouterTeacher:
        """A router checkpoint or an ensemble directory (`model ensemble-router`)."""
        return RouterTeacher(path, start.tokenizer, start.state["catalog"])

    # -- GRPO ------------------------------------------------------------------------------------

    def policy(self, start: StartingPoint, sampling: Any, *, max_prompt_len: int) -> LMPolicy:
        """`LMPolicy` constrained by the router's plan grammar; plans decoded for rewards."""
        tok, catalog = start.tokenizer, start.state["catalog"]
        max_steps = int(start.state["max_steps"])
        grammar = compile_grammar(
            catalog, tok, vocab_size=start.model.cfg.vocab_size, max_steps=max_steps
        )
        return LMPolicy(
            max_prompt_len=max_prompt_len,
            max_new_tokens=getattr(sampling, "max_new_tokens", None) or max_steps + 1,
            pad_id=tok.pad_id,
            eos_id=tok.eos_id,
            temperature=getattr(sampling, "temperature", 1.0),
            constraint_for=lambda rows: grammar.constraint([attachments_of(r, tok) for r in rows]),
            decode=lambda ids: decode_plan(tok, ids, catalog),
            decoded_column="plans",
            slots=getattr(sampling, "slots", 0),
        )

    def reward_context(self, start: StartingPoint) -> dict[str, Any]:
        return {"catalog": start.state["catalog"]}

    # -- evaluation and saving ---------------------------------------------------------------

    def router(self, start: StartingPoint) -> Router:
        """The servable router for the current weights."""
        return Router(start.model, start.tokenizer, start.state["catalog"],
                      max_steps=int(start.state["max_steps"]))  # fmt: skip

    def evaluate(
        self, start: StartingPoint, records: Sequence[Mapping[str, Any]]
    ) -> dict[str, float]:
        """Exact-plan accuracy, step F1 and validity of decoded plans on labelled examples."""
        figures, _, _ = evaluate_router(self.router(start), [dict(r) for r in records])
        return {k: float(v) for k, v in figures.items() if isinstance(v, int | float)}

    def save(
        self, start: StartingPoint, path: Path, *, trained_by: str, metrics: Mapping[str, float]
    ) -> Path:
        return save_router(
            path, start.model, start.tokenizer, start.state["catalog"],
            max_steps=int(start.state["max_steps"]), trained_by=trained_by, metrics=dict(metrics),
        )  # fmt: skip
