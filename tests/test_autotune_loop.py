"""The loop end to end on the shipped objective: proposers, statuses, ledger, report,
resume after SIGKILL, git recording and the agent round trip."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import pytest
from autotune_helpers import write_space
from click.testing import CliRunner

from studio_align.autotune import PROPOSERS, LoopOptions, Space, run_autotune
from studio_align.autotune.ledger import Ledger
from studio_align.errors import ConfigError

FAST = {"trials": 3, "wall_clock_s": 600, "trial_timeout_s": 20}


@pytest.mark.parametrize("proposer", [p for p in PROPOSERS if p != "agent"])
def test_each_proposer_runs_valid_configs(tmp_path, proposer):
    space = Space.load(write_space(tmp_path, budget=FAST))
    s = run_autotune(space, tmp_path / "out", LoopOptions(proposer=proposer, report=False))
    assert s.trials == 3 and sum(s.counts.values()) == 3
    proposals = [r for r in Ledger(tmp_path / "out").of_kind("propose") if r["trial"] > 0]
    assert len(proposals) == 3
    for r in proposals:
        assert space.complete(r["config"], strict=True) == r["config"]  # valid, complete
        assert r["description"].startswith(proposer)
    assert len({json.dumps(r["config"], sort_keys=True) for r in proposals}) == 3


@pytest.mark.slow  # ~11 s on a busy 2-core VM: several real trials
def test_statuses_follow_the_trial_outcome(tmp_path):
    params = {
        "x": {"type": "float", "low": 0.0, "high": 1.0, "default": 0.3},
        "mode": {"type": "choice", "values": ["none", "crash", "nan", "hang"]},
    }
    budget = {"trials": 8, "wall_clock_s": 600, "trial_timeout_s": 1.5}
    space = Space.load(write_space(tmp_path, params=params, budget=budget))
    s = run_autotune(space, tmp_path / "out", LoopOptions(proposer="random", report=True))
    expected = {"crash": "crash", "nan": "nan", "hang": "timeout"}
    trials = [r for r in Ledger(tmp_path / "out").of_kind("trial") if r["trial"] > 0]
    for r in trials:
        mode = r["config"]["mode"]
        if mode in expected:
            assert r["status"] == expected[mode], r
        else:
            assert r["status"] in ("keep", "discard"), r
    got = Counter(r["status"] for r in trials)
    assert got["crash"] and got["nan"] and got["timeout"]  # seed 0 draws every mode
    assert s.counts == {k: got.get(k, 0) for k in ("keep", "discard", "crash", "timeout", "nan")}
    rows = (tmp_path / "out/results.tsv").read_text().splitlines()
    assert rows[0].split("\t")[:6] == [
        "trial",
        "metric",
        "status",
        "description",
        "diff",
        "seconds",
    ]
    assert len(rows) == 1 + 1 + 8
    for f in ("report.md", "report.html", "running_best.png"):
        assert (tmp_path / "out" / f).stat().st_size > 0


def test_heldout_confirms_best_and_is_never_used_for_selection(tmp_path):
    space = Space.load(write_space(tmp_path, budget=FAST))
    s = run_autotune(space, tmp_path / "out", LoopOptions(proposer="sobol", report=False))
    runs = list(Ledger(tmp_path / "out").of_kind("run"))
    heldout = [r for r in runs if r["split"] == "heldout"]
    assert {r["trial"] for r in heldout} == {0, s.best_trial}
    last_trial_time = max(r["time"] for r in Ledger(tmp_path / "out").of_kind("trial"))
    assert all(r["time"] > last_trial_time for r in heldout)  # only after all decisions
    assert set(s.heldout) == {"0", str(s.best_trial)}
    # held-out evaluation reused the checkpoints: every run directory was trained once
    for count in (tmp_path / "out/trials").glob("*/seed-*/train_count"):
        assert count.read_text() == "1\n"


def test_existing_ledger_needs_resume(tmp_path):
    space = Space.load(write_space(tmp_path, budget={**FAST, "trials": 1}))
    run_autotune(space, tmp_path / "out", LoopOptions(proposer="random", report=False))
    with pytest.raises(ConfigError, match="--resume"):
        run_autotune(space, tmp_path / "out", LoopOptions(proposer="random"))
    s = run_autotune(
        space, tmp_path / "out", LoopOptions(proposer="random", resume=True, trials=2, report=False)
    )
    assert s.trials == 2


def _studio_align() -> str:
    return str(Path(sys.executable).with_name("studio-align"))


def _processes_naming(path: Path) -> list[str]:
    """Pids of live processes whose command line names `path`."""
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            if str(path).encode() in cmdline.read_bytes():
                found.append(cmdline.parent.name)
        except OSError:
            pass
    return found


@pytest.mark.slow  # over 10 s; the default suite stays under 15 minutes on 2 cores
def test_kill_mid_trial_and_resume(tmp_path):
    """SIGKILL the loop while trial 3 trains; the restart repeats no finished trial."""
    budget = {"trials": 4, "wall_clock_s": 600, "trial_timeout_s": 30}
    space_path = write_space(tmp_path, budget=budget, locked={"noise": 0.02, "work_s": 0.4})
    out = tmp_path / "out"
    cmd = [
        _studio_align(),
        "autotune",
        "--space",
        str(space_path),
        "--out",
        str(out),
        "--proposer",
        "random",
        "--no-confirm",
    ]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    ledger = Ledger(out)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        recs = ledger.records() if ledger.path.exists() else []
        if (
            any(r["kind"] == "propose" and r["trial"] == 3 for r in recs)
            and (out / "trials/0003").exists()
        ):
            break
        time.sleep(0.05)
    else:
        proc.kill()
        pytest.fail("loop never reached trial 3")
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    before = ledger.records()
    done_before = {r["trial"]: r for r in before if r["kind"] == "trial"}
    assert set(done_before) == {0, 1, 2}
    proposal3 = next(r for r in before if r["kind"] == "propose" and r["trial"] == 3)
    if sys.platform.startswith("linux"):  # the trainer dies with its parent (PDEATHSIG)
        orphans = _processes_naming(out)
        deadline = time.monotonic() + 30  # the signal is delivered asynchronously: wait for it
        while orphans and time.monotonic() < deadline:
            time.sleep(0.05)
            orphans = _processes_naming(out)
        assert not orphans, f"trial processes outlived the killed loop: {orphans}"

    res = subprocess.run([*cmd, "--resume"], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    after = ledger.records()
    trials = [r for r in after if r["kind"] == "trial"]
    assert [r["trial"] for r in trials] == [0, 1, 2, 3, 4]  # each exactly once
    for t, rec in done_before.items():  # finished trials untouched
        assert next(r for r in trials if r["trial"] == t) == rec
    proposals3 = [r for r in after if r["kind"] == "propose" and r["trial"] == 3]
    assert proposals3 == [proposal3]  # trial 3 resumed with the config proposed before
    runs = Counter((r["trial"], r["seed"], r["split"]) for r in after if r["kind"] == "run")
    assert max(runs.values()) == 1  # no seed of any trial ran twice
    for t in (0, 1, 2):  # and no finished trial was retrained
        for count in (out / f"trials/{t:04d}").glob("seed-*/train_count"):
            assert count.read_text() == "1\n"
    assert "resuming" in res.stderr


def _git(repo, *args):
    return subprocess.run(
        ["git", "-C", str(repo), *args], capture_output=True, text=True, check=True
    ).stdout.strip()


def test_git_commits_each_kept_config(tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    _git(repo, "init", "-q", "-b", "main")
    (repo / "README").write_text("user's project\n")
    _git(repo, "add", "README")
    _git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "init")
    (repo / "wip.txt").write_text("uncommitted work\n")  # must survive untouched
    head = _git(repo, "rev-parse", "HEAD")

    space = Space.load(write_space(tmp_path, budget={**FAST, "trials": 4}))
    s = run_autotune(
        space,
        tmp_path / "out",
        LoopOptions(proposer="sobol", git=True, git_repo=repo, report=False),
    )
    log = _git(repo, "log", "--format=%s", "autotune/toy").splitlines()
    kept = [
        r for r in Ledger(tmp_path / "out").of_kind("trial") if r["status"] in ("baseline", "keep")
    ]
    assert len(log) == 1 + len(kept) == 1 + 1 + s.counts["keep"]  # + the user's init
    assert log[0].startswith(f"toy trial {s.best_trial}: ")
    config = _git(repo, "show", "autotune/toy:autotune/toy/config.toml")
    import tomllib

    assert tomllib.loads(config) == {**space.locked, **s.best_config}
    assert kept[-1]["commit"] == _git(repo, "rev-parse", "autotune/toy")
    # the user's checkout is untouched
    assert _git(repo, "rev-parse", "HEAD") == head
    assert _git(repo, "branch", "--show-current") == "main"
    assert _git(repo, "status", "--porcelain") == "?? wip.txt"


def test_agent_round_trip(tmp_path):
    space = Space.load(write_space(tmp_path, budget={**FAST, "trials": 2}))
    out = tmp_path / "out"
    result = {}

    def loop():
        try:
            result["summary"] = run_autotune(
                space, out, LoopOptions(proposer="agent", agent_wait_s=60, report=False)
            )
        except Exception as e:  # surfaced below
            result["error"] = e

    thread = threading.Thread(target=loop)
    thread.start()
    agent = out / "agent"

    def wait_request(trial):
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                req = json.loads((agent / "request.json").read_text())
                if req["trial"] == trial:
                    return req
            except (FileNotFoundError, json.JSONDecodeError):
                pass
            time.sleep(0.05)
        raise AssertionError(f"no request for trial {trial}: {result}")

    def write(path, text):
        tmp = path.with_suffix(".tmp")
        tmp.write_text(text)
        tmp.replace(path)

    req = wait_request(1)
    program = (out / "program.md").read_text()
    assert "`score`" in program and "maximize" in program and "`momentum`" in program
    assert "agent/trial-NNNN.toml" in program and req["write"] == "agent/trial-0001.toml"
    # an agent trying to change the seed is refused, and told why
    write(out / req["write"], 'description = "try another seed"\nseed = 7\n')
    deadline = time.monotonic() + 30
    while not (agent / "trial-0001.error.txt").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    # the reason is whole when it appears, and the rejected file is already aside
    assert "seed" in (agent / "trial-0001.error.txt").read_text()
    assert (agent / "trial-0001.toml.rejected").exists()
    assert not (agent / "trial-0001.toml").exists()
    write(out / req["write"], 'description = "x to its optimum"\nx = 0.7\nlr = 0.01\n')
    req = wait_request(2)
    assert req["best"]["x"] == 0.7  # the agent sees that its change was kept
    assert "best mean score" in (out / "program.md").read_text()
    write(out / req["write"], 'description = "sgd instead"\nopt = "sgd"\nmomentum = 0.9\n')
    thread.join(60)
    assert not thread.is_alive() and "error" not in result, result
    s = result["summary"]
    rows = [ln.split("\t") for ln in (out / "results.tsv").read_text().splitlines()[1:]]
    assert [r[3] for r in rows] == ["baseline", "agent: x to its optimum", "agent: sgd instead"]
    assert rows[1][2] == "keep" and s.best_trial == 1


def test_cli_runs_and_reports_json(tmp_path):
    from studio_align.cli import main

    space_path = write_space(tmp_path, budget={**FAST, "trials": 2})
    res = CliRunner().invoke(
        main,
        [
            "autotune",
            "--space",
            str(space_path),
            "--out",
            str(tmp_path / "o"),
            "--proposer",
            "hill",
            "--json",
        ],
    )
    assert res.exit_code == 0, res.output
    summary = json.loads(res.stdout)
    assert summary["trials"] == 2 and summary["baseline_std"] > 0
    again = CliRunner().invoke(
        main, ["autotune", "--space", str(space_path), "--out", str(tmp_path / "o")]
    )
    assert again.exit_code == 2 and "--resume" in again.output


def test_cli_bad_space_is_one_line_error(tmp_path):
    from studio_align.cli import main

    bad = tmp_path / "s.toml"
    bad.write_text('[metric]\nname = "a"\n[data]\nvalidation = "v"\n[params.lr]\ntype = "float"\n')
    res = CliRunner().invoke(main, ["autotune", "--space", str(bad)])
    assert res.exit_code == 2 and "params.lr" in res.output


if os.environ.get("STUDIO_ALIGN_AUTOTUNE_TRIAL"):  # pragma: no cover
    raise RuntimeError("tests must not run inside an autotune trial")
