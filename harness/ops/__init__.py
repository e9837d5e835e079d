"""Pure tensor kernels: Sinkhorn (``ot``, with its native C kernel in ``native``), the contrastive loss family
(``losses``), retrieval metrics (``metrics``), numeric precision (``precision``) and the embedding queue
(``queue``). Functions of tensors, no settings files, no registries; the one file written is the native kernel's
build, in a user cache folder.

May import: nothing of the harness.
"""
