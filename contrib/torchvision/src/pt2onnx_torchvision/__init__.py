"""pt2onnx-torchvision: torchvision's detection models as ONNX.

The plugin (:mod:`.plugin`, entry point ``torchvision``) converts ``torchvision::nms``,
``torchvision::roi_align``, ``torchvision::roi_pool``, ``torchvision::ps_roi_align``,
``torchvision::ps_roi_pool`` and ``torchvision::deform_conv2d`` and registers the capture patch of :mod:`.patches`, which
replaces the data-dependent Python of torchvision's detection code while capture runs.
Importing the pack does not import torchvision.
"""
