"""The four reference models (small configs, random weights): MLP, CNN with BatchNorm,
BERT-style encoder, LLaMA-style decoder. The architectures are the benchmark zoo's
(``npu_inductor.benchmarks.zoo``); this file adds the test CNN and the test configs."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from npu_inductor.benchmarks.zoo import MLP, Bert, Llama, RMSNorm, rotate_half

__all__ = ["CNN", "MLP", "Bert", "Llama", "RMSNorm", "make", "rotate_half"]


class CNN(nn.Module):
    def __init__(self, classes: int = 10) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(8)
        self.conv2 = nn.Conv2d(8, 16, 3, stride=1, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(16)
        self.pool = nn.MaxPool2d(2)
        self.avg = nn.AvgPool2d(2)
        self.fc = nn.Linear(16 * 2 * 2, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.pool(F.relu(self.bn1(self.conv1(x))))
        x = self.avg(F.relu(self.bn2(self.conv2(x))))
        return self.fc(torch.flatten(x, 1))


def make(name: str, seed: int = 0) -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    """A model and example inputs by name: mlp, cnn, bert, llama, llama_tied."""
    torch.manual_seed(seed)
    if name == "mlp":
        return MLP(), (torch.randn(4, 16),)
    if name == "cnn":
        return CNN(), (torch.randn(2, 3, 8, 8),)
    if name == "bert":
        ids = torch.randint(0, 100, (2, 8))
        mask = torch.ones(2, 8, dtype=torch.long)
        mask[1, 5:] = 0
        return Bert(), (ids, mask)
    if name in ("llama", "llama_tied"):
        return Llama(tie=name == "llama_tied"), (torch.randint(0, 128, (2, 8)),)
    raise KeyError(name)


MODEL_NAMES = ("mlp", "cnn", "bert", "llama", "llama_tied")
