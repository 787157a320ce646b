"""The root command: --plugin loading before subcommands, plugins list, one-line errors."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import click
import pytest
from click.testing import CliRunner

from studio_align.cli import CORE_COMMANDS, CORE_SUBCOMMANDS, main
from studio_align.plugins import get_host, set_host

HELLO = """
import click
from studio_align.errors import DataError

def studio_align_register_commands(cli):
    @cli.command("hello")
    @click.option("--name", default="world")
    def hello(name):
        "Say hello (from a plugin)."
        click.echo(f"hello {name}")

    @cli.command("fail")
    def fail():
        raise DataError("logs.jsonl line 3: bad JSON\\nsecond line")

def studio_align_register_rewards(register):
    def hello_reward(prompts):
        return [1.0 for _ in prompts]
    register(hello_reward)
"""


@pytest.fixture
def runner(monkeypatch):
    monkeypatch.delenv("STUDIO_ALIGN_PLUGINS", raising=False)
    monkeypatch.delenv("STUDIO_ALIGN_DEBUG", raising=False)
    return CliRunner()


@pytest.fixture
def hello_file(tmp_path):
    p = tmp_path / "hello_plugin.py"
    p.write_text(textwrap.dedent(HELLO), encoding="utf-8")
    return p


def plugins_json(runner, *args):
    result = runner.invoke(main, [*args, "plugins", "list", "--json"])
    assert result.exit_code == 0, result.output
    return {p["name"]: p for p in json.loads(result.stdout)}


def test_plugins_list_shows_builtins(runner):
    plugins = plugins_json(runner)
    routing = plugins["routing"]
    assert routing["origin"] == "builtin"
    assert routing["hooks"] == [
        "studio_align_register_bundle_classes",
        "studio_align_register_commands",
        "studio_align_register_rewards",
        "studio_align_register_tasks",
    ]
    assert routing["rewards"] == ["intent_accuracy", "plan_validity"]
    assert "grading.film" in plugins["catalog"]["engines"]
    text = runner.invoke(main, ["plugins", "list"])
    assert text.exit_code == 0
    assert "routing  [builtin]" in text.output
    assert "rewards: intent_accuracy, plan_validity" in text.output


def test_plugin_file_adds_a_command_before_subcommand_resolution(runner, hello_file):
    result = runner.invoke(main, ["--plugin", str(hello_file), "hello", "--name", "ada"])
    assert result.exit_code == 0, result.output
    assert result.output == "hello ada\n"
    helped = runner.invoke(main, ["--plugin", str(hello_file), "--help"])
    assert "hello" in helped.output and "Say hello" in helped.output
    info = plugins_json(runner, "--plugin", str(hello_file))["hello_plugin"]
    assert info["origin"] == "file"
    assert info["commands"] == ["hello", "fail"]
    assert info["rewards"] == ["hello_reward"]
    assert set(info["hooks"]) == {"studio_align_register_commands", "studio_align_register_rewards"}
    # Without --plugin the command does not exist, and nothing leaked from the last call.
    missing = runner.invoke(main, ["hello"])
    assert missing.exit_code == 2 and "No such command 'hello'" in missing.output


def test_repeatable_plugin_option_and_module_origin(runner, hello_file, tmp_path, monkeypatch):
    mods = tmp_path / "mods"
    mods.mkdir()
    (mods / "sa_cli_mod_plugin.py").write_text(
        "def studio_align_register_rewards(register):\n"
        "    register(lambda plans: plans, name='from_module')\n",
        encoding="utf-8",
    )
    monkeypatch.syspath_prepend(str(mods))
    plugins = plugins_json(runner, "--plugin", str(hello_file), "--plugin", "sa_cli_mod_plugin")
    assert plugins["hello_plugin"]["origin"] == "file"
    assert plugins["sa_cli_mod_plugin"]["origin"] == "module"
    assert plugins["sa_cli_mod_plugin"]["rewards"] == ["from_module"]
    sys.modules.pop("sa_cli_mod_plugin", None)


def test_env_var_plugins(runner, hello_file, monkeypatch):
    monkeypatch.setenv("STUDIO_ALIGN_PLUGINS", str(hello_file))
    assert plugins_json(runner)["hello_plugin"]["origin"] == "env"
    assert runner.invoke(main, ["hello"]).output == "hello world\n"


def test_library_errors_are_one_line_exit_2(runner, hello_file, tmp_path):
    result = runner.invoke(main, ["--plugin", str(hello_file), "fail"])
    assert result.exit_code == 2
    assert result.stderr == "Error: logs.jsonl line 3: bad JSON; second line\n"
    assert "Traceback" not in result.output

    broken = tmp_path / "broken_plugin.py"
    broken.write_text("import not_installed_anywhere_xyz\n", encoding="utf-8")
    result = runner.invoke(main, ["--plugin", str(broken), "plugins", "list"])
    assert result.exit_code == 2
    assert result.stderr.startswith("Error: plugin 'broken_plugin' (file ")
    assert "ModuleNotFoundError" in result.stderr and result.stderr.count("\n") == 1

    hook_fails = tmp_path / "hook_fails.py"
    hook_fails.write_text(
        "def studio_align_register_rewards(register):\n    raise ValueError('oops')\n",
        encoding="utf-8",
    )
    result = runner.invoke(main, ["--plugin", str(hook_fails), "plugins", "list"])
    assert result.exit_code == 2
    assert (
        "plugin 'hook_fails' raised ValueError in hook studio_align_register_rewards"
        in result.stderr
    )


def test_debug_env_lets_the_traceback_through(runner, hello_file, monkeypatch):
    monkeypatch.setenv("STUDIO_ALIGN_DEBUG", "1")
    result = runner.invoke(main, ["--plugin", str(hello_file), "fail"])
    assert result.exit_code == 1
    assert type(result.exception).__name__ == "DataError"


def test_plugin_command_clashing_with_builtin(runner, tmp_path):
    clash = tmp_path / "clash.py"
    clash.write_text(
        "import click\n"
        "def studio_align_register_commands(cli):\n"
        "    @cli.command('plugins')\n"
        "    def plugins():\n"
        "        pass\n",
        encoding="utf-8",
    )
    result = runner.invoke(main, ["--plugin", str(clash), "plugins", "list"])
    assert result.exit_code == 2
    assert "'plugins' (plugin clash) clash with built-in commands" in result.stderr


def test_invocation_host_is_not_left_behind(runner, hello_file):
    previous = set_host(None)
    try:
        before = get_host()
        runner.invoke(main, ["--plugin", str(hello_file), "plugins", "list"])
        assert get_host() is before
        assert "hello_reward" not in get_host().rewards
    finally:
        set_host(previous)


LAZY = """
def studio_align_register_commands(cli):
    cli.lazy("train hello", "sa_lazy_cmds:hello", "Say hello under train.")
    cli.lazy("wave", "sa_lazy_cmds:hello", "Wave (top level).")
