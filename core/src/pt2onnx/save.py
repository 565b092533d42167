"""Save: protobuf, or protobuf plus external data (automatic above 2 GB), written atomically.

Everything is written into a temporary directory beside the target and moved into
place only when complete, so a failed save leaves no partial file.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import onnx_ir as ir

from .errors import SaveError

__all__ = ["PROTOBUF_LIMIT", "save_model"]

#: Protobuf cannot serialize messages of 2 GB or more.
PROTOBUF_LIMIT = 2**31 - 1


def _weights_nbytes(model: ir.Model) -> int:
    return sum(v.const_value.nbytes for v in model.graph.initializers.values() if v.const_value is not None)


def save_model(model: ir.Model, path: str | os.PathLike[str], external_data: bool | str | None = None) -> list[Path]:
    """Write ``model`` to ``path``; returns the files written.

    Args:
        external_data: ``None``: only when the weights would exceed protobuf's 2 GB
            limit; ``True``: always, to ``<name>.data``; a string: always, to that file
            name (relative to ``path``'s directory); ``False``: never.
    """
    target = Path(path)
    if not target.parent.is_dir():
        raise SaveError(f"cannot save to {target}: directory {target.parent} does not exist")
    if external_data is None:
        external_data = _weights_nbytes(model) >= PROTOBUF_LIMIT
    if external_data is False and _weights_nbytes(model) >= PROTOBUF_LIMIT:
        raise SaveError(
            f"the weights are {_weights_nbytes(model) / 2**30:.1f} GiB, over protobuf's 2 GB limit",
            hint="save with external_data=True",
        )
    data_name = None
    if external_data:
        data_name = external_data if isinstance(external_data, str) else f"{target.name}.data"
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
    try:
        ir.save(model, staging / target.name, external_data=data_name)
        written = []
        # The data file goes into place first: the model never points at missing data.
        for name in [data_name, target.name]:
            if name is not None and (staging / name).exists():
                os.replace(staging / name, target.parent / name)
                written.append(target.parent / name)
        return written
    except Exception as e:
        raise SaveError(f"saving to {target} failed: {type(e).__name__}: {e}") from e
    finally:
        shutil.rmtree(staging, ignore_errors=True)
