"""Small models shared by the core tests."""

from __future__ import annotations

import torch


class MLP(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1 = torch.nn.Linear(8, 16)
        self.fc2 = torch.nn.Linear(16, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(torch.relu(self.fc1(x)) * 2.0 + 1.0)


class CNN(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.bn = torch.nn.BatchNorm2d(8)
        self.pool = torch.nn.MaxPool2d(2)
        self.fc = torch.nn.Linear(8 * 4 * 4, 10)

    def forward(self, image: torch.Tensor) -> torch.Tensor:
        y = self.pool(torch.relu(self.bn(self.conv(image))))
        return self.fc(y.flatten(1))


def trained_cnn() -> CNN:
    """A CNN whose batch-norm statistics are not the defaults, in eval mode."""
    torch.manual_seed(0)
    model = CNN()
    model.bn.running_mean.uniform_(-1, 1)
    model.bn.running_var.uniform_(0.5, 2)
    return model.eval()
