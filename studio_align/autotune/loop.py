"""The autotune loop: propose, run, decide, record; resumable from its ledger.

Order of events for a trial: `propose` (config written before anything runs), one `run`
per seed, then `trial` (the decision). Trial 0 is the baseline on `seeds.baseline`; it
fixes the noise estimate and is the first best. Candidates start on `seeds.candidate`
and, when better but within the noise margin, take `seeds.extra` one at a time. A
candidate that passes on fewer than `acceptance.keep_seeds` seeds (default: as many as
the baseline) is run on more seeds and must pass again: a config kept on one lucky seed
would otherwise become an inflated reference for every later decision (winner's curse).
Any crash, timeout or NaN on a seed ends the trial with that status.

After the budget, the best trial (and the baseline, for comparison) is evaluated once on
the held-out split from its saved checkpoints; nothing in the loop ever reads held-out
figures, so the confirmation is an honest estimate.
"""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path
from typing import Any

from studio_align.autotune import acceptance
from studio_align.autotune.ledger import GitRecorder, Ledger, write_results_tsv
from studio_align.autotune.proposers import History, Proposer, make_proposer
from studio_align.autotune.report import write_report
from studio_align.autotune.runner import Runner, RunResult
from studio_align.autotune.space import Config, Space
from studio_align.autotune.state import (
    LoopOptions,
    Summary,
    _State,
    build_summary,
    config_toml,
    lock_dir,
)
from studio_align.errors import ConfigError, StudioAlignError


