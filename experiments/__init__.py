"""Experiments: one module per experiment, each with its ``Params`` model and ``run(params, ctx)``.

They use only the toolkit's public API; the runner (``toolkit.lab``) discovers them here.
"""
