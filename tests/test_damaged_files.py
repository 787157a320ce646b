"""Damaged checkpoints, metadata, manifests and ledgers: each load fails with the SDK's
error naming the file at fault (the CLI prints it as one line), never a bare
`ValueError`/`KeyError`/`MemoryError` that the CLI can only call an internal error."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from PIL import Image
from serving_helpers import make_router_checkpoint

from studio_align.autotune.ledger import Ledger
from studio_align.errors import CheckpointError, DataError, ModelLoadError, StudioAlignError
from studio_align.models.hf_config import read_hf_config, to_model_config
from studio_align.models.safetensors_io import SafetensorsDir, SafetensorsFile, save_safetensors
from studio_align.reward_models.preference import (
    PreferenceModel,
    load_preference_model,
    save_preference_model,
)
from studio_align.router.router import Router
from studio_align.textfiles import read_json, read_text
from studio_align.verticals.flow.checkpoint import BASE_WEIGHTS, load_flow
from studio_align.verticals.flow.pretrain import read_manifest
from studio_align.verticals.grading.model import GradingModel

LATIN1 = b'{"name": "caf\xe9"}'


def _raises_naming(
    path: Path, error: type[Exception], fn: Callable[[], object], *, match: str = ""
) -> str:
    with pytest.raises(error) as info:
        fn()
    text = str(info.value)
    assert str(path) in text, text
    assert "\n" not in text and match in text, text
    return text


def test_text_and_json_files_name_themselves(tmp_path: Path) -> None:
    bad = tmp_path / "meta.json"
    bad.write_bytes(LATIN1)
    _raises_naming(bad, DataError, lambda: read_text(bad), match="not UTF-8 text (byte 13")
    bad.write_text('{"a": 1,\n  oops}')
    _raises_naming(bad, CheckpointError, lambda: read_json(bad, CheckpointError), match="line 2")


# -- safetensors and the flow checkpoint on top of them --------------------------------------------


def test_a_truncated_or_foreign_safetensors_file_names_itself(tmp_path: Path) -> None:
    cut = tmp_path / "cut.safetensors"
    cut.write_bytes(BASE_WEIGHTS.read_bytes()[:50_000])
    _raises_naming(cut, ModelLoadError, lambda: SafetensorsFile(cut), match="truncated")
    _raises_naming(cut, StudioAlignError, lambda: load_flow(cut))
    toml = tmp_path / "run.safetensors"  # 8 bytes of text read as a ~10^18-byte header length
    toml.write_text('run_dir = "runs/flow"\n[model]\nwidth = 48\n')
    _raises_naming(toml, ModelLoadError, lambda: SafetensorsFile(toml), match="header length")


def _base_with_metadata(tmp_path: Path, **metadata: str) -> Path:
    f = SafetensorsFile(BASE_WEIGHTS)
    tensors = {n: np.asarray(f.get(n)) for n in f.names}
    return save_safetensors(tensors, tmp_path / "m.safetensors", {**f.metadata, **metadata})


def test_flow_metadata_that_is_not_json_or_does_not_build_names_the_file(tmp_path: Path) -> None:
    torn = _base_with_metadata(tmp_path, flow_config="{torn")
    _raises_naming(
        torn, CheckpointError, lambda: load_flow(torn), match="'flow_config' is not JSON"
    )
    cfg = json.loads(SafetensorsFile(BASE_WEIGHTS).metadata["flow_config"])
    wide = _base_with_metadata(tmp_path, flow_config=json.dumps({**cfg, "width": "wide"}))
    _raises_naming(wide, CheckpointError, lambda: load_flow(wide), match="does not build")


def test_a_hugging_face_index_or_config_of_the_wrong_shape_names_its_file(tmp_path: Path) -> None:
    index = tmp_path / "model.safetensors.index.json"
    index.write_text('{"weight_map": 5}')
    _raises_naming(index, ModelLoadError, lambda: SafetensorsDir(tmp_path), match="weight_map")
    config = tmp_path / "config.json"
    config.write_bytes(LATIN1)
    _raises_naming(config, ModelLoadError, lambda: read_hf_config(tmp_path), match="UTF-8")
    hf = {"num_hidden_layers": 1, "hidden_size": "big", "num_attention_heads": 1,
          "vocab_size": 10, "intermediate_size": 4}  # fmt: skip
    where = str(config)
    _raises_naming(config, ModelLoadError, lambda: to_model_config(hf, where=where), match="'big'")
    negative = {**hf, "hidden_size": 8, "num_hidden_layers": -1}
    _raises_naming(config, ModelLoadError, lambda: to_model_config(negative, where=where),
                   match="num_layers is -1; it must be positive")  # fmt: skip


# -- product checkpoints -----------------------------------------------------------------------


def test_a_damaged_grading_model_names_the_file(tmp_path: Path) -> None:
    model = GradingModel.create(["ana"], hidden=8, thumbnail=16, seed=1)
    d = model.save(tmp_path / "g")
    policy = d / "policy.npz"
    policy.write_bytes(policy.read_bytes()[:100])
    _raises_naming(policy, CheckpointError, lambda: GradingModel.load(d), match="unreadable")
    d = model.save(tmp_path / "g2")
    meta = d / "grading.json"
    meta.write_bytes(LATIN1)
    _raises_naming(meta, CheckpointError, lambda: GradingModel.load(d), match="UTF-8")
    meta.write_text('{"format": "studio-align/grading-model", "params": null}')
    _raises_naming(meta, CheckpointError, lambda: GradingModel.load(d), match="params None")


def test_a_damaged_preference_model_names_the_file(tmp_path: Path) -> None:
    import flax.nnx as nnx

    model = PreferenceModel(4, hidden=4, rngs=nnx.Rngs(0))
    d = save_preference_model(model, tmp_path / "p", {})
    weights = d / "weights.npz"
    weights.write_bytes(weights.read_bytes()[:100])
    _raises_naming(weights, CheckpointError, lambda: load_preference_model(d))
    d = save_preference_model(model, tmp_path / "p2", {})
    meta = d / "meta.json"
    meta.write_text('{"format": "studio-align/preference-model", "dim": "four", "hidden": 4, '
                    '"creators": []}')  # fmt: skip
    _raises_naming(meta, CheckpointError, lambda: load_preference_model(d), match="'four'")


def test_a_router_without_its_tokenizer_or_with_bad_metadata_names_it(tmp_path: Path) -> None:
    good = make_router_checkpoint(tmp_path / "good", seed=0, version="v")
    no_tok = Path(shutil.copytree(good, tmp_path / "no-tok"))
    (no_tok / "tokenizer.json").unlink()
    _raises_naming(no_tok, CheckpointError, lambda: Router.load(no_tok), match="tokenizer.json")
    steps = Path(shutil.copytree(good, tmp_path / "steps"))
    meta = json.loads((steps / "router.json").read_text())
    (steps / "router.json").write_text(json.dumps({**meta, "max_steps": "three"}))
    _raises_naming(steps / "router.json", CheckpointError, lambda: Router.load(steps),
                   match="max_steps 'three'")  # fmt: skip


# -- data files ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("line", "match"),
    [
        ('{"kind": "run", "seed": 0, "split": "validation", "status": "ok", "value": 1.0}',
         "a run event without 'trial'"),
        ('{"kind": "trial", "trial": 0, "status": "keep", "config": {}, "values": "oops", '
         '"seeds": [], "mean": null, "std": null}', "'values' is 'oops'"),
        ('{"kind": "propose", "trial": "zero", "config": {}}', "'trial' is 'zero'"),
        ('{"kind": "confirm", "trial": 1, "seeds": [0], "values": ["x"]}', "hold 'x'"),
        ("[1, 2]", "not list"),
    ],
)  # fmt: skip
def test_a_ledger_line_the_loop_cannot_use_is_named_by_line(
    tmp_path: Path, line: str, match: str
) -> None:
    ledger = Ledger(tmp_path)
    ledger.append("header", name="t", metric="m", direction="max")
    ledger.path.write_text(ledger.path.read_text() + line + "\n" + '{"kind": "header", '
                           '"name": "t", "metric": "m", "direction": "max"}\n')  # fmt: skip
    text = _raises_naming(ledger.path, StudioAlignError, ledger.records, match=match)
    assert ":2: corrupt ledger line" in text


def test_a_non_utf8_ledger_names_itself(tmp_path: Path) -> None:
    ledger = Ledger(tmp_path)
    ledger.path.write_bytes(LATIN1 + b"\n")
    _raises_naming(ledger.path, StudioAlignError, ledger.records, match="UTF-8")


@pytest.mark.parametrize(
    ("entry", "match"),
    [
        ({"image": 5, "vertical": "product"}, "'image' must be a string"),
        ({"image": "a.png", "vertical": "product", "tags": "lifestyle"}, "'tags' must be a list"),
        ([], "not list"),
    ],
)
def test_a_flow_manifest_entry_of_the_wrong_shape_is_named_by_line(
    tmp_path: Path, entry: object, match: str
) -> None:
    Image.new("RGB", (8, 8)).save(tmp_path / "a.png")
    manifest = tmp_path / "manifest.jsonl"
    good = {"image": "a.png", "vertical": "product", "tags": ["lifestyle"]}
    manifest.write_text(json.dumps(good) + "\n" + json.dumps(entry) + "\n")
    text = _raises_naming(manifest, DataError, lambda: read_manifest(manifest, 8), match=match)
    assert f"{manifest}:2:" in text
    manifest.write_bytes(LATIN1)
    _raises_naming(manifest, DataError, lambda: read_manifest(manifest, 8), match="UTF-8")


def test_training_data_with_an_unknown_step_or_no_records_names_the_file(tmp_path: Path) -> None:
    from studio_align.plugins import get_host
    from studio_align.training.run import RecordsSection, read_split

    task = get_host().task("router")
    data = tmp_path / "train.jsonl"
    rows = [{"request": {"text": "a song", "attachments": []}, "plan": ["audio.music"]},
            {"request": {"text": "a flyer", "attachments": []}, "plan": ["no.such_step"]}]  # fmt: skip
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    section = RecordsSection(train=data)
    _raises_naming(data, DataError, lambda: read_split(task, section, "sft", "train"),
                   match=":2: plan: unknown step 'no.such_step'")  # fmt: skip
    data.write_text("\n")
    _raises_naming(data, DataError, lambda: read_split(task, section, "sft", "train"),
                   match="no routing_examples records")  # fmt: skip
