"""The model zoo: small configs of real architectures with random weights (no downloads).

MLP, BERT-style encoder and LLaMA-style decoder keep the signatures of ``tests/models.py``
so tests can import them from here; the LLaMA decoder adds KV-cache prefill/decode
forwards. ``resnet18`` is the CIFAR variant (3x3 stem, no max-pool, 32x32 input).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

import torch
import torch.nn.functional as F
from torch import nn

Inputs = tuple[torch.Tensor, ...]


class MLP(nn.Module):
    def __init__(self, d_in: int = 16, hidden: int = 32, d_out: int = 8) -> None:
        super().__init__()
        self.fc1 = nn.Linear(d_in, hidden)
        self.fc2 = nn.Linear(hidden, hidden)
        self.fc3 = nn.Linear(hidden, d_out)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc3(torch.relu(self.fc2(torch.relu(self.fc1(x)))))


class BasicBlock(nn.Module):
    def __init__(self, c_in: int, c_out: int, stride: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(c_in, c_out, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(c_out)
        self.conv2 = nn.Conv2d(c_out, c_out, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(c_out)
        self.shortcut = nn.Sequential()
        if stride != 1 or c_in != c_out:
            self.shortcut = nn.Sequential(nn.Conv2d(c_in, c_out, 1, stride, bias=False),
                                          nn.BatchNorm2d(c_out))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = F.relu(self.bn1(self.conv1(x)))
        return F.relu(self.bn2(self.conv2(out)) + self.shortcut(x))


class ResNet18(nn.Module):
    """ResNet-18 for CIFAR (32x32): 3x3 stem, four stages of two BasicBlocks."""

    def __init__(self, classes: int = 10, width: int = 64) -> None:
        super().__init__()
        self.stem = nn.Conv2d(3, width, 3, 1, 1, bias=False)
        self.bn = nn.BatchNorm2d(width)
        blocks, c_in = [], width
        for i, stride in enumerate((1, 2, 2, 2)):
            c_out = width * 2 ** i
            blocks += [BasicBlock(c_in, c_out, stride), BasicBlock(c_out, c_out, 1)]
            c_in = c_out
        self.blocks = nn.Sequential(*blocks)
        self.fc = nn.Linear(c_in, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.blocks(F.relu(self.bn(self.stem(x))))
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


class BertLayer(nn.Module):
    def __init__(self, hidden: int, heads: int, ffn: int) -> None:
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(hidden, 3 * hidden)
        self.out = nn.Linear(hidden, hidden)
        self.ln1 = nn.LayerNorm(hidden)
        self.ffn1 = nn.Linear(hidden, ffn)
        self.ffn2 = nn.Linear(ffn, hidden)
        self.ln2 = nn.LayerNorm(hidden)

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        b, s, h = x.shape
        d = h // self.heads
        q, k, v = self.qkv(x).split(h, dim=-1)
        q, k, v = (t.view(b, s, self.heads, d).transpose(1, 2) for t in (q, k, v))
        scores = q @ k.transpose(-1, -2) / math.sqrt(d) + mask
        ctx = (scores.softmax(-1) @ v).transpose(1, 2).reshape(b, s, h)
        x = self.ln1(x + self.out(ctx))
        return self.ln2(x + self.ffn2(F.gelu(self.ffn1(x))))


class Bert(nn.Module):
    """BERT-style encoder: word/position/type embeddings, LayerNorm, padding-masked MHA."""

    def __init__(self, vocab: int = 100, hidden: int = 32, heads: int = 4, layers: int = 2,
                 max_pos: int = 64) -> None:
        super().__init__()
        self.word = nn.Embedding(vocab, hidden)
        self.pos = nn.Embedding(max_pos, hidden)
        self.token_type = nn.Embedding(2, hidden)
        self.ln = nn.LayerNorm(hidden)
        self.layers = nn.ModuleList(BertLayer(hidden, heads, 4 * hidden) for _ in range(layers))
        self.pool = nn.Linear(hidden, hidden)

    def forward(self, ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        pos = torch.arange(ids.shape[1], device=ids.device)
        x = self.ln(self.word(ids) + self.pos(pos) + self.token_type(torch.zeros_like(ids)))
        mask = (1.0 - attention_mask[:, None, None, :].to(x.dtype)) * torch.finfo(x.dtype).min
        for layer in self.layers:
            x = layer(x, mask)
        return torch.tanh(self.pool(x[:, 0]))


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = x.float()
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * h.to(x.dtype)


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


class LlamaLayer(nn.Module):
    def __init__(self, hidden: int, heads: int, kv_heads: int, ffn: int) -> None:
        super().__init__()
        self.heads, self.kv_heads, self.d = heads, kv_heads, hidden // heads
        self.q = nn.Linear(hidden, heads * self.d, bias=False)
        self.k = nn.Linear(hidden, kv_heads * self.d, bias=False)
        self.v = nn.Linear(hidden, kv_heads * self.d, bias=False)
        self.o = nn.Linear(heads * self.d, hidden, bias=False)
        self.gate = nn.Linear(hidden, ffn, bias=False)
        self.up = nn.Linear(hidden, ffn, bias=False)
        self.down = nn.Linear(ffn, hidden, bias=False)
        self.norm1 = RMSNorm(hidden)
        self.norm2 = RMSNorm(hidden)

    def qkv(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> Inputs:
        """Rotary-embedded q, k and v, shaped (batch, heads, seq, head_dim)."""
        b, s, _ = x.shape
        h = self.norm1(x)
        q = self.q(h).view(b, s, self.heads, self.d).transpose(1, 2)
        k = self.k(h).view(b, s, self.kv_heads, self.d).transpose(1, 2)
        v = self.v(h).view(b, s, self.kv_heads, self.d).transpose(1, 2)
        return q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin, v

    def finish(self, x: torch.Tensor, attn: torch.Tensor) -> torch.Tensor:
        b, s, _ = x.shape
        x = x + self.o(attn.transpose(1, 2).reshape(b, s, -1))
        h = self.norm2(x)
        return x + self.down(F.silu(self.gate(h)) * self.up(h))

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        return self.prefill(x, cos, sin)[0]

    def prefill(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> Inputs:
        """Causal attention over the prompt; also returns this layer's k/v cache."""
        q, k, v = self.qkv(x, cos, sin)
        attn = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
        return self.finish(x, attn), k, v

    def decode(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor,
               past_k: torch.Tensor, past_v: torch.Tensor) -> Inputs:
        """One new token attends to the cache plus itself; returns the grown cache."""
        q, k, v = self.qkv(x, cos, sin)
        k, v = torch.cat((past_k, k), dim=2), torch.cat((past_v, v), dim=2)
        attn = F.scaled_dot_product_attention(q, k, v, enable_gqa=True)
        return self.finish(x, attn), k, v


