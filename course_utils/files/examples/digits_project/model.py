"""The model: an MLP whose sizes come from the config, never from constants in the code."""

from __future__ import annotations

from torch import nn

N_PIXELS, N_CLASSES = 64, 10


class DigitsMLP(nn.Module):
    def __init__(self, hidden: int, dropout: float):
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(N_PIXELS, hidden), nn.ReLU(), nn.Dropout(dropout))
        self.head = nn.Linear(hidden, N_CLASSES)

    def forward(self, x):
        return self.head(self.encoder(x))


def build_model(config: dict) -> DigitsMLP:
    return DigitsMLP(hidden=config["hidden"], dropout=config["dropout"])
