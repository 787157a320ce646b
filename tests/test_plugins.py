"""Plugin host: discovery origins, validated registration, errors naming plugin and hook."""

from __future__ import annotations

import sys
import textwrap
from types import MappingProxyType

import click
import pytest

from studio_align.catalog import DEFAULT_ENGINES, Engine
from studio_align.errors import ConfigError, PluginError
from studio_align.hookspecs import EncoderSpec, hookimpl
from studio_align.plugins import PluginHost, Reward, get_host, set_host, using_host
from studio_align.scoring import score_registered


def write_plugin(tmp_path, name: str, body: str):
    path = tmp_path / f"{name}.py"
    path.write_text(textwrap.dedent(body), encoding="utf-8")
    return path


class RewardPlugin:
    def __init__(self, *names: str):
        self.names = names

    @hookimpl
    def studio_align_register_rewards(self, register):
        for n in self.names:
            register(lambda plans: [1.0] * len(plans), name=n)


def test_builtins_register_through_hooks(host):
    assert set(host.rewards) >= {"intent_accuracy", "plan_validity"}
    assert host.catalog.names == [e.name for e in DEFAULT_ENGINES]
    infos = {i.name: i for i in host.describe()}
    assert {"catalog", "routing", "aesthetics"} <= set(infos)
    routing = infos["routing"]
    assert routing.origin == "builtin"
    assert routing.hooks == [
        "studio_align_register_bundle_classes",
        "studio_align_register_commands",
        "studio_align_register_rewards",
        "studio_align_register_tasks",
    ]
    assert routing.rewards == ["intent_accuracy", "plan_validity"]
    assert infos["catalog"].engines == [e.name for e in DEFAULT_ENGINES]


def test_fake_plugin_registered_and_unregistered(host):
    host.register(RewardPlugin("fake"), name="fake-plugin")
    assert host.rewards["fake"].plugin == "fake-plugin"
    host.unregister("fake-plugin")
    assert "fake" not in host.rewards


def test_fresh_hosts_do_not_share_state():
    a, b = PluginHost(), PluginHost()
    a.register(RewardPlugin("only_a"), name="p")
    assert "only_a" in a.rewards
    assert b.rewards == {}


def test_duplicate_reward_names_both_plugins_and_hook(host):
    host.register(RewardPlugin("dup"), name="first")
    host.register(RewardPlugin("dup"), name="second")
    with pytest.raises(PluginError) as info:
        host.rewards  # noqa: B018
    msg = str(info.value)
    assert "'dup'" in msg and "'first'" in msg and "'second'" in msg
    assert "studio_align_register_rewards" in msg


def test_duplicate_builtin_reward_names_builtin_plugin(host):
    host.register(RewardPlugin("plan_validity"), name="copycat")
    with pytest.raises(PluginError, match=r"routing.*'copycat'"):
        host.rewards  # noqa: B018


def test_duplicate_engine_and_encoder(host):
    class Engines:
        @hookimpl
        def studio_align_register_engines(self, register):
            register(Engine("wan.image_to_video", frozenset({"image"}), "video"))

    host.register(Engines(), name="wan-fork")
    with pytest.raises(
        PluginError,
        match=r"engine 'wan.image_to_video'.*catalog.*'wan-fork'.*studio_align_register_engines",
    ):
        host.catalog  # noqa: B018

    h = PluginHost()

    class Enc:
        @hookimpl
        def studio_align_register_encoders(self, register):
            register(EncoderSpec("stats", lambda **kw: None, "x"))

    h.register(Enc(), name="enc1")
    h.register(Enc(), name="enc2")
    with pytest.raises(
        PluginError, match=r"encoder 'stats'.*'enc1'.*'enc2'.*studio_align_register_encoders"
    ):
        h.encoders  # noqa: B018


@pytest.mark.parametrize(
    ("hook", "bad", "match"),
    [
        ("studio_align_register_rewards", "42", r"'wrong'.*studio_align_register_rewards.*got int"),
        (
            "studio_align_register_engines",
            "'wan.x'",
            r"'wrong'.*studio_align_register_engines.*got str",
        ),
        (
            "studio_align_register_encoders",
            "None",
            r"'wrong'.*studio_align_register_encoders.*got NoneType",
        ),
    ],
)
def test_wrong_types_name_plugin_and_hook(tmp_path, hook, bad, match):
    path = write_plugin(tmp_path, "wrong", f"def {hook}(register):\n    register({bad})\n")
    h = PluginHost()
    h.load_file(path)
    with pytest.raises(PluginError, match=match):
        h.rewards  # noqa: B018