class Llama(nn.Module):
    """LLaMA-style decoder: RMSNorm in plain ops, RoPE (rotate-half), GQA via SDPA with a
    causal mask, SiLU-gated MLP, tied or untied LM head."""

    def __init__(self, vocab: int = 128, hidden: int = 32, heads: int = 4, kv_heads: int = 2,
                 layers: int = 2, ffn: int = 64, tie: bool = False, max_pos: int = 128) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, hidden)
        self.layers = nn.ModuleList(LlamaLayer(hidden, heads, kv_heads, ffn)
                                    for _ in range(layers))
        self.norm = RMSNorm(hidden)
        self.lm_head = nn.Linear(hidden, vocab, bias=False)
        if tie:
            self.lm_head.weight = self.embed.weight
        d = hidden // heads
        inv = 1.0 / (10000 ** (torch.arange(0, d, 2).float() / d))
        freqs = torch.outer(torch.arange(max_pos).float(), inv)
        emb = torch.cat((freqs, freqs), dim=-1)
        self.register_buffer("cos", emb.cos(), persistent=False)
        self.register_buffer("sin", emb.sin(), persistent=False)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        s = ids.shape[1]
        cos, sin = self.cos[:s], self.sin[:s]
        x = self.embed(ids)
        for layer in self.layers:
            x = layer(x, cos, sin)
        return self.lm_head(self.norm(x))

    def prefill(self, ids: torch.Tensor) -> Inputs:
        """Logits for the prompt and the KV cache, stacked (layers, b, kv_heads, s, d)."""
        s = ids.shape[1]
        x, ks, vs = self.embed(ids), [], []
        for layer in self.layers:
            x, k, v = layer.prefill(x, self.cos[:s], self.sin[:s])
            ks.append(k)
            vs.append(v)
        return self.lm_head(self.norm(x)), torch.stack(ks), torch.stack(vs)

    def decode(self, ids: torch.Tensor, past_k: torch.Tensor, past_v: torch.Tensor) -> Inputs:
        """One decode step: ``ids`` is (b, 1), the caches (layers, b, kv_heads, past, d)."""
        pos = past_k.shape[3]
        cos, sin = self.cos[pos:pos + 1], self.sin[pos:pos + 1]
        x, ks, vs = self.embed(ids), [], []
        for i, layer in enumerate(self.layers):
            x, k, v = layer.decode(x, cos, sin, past_k[i], past_v[i])
            ks.append(k)
            vs.append(v)
        return self.lm_head(self.norm(x)), torch.stack(ks), torch.stack(vs)