class Autotune:
    def __init__(self, space: Space, out: str | Path, options: LoopOptions | None = None):
        self.space = space
        self.out = Path(out).resolve()
        self.opt = options or LoopOptions()
        self.ledger = Ledger(self.out)
        self.runner = Runner(space, self.out)
        b = space.spec.budget
        self.max_trials = b.trials if self.opt.trials is None else self.opt.trials
        self.wall_clock = b.wall_clock_s if self.opt.wall_clock_s is None else self.opt.wall_clock_s
        self.sign = space.metric.sign
        self.git: GitRecorder | None = None
        if self.opt.git:
            branch = self.opt.git_branch or f"autotune/{space.name}"
            self.git = GitRecorder(self.opt.git_repo, branch, subdir=f"autotune/{space.name}")

    def _log(self, msg: str) -> None:
        if self.opt.log:
            self.opt.log(msg)

    def _run_seed(
        self, state: _State, trial: int, seed: int, config: Config, split: str = "validation"
    ) -> dict[str, Any]:
        """One seed, reusing the ledger's record when it already finished."""
        key = (trial, seed, split)
        if key in state.runs:
            return state.runs[key]
        res: RunResult = self.runner.run(trial, seed, config, split=split)
        rec = self.ledger.append(
            "run",
            trial=trial,
            seed=seed,
            split=split,
            status=res.status,
            value=res.value,
            seconds=round(res.seconds, 3),
            phase=res.phase,
            message=res.message,
            metrics=res.metrics,
        )
        state.runs[key] = rec
        shown = "-" if res.value is None else f"{res.value:.6g}"
        self._log(
            f"  trial {trial} seed {seed} [{split}]: {res.status} {shown} "
            f"({res.seconds:.1f}s){' ' + res.message if res.message else ''}"
        )
        return rec

    def _noise(self, state: _State) -> acceptance.Noise:
        groups = [
            t["values"]
            for t in state.trials.values()
            if t["status"] in ("baseline", "keep", "discard") and len(t["values"]) >= 2
        ]
        return acceptance.estimate_noise(groups, min_std=self.space.spec.acceptance.min_std)

    def _best(self, state: _State) -> dict[str, Any]:
        return state.best()

    def _history(self, state: _State) -> History:
        best = self._best(state)
        return History(
            baseline=state.trials[0]["config"],
            best=best["config"],
            best_mean=best["mean"],
            trials=[state.trials[k] for k in sorted(state.trials)],
        )

    def _finish(self, state: _State, record: dict[str, Any]) -> dict[str, Any]:
        write_results_tsv(self.out, [*state.trials.values(), record])
        if self.git and record["status"] in ("baseline", "keep"):
            files = {
                "config.toml": config_toml(self.space, record),
                "results.tsv": (self.out / "results.tsv").read_text(),
            }
            m = self.space.metric.name
            msg = (
                f"{self.space.name} trial {record['trial']}: {record['status']} "
                f"{m}={record['mean']:.6g} over {len(record['values'])} seeds\n\n"
                f"{record['description']}\nchanges: {record['diff']}\n"
            )
            record["commit"] = self.git.commit(files, msg)
        rec = self.ledger.append("trial", **record)
        state.trials[record["trial"]] = rec
        write_results_tsv(self.out, list(state.trials.values()))
        return rec

    # -- the loop ----------------------------------------------------------------------
    def run(self) -> Summary:
        with lock_dir(self.out):
            state = self._open()
            proposer = (
                self.opt.proposer
                if not isinstance(self.opt.proposer, str)
                else make_proposer(
                    self.opt.proposer,
                    self.space,
                    self.out,
                    seed=self.space.spec.seeds.sampler,
                    agent_wait_s=self.opt.agent_wait_s,
                )
            )
            self._baseline(state, proposer)
            for t in sorted(state.trials):  # replay finished trials into the proposer
                if t > 0:
                    rec = state.trials[t]
                    proposer.tell(t, rec["config"], rec.get("mean"), rec["status"])
            stopped = self._search(state, proposer)
            if self.opt.confirm:
                self._confirm(state)
            summary = self.summary(state, stopped)
            if self.opt.report:
                write_report(self.out, self.ledger.records(), summary)
            return summary

    def _open(self) -> _State:
        if self.ledger.exists() and not self.opt.resume:
            raise ConfigError(
                f"{self.ledger.path} exists: pass --resume to continue it, or choose another --out"
            )
        state = _State(self.ledger.records())
        space_text = (
            Path(self.space.source).read_text() if Path(self.space.source).is_file() else ""
        )
        digest = hashlib.sha256(space_text.encode()).hexdigest()[:12]
        if state.header is None:
            if space_text:
                shutil.copyfile(self.space.source, self.out / "space.toml")
            state.header = self.ledger.append(
                "header",
                name=self.space.name,
                metric=self.space.metric.name,
                direction=self.space.metric.direction,
                proposer=getattr(self.opt.proposer, "name", self.opt.proposer),
                space_sha=digest,
                params=list(self.space.params),
            )
        elif (state.header["metric"], state.header["direction"]) != (
            self.space.metric.name,
            self.space.metric.direction,
        ):
            raise ConfigError(
                f"{self.ledger.path}: the ledger optimises "
                f"{state.header['metric']} ({state.header['direction']}); "
                "the space file now says otherwise"
            )
        else:
            self._log(f"resuming {self.out}: {len(state.trials)} trials finished")
        return state

    def _baseline(self, state: _State, proposer: Proposer) -> None:
        if 0 in state.trials:
            if state.trials[0]["status"] != "baseline":
                raise StudioAlignError(
                    f"baseline failed earlier ({state.trials[0]['status']}): "
                    f"{state.trials[0]['description']}"
                )
            proposer.tell(0, state.trials[0]["config"], state.trials[0]["mean"], "baseline")
            return
        config = state.proposals.get(0, {}).get("config") or self.space.baseline()
        if 0 not in state.proposals:
            state.proposals[0] = self.ledger.append(
                "propose", trial=0, config=config, description="baseline", proposer="baseline"
            )
        self._log(f"trial 0 (baseline) on seeds {self.space.spec.seeds.baseline}")
        values: list[float] = []
        seeds: list[int] = []
        seconds = 0.0
        for seed in self.space.spec.seeds.baseline:
            rec = self._run_seed(state, 0, seed, config)
            seconds += rec["seconds"]
            if rec["status"] != "ok":
                self._finish(
                    state,
                    self._record(
                        0,
                        config,
                        "baseline",
                        rec["status"],
                        values,
                        seeds,
                        seconds,
                        message=rec["message"],
                    ),
                )
                raise StudioAlignError(
                    f"baseline {rec['status']} on seed {seed} ({rec['phase']}): {rec['message']}"
                    f"; see {self.runner.out}/trials/0000/seed-{seed}/"
                )
            values.append(rec["value"])
            seeds.append(seed)
        rec = self._finish(
            state, self._record(0, config, "baseline", "baseline", values, seeds, seconds)
        )
        proposer.tell(0, config, rec["mean"], "baseline")
        self._log(f"baseline {self.space.metric.name} = {rec['mean']:.6g} ± {rec['std']:.3g}")

    def _record(
        self,
        trial: int,
        config: Config,
        description: str,
        status: str,
        values: list[float],
        seeds: list[int],
        seconds: float,
        **extra: Any,
    ) -> dict[str, Any]:
        mean, std = acceptance.mean_std(values) if values else (None, None)
        return {
            "trial": trial,
            "status": status,
            "config": config,
            "description": description,
            "diff": self.space.diff(config, self.space.baseline()),
            "values": values,
            "seeds": seeds,
            "mean": mean,
            "std": std,
            "seconds": round(seconds, 3),
            **extra,
        }

    def _search(self, state: _State, proposer: Proposer) -> str:
        seeds = self.space.spec.seeds
        k = self.space.spec.acceptance.k
        while True:
            n = max(state.trials) + 1
            pending = state.proposals.get(n)
            if pending is None:
                done = len([t for t in state.trials if t > 0])
                if done >= self.max_trials:
                    return f"trial budget reached ({self.max_trials})"
                if state.elapsed() >= self.wall_clock:
                    return f"wall-clock budget spent ({self.wall_clock:g}s)"
                proposal = proposer.propose(n, self._history(state))
                if proposal is None:
                    return "the agent wrote no proposal in time"
                pending = self.ledger.append(
                    "propose",
                    trial=n,
                    config=proposal.config,
                    description=proposal.description,
                    proposer=proposer.name,
                )
                state.proposals[n] = pending
            config, desc = pending["config"], pending["description"]
            self._log(f"trial {n}: {desc}")
            best = self._best(state)
            noise = self._noise(state)
            values: list[float] = []
            used: list[int] = []
            seconds = 0.0
            status, message, decision = "", "", None
            queue = list(seeds.candidate)
            extra = [x for x in seeds.extra if x not in queue]
            # a keep must hold on at least `keep_seeds` seeds: the baseline's, then extras
            need = self.space.spec.acceptance.keep_seeds or len(seeds.baseline)
            topup = [x for x in [*seeds.baseline, *seeds.extra] if x not in queue]
            while queue:
                seed = queue.pop(0)
                rec = self._run_seed(state, n, seed, config)
                seconds += rec["seconds"]
                used.append(seed)
                if rec["status"] != "ok":
                    status, message = rec["status"], f"{rec['phase']}: {rec['message']}"
                    break
                values.append(rec["value"])
                if queue:
                    continue
                extra = [x for x in extra if x not in used]
                topup = [x for x in topup if x not in used]
                decision = acceptance.decide(
                    best["values"],
                    values,
                    sigma=noise.sigma,
                    k=k,
                    dof=noise.dof,
                    sign=self.sign,
                    can_rerun=bool(extra),
                )
                if decision.verdict == "keep" and len(values) < need and topup:
                    queue = topup[: need - len(values)]  # confirm on more seeds first
                    continue
                if decision.verdict == "rerun":
                    queue.append(extra[0])
                    continue
                status = decision.verdict
            record = self._record(
                n,
                config,
                desc,
                status,
                values,
                used,
                seconds,
                proposer=pending.get("proposer"),
                best_trial=best["trial"],
                best_mean=best["mean"],
                message=message,
            )
            if decision is not None:
                record.update(
                    improvement=decision.diff,
                    margin=decision.margin,
                    sigma=noise.sigma,
                    dof=noise.dof,
                )
            rec = self._finish(state, record)
            proposer.tell(n, config, rec["mean"], status)
            shown = "-" if rec["mean"] is None else f"{rec['mean']:.6g}"
            why = (
                (
                    f" (improvement {decision.diff:+.4g} vs margin {decision.margin:.4g}, "
                    f"{len(values)} seeds)"
                )
                if decision
                else f" ({message})"
            )
            self._log(f"trial {n}: {status} {shown}{why}")

    def _confirm(self, state: _State) -> None:
        if self.space.spec.data.heldout is None or 0 not in state.trials:
            return
        best = self._best(state)
        for t in sorted({0, best["trial"]}):
            if t in state.confirms:
                continue
            rec = state.trials[t]
            values, statuses = [], []
            for seed in rec["seeds"]:
                run = self._run_seed(state, t, seed, rec["config"], split="heldout")
                statuses.append(run["status"])
                if run["status"] == "ok":
                    values.append(run["value"])
            mean, std = acceptance.mean_std(values) if values else (None, None)
            state.confirms[t] = self.ledger.append(
                "confirm",
                trial=t,
                split="heldout",
                seeds=rec["seeds"],
                values=values,
                statuses=statuses,
                mean=mean,
                std=std,
            )
            self._log(f"held-out confirmation of trial {t}: {mean} ± {std}")

    def summary(self, state: _State, stopped: str = "") -> Summary:
        sigma = self._noise(state).sigma if 0 in state.trials else None
        return build_summary(state, str(self.out), self.space.metric, sigma, stopped=stopped)


def run_autotune(
    space: Space | str | Path, out: str | Path, options: LoopOptions | None = None
) -> Summary:
    """Run (or resume) an autotune loop; the library entry point the CLI calls."""
    if not isinstance(space, Space):
        space = Space.load(space)
    return Autotune(space, out, options).run()