"""

LAZY_TARGET = """
import click

@click.command("hello")
def hello():
    click.echo("hello from train")
"""


@pytest.fixture
def lazy_plugin(tmp_path, monkeypatch):
    (tmp_path / "sa_lazy_cmds.py").write_text(LAZY_TARGET, encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    p = tmp_path / "lazy_plugin.py"
    p.write_text(LAZY, encoding="utf-8")
    yield p
    sys.modules.pop("sa_lazy_cmds", None)


def test_lazy_plugin_commands_load_only_when_run(runner, lazy_plugin):
    helped = runner.invoke(main, ["--plugin", str(lazy_plugin), "train", "--help"])
    assert helped.exit_code == 0, helped.output
    assert "hello" in helped.output and "Say hello under train." in helped.output
    assert "sa_lazy_cmds" not in sys.modules  # listed from its help line, not imported
    ran = runner.invoke(main, ["--plugin", str(lazy_plugin), "train", "hello"])
    assert ran.exit_code == 0 and ran.output == "hello from train\n"
    assert (
        runner.invoke(main, ["--plugin", str(lazy_plugin), "wave"]).output == "hello from train\n"
    )
    info = plugins_json(runner, "--plugin", str(lazy_plugin))["lazy_plugin"]
    assert info["commands"] == ["train hello", "wave"]
    # another invocation without the plugin does not see its commands
    assert "hello" not in runner.invoke(main, ["train", "--help"]).output


def test_lazy_command_errors_name_the_plugin(runner, tmp_path):
    bad = tmp_path / "bad_group.py"
    bad.write_text(
        "def studio_align_register_commands(cli):\n    cli.lazy('nogroup thing', 'x:y', 'help')\n",
        encoding="utf-8",
    )
    result = runner.invoke(main, ["--plugin", str(bad), "--help"])
    assert result.exit_code == 2
    assert "plugin 'bad_group': command 'nogroup thing': no core group 'nogroup'" in result.stderr
    clash = tmp_path / "clash_lazy.py"
    clash.write_text(
        "def studio_align_register_commands(cli):\n    cli.lazy('train sft', 'x:y', 'help')\n",
        encoding="utf-8",
    )
    result = runner.invoke(main, ["--plugin", str(clash), "train", "--help"])
    assert result.exit_code == 2
    assert "'train sft' (plugin clash_lazy) clash with built-in commands" in result.stderr
    missing = tmp_path / "missing_target.py"
    missing.write_text(
        "def studio_align_register_commands(cli):\n"
        "    cli.lazy('train gone', 'sa_no_such_module_xyz:cmd', 'help')\n",
        encoding="utf-8",
    )
    result = runner.invoke(main, ["--plugin", str(missing), "train", "gone"])
    assert result.exit_code == 2
    assert result.stderr.startswith("Error: command 'gone' (plugin 'missing_target'): cannot load")


def test_core_commands_and_product_commands(runner):
    assert {"data", "plugins", "config", "serve", "autotune", "model", "train", "eval"} <= {
        *CORE_COMMANDS,
        *CORE_SUBCOMMANDS,
    }
    helped = runner.invoke(main, ["--help"])
    assert helped.exit_code == 0
    for name in ("grade", "generate", "train", "eval", "plugins"):
        assert f"  {name} " in helped.output
    evals = runner.invoke(main, ["eval", "--help"]).output
    assert all(f"  {p} " in evals for p in ("router", "grading", "flow"))  # from product plugins


def test_help_imports_no_jax():
    """`--help`, every command's own `--help` (the built-in plugins' included), `plugins
    list` and every `config show` form import no JAX (nor torch): a command's module
    defers the library calls of its body (`commands.deferred`)."""
    code = (
        "import sys\n"
        "import click\n"
        "from studio_align.cli import main\n"
        "from studio_align.cli.config_cmd import RUN_CONFIGS\n"
        "shows = [['config', 'show', k, *j] for k in sorted(RUN_CONFIGS) for j in ([], ['--json'])]\n"
        "helps = []\n"
        "ctx = main.make_context('studio-align', ['--help'], resilient_parsing=True)\n"
        "with ctx:\n"
        "    for name in main.list_commands(ctx):\n"
        "        cmd = main.get_command(ctx, name)\n"
        "        helps.append([name, '--help'])\n"
        "        if isinstance(cmd, click.Group):\n"
        "            sub = click.Context(cmd, parent=ctx, info_name=name)\n"
        "            helps += [[name, c, '--help'] for c in cmd.list_commands(sub)]\n"
        "assert len(helps) > 30, helps\n"
        "for args in (['--help'], ['plugins', 'list'], *helps, *shows):\n"
        "    try:\n"
        "        main(args)\n"
        "    except SystemExit as e:\n"
        "        assert e.code == 0, (args, e.code)\n"
        "heavy = [m for m in ('jax', 'flax', 'optax', 'torch') if m in sys.modules]\n"
        "assert not heavy, heavy\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]


def test_every_listed_command_loads(runner):
    """Each lazy reference of the core and the built-in plugins names a real click command."""
    ctx = main.make_context("studio-align", ["--help"], resilient_parsing=True)
    with ctx:
        for name in main.list_commands(ctx):
            cmd = main.get_command(ctx, name)
            assert isinstance(cmd, click.Command), name
            if isinstance(cmd, click.Group):
                sub_ctx = click.Context(cmd, parent=ctx, info_name=name)
                for sub in cmd.list_commands(sub_ctx):
                    assert isinstance(cmd.get_command(sub_ctx, sub), click.Command), (name, sub)
