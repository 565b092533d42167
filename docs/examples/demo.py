"""The demo model of the README: a small CNN classifier with a dynamic batch."""

from __future__ import annotations

import torch


class SmallCNN(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.features = torch.nn.Sequential(
            torch.nn.Conv2d(3, 16, 3, padding=1),
            torch.nn.BatchNorm2d(16),
            torch.nn.ReLU(),
            torch.nn.MaxPool2d(2),
            torch.nn.Conv2d(16, 32, 3, padding=1),
            torch.nn.ReLU(),
            torch.nn.MaxPool2d(2),
        )
        self.classifier = torch.nn.Sequential(torch.nn.Linear(32 * 8 * 8, 64), torch.nn.ReLU(), torch.nn.Linear(64, 10))

    def forward(self, image: torch.Tensor) -> torch.Tensor:
        return self.classifier(self.features(image).flatten(1))


def make_model():
    """Model, example inputs and export options (the `pt2onnx export MODULE:FACTORY` convention)."""
    torch.manual_seed(0)
    model = SmallCNN().eval()
    image = torch.randn(4, 3, 32, 32)
    options = {"dynamic_shapes": {"image": {0: torch.export.Dim("batch")}}}
    return model, (image,), options
