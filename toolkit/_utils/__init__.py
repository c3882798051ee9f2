"""What every layer may use: argument validation, lazy imports, random-generator state, the tree
map over nested structures, and the table of module paths that moved."""