def test_unnamed_lambda_is_rejected_with_hint():
    class Anon:
        @hookimpl
        def studio_align_register_rewards(self, register):
            register(lambda plans: plans)

    h = PluginHost()
    h.register(Anon(), name="anon")
    with pytest.raises(PluginError, match=r"'anon'.*invalid reward name '<lambda>'.*name="):
        h.rewards  # noqa: B018


def test_reward_objects_and_renames():
    class P:
        @hookimpl
        def studio_align_register_rewards(self, register):
            register(Reward("orig", lambda plans: plans, "described"))
            register(Reward("orig", lambda plans: plans), name="renamed", description="new")

            def documented(plans):
                """First line is the description.

                More text.
                """
                return plans

            register(documented)

    h = PluginHost()
    h.register(P(), name="p")
    assert h.rewards["orig"].description == "described"
    assert h.rewards["renamed"].description == "new"
    assert h.rewards["documented"].description == "First line is the description."
    assert all(r.plugin == "p" for r in h.rewards.values())


def test_exception_in_hook_names_plugin_and_hook(tmp_path):
    path = write_plugin(
        tmp_path,
        "explodes",
        """
        def studio_align_register_rewards(register):
            raise RuntimeError("no config found")
        """,
    )
    h = PluginHost()
    h.load_file(path)
    with pytest.raises(
        PluginError,
        match=r"plugin 'explodes' raised RuntimeError in hook studio_align_register_rewards: no config found",
    ):
        h.rewards  # noqa: B018


def test_import_errors_name_the_plugin(tmp_path):
    path = write_plugin(tmp_path, "needs_missing", "import definitely_not_installed_xyz\n")
    with pytest.raises(
        PluginError, match=r"plugin 'needs_missing' \(file .*\): import failed: ModuleNotFoundError"
    ):
        PluginHost().load_file(path)
    with pytest.raises(PluginError, match=r"plugin 'no_such_plugin_mod' \(module\): import failed"):
        PluginHost().load("no_such_plugin_mod")
    with pytest.raises(PluginError, match=r"not found"):
        PluginHost().load(str(tmp_path / "absent.py"))
    syntax = write_plugin(tmp_path, "syntax", "def broken(:\n")
    with pytest.raises(PluginError, match=r"'syntax'.*SyntaxError"):
        PluginHost().load_file(syntax)


def test_unknown_hook_and_bad_hook_arguments(tmp_path):
    typo = write_plugin(tmp_path, "typo", "def studio_align_register_reward(register):\n    pass\n")
    h = PluginHost()
    with pytest.raises(PluginError, match=r"'typo'.*unknown hook.*studio_align_register_reward\b"):
        h.load_file(typo)
    assert h.describe() == []  # rejected plugin is not left half-registered

    class BadArgs:
        @hookimpl
        def studio_align_register_rewards(self, register, extra):
            pass

    with pytest.raises(PluginError, match=r"'bad-args'.*studio_align_register_rewards"):
        PluginHost().register(BadArgs(), name="bad-args")


def test_unmarked_file_plugin_origin_and_idempotent_load(tmp_path):
    path = write_plugin(
        tmp_path,
        "plainfile",
        """
        def studio_align_register_rewards(register):
            def length(prompts):
                return [float(len(p)) for p in prompts]
            register(length)

        def helper_not_a_hook():
            return 1
        """,
    )
    h = PluginHost()
    assert h.load(str(path)) == "plainfile"
    assert h.load(str(path)) == "plainfile"  # same module object: no duplicate
    (info,) = h.describe()
    assert (info.origin, info.source, info.rewards) == ("file", str(path), ["length"])


def test_name_clash_between_different_plugins(tmp_path):
    a = tmp_path / "a"
    b = tmp_path / "b"
    a.mkdir()
    b.mkdir()
    pa = write_plugin(a, "same", "def studio_align_register_rewards(register):\n    pass\n")
    pb = write_plugin(b, "same", "def studio_align_register_rewards(register):\n    pass\n")
    h = PluginHost()
    h.load(str(pa))
    with pytest.raises(
        PluginError, match=r"plugin name 'same' \(file .*b/same.py\) is already taken .*a/same.py"
    ):
        h.load(str(pb))


