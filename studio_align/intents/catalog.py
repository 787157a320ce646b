"""Engine catalog and plan validity.

A step is `engine.task`; it needs one of a set of input modalities that the request's
attachments or an earlier step provide (text is always there) and makes one modality.
The catalog is data: the default below, extendable by `studio_align_register_engines`.
A plan is valid when every step's need is met in order; `allowed_next` is the same rule
seen from the decoder's side and is what constrained decoding uses.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

MODALITIES: tuple[str, ...] = ("text", "image", "video", "audio")
ATTACHMENT_KINDS: tuple[str, ...] = ("image", "video", "audio")


@dataclass(frozen=True)
class Engine:
    """One catalog step. `makes=None` means it makes the same modality it consumed."""

    name: str
    needs: frozenset[str]
    makes: str | None
    description: str = ""

    def __post_init__(self) -> None:
        engine, dot, task = self.name.partition(".")
        if not dot or not engine or not task:
            raise ValueError(f"engine step {self.name!r} must look like 'engine.task'")
        bad = set(self.needs) - set(MODALITIES)
        if bad or (self.makes is not None and self.makes not in MODALITIES):
            raise ValueError(
                f"engine step {self.name!r}: unknown modality {sorted(bad) or self.makes}"
            )


DEFAULT_ENGINES: tuple[Engine, ...] = (
    Engine("ideogram.text_to_image", frozenset({"text"}), "image", "generate an image from text"),
    Engine("ideogram.edit_image", frozenset({"image"}), "image", "edit or restyle an image"),
    Engine("wan.text_to_video", frozenset({"text"}), "video", "generate a video from text"),
    Engine("wan.image_to_video", frozenset({"image"}), "video", "animate an image into a video"),
    Engine("runway.video_to_video", frozenset({"video"}), "video", "restyle or edit a video"),
    Engine("audio.music", frozenset({"text"}), "audio", "compose music"),
    Engine("audio.speech", frozenset({"text"}), "audio", "synthesise speech / voice-over"),
    Engine("storyboard.anime", frozenset({"text"}), "image", "draw an anime storyboard"),
    Engine("ecommerce.product_shot", frozenset({"image"}), "image", "studio product photo"),
    Engine("grading.film", frozenset({"image", "video"}), None, "film colour grading"),
)


@dataclass
class Catalog:
    """An ordered set of engine steps (order fixes token ids, so keep it stable)."""

    engines: list[Engine] = field(default_factory=lambda: list(DEFAULT_ENGINES))

    def __post_init__(self) -> None:
        seen: set[str] = set()
        for e in self.engines:
            if e.name in seen:
                raise ValueError(f"duplicate engine step {e.name!r} in catalog")
            seen.add(e.name)

    @property
    def names(self) -> list[str]:
        return [e.name for e in self.engines]

    def __contains__(self, name: object) -> bool:
        return any(e.name == name for e in self.engines)

    def get(self, name: str) -> Engine:
        for e in self.engines:
            if e.name == name:
                return e
        raise KeyError(name)

    def add(self, engine: Engine) -> None:
        if engine.name in self:
            raise ValueError(f"duplicate engine step {engine.name!r} in catalog")
        self.engines.append(engine)

    def available(self, attachments: Iterable[str], prefix: Sequence[str] = ()) -> set[str]:
        """Modalities available after the attachments and the steps of `prefix`."""
        have = {"text", *attachments}
        for step in prefix:
            made = self.get(step).makes
            if made is not None:
                have.add(made)
        return have

    def allowed_next(self, attachments: Iterable[str], prefix: Sequence[str] = ()) -> list[str]:
        """Steps whose need is met after `prefix` (the decoding constraint)."""
        have = self.available(attachments, prefix)
        return [e.name for e in self.engines if e.needs & have]

    def plan_problems(self, plan: Sequence[str], attachments: Iterable[str] = ()) -> list[str]:
        """Why `plan` is invalid (empty list when valid)."""
        attachments = list(attachments)
        problems = [
            f"unknown attachment kind {a!r}" for a in attachments if a not in ATTACHMENT_KINDS
        ]
        if not plan:
            problems.append("empty plan")
        have = {"text", *attachments}
        for i, step in enumerate(plan):
            if step not in self:
                problems.append(f"step {i}: unknown step {step!r}")
                continue
            eng = self.get(step)
            if not eng.needs & have:
                problems.append(
                    f"step {i}: {step!r} needs {'/'.join(sorted(eng.needs))}, "
                    f"only {'/'.join(sorted(have))} available"
                )
            if eng.makes is not None:
                have.add(eng.makes)
        return problems

    def is_valid(self, plan: Sequence[str], attachments: Iterable[str] = ()) -> bool:
        return not self.plan_problems(plan, attachments)


def default_catalog() -> Catalog:
    """A fresh copy of the default catalog (plugins' engines are added by the host)."""
    return Catalog()