class LlamaPrefill(nn.Module):
    """``Llama.prefill`` as a module's forward (what ``torch.compile`` wraps)."""

    def __init__(self, llama: Llama) -> None:
        super().__init__()
        self.llama = llama

    def forward(self, ids: torch.Tensor) -> Inputs:
        return self.llama.prefill(ids)


class LlamaDecode(LlamaPrefill):
    """``Llama.decode`` as a module's forward."""

    def forward(self, ids: torch.Tensor, past_k: torch.Tensor,  # type: ignore[override]
                past_v: torch.Tensor) -> Inputs:
        return self.llama.decode(ids, past_k, past_v)


class ViTBlock(nn.Module):
    def __init__(self, hidden: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(hidden)
        self.qkv = nn.Linear(hidden, 3 * hidden)
        self.proj = nn.Linear(hidden, hidden)
        self.ln2 = nn.LayerNorm(hidden)
        self.fc1 = nn.Linear(hidden, 4 * hidden)
        self.fc2 = nn.Linear(4 * hidden, hidden)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, s, h = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(h, dim=-1)
        q, k, v = (t.reshape(b, s, self.heads, -1).transpose(1, 2) for t in (q, k, v))
        attn = F.scaled_dot_product_attention(q, k, v)
        x = x + self.proj(attn.transpose(1, 2).reshape(b, s, h))
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


class ViT(nn.Module):
    """Tiny ViT: conv patch embedding, class token, learned positions, pre-norm blocks."""

    def __init__(self, image: int = 32, patch: int = 4, hidden: int = 64, heads: int = 4,
                 layers: int = 2, classes: int = 10) -> None:
        super().__init__()
        self.patch = nn.Conv2d(3, hidden, patch, patch)
        self.cls = nn.Parameter(torch.randn(1, 1, hidden) * 0.02)
        self.pos = nn.Parameter(torch.randn(1, (image // patch) ** 2 + 1, hidden) * 0.02)
        self.blocks = nn.Sequential(*(ViTBlock(hidden, heads) for _ in range(layers)))
        self.ln = nn.LayerNorm(hidden)
        self.head = nn.Linear(hidden, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.patch(x).flatten(2).transpose(1, 2)
        x = torch.cat((self.cls.expand(x.shape[0], -1, -1), x), dim=1) + self.pos
        return self.head(self.ln(self.blocks(x))[:, 0])


@dataclass(frozen=True)
class ZooModel:
    """A zoo entry: ``build(batch, seed)`` returns the model and example inputs."""

    name: str
    build: Callable[[int, int], tuple[nn.Module, Inputs]]
    trainable: bool = True
    default_batch: int = 2
    quick: bool = False
    default: bool = True  # part of the default ``--models`` (all): the small CI-sized zoo


# Builders take the sizes as keywords: the CI-sized zoo and the ``*_base`` entries (the same
# architectures at sizes where kernels, not per-call overhead, dominate: BERT-base-like
# width, a 0.1B LLaMA, ViT-S/16 at 224, ResNet-18 at 64x64; opt-in with ``--models base``).
def _mlp(batch: int, seed: int, *, sizes: tuple[int, int, int]) -> tuple[nn.Module, Inputs]:
    torch.manual_seed(seed)
    return MLP(*sizes), (torch.randn(batch, sizes[0]),)


def _resnet18(batch: int, seed: int, *, image: int) -> tuple[nn.Module, Inputs]:
    torch.manual_seed(seed)
    return ResNet18(), (torch.randn(batch, 3, image, image),)


def _bert(batch: int, seed: int, *, seq: int, **config: int) -> tuple[nn.Module, Inputs]:
    torch.manual_seed(seed)
    model = Bert(**config)
    mask = torch.ones(batch, seq, dtype=torch.long)
    mask[-1, seq // 2:] = 0  # one padded sequence exercises the attention mask
    return model, (torch.randint(0, config["vocab"], (batch, seq)), mask)


def _llama_prefill(batch: int, seed: int, *, prompt: int, **config: int
                   ) -> tuple[nn.Module, Inputs]:
    torch.manual_seed(seed)
    model = LlamaPrefill(Llama(**config))
    return model, (torch.randint(0, config["vocab"], (batch, prompt)),)


def _llama_decode(batch: int, seed: int, *, prompt: int, **config: int
                  ) -> tuple[nn.Module, Inputs]:
    """The cache comes from a real eager prefill of a random prompt."""
    torch.manual_seed(seed)
    llama = Llama(**config)
    with torch.no_grad():
        _, past_k, past_v = llama.prefill(torch.randint(0, config["vocab"], (batch, prompt)))
    return LlamaDecode(llama), (torch.randint(0, config["vocab"], (batch, 1)), past_k, past_v)


def _vit(batch: int, seed: int, *, image: int = 32, **config: int) -> tuple[nn.Module, Inputs]:
    torch.manual_seed(seed)
    return ViT(image=image, **config), (torch.randn(batch, 3, image, image),)


LLAMA_CONFIG = {"vocab": 1000, "hidden": 128, "heads": 4, "kv_heads": 2, "layers": 4,
                "ffn": 344, "max_pos": 256, "prompt": 32}
LLAMA_BASE = {"vocab": 32000, "hidden": 512, "heads": 8, "kv_heads": 4, "layers": 4,
              "ffn": 1376, "max_pos": 1024, "prompt": 256}
BERT_CONFIG = {"vocab": 1000, "hidden": 128, "heads": 4, "layers": 2, "max_pos": 128, "seq": 32}
BERT_BASE = {"vocab": 30522, "hidden": 512, "heads": 8, "layers": 4, "max_pos": 512, "seq": 128}

ZOO: dict[str, ZooModel] = {m.name: m for m in (
    ZooModel("mlp", partial(_mlp, sizes=(64, 256, 16)), default_batch=8, quick=True),
    ZooModel("resnet18", partial(_resnet18, image=32), default_batch=4),
    ZooModel("bert", partial(_bert, **BERT_CONFIG), quick=True),
    ZooModel("llama_prefill", partial(_llama_prefill, **LLAMA_CONFIG)),
    ZooModel("llama_decode", partial(_llama_decode, **LLAMA_CONFIG), trainable=False,
             quick=True),
    ZooModel("vit", _vit),
    ZooModel("mlp_base", partial(_mlp, sizes=(1024, 4096, 1024)), default_batch=64,
             default=False),
    ZooModel("resnet18_base", partial(_resnet18, image=64), default_batch=8, default=False),
    ZooModel("bert_base", partial(_bert, **BERT_BASE), default_batch=4, default=False),
    ZooModel("llama_prefill_base", partial(_llama_prefill, **LLAMA_BASE), default_batch=1,
             default=False),
    ZooModel("llama_decode_base", partial(_llama_decode, **LLAMA_BASE), trainable=False,
             default_batch=4, default=False),
    ZooModel("vit_base", partial(_vit, image=224, patch=16, hidden=384, heads=6),
             default=False),
)}
# Names that select several entries.
ALIASES: dict[str, tuple[str, ...]] = {
    "llama": ("llama_prefill", "llama_decode"),
    "base": tuple(n for n, m in ZOO.items() if not m.default),
}


def expand_names(names: list[str]) -> list[str]:
    """Zoo entry names for ``--models`` (aliases expanded, order kept, unknown names raise)."""
    out: list[str] = []
    for name in names:
        for entry in ALIASES.get(name, (name,)):
            if entry not in ZOO:
                choices = sorted(ZOO) + sorted(ALIASES)
                raise KeyError(f"unknown model {name!r}; choose from {choices}")
            if entry not in out:
                out.append(entry)
    return out
