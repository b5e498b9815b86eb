"""A sentence-transformers BERT model (Transformer -> mean Pooling -> Normalize) run with torch alone, skipping the
7-10 CPU-s of `import sentence_transformers`: the same torch operations in the same order as transformers' BertModel,
so each vector equals the library's bit for bit. Any other layout: `load_bert_encoder` returns None."""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

_PLAIN_MODULES = ("sentence_transformers.models.Transformer", "sentence_transformers.models.Pooling")
_NORMALIZE = "sentence_transformers.models.Normalize"


@dataclass(frozen=True)
class BertShape:
    layers: int
    heads: int
    hidden: int
    eps: float
    max_seq_length: int
    positions: int          # the model's position embeddings: the longest input it can read
    normalize: bool


def plain_bert_shape(folder: Path) -> BertShape | None:
    """The encoder's shape when `folder` holds a plain BERT + mean-pooling sentence-transformers model, else None
    (anything unexpected in its files, too: the library then reads it)."""
    try:
        modules = json.loads((folder / "modules.json").read_text())
        config = json.loads((folder / "config.json").read_text())
        pooling = json.loads((folder / "1_Pooling" / "config.json").read_text())
        st_config = json.loads((folder / "sentence_bert_config.json").read_text())
        extra = folder / "config_sentence_transformers.json"
        prompts = json.loads(extra.read_text()) if extra.exists() else {}
        types = [m.get("type") for m in modules]
        normalize = types[2:] == [_NORMALIZE]
        modes = {k for k, v in pooling.items() if k.startswith("pooling_mode_") and v is True}
        mean = modes == {"pooling_mode_mean_tokens"} or pooling.get("pooling_mode") in ("mean", ["mean"])
        if (tuple(types[:2]) != _PLAIN_MODULES or not (len(types) == 2 or normalize)
                or modules[0].get("path", "") != "" or modules[1].get("path") != "1_Pooling" or not mean
                or config.get("model_type") != "bert" or config.get("hidden_act") != "gelu"
                or config.get("position_embedding_type", "absolute") != "absolute" or config.get("is_decoder")
                or pooling.get("include_prompt", True) is not True
                or any(prompts.get(k) for k in ("prompts", "default_prompt_name"))
                or st_config.get("do_lower_case") or not st_config.get("max_seq_length")
                or not (folder / "model.safetensors").is_file() or not (folder / "tokenizer.json").is_file()):
            return None
        hidden, heads = int(config["hidden_size"]), int(config["num_attention_heads"])
        if hidden % heads:
            return None
        positions = int(config["max_position_embeddings"])
        return BertShape(layers=int(config["num_hidden_layers"]), heads=heads, hidden=hidden,
                         eps=float(config.get("layer_norm_eps", 1e-12)),
                         max_seq_length=min(int(st_config["max_seq_length"]), positions), positions=positions,
                         normalize=normalize)
    except (OSError, ValueError, TypeError, KeyError, AttributeError, IndexError):
        return None


class BertTokenizer:
    """The folder's fast tokenizer (tokenizer.json), cutting texts to `max_length` tokens as transformers'
    truncation="longest_first" does, unpadded."""

    def __init__(self, path: Path, max_length: int) -> None:
        from tokenizers import Tokenizer

        self.path, self.max_length = path, max_length
        self._tokenizer = Tokenizer.from_file(str(path))
        self._tokenizer.no_padding()
        self._tokenizer.enable_truncation(max_length, strategy="longest_first")
        self.pad_id = self._tokenizer.token_to_id("[PAD]") or 0

    def tokenize(self, text: str) -> list[str]:
        """Word pieces without the special tokens (transformers' `tokenizer.tokenize`)."""
        return self._tokenizer.encode(text, add_special_tokens=False).tokens

    def encode(self, texts: list[str], width: int | None = None) -> dict[str, Any]:
        """input_ids, token_type_ids, attention_mask (int64 tensors) of `texts`, padded to `width` (None: to the
        longest)."""
        import torch

        ids = [e.ids for e in self._tokenizer.encode_batch(list(texts))]
        longest = max((len(x) for x in ids), default=0)
        if width is not None and longest > width:  # the embedder pads each text to its own bucket: never shorter
            raise ValueError(f"a text of {longest} tokens does not fit the padded width {width}")
        width = width or longest
        mask = [[1] * len(x) + [0] * (width - len(x)) for x in ids]
        ids = [x + [self.pad_id] * (width - len(x)) for x in ids]
        tensor = torch.tensor(ids, dtype=torch.int64)
        return {"input_ids": tensor, "token_type_ids": torch.zeros_like(tensor),
                "attention_mask": torch.tensor(mask, dtype=torch.int64)}


