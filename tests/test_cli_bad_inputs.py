"""Bad inputs through the real CLI, in subprocesses: exit code 2, one line, no traceback.

Each case builds its bad input from shared module fixtures (a tiny demo dataset, a run
config, a tiny untrained router checkpoint and corrupt copies of it), runs
`python -m studio_align ...` and asserts exit code 2, a non-empty `Error:` line on
stderr and no `Traceback`. Every case stops before any training step, so a case costs
one interpreter start. The full matrix is marked slow; `FAST` is a representative few
that run in the default suite.

Read-only and full disks are real where the test may mount a tiny tmpfs (as root in a
container): `Env.mounts` makes a read-only one and a 256 KiB one that is filled up;
elsewhere those cases skip. `/dev/full` (ENOSPC on every write) and a path under a
regular file (ENOTDIR) need no privileges, and the EROFS message is also checked
in-process with an injected `OSError` (`test_read_only_filesystem_is_one_line`).
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from serving_helpers import free_port, make_router_checkpoint

from studio_align.config import load_config
from studio_align.training.sft import SFTConfig

ROOT = Path(__file__).resolve().parents[1]
NON_UTF8 = b'{"request": {"text": "caf\xe9"}, "plan": ["audio.music"]}\n'
UNKNOWN_STEP = b'{"request": {"text": "a flyer", "attachments": []}, "plan": ["no.such_step"]}\n'


class Env:
    """Shared fixture files; `tmp` holds scratch space for each case."""

    def __init__(self, base: Path) -> None:
        from studio_align.router.data import write_jsonl
        from studio_align.simulate.router.requests import generate_examples

        self.base = base
        self.train = write_jsonl(base / "train.jsonl", generate_examples(24, seed=0))
        self.held = write_jsonl(base / "held.jsonl", generate_examples(8, seed=1, split="heldout"))
        self.router = make_router_checkpoint(base / "routers" / "good", seed=0, version="good")
        self.logs = base / "logs.jsonl"
        lines = [
            {"type": "route", "id": f"e{i}", "ts": "2026-11-01T10:00:00Z", "creator": f"c{i}",
             "session": "s", "request": {"text": "make a video", "attachments": ["image"]},
             "proposed": ["wan.image_to_video"], "final": ["wan.image_to_video"],
             "outcome": "accepted"}
            for i in range(5)
        ]  # fmt: skip
        self.logs.write_text("".join(json.dumps(x) + "\n" for x in lines))
        self.n = 0
        self.mounts: dict[str, Path] = {}

    def mount(self, kind: str) -> Path:
        """A read-only (`ro`) or full (`full`) tmpfs; skips the case where none can be made."""
        if kind not in self.mounts:
            pytest.skip(f"cannot mount a {kind} tmpfs here (needs root in a container)")
        return self.mounts[kind]

    def try_mounts(self) -> None:
        for kind, opts in (("ro", "ro,size=64k"), ("full", "size=256k")):
            d = self.base / f"mnt-{kind}"
            d.mkdir()
            r = subprocess.run(["mount", "-t", "tmpfs", "-o", opts, "tmpfs", str(d)],
                               capture_output=True)  # fmt: skip
            if r.returncode == 0:
                self.mounts[kind] = d
        if "full" in self.mounts:  # fill it up
            with open(self.mounts["full"] / "filler", "wb") as f, contextlib.suppress(OSError):
                while True:
                    f.write(b"\0" * 65536)

    def unmount(self) -> None:
        for d in self.mounts.values():
            subprocess.run(["umount", str(d)], capture_output=True)

    def scratch(self) -> Path:
        self.n += 1
        d = self.base / f"case{self.n}"
        d.mkdir()
        return d

    def toml(self, d: Path, extra: str = "", run_dir: Path | None = None) -> Path:
        p = d / "run.toml"
        p.write_text(
            f'run_dir = "{run_dir or d / "run"}"\n{extra}\n'
            f'[model]\npreset = "tiny"\nvocab_size = 300\n'
            f'[data]\ntrain = "{self.train}"\nheldout = "{self.held}"\n'
            "[train]\nsteps = 2\nbatch_size = 4\nprogress = false\n"
            "[checkpoint]\nevery = 0\nkeep = 1\n",
            encoding="utf-8",
        )
        return p

    def router_copy(self, name: str) -> Path:
        dst = self.base / "routers" / name
        shutil.copytree(self.router, dst)
        return dst


Case = Callable[[Env], list[str]]


def _sft(env: Env, *sets: str, extra: str = "", run_dir: Path | None = None) -> list[str]:
    d = env.scratch()
    args = ["train", "sft", "--config", str(env.toml(d, extra, run_dir))]
    for s in sets:
        args += ["--set", s]
    return args


def _sft_data(env: Env, key: str, make: Callable[[Path], Path]) -> list[str]:
    d = env.scratch()
    return _sft(env, f'{key}="{make(d)}"')


def _non_utf8(d: Path) -> Path:
    p = d / "bad.jsonl"
    p.write_bytes(NON_UTF8)
    return p


def _non_utf8_config(env: Env) -> list[str]:
    d = env.scratch()
    p = d / "run.toml"
    p.write_bytes(b'run_dir = "caf\xe9"\n')
    return ["train", "sft", "--config", str(p)]


def _run_dir_is_file(env: Env) -> list[str]:
    d = env.scratch()
    f = d / "file"
    f.write_text("x")
    return _sft(env, run_dir=f)


def _corrupt_ckpt_meta(env: Env) -> list[str]:
    d = env.scratch()
    meta = d / "run" / "checkpoints" / "7" / "meta"
    meta.mkdir(parents=True)
    (meta / "metadata").write_text("{not json")
    (d / "run" / "checkpoints" / "7" / "_CHECKPOINT_METADATA").write_text("{broken")
    return ["train", "sft", "--config", str(env.toml(d))]


def _corrupt_ckpt_arrays(env: Env) -> list[str]:
    """A real step-2 checkpoint whose array files are cut short: orbax abandons the other
    reads, which used to print hundreds of lines of tracebacks after the one error."""
    d = env.scratch()
    made = run_cli(_sft(env, "checkpoint.every=2", run_dir=d / "run"), env.base)
    assert made.returncode == 0, made.stderr
    for f in (d / "run" / "checkpoints" / "2" / "params").rglob("*"):
        if f.is_file() and f.parent.name == "d":
            f.write_bytes(f.read_bytes()[:10])
    return _sft(env, "train.steps=4", run_dir=d / "run")


def _bundle(env: Env, name: str, corrupt: Callable[[Path], None]) -> Path:
    ck = env.router_copy(f"{name}-{env.n}")
    env.n += 1
    corrupt(ck)
    return ck


def _write(rel: str, data: bytes) -> Callable[[Path], None]:
    return lambda ck: (ck / rel).write_bytes(data)


def _truncate(ck: Path) -> None:
    p = ck / "params.safetensors"
    p.write_bytes(p.read_bytes()[:1000])


def _foreign_class(ck: Path) -> None:
    meta = json.loads((ck / "bundle.json").read_text())
    meta["model_class"] = "os.system"
    (ck / "bundle.json").write_text(json.dumps(meta))


def _nan_weights(ck: Path) -> None:
    import numpy as np
    from safetensors.numpy import load_file, save_file

    t = load_file(str(ck / "params.safetensors"))
    save_file({k: np.full_like(v, np.nan) if v.dtype.kind == "f" else v for k, v in t.items()},
              str(ck / "params.safetensors"))  # fmt: skip


def _int32_weights(ck: Path) -> None:
    import numpy as np
    from safetensors.numpy import load_file, save_file

    t = load_file(str(ck / "params.safetensors"))
    save_file({k: v.astype(np.int32) if v.dtype.kind == "f" else v for k, v in t.items()},
              str(ck / "params.safetensors"))  # fmt: skip


def _fifo(env: Env) -> str:
    p = env.scratch() / "fifo.jsonl"
    os.mkfifo(p)
    return str(p)


def _dangling(env: Env) -> str:
    p = env.scratch() / "dangling.jsonl"
    p.symlink_to(env.scratch() / "nowhere" / "x.jsonl")
    return str(p)


def _keys(env: Env, body: str) -> str:
    p = env.scratch() / "platforms.toml"
    p.write_text(body)
    return str(p)


def _deep_toml(env: Env) -> str:
    p = env.scratch() / "deep.toml"
    p.write_text("x = " + "[" * 5000 + "]" * 5000 + "\n")
    return str(p)


def _non_utf8_toml(env: Env) -> str:
    p = env.scratch() / "latin1.toml"
    p.write_bytes(b'host = "caf\xe9"\n')
    return str(p)


CORRUPTIONS: dict[str, Callable[[Path], None]] = {
    "bundle.json garbage": _write("bundle.json", b"{not json"),
    "bundle.json not utf-8": _write("bundle.json", b'{"format": "\xff"}'),
    "truncated safetensors": _truncate,
    "foreign class": _foreign_class,
    "router.json not utf-8": _write("router.json", b"\xff\xfe"),
    "model_config.json wrong": _write("model_config.json", b'{"vocab_size": "many"}'),
}


def _eval(env: Env, ck: Path, data: Path | None = None, *extra: str) -> list[str]:
    return ["eval", "router", "--checkpoint", str(ck), "--data", str(data or env.held), *extra]


def _serve(env: Env, *extra: str, ck: Path | None = None) -> list[str]:
    port = str(free_port())  # every case is refused before binding
    return ["serve", "router", "--checkpoint", str(ck or env.router), "--port", port, *extra]


def _eval_corrupt(kind: str) -> Case:
    return lambda e: _eval(e, _bundle(e, "ev", CORRUPTIONS[kind]))


def _serve_corrupt(kind: str) -> Case:
    return lambda e: _serve(e, ck=_bundle(e, "sv", CORRUPTIONS[kind]))


def _validate(env: Env, quarantine: Path) -> list[str]:
    return ["data", "validate", str(_bad_log(env)), "--quarantine", str(quarantine)]


def _broken_toml(env: Env) -> Path:
    p = env.scratch() / "serve.toml"
    p.write_text("host = [unclosed\n")
    return p


def _linked_quarantine(kind: str) -> Case:
    def case(env: Env) -> list[str]:
        d = env.scratch()
        log = d / "h.jsonl"
        log.write_bytes(env.logs.read_bytes() + b"{bad line\n")
        q = d / "q" / "h.q"
        q.parent.mkdir()
        if kind == "hard":
            os.link(log, q)
        elif kind == "sym":
            q.symlink_to(log)
        else:
            q = log
        return ["data", "validate", str(log), "--quarantine", str(q)]

    return case


def _plugin_file(body: str) -> Case:
    def case(env: Env) -> list[str]:
        p = env.scratch() / "bad_plugin.py"
        p.write_text(body)
        return ["--plugin", str(p), "plugins", "list"]

    return case


def _under_file(env: Env) -> Path:
    f = env.scratch() / "a-file"
    f.write_text("x")
    return f / "sub"


CASES: dict[str, Case] = {
    # train sft: config and overrides
    "sft config not utf-8": _non_utf8_config,
    "sft config invalid toml": lambda e: _sft(e, extra="[[[broken"),
    "sft set vocab_size=10": lambda e: _sft(e, "model.vocab_size=10"),
    "sft set huge batch int": lambda e: _sft(e, "train.batch_size=99999999999999999999999"),
    "sft set batch larger than data": lambda e: _sft(e, "train.batch_size=1000"),
    "sft set batch over the bound": lambda e: _sft(e, "train.batch_size=100000000"),
    "sft set huge steps": lambda e: _sft(e, "train.steps=99999999999999999999999"),
    "sft set no equals": lambda e: _sft(e, "train.steps"),
    "sft set unknown key": lambda e: _sft(e, "train.stepz=3"),
    "sft set wrong type": lambda e: _sft(e, "train.steps=many"),
    "sft set negative lr": lambda e: _sft(e, "optim.learning_rate=-1"),
    "sft set nan lr": lambda e: _sft(e, "optim.learning_rate=nan"),
    "sft set inf lr": lambda e: _sft(e, "optim.learning_rate=inf"),
    "sft run_dir empty": lambda e: _sft(e, 'run_dir=""'),
    "sft run_dir is init_from": lambda e: _sft(
        e, f'run_dir="{e.router}"', f'model.init_from="{e.router}"'
    ),
    "sft set nested 5000 deep": lambda e: _sft(e, "train.steps=" + "[" * 5000 + "]" * 5000),
    "sft set table over scalar": lambda e: _sft(e, "train.steps.x=1"),
    # train sft: files and folders
    "sft run_dir is a file": _run_dir_is_file,
    "sft run_dir under a file": lambda e: _sft(e, run_dir=_under_file(e)),
    "sft checkpoint.dir under a file": lambda e: _sft(e, f'checkpoint.dir="{_under_file(e)}"'),
    "sft data.train is a directory": lambda e: _sft_data(e, "data.train", lambda d: d),
    "sft data.train not utf-8": lambda e: _sft_data(e, "data.train", _non_utf8),
    "sft data.train missing": lambda e: _sft_data(e, "data.train", lambda d: d / "none.jsonl"),
    "sft data.heldout not utf-8": lambda e: _sft_data(e, "data.heldout", _non_utf8),
    "sft corrupt checkpoint meta": _corrupt_ckpt_meta,
    "sft corrupt checkpoint arrays": _corrupt_ckpt_arrays,
    "sft run_dir is a device file": lambda e: _sft(e, run_dir=Path("/dev/full")),
    "sft run_dir on a read-only disk": lambda e: _sft(e, run_dir=e.mount("ro") / "run"),
    "sft run_dir on a full disk": lambda e: _sft(e, run_dir=e.mount("full") / "run"),
    "eval report on a read-only disk": lambda e: _eval(
        e, e.router, None, "--report", str(e.mount("ro") / "report")
    ),
    "serve feedback log on a read-only disk": lambda e: _serve(
        e, "--feedback-dir", str(e.mount("ro") / "fb")
    ),
    "validate quarantine on a full disk": lambda e: _validate(e, e.mount("full") / "q.jsonl"),
    # eval router
    **{f"eval {k}": _eval_corrupt(k) for k in CORRUPTIONS},
    "eval data not utf-8": lambda e: _eval(e, e.router, _non_utf8(e.scratch())),
    "eval data not json": lambda e: _eval(e, e.router, _write_file(e, b"{oops\n")),
    "eval data empty": lambda e: _eval(e, e.router, _write_file(e, b"")),
    "eval data unknown step": lambda e: _eval(e, e.router, _write_file(e, UNKNOWN_STEP)),
    "eval report under a file": lambda e: _eval(e, e.router, None, "--report", str(_under_file(e))),
    "eval checkpoint not a router": lambda e: _eval(e, e.scratch()),
    # serve router (all refused before binding)
    **{
        f"serve {k}": _serve_corrupt(k)
        for k in ("bundle.json garbage", "truncated safetensors", "foreign class")
    },
    "serve nan weights": lambda e: _serve(e, ck=_bundle(e, "nan", _nan_weights)),
    "serve int32 weights": lambda e: _serve(e, ck=_bundle(e, "i32", _int32_weights)),
    "serve feedback log is a fifo": lambda e: _serve(e, "--feedback-log", _fifo(e)),
    "serve feedback log dangling link": lambda e: _serve(e, "--feedback-log", _dangling(e)),
    "serve public bind without feedback keys": lambda e: _serve(
        e, "--host", "0.0.0.0", "--set", "admin_token=0123456789abcdef0123"
    ),
    "serve feedback keys short": lambda e: _serve(
        e, "--feedback-keys", _keys(e, '[platforms]\nacme = "short"\n')
    ),
    "serve feedback keys not toml": lambda e: _serve(e, "--feedback-keys", _keys(e, "[oops\n")),
    "serve memory setting negative": lambda e: _serve(e, "--set", "memory.creator_sim=-1"),
    "serve memory capacity zero": lambda e: _serve(e, "--set", "memory.capacity=0"),
    "serve config nested 5000 deep": lambda e: _serve(e, "--config", _deep_toml(e)),
    "serve config not utf-8": lambda e: _serve(e, "--config", _non_utf8_toml(e)),
    "serve broken config toml": lambda e: _serve(e, "--config", str(_broken_toml(e))),
    "serve public bind without token": lambda e: _serve(e, "--host", "0.0.0.0"),
    "serve short admin token": lambda e: _serve(e, "--set", "admin_token=short"),
    "serve unknown key": lambda e: _serve(e, "--set", "max_batchh=4"),
    "serve feedback log under a file": lambda e: _serve(
        e, "--feedback-log", str(_under_file(e) / "fb.jsonl")
    ),
    "serve feedback log on a full disk dir": lambda e: _serve(e, "--feedback-dir", "/dev/full/fb"),
    # data
    "validate quarantine hard link": _linked_quarantine("hard"),
    "validate quarantine symlink": _linked_quarantine("sym"),
    "validate quarantine same path": _linked_quarantine("same"),
    "validate quarantine /dev/full": lambda e: _validate(e, Path("/dev/full")),
    "validate log dir without jsonl": lambda e: ["data", "validate", str(e.scratch())],
    "compile out is a file": lambda e: ["data", "compile", str(e.logs), "--out", str(e.logs)],
    "compile out under a file": lambda e: [
        "data",
        "compile",
        str(e.logs),
        "--out",
        str(_under_file(e)),
    ],
    # plugins
    "plugin missing file": lambda e: ["--plugin", str(e.base / "nope.py"), "plugins", "list"],
    "plugin syntax error": _plugin_file("def oops(:\n"),
    "plugin exits in a hook": _plugin_file(
        "import sys\ndef studio_align_register_rewards(register):\n    sys.exit(3)\n"
    ),
    "plugin raises in a hook": _plugin_file(
        "def studio_align_register_rewards(register):\n    raise RuntimeError('boom')\n"
    ),
}

FAST = [  # a representative few; every case runs in the slow matrix (the quarantine
    # hard-link case there only: tests/test_reader_lossless.py checks the refusal itself)
    "sft config not utf-8",
    "serve public bind without token",
    "serve feedback log is a fifo",
]


def _write_file(env: Env, data: bytes) -> Path:
    p = env.scratch() / "data.jsonl"
    p.write_bytes(data)
    return p


def _bad_log(env: Env) -> Path:
    p = env.scratch() / "bad.jsonl"
    p.write_bytes(env.logs.read_bytes() + b"{bad\n")
    return p


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    e = Env(tmp_path_factory.mktemp("bad_inputs"))
    sane = run_cli(["plugins", "list"], e.base)  # else every case would exit 2 vacuously
    assert sane.returncode == 0, f"the CLI is broken before any bad input: {sane.stderr}"
    # the base run config must be valid, else every `train sft` case exits 2 vacuously
    load_config(SFTConfig, e.toml(e.scratch()))
    if shutil.which("mount") and os.geteuid() == 0:
        e.try_mounts()
    try:
        yield e
    finally:
        e.unmount()


def run_cli(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    environ = {**os.environ, "JAX_PLATFORMS": "cpu", "PYTHONPATH": str(ROOT)}
    environ.pop("STUDIO_ALIGN_DEBUG", None)
    environ.pop("STUDIO_ALIGN_ADMIN_TOKEN", None)
    return subprocess.run(
        [sys.executable, "-m", "studio_align", *args],
        capture_output=True, text=True, timeout=300, cwd=cwd, env=environ,
    )  # fmt: skip


def _check(env: Env, name: str) -> None:
    args = CASES[name](env)
    out = run_cli(args, env.base)
    assert "Traceback" not in out.stderr + out.stdout, f"{name}: {args}\n{out.stderr}"
    assert out.returncode == 2, f"{name}: exit {out.returncode}: {args}\n{out.stderr}"
    errors = [ln for ln in out.stderr.splitlines() if ln.startswith("Error:")]
    assert len(errors) == 1 and len(errors[0]) > len("Error: "), f"{name}: {out.stderr}"
    if args[0] == "serve":  # a refused server never claims to be serving
        assert " on http://" not in out.stderr, f"{name}: {out.stderr}"
    if "config not utf-8" in name:  # the error names the file at fault
        assert ".toml" in errors[0], f"{name}: {errors[0]}"


def test_matrix_has_at_least_40_cases() -> None:
    assert len(CASES) >= 40, len(CASES)


@pytest.mark.parametrize("name", FAST)
def test_bad_input_fast(env: Env, name: str) -> None:
    _check(env, name)


@pytest.mark.slow
@pytest.mark.parametrize("name", [n for n in CASES if n not in FAST])
def test_bad_input_matrix(env: Env, name: str) -> None:
    _check(env, name)


def test_read_only_filesystem_is_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    from click.testing import CliRunner

    from studio_align.cli import main

    @main.command("_ro_probe", hidden=True)
    def probe() -> None:
        raise OSError(errno.EROFS, os.strerror(errno.EROFS), "/mnt/ro/run/metrics.jsonl")

    try:
        r = CliRunner().invoke(main, ["_ro_probe"])
    finally:
        main.commands.pop("_ro_probe", None)
    assert r.exit_code == 2
    assert "/mnt/ro/run/metrics.jsonl: Read-only file system" in r.output
    assert "Traceback" not in r.output


@pytest.mark.parametrize(
    "args",
    [
        ["generate", "--checkpoint", "base", "--tags", "product: lifestyle", "--out", "x",
         "--guidance", "nan"],
        ["autotune", "--space", "s.toml", "--out", "x", "--wall-clock", "nan"],
        ["model", "calibrate-router", ".", "--val", "v.jsonl", "--target", "inf"],
    ],
)  # fmt: skip
def test_a_non_finite_number_option_is_refused_before_the_command_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, args: list[str]
) -> None:
    """NaN passes `click.FloatRange` (every comparison is false): `--guidance nan` wrote
    black images with exit 0."""
    from click.testing import CliRunner

    from studio_align.cli import main

    monkeypatch.chdir(tmp_path)
    (tmp_path / "s.toml").write_text("")
    (tmp_path / "v.jsonl").write_text("")
    r = CliRunner().invoke(main, args)
    assert r.exit_code == 2, r.output
    assert r.output.startswith(f"Error: {args[-2]}: ") and r.output.count("\n") == 1, r.output
    assert not (tmp_path / "x").exists()


def test_a_file_in_the_way_of_a_folder_and_a_folder_as_plugin_say_so(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from studio_align.cli import main

    log = tmp_path / "logs.jsonl"
    log.write_text("{}\n")
    r = CliRunner().invoke(main, ["data", "validate", str(log), "--quarantine", f"{log}/q.jsonl"])
    assert r.exit_code == 2 and f"{log}: a file, where a folder is needed" in r.output, r.output
    r = CliRunner().invoke(main, ["--plugin", str(tmp_path), "plugins", "list"])
    assert r.exit_code == 2 and "a folder; give its .py file" in r.output, r.output