def test_env_and_module_origins(tmp_path, monkeypatch):
    file_plugin = write_plugin(
        tmp_path, "envfile", "def studio_align_register_rewards(register):\n    pass\n"
    )
    pkg = tmp_path / "mods"
    pkg.mkdir()
    write_plugin(
        pkg, "sa_env_module_plugin", "def studio_align_register_rewards(register):\n    pass\n"
    )
    write_plugin(
        pkg, "sa_cli_module_plugin", "def studio_align_register_rewards(register):\n    pass\n"
    )
    monkeypatch.syspath_prepend(str(pkg))
    env = {"STUDIO_ALIGN_PLUGINS": f" sa_env_module_plugin , {file_plugin},"}
    h = PluginHost.default(["sa_cli_module_plugin"], entry_points=False, env=env)
    origins = {i.name: i.origin for i in h.describe()}
    assert origins["sa_env_module_plugin"] == "env"
    assert origins["envfile"] == "env"
    assert origins["sa_cli_module_plugin"] == "module"
    assert origins["routing"] == "builtin"
    for mod in ("sa_env_module_plugin", "sa_cli_module_plugin"):
        sys.modules.pop(mod, None)


def test_fire_metrics_reaches_loggers_read_only():
    got = []

    class Logger:
        @hookimpl
        def studio_align_on_metrics(self, run, step, metrics):
            got.append((run, step, dict(metrics)))
            assert isinstance(metrics, MappingProxyType)

    class StepOnly:  # hook impls may take a subset of the arguments
        @hookimpl
        def studio_align_on_metrics(self, step):
            got.append(step)

    h = PluginHost()
    h.register(Logger(), name="logger")
    h.register(StepOnly(), name="step-only")
    h.fire_metrics(run="r1", step=3, metrics={"loss": 0.5})
    assert got == [("r1", 3, {"loss": 0.5}), 3]

    class Crashy:
        @hookimpl
        def studio_align_on_metrics(self, metrics):
            metrics["loss"] = 0  # read-only: TypeError

    h.register(Crashy(), name="crashy")
    got.clear()
    h.fire_metrics(run="r1", step=4, metrics={"loss": 0.4})  # a failing logger is not fatal
    h.fire_metrics(run="r1", step=5, metrics={"loss": 0.3})
    assert h.metrics_hook_failures == {"crashy": 2}
    assert [g if isinstance(g, int) else g[1] for g in got] == [4, 4, 5, 5]  # others still run


def test_commands_hook_collects_and_rejects_duplicates():
    class Cmds:
        def __init__(self, name):
            self.name = name

        @hookimpl
        def studio_align_register_commands(self, cli):
            @cli.command(self.name)
            def _cmd():
                click.echo("hi")

    h = PluginHost()
    h.register(Cmds("hello"), name="p1")
    assert list(h.commands) == ["hello"]
    assert h.command_owner("hello") == "p1"
    assert h.describe()[0].commands == ["hello"]
    h.register(Cmds("hello"), name="p2")
    with pytest.raises(
        PluginError, match=r"command 'hello'.*'p1'.*'p2'.*studio_align_register_commands"
    ):
        h.commands  # noqa: B018


def test_score_batch_unknown_reward_is_named(host):
    with pytest.raises(ConfigError, match=r"unknown reward\(s\) 'nope'.*intent_accuracy"):
        score_registered(host, {"nope": 1.0}, {"plans": [[]]})


def test_default_host_is_cached_and_swappable():
    previous = set_host(None)
    try:
        a = get_host()
        assert get_host() is a
        mine = PluginHost()
        with using_host(mine):
            assert get_host() is mine
        assert get_host() is a
    finally:
        set_host(previous)


def test_blocked_plugins_are_skipped(tmp_path):
    path = write_plugin(tmp_path, "blockme", "import not_installed_anywhere_xyz\n")
    env = {
        "STUDIO_ALIGN_BLOCK_PLUGINS": "routing, blockme",
        "STUDIO_ALIGN_PLUGINS": str(path),
    }
    h = PluginHost.default(entry_points=False, env=env)
    assert "intent_accuracy" not in h.rewards
    assert "catalog" in {i.name for i in h.describe()}
