"""torchvision for these tests: from the folder ./dev.sh installs it to, with stand-in CPU kernels.

dev.sh keeps torchvision out of .venv (its wheel for the CPU torch cannot load its C++ ops,
and a failing ``import torchvision`` breaks transformers); here it goes on the path and
:func:`torchvision_ops.install` gives its operators CPU kernels before the first import.
Loaded at collection by every worker, so whichever test imports torchvision next finds it
working. Without that folder (and without a working torchvision) these tests skip.
"""

from __future__ import annotations

import importlib.util

from torchvision_ops import SITE, install

if not SITE.is_dir() and importlib.util.find_spec("torchvision") is None:
    collect_ignore_glob = ["test_*.py"]
else:
    install()
