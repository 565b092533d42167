"""The calling convention: how the model is called, and how its inputs, outputs and dims are named.

One wing for what crosses the model's boundary, so every phase asks here instead of
deriving names or flattening inputs itself:

* :mod:`~pt2onnx.interface.calling`: example arguments, the forward signature (keywords a
  ``**kwargs`` parameter catches included), the user inputs flattened as captured;
* :mod:`~pt2onnx.interface.matching`: the inputs a caller of ``run``/``verify`` gives,
  laid out as captured (by name, constants left out), or one line on what is missing;
* :mod:`~pt2onnx.interface.shapes`: ``dynamic_shapes`` (``"auto"``, dims told by further
  examples, named axes) and which dims stayed static;
* :mod:`~pt2onnx.interface.names`: the ONNX names of inputs, outputs, updates and dims;
* :mod:`~pt2onnx.interface.symbolic`: ONNX types and shapes from torch's, dims by name.

Following ``dynamic_shapes`` through an export: ``export`` -> ``prepare.prepare_capture``
-> ``shapes.resolve_dynamic_shapes`` (plugins' hints applied) -> ``capture`` ->
``shapes.static_dims`` (the report) -> ``names.dim_names`` -> ``symbolic.DimNames`` ->
``translate``.
"""
