"""The model zoo runner: the world's model libraries through pt2onnx and torch.onnx, side by side (issue #25)."""
