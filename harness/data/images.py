"""Images as the rows of a split: read from files through torchvision, held in memory, or generated.

Each kind has ``len()``, ``item_shape`` (C, H, W) and ``take(index) -> (B, C, H, W)`` float32, so
that :func:`harness.data.paired.take` and the encoders treat them like any other features. Random
choices (augmentation, sampled triplets) draw from torch's global generator, which the
harness seeds per run and saves in every resume checkpoint, so an interrupted run resumes
with the same draws.

:class:`SemanticTriplets` is the photo side of a zero-shot training split: for each sketch, a
photo of its class, a photo of a semantically sampled negative class and the class word vector
(Doodle2Search's training triplets).
"""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any, Sequence

import torch
from PIL import Image, UnidentifiedImageError
from torchvision.datasets.folder import default_loader
from torchvision.transforms import v2

from harness.data.paired import take
from harness.errors import DataError

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)


def image_transform(size: int, channels: int, mean: Sequence[float] | None = None,
                    std: Sequence[float] | None = None) -> v2.Compose:
    """PIL image -> (channels, size, size) float32 in [0, 1], resized without keeping the aspect ratio
    (as Doodle2Search resizes to 224 × 224), then normalised channel-wise when ``mean`` and ``std`` are
    given (None: left in [0, 1], as Doodle2Search's ``ToTensor()`` leaves them)."""
    steps: list[Any] = [v2.ToImage()] + ([v2.Grayscale(1)] if channels == 1 else [])
    steps += [v2.Resize((size, size), antialias=True), v2.ToDtype(torch.float32, scale=True)]
    if mean is not None and std is not None:
        steps.append(v2.Normalize(list(mean), list(std)))
    return v2.Compose(steps)


def check_readable(paths: Sequence[str]) -> None:
    """Open every file's header with PIL (no pixel decoding); one DataError lists the unreadable ones."""
    bad = []
    for path in paths:
        try:
            with Image.open(path) as img:
                img.verify()
        except (OSError, UnidentifiedImageError, SyntaxError) as err:
            bad.append(f"{path} ({type(err).__name__}: {err})")
    if bad:
        shown = "\n  ".join(bad[:10]) + (f"\n  … and {len(bad) - 10} more" if len(bad) > 10 else "")
        raise DataError(f"{len(bad)} image file(s) cannot be read:\n  {shown}\nRemove or replace them, or set "
                        "dataset.verify: false to find them only when a batch reads them")


class ImageFiles:
    """Rows read on demand from image files with torchvision's loader and transforms.

    ``workers`` > 0 decodes a batch with that many threads (PIL releases the GIL while decoding).
    """

    def __init__(self, paths: Sequence[str], transform: v2.Compose, item_shape: tuple[int, int, int],
                 workers: int = 0):
        self.paths, self.transform, self.workers = list(paths), transform, workers
        self._shape = item_shape

    def __len__(self) -> int:
        return len(self.paths)

    @property
    def item_shape(self) -> tuple[int, int, int]:
        return self._shape

    def load(self, i: int) -> torch.Tensor:
        """(C, H, W) image ``i``; a file that cannot be decoded is a DataError naming it."""
        return self.read(self.paths[i])

    def read(self, path: str) -> torch.Tensor:
        """(C, H, W) image of the file ``path``."""
        try:
            image: torch.Tensor = self.transform(default_loader(path))
            return image
        except (OSError, UnidentifiedImageError) as err:
            raise DataError(f"cannot read image {path}: {err}") from err

    def take(self, index: torch.Tensor) -> torch.Tensor:
        """(B, C, H, W) images ``index``."""
        rows = index.tolist()
        if self.workers > 0 and len(rows) > 1:
            with ThreadPoolExecutor(self.workers) as pool:
                return torch.stack(list(pool.map(self.load, rows)))
        return torch.stack([self.load(i) for i in rows])


class ImageChoices(ImageFiles):
    """Rows read from image files where each row has several versions (Sketchy's augmented sketch
    folders): every ``take`` draws, for each row taken, one of its versions uniformly with torch's
    global generator (so one draw per item and epoch, reproducible from the run's seed), before any
    decoding thread starts. ``versions[i]`` lists row i's files; ``paths`` are the first versions."""

    def __init__(self, versions: Sequence[Sequence[str]], transform: v2.Compose, item_shape: tuple[int, int, int],
                 workers: int = 0):
        super().__init__([v[0] for v in versions], transform, item_shape, workers)
        self.versions = [list(v) for v in versions]
        self.counts = torch.tensor([len(v) for v in self.versions])

    def choose(self, index: torch.Tensor) -> list[str]:
        """The file drawn for each row of ``index``."""
        picks = (torch.rand(len(index), dtype=torch.float64) * self.counts[index]).long()
        return [self.versions[i][k] for i, k in zip(index.tolist(), picks.tolist())]

    def take(self, index: torch.Tensor) -> torch.Tensor:
        """(B, C, H, W) images ``index``, each from a freshly drawn version."""
        files = self.choose(index)
        if self.workers > 0 and len(files) > 1:
            with ThreadPoolExecutor(self.workers) as pool:
                return torch.stack(list(pool.map(self.read, files)))
        return torch.stack([self.read(f) for f in files])


