"""Byte-level BPE tokenizer: special tokens, exact round trips, save/load, HF files."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tokenizers import AddedToken, models, pre_tokenizers
from tokenizers import Tokenizer as HFTokenizer

from studio_align.errors import ConfigError, ModelLoadError
from studio_align.models.tokenizer import Tokenizer

SPECIALS = ["<plan>", "<att:image>", "<step:wan.image_to_video>", "<step:audio.music>"]
CORPUS = [
    "把这张图做成10秒的视频并配乐",
    "帮我把这张照片做成视频",
    "给这段视频配上背景音乐",
    "生成一张赛博朋克风格的城市夜景图",
    "turn this picture into a 10 second video with music",
    "make a video from this photo",
    "add background music to this clip",
    "generate a cyberpunk city at night",
] * 20


@pytest.fixture(scope="module")
def tok() -> Tokenizer:
    return Tokenizer.train(CORPUS, vocab_size=600, special_tokens=SPECIALS)


def test_special_tokens_are_single_ids_in_order(tok):
    assert (tok.pad_id, tok.bos_id, tok.eos_id, tok.unk_id) == (0, 1, 2, 3)
    assert [tok.token_to_id(s) for s in SPECIALS] == [4, 5, 6, 7]
    ids = tok.encode("视频<plan><att:image><step:wan.image_to_video><eos>")
    assert ids[-4:] == [4, 5, 6, 2]
    # As plain text they split into ordinary byte pieces, never a control id.
    plain = tok.encode("<plan><eos>", allow_special=False)
    assert len(plain) > 2 and not set(plain) & set(range(8))
    assert tok.decode(plain) == "<plan><eos>"
    assert tok.encode("a", add_bos=True)[0] == tok.bos_id


def test_learned_merges_compress_both_languages(tok):
    zh = "把这张图做成视频"
    en = "make a video from this photo"
    assert len(tok.encode(zh)) <= 4 < len(zh.encode("utf-8"))
    assert len(tok.encode(en)) <= 7
    assert tok.id_to_token(tok.encode("视频")[0]) is not None and len(tok.encode("视频")) == 1


@settings(max_examples=60, deadline=None)
@given(st.text(max_size=40))
def test_any_text_round_trips(text):
    tok = _shared()
    assert tok.decode(tok.encode(text, allow_special=False)) == text


_CACHE: dict[str, Tokenizer] = {}


def _shared() -> Tokenizer:
    if "t" not in _CACHE:
        _CACHE["t"] = Tokenizer.train(CORPUS, vocab_size=600, special_tokens=SPECIALS)
    return _CACHE["t"]


def test_save_and_load(tok, tmp_path):
    path = tok.save(tmp_path / "tokenizer.json")
    again = Tokenizer.load(path)
    from_dir = Tokenizer.load(tmp_path)
    text = "Make 视频 with 配乐 🎵 <plan><step:audio.music>"
    assert again.encode(text) == from_dir.encode(text) == tok.encode(text)
    assert again.vocab_size == tok.vocab_size
    assert (again.pad_id, again.bos_id, again.eos_id) == (0, 1, 2)


def test_load_foreign_hf_tokenizer(tmp_path):
    # A WordPiece-style tokenizer with its own special-token names and a config naming them.
    vocab = {"[PAD]": 0, "[UNK]": 1, "<s>": 2, "</s>": 3, "hello": 4, "world": 5}
    hf = HFTokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    hf.pre_tokenizer = pre_tokenizers.Whitespace()
    hf.add_special_tokens([AddedToken(t, special=True) for t in ("[PAD]", "<s>", "</s>")])
    hf.save(str(tmp_path / "tokenizer.json"))
    (tmp_path / "tokenizer_config.json").write_text(
        json.dumps({"pad_token": "[PAD]", "eos_token": {"content": "</s>"}, "unk_token": "[UNK]"})
    )
    tok = Tokenizer.load(tmp_path)
    assert (tok.pad_id, tok.bos_id, tok.eos_id, tok.unk_id) == (0, 2, 3, 1)
    assert tok.encode("hello nope world") == [4, 1, 5]
    with pytest.raises(ModelLoadError, match="not found"):
        Tokenizer.load(tmp_path / "missing")
    (tmp_path / "bad.json").write_text("{}")
    with pytest.raises(ModelLoadError, match="not a valid"):
        Tokenizer.load(tmp_path / "bad.json")


def test_vocab_size_too_small():
    with pytest.raises(ConfigError, match="vocab_size"):
        Tokenizer.train(CORPUS, vocab_size=100)
