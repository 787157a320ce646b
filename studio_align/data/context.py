"""Context checks on a schema-valid event: plan steps against the catalog, image paths.

Split from the reader because they need context the schema does not have (the engine
catalog, the log's folder, the disk). They are cached: in a log the same plans and the
same images recur, and a cache hit costs a dict or set lookup, not a path join, a
`realpath` and a `stat` (what made these checks a third of the reader's time). The
caches are bounded (cleared when full), so memory stays flat on any log.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Container, Sequence

from studio_align.catalog import Catalog
from studio_align.data.paths import confined
from studio_align.data.results import Reason
from studio_align.data.schemas import (
    RatingEvent,
    RetouchEvent,
    RouteEvent,
    SelectionEvent,
    image_fields,
)

AnyEvent = SelectionEvent | RouteEvent | RetouchEvent | RatingEvent
_CACHE = 65536
Problem = tuple[Reason, str] | None


def route_problem(
    event: RouteEvent,
    steps: Container[str],
    plan_problems: Callable[[tuple[str, ...], tuple[str, ...]], list[str]],
) -> Problem:
    """What is wrong with a route event's plans in a catalog: an unknown step anywhere, or
    an unsatisfiable plan the creator endorsed (a rejected proposal may be unsatisfiable).
    Shared by the reader and the server's feedback endpoint, so both accept the same lines."""
    plans = [("proposed", event.proposed)]
    if event.final is not None:
        plans.append(("final", event.final))
    unknown = [
        f"{name}[{i}] {step!r}"
        for name, plan in plans
        for i, step in enumerate(plan)
        if step not in steps
    ]
    if unknown:
        return Reason.UNKNOWN_STEP, "unknown step " + ", ".join(unknown)
    preferred = event.preferred_plan
    if preferred is not None:
        problems = plan_problems(tuple(preferred), tuple(event.request.attachments))
        if problems:
            which = "final" if event.outcome == "rerouted" else "proposed"
            return Reason.INVALID_PLAN, f"{which} plan ({event.outcome}): " + "; ".join(problems)
    return None


class ContextChecks:
    """The reader's context checks for one file at a time (`start_file` between files)."""

    def __init__(
        self,
        catalog: Catalog,
        *,
        check_images: bool,
        images_root: str | None,
        allow_external_images: bool,
    ) -> None:
        self.catalog = catalog
        self.check_images = check_images
        self.images_root = images_root
        self.allow_external_images = allow_external_images
        self.steps = frozenset(catalog.names)
        self._confined = functools.lru_cache(maxsize=_CACHE)(confined)
        self._isfile = functools.lru_cache(maxsize=_CACHE)(os.path.isfile)
        self.plan_problems = functools.lru_cache(maxsize=8192)(self._plan_problems_uncached)
        self.good: set[str] = set()  # images of this file known confined (and present)
        self.base_dir = ""
        self._roots: tuple[str, ...] = ()

    def start_file(self, base_dir: str) -> None:
        """Image paths are relative to each log's folder: forget what held for the last."""
        self.base_dir = base_dir
        self._roots = (os.path.realpath(base_dir),) + (
            (self.images_root,) if self.images_root else ()
        )
        self.good = set()

    def problem(self, event: AnyEvent) -> Problem:
        """None when the event fits its context, else (reason, detail)."""
        if type(event) is RouteEvent:
            if self.route_ok(event.proposed, event.final, event.outcome, event.request.attachments):
                return None
            return route_problem(event, self.steps, self.plan_problems)
        good = self.good
        if type(event) is SelectionEvent:
            for c in event.candidates:
                if c.image not in good:
                    return self._image_problem(event)
            return None
        if event.image in good:  # type: ignore[union-attr]
            return None
        return self._image_problem(event)

    def route_ok(
        self,
        proposed: list[str],
        final: list[str] | None,
        outcome: str,
        attachments: Sequence[str],
    ) -> bool:
        """Whether a route's plans fit the catalog (`route_problem` says why not): every
        step known, and the plan the creator endorsed satisfiable (cached per plan and
        attachments, which recur far more than whole events do)."""
        steps = self.steps
        if not steps.issuperset(proposed) or (final is not None and not steps.issuperset(final)):
            return False
        preferred = final if outcome == "rerouted" else proposed if outcome == "accepted" else None
        return preferred is None or not self.plan_problems(tuple(preferred), tuple(attachments))

    def _image_problem(self, event: AnyEvent) -> Problem:
        base_dir, roots = self.base_dir, self._roots
        fields = image_fields(event)
        if not self.allow_external_images:
            outside = [
                f"{loc} {image!r}"
                for loc, image in fields
                if not self._confined(os.path.normpath(os.path.join(base_dir, image)), roots)
            ]
            if outside:
                where = (
                    "outside the log's folder and images_root"
                    if self.images_root
                    else "outside the log's folder (set images_root or allow_external_images)"
                )
                return Reason.IMAGE_OUTSIDE_ROOT, "; ".join(outside) + f": resolves {where}"
        if self.check_images:
            missing = []
            for loc, image in fields:
                full = os.path.normpath(os.path.join(base_dir, image))
                if not self._isfile(full):
                    missing.append(f"{loc} {image!r} not found ({full})")
            if missing:
                return Reason.MISSING_IMAGE, "; ".join(missing)
        if len(self.good) >= _CACHE:
            self.good.clear()
        self.good.update(image for _, image in fields)
        return None

    def _plan_problems_uncached(
        self, plan: tuple[str, ...], attachments: tuple[str, ...]
    ) -> list[str]:
        return self.catalog.plan_problems(plan, attachments)
