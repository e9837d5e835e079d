"""Encoders: one file each, registered in ``harness.api.ENCODERS``.

An encoder is a class with a frozen ``Params`` dataclass and
``build(input_shape, params) -> nn.Module``; the module maps a batch of one modality's
items to (B, out_dim) embeddings and exposes ``out_dim``. Input sizes come from data.

Plugins: files here import only :mod:`harness.api` and each other (an import contract checks it).
"""
