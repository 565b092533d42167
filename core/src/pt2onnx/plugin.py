"""The plugin author's API: everything a converter pack imports from pt2onnx.

A minimal pack, one module:

```python
import sys

from pt2onnx.plugin import converter, hookimpl


@converter("aten::gelu")
def gelu(op, self, *, approximate="none"):
    if approximate == "tanh":
        return op.Gelu(self, approximate="tanh")
    return op.Gelu(self)


@hookimpl
def pt2onnx_register_converters(register):
    register.module(sys.modules[__name__])
```

and an entry point in its pyproject.toml, so that installing the pack is all it takes:

```toml
[project.entry-points.pt2onnx]
mypack = "mypack"
```
"""

from __future__ import annotations

from .errors import ConversionError, ConverterDeclined, UnsupportedArgumentError
from .hookspecs import hookimpl
from .op import Op
from .opset import onnxruntime_has_kernel
from .registration import (
    ConverterRegistrar,
    CustomOpRegistrar,
    DecompositionRegistrar,
    LoweringRegistrar,
    PreparationRegistrar,
    PytreeNode,
    RewriteRegistrar,
    converter,
    lowering,
)

__all__ = [
    "ConversionError",
    "ConverterDeclined",
    "ConverterRegistrar",
    "CustomOpRegistrar",
    "DecompositionRegistrar",
    "LoweringRegistrar",
    "Op",
    "PreparationRegistrar",
    "PytreeNode",
    "RewriteRegistrar",
    "UnsupportedArgumentError",
    "converter",
    "hookimpl",
    "lowering",
    "onnxruntime_has_kernel",
]