class ImageTensor:
    """Rows of an in-memory (N, C, H, W) float tensor. With ``crop_scale`` each taken row is
    augmented by its own random resized crop (area share in ``crop_scale``, aspect 0.9–1.1),
    resized back to H × W; without it rows are returned as stored."""

    def __init__(self, images: torch.Tensor, crop_scale: tuple[float, float] | None = None):
        self.images = images
        self.crop = None
        if crop_scale is not None:
            self.crop = v2.RandomResizedCrop(tuple(images.shape[-2:]), scale=crop_scale, ratio=(0.9, 1.1),
                                             antialias=True)

    def __len__(self) -> int:
        return len(self.images)

    @property
    def item_shape(self) -> tuple[int, ...]:
        return tuple(self.images.shape[1:])

    def take(self, index: torch.Tensor) -> torch.Tensor:
        """(B, C, H, W) rows ``index``, augmented when a crop is set."""
        rows = self.images[index]
        if self.crop is None:
            return rows
        return torch.stack([self.crop(row) for row in rows])


class RandomImages:
    """Generated rows for timing: row i is always the same uniform-noise image (seeded by ``seed``
    and i), standardised to about zero mean and unit variance. Nothing is held in memory."""

    def __init__(self, n: int, item_shape: tuple[int, int, int], seed: int):
        self.n, self._shape, self.seed = n, item_shape, seed

    def __len__(self) -> int:
        return self.n

    @property
    def item_shape(self) -> tuple[int, int, int]:
        return self._shape

    def take(self, index: torch.Tensor) -> torch.Tensor:
        """(B, C, H, W) images ``index``."""
        out = torch.empty(len(index), *self._shape)
        for row, i in enumerate(index.tolist()):
            g = torch.Generator().manual_seed(self.seed * 1_000_003 + i)
            out[row] = (torch.rand(self._shape, generator=g) - 0.5) * 12**0.5
        return out


def negative_class_probabilities(word_vectors: torch.Tensor | None, n_classes: int,
                                 temperature: float) -> torch.Tensor:
    """(C, C) float64: row c is the distribution of the negative class for a sketch of class c.

    Doodle2Search's semantic sampling: P(j | c) ∝ exp(−‖w_c − w_j‖² / T) over j ≠ c, from the
    classes' word vectors ``word_vectors`` (C, d); uniform over j ≠ c without word vectors.
    Computed as a softmax in float64, so that distant classes underflow to 0 rather than
    the whole row to 0/0.
    """
    if n_classes < 2:
        raise DataError(f"semantic negatives need at least 2 training classes, got {n_classes}")
    if word_vectors is None:
        logits = torch.zeros(n_classes, n_classes, dtype=torch.float64)
    else:
        w = word_vectors.double()
        logits = -torch.cdist(w, w).square() / temperature  # (C, C)
    return torch.softmax(logits.fill_diagonal_(-torch.inf), dim=1)


class SemanticTriplets:
    """The photo side of a zero-shot training split: item j belongs to sketch j.

    ``take(index)`` returns ``(positives, negatives, words)``: for each sketch a uniformly drawn
    photo of its class, a uniformly drawn photo of a negative class drawn with
    :func:`negative_class_probabilities`, and the sketch class's word vector (B, d; d = 0
    without word vectors). Labels are the source's global class ids.
    """

    def __init__(self, photos: Any, photo_labels: torch.Tensor, sketch_labels: torch.Tensor,
                 word_vectors: torch.Tensor | None = None, temperature: float = 0.1):
        self.photos, self.sketch_labels = photos, sketch_labels
        self.classes = torch.unique(sketch_labels)  # (C,) sorted global ids
        photo_classes = set(torch.unique(photo_labels).tolist())
        if photo_classes != set(self.classes.tolist()):
            raise DataError(f"training classes differ between sketches and photos: sketches only "
                            f"{sorted(set(self.classes.tolist()) - photo_classes)}, photos only "
                            f"{sorted(photo_classes - set(self.classes.tolist()))}")
        self.local = torch.searchsorted(self.classes, sketch_labels)  # (N,) class of each sketch, 0..C-1
        photo_local = torch.searchsorted(self.classes, photo_labels)  # (P,)
        self.order = torch.argsort(photo_local, stable=True)  # photo rows grouped by class
        self.counts = torch.bincount(photo_local, minlength=len(self.classes))  # (C,)
        self.starts = torch.cumsum(self.counts, 0) - self.counts  # (C,) first slot of each class in order
        self.word_vectors = word_vectors
        self.probabilities = negative_class_probabilities(word_vectors, len(self.classes), temperature)

    def __len__(self) -> int:
        return len(self.sketch_labels)

    @property
    def item_shape(self) -> tuple[int, ...]:
        return tuple(self.photos.item_shape)

    @property
    def word_dim(self) -> int | None:
        """Width of the class word vectors, None without them."""
        return None if self.word_vectors is None else int(self.word_vectors.shape[1])

    def _photo_of(self, classes: torch.Tensor) -> torch.Tensor:
        """(B,) a uniformly drawn photo row of each local class in ``classes``."""
        slot = (torch.rand(len(classes), dtype=torch.float64) * self.counts[classes]).long()
        return self.order[self.starts[classes] + slot]

    def sample(self, index: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(positive photo rows, negative photo rows, negative local classes) for sketches ``index``."""
        own = self.local[index]  # (B,)
        negative = torch.multinomial(self.probabilities[own], 1).squeeze(1)  # (B,)
        return self._photo_of(own), self._photo_of(negative), negative

    def take(self, index: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(positives (B, C, H, W), negatives (B, C, H, W), words (B, d))."""
        positive, negative, _ = self.sample(index)
        own = self.local[index]
        words = self.word_vectors[own] if self.word_vectors is not None else torch.zeros(len(index), 0)
        return take(self.photos, positive), take(self.photos, negative), words
