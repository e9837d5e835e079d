"""Pure tensor kernels: Sinkhorn (``ot``), the contrastive loss family (``losses``), retrieval metrics
(``metrics``), numeric precision (``precision``) and the embedding queue (``queue``). Functions of tensors,
no files, no settings, no registries.

May import: nothing of the harness.
"""
