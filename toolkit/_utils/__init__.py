"""What every layer may use: argument validation, lazy imports, random-generator state, the tree
map over nested structures, allocation failures as ``MemoryError``, the user's frame for a
warning, and the table of module paths that moved."""
