"""Bundle classes come from the plugin hook `studio_align_register_bundle_classes`.

A plugin that registers its model and config classes makes bundles naming them loadable;
without it they are refused, as is any class nobody registered (the file never chooses
code), and a plugin cannot put its own class under another's name.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx
from pydantic import BaseModel

from studio_align.errors import CheckpointError, PluginError
from studio_align.hookspecs import hookimpl
from studio_align.models.bundle import bundle_classes, load_model_bundle, save_model_bundle
from studio_align.models.config import ModelConfig
from studio_align.models.transformer import Transformer
from studio_align.plugins import PluginHost


class TinyConfig(BaseModel):
    width: int = 4


class Tiny(nnx.Module):
    def __init__(self, cfg: TinyConfig, *, rngs: nnx.Rngs):
        self.cfg = cfg
        self.dense = nnx.Linear(cfg.width, 2, rngs=rngs)


class TinyPlugin:
    @hookimpl
    def studio_align_register_bundle_classes(self, register):
        register(Tiny, TinyConfig)


def _host(*plugins: tuple[object, str]) -> PluginHost:
    h = PluginHost.default(entry_points=False, env={})
    for plugin, name in plugins:
        h.register(plugin, name=name)
    return h


def test_a_plugin_registered_class_loads_and_is_refused_without_the_plugin(tmp_path: Path) -> None:
    model = Tiny(TinyConfig(width=3), rngs=nnx.Rngs(1))
    save_model_bundle(tmp_path / "b", model)
    loaded = load_model_bundle(tmp_path / "b", host=_host((TinyPlugin(), "tiny-plugin")))
    assert isinstance(loaded.model, Tiny) and loaded.config == TinyConfig(width=3)
    np.testing.assert_array_equal(loaded.model.dense.kernel[...], model.dense.kernel[...])
    with pytest.raises(CheckpointError, match=r"config_class '.*TinyConfig' is not a registered"):
        load_model_bundle(tmp_path / "b", host=_host())
    # the engine's decoder comes from the built-in router plugin, through the same hook
    builtin = bundle_classes(_host())
    assert builtin[f"{Transformer.__module__}.Transformer"] is Transformer
    assert builtin[f"{ModelConfig.__module__}.ModelConfig"] is ModelConfig
    assert bundle_classes(PluginHost()) == {}


def test_a_foreign_class_named_in_bundle_json_is_refused_and_never_imported(tmp_path: Path) -> None:
    save_model_bundle(tmp_path / "b", Tiny(TinyConfig(), rngs=nnx.Rngs(0)))
    meta_path = tmp_path / "b" / "bundle.json"
    meta = json.loads(meta_path.read_text())
    for name in ("os.system", "studio_align_evil_module.Payload"):
        meta["model_class"] = name
        meta_path.write_text(json.dumps(meta))
        with pytest.raises(CheckpointError, match="is not a registered bundle class"):
            load_model_bundle(tmp_path / "b", host=_host((TinyPlugin(), "tiny-plugin")))
    assert "studio_align_evil_module" not in sys.modules


def test_a_plugin_cannot_take_another_class_name() -> None:
    class Spoof(nnx.Module):
        def __init__(self, cfg: ModelConfig, *, rngs: nnx.Rngs):
            self.w = nnx.Param(jnp.zeros(()))

    Spoof.__module__, Spoof.__qualname__ = Transformer.__module__, "Transformer"

    class SpoofPlugin:
        @hookimpl
        def studio_align_register_bundle_classes(self, register):
            register(Spoof)

    class NotAClass:
        @hookimpl
        def studio_align_register_bundle_classes(self, register):
            register("studio_align.models.transformer.Transformer")

    with pytest.raises(PluginError, match=r"registered twice.*plugin 'routing'.*plugin 'spoof'"):
        bundle_classes(_host((SpoofPlugin(), "spoof")))
    with pytest.raises(PluginError, match=r"plugin 'strings'.*expected a class"):
        bundle_classes(_host((NotAClass(), "strings")))
