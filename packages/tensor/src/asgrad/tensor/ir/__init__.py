"""The graph IR: the op registry, nodes and graphs, passes and the schedule.

Holds ``registry`` (``OpDef``, ``TensorType``, ``register_op``), ``graph`` (``Graph``,
``Node``), ``variables``, ``scopes`` (node metadata), ``leaf_shapes``, ``common`` (shared
pieces of op definitions: broadcasting, axes, sizes, argument checks), ``dtypes``,
``passes`` (dead code, common subexpressions, folding), ``schedule``, ``cache`` and
``scalar`` (the scalar expressions that state what each elementwise op computes).

May import: `asgrad.tensor.errors` and itself, nothing else of asgrad at import time
(``registry.all_ops`` imports `asgrad.tensor.ops` when first called, to register the
built-in ops). ``Graph`` imports no API and no file format: the layers above it install
what it hands out (the ``Tensor`` wrapper, graph files, printing) at import of
[`asgrad.tensor`][asgrad.tensor] through `asgrad.tensor.ir.graph.install`.
"""
