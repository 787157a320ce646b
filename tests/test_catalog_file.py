"""The engine catalog is data: a TOML file, replaceable by STUDIO_ALIGN_CATALOG."""

from __future__ import annotations

from pathlib import Path

import pytest

from studio_align.catalog import DEFAULT_ENGINES, load_engines
from studio_align.errors import ConfigError
from studio_align.plugins import PluginHost

DESIGN_ORDER = [
    "ideogram.text_to_image", "ideogram.edit_image", "wan.text_to_video", "wan.image_to_video",
    "runway.video_to_video", "audio.music", "audio.speech", "storyboard.anime",
    "ecommerce.product_shot", "grading.film",
]  # fmt: skip


def test_shipped_catalog_is_designs_table() -> None:
    assert [e.name for e in DEFAULT_ENGINES] == DESIGN_ORDER
    grading = DEFAULT_ENGINES[-1]
    assert grading.needs == {"image", "video"} and grading.makes is None


def test_env_catalog_replaces_the_default(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    f = tmp_path / "engines.toml"
    f.write_text(
        '[[engine]]\nname = "suno.song"\nneeds = ["text"]\nmakes = "audio"\n'
        '[[engine]]\nname = "kling.image_to_video"\nneeds = ["image"]\nmakes = "video"\n'
    )
    monkeypatch.setenv("STUDIO_ALIGN_CATALOG", str(f))
    host = PluginHost.default(entry_points=False)
    assert host.catalog.names == ["suno.song", "kling.image_to_video"]
    assert host.catalog.is_valid(["kling.image_to_video"], ["image"])


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ('[[engine]]\nname = "a.b"\nneeds = ["text"]\n', "engine 0 .'a.b'.: missing key 'makes'"),
        ('[[engine]]\nname = "a.b"\nneeds = ["smell"]\nmakes = "image"\n', "unknown modality"),
        ('[[engine]]\nname = "ab"\nneeds = ["text"]\nmakes = "image"\n', "engine.task"),
        ('[[engine]]\nname = "a.b"\nneeds = ["text"]\nmakes = "image"\ncost = 3\n', "unknown key"),
        ("[[engine]\n", "cannot read"),
        ("", "no \\[\\[engine\\]\\] tables"),
    ],
)
def test_bad_catalog_file_names_file_and_engine(tmp_path: Path, text: str, match: str) -> None:
    f = tmp_path / "bad.toml"
    f.write_text(text)
    with pytest.raises(ConfigError, match=match) as e:
        load_engines(f)
    assert str(f) in str(e.value)
