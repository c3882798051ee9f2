"""What every layer may use: argument validation, lazy imports, random-generator state, and the
table of module paths that moved."""
