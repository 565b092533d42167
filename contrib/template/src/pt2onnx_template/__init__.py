"""pt2onnx-template: a custom op (``ops``) and the pt2onnx plugin that exports it (``plugin``)."""