class BertEncoder:
    """BERT's encoder stack as transformers computes it in eval mode (no dropout, sdpa attention)."""

    def __init__(self, weights: dict[str, Any], shape: BertShape) -> None:
        self.w, self.shape = weights, shape
        prefix = "embeddings." if "embeddings.word_embeddings.weight" in weights else "bert.embeddings."
        self._root = prefix[: -len("embeddings.")]

    def _p(self, name: str) -> Any:
        return self.w[self._root + name]

    def last_hidden_state(self, input_ids: Any, token_type_ids: Any, attention_mask: Any) -> Any:
        import torch
        import torch.nn.functional as F  # noqa: N812

        s = self.shape
        batch, length = input_ids.shape
        h = F.embedding(input_ids, self._p("embeddings.word_embeddings.weight"))
        h = h + F.embedding(token_type_ids, self._p("embeddings.token_type_embeddings.weight"))
        positions = torch.arange(length).unsqueeze(0)
        h = h + F.embedding(positions, self._p("embeddings.position_embeddings.weight"))
        h = F.layer_norm(h, (s.hidden,), self._p("embeddings.LayerNorm.weight"), self._p("embeddings.LayerNorm.bias"),
                         s.eps)
        # transformers passes no mask when every position is attended, else a boolean (batch, 1, query, key) one
        mask = None if bool(attention_mask.all()) else \
            attention_mask.bool()[:, None, None, :].expand(batch, 1, length, length)
        head = s.hidden // s.heads
        for i in range(s.layers):
            p = f"encoder.layer.{i}."

            def linear(x: Any, name: str, p: str = p) -> Any:
                return F.linear(x, self._p(p + name + ".weight"), self._p(p + name + ".bias"))

            q, k, v = (linear(h, f"attention.self.{n}").view(batch, length, -1, head).transpose(1, 2)
                       for n in ("query", "key", "value"))
            a = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=0.0, scale=head ** -0.5,
                                               is_causal=False)
            a = a.reshape(batch, -1, length, head).transpose(1, 2).contiguous()
            a = a.reshape(batch, length, -1).contiguous()
            a = F.layer_norm(linear(a, "attention.output.dense") + h, (s.hidden,),
                             self._p(p + "attention.output.LayerNorm.weight"),
                             self._p(p + "attention.output.LayerNorm.bias"), s.eps)
            x = F.gelu(linear(a, "intermediate.dense"))
            h = F.layer_norm(linear(x, "output.dense") + a, (s.hidden,), self._p(p + "output.LayerNorm.weight"),
                             self._p(p + "output.LayerNorm.bias"), s.eps)
        return h


class BertSentenceModel:
    """The embedder's model: tokenizer, encoder, mean pooling and the unit norm of a sentence-transformers folder."""

    def __init__(self, folder: Path, shape: BertShape) -> None:
        from safetensors.torch import load_file

        self.folder, self.shape = folder, shape
        self.max_seq_length = shape.max_seq_length  # fixed at load: the tokenizer truncates to it
        self.tokenizer = BertTokenizer(folder / "tokenizer.json", shape.max_seq_length)
        self.encoder = BertEncoder(load_file(str(folder / "model.safetensors")), shape)

    def get_sentence_embedding_dimension(self) -> int:
        return self.shape.hidden

    def preprocess(self, texts: list[str], processing_kwargs: dict | None = None) -> dict[str, Any]:
        """sentence-transformers' call shape: `processing_kwargs={"text": {"max_length": width}}` pads to `width`."""
        width = ((processing_kwargs or {}).get("text") or {}).get("max_length")
        return self.tokenizer.encode(texts, width)

    def forward(self, features: dict[str, Any]) -> dict[str, Any]:
        import torch
        import torch.nn.functional as F  # noqa: N812

        tokens = self.encoder.last_hidden_state(features["input_ids"], features["token_type_ids"],
                                                features["attention_mask"])
        mask = features["attention_mask"].unsqueeze(-1).to(tokens.dtype)
        total = (tokens * mask).sum(dim=1, dtype=torch.float32)
        count = torch.clamp(mask.sum(dim=1, dtype=torch.float32), min=1e-9)
        pooled = (total / count).to(tokens.dtype)
        return {"token_embeddings": tokens,
                "sentence_embedding": F.normalize(pooled, p=2, dim=-1) if self.shape.normalize else pooled}


def load_bert_encoder(folder: str | Path, max_seq_length: int | None = None) -> BertSentenceModel | None:
    """The folder's model run with torch alone, or None where its layout is not the plain one this module reads.
    `max_seq_length` replaces the folder's (up to the model's position embeddings; more is a ValueError)."""
    path = Path(folder)
    shape = plain_bert_shape(path) if path.is_dir() else None
    if shape is None:
        return None
    if max_seq_length:
        if not 0 < int(max_seq_length) <= shape.positions:
            raise ValueError(f"max_seq_length {max_seq_length} is outside 1..{shape.positions} (the model's positions)")
        shape = replace(shape, max_seq_length=int(max_seq_length))
    model = BertSentenceModel(path, shape)
    import torch

    if any(t.dtype != torch.float32 for t in model.encoder.w.values() if t.is_floating_point()):
        return None  # half-precision weights: transformers' loading rules for them are the library's to apply
    return model
