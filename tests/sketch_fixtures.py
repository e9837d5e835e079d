"""Generated image folders for the sketch -> photo tests: PIL-drawn class shapes, tiny images, seconds."""
from __future__ import annotations

from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw

CLASSES = ("apple", "bat", "cow", "door", "palm_tree", "saw")


def draw(kind: int, rng: np.random.Generator, size: int, photo: bool) -> Image.Image:
    """Class ``kind``'s shape (ellipse, box, diagonal, triangle, bar, cross) at a jittered position;
    photos are coloured RGB, sketches black on white grey-scale."""
    img = Image.new("RGB" if photo else "L", (size, size), (255, 255, 255) if photo else 255)
    d = ImageDraw.Draw(img)
    x0, y0 = (int(v) for v in rng.integers(0, size // 4, 2))
    x1, y1 = x0 + size // 2, y0 + size // 2
    ink = tuple(int(v) for v in rng.integers(0, 200, 3)) if photo else 0
    shape = kind % 6
    if shape == 0:
        d.ellipse((x0, y0, x1, y1), fill=ink)
    elif shape == 1:
        d.rectangle((x0, y0, x1, y1), fill=ink)
    elif shape == 2:
        d.line((x0, y0, x1, y1), fill=ink, width=2)
    elif shape == 3:
        d.polygon([(x0, y1), (x1, y1), ((x0 + x1) // 2, y0)], fill=ink)
    elif shape == 4:
        d.rectangle((x0, y0, x0 + 2, y1), fill=ink)
    else:
        d.line((x0, y0, x1, y1), fill=ink, width=2)
        d.line((x0, y1, x1, y0), fill=ink, width=2)
    return img


def write_image_folders(root: Path, classes=CLASSES, sketches: int = 4, photos: int = 5, size: int = 12,
                        seed: int = 0) -> Path:
    """``root/sketch/<class>/*.png`` and ``root/photo/<class>/*.jpg`` plus a word-vector file
    ``root/word_vectors.txt`` (4-d; multi-word names as the mean of their words). Returns ``root``."""
    rng = np.random.default_rng(seed)
    for k, name in enumerate(classes):
        for modality, count, ext in (("sketch", sketches, "png"), ("photo", photos, "jpg")):
            folder = root / modality / name
            folder.mkdir(parents=True, exist_ok=True)
            for i in range(count):
                draw(k, rng, size, modality == "photo").save(folder / f"{i}.{ext}")
    words = sorted({w for name in classes for w in name.split("_")})
    lines = ["%d 4" % len(words)] + [" ".join([w, *(f"{v:.3f}" for v in rng.normal(size=4))]) for w in words]
    (root / "word_vectors.txt").write_text("\n".join(lines) + "\n")
    return root


def write_doodle2search_files(root: Path, classes=CLASSES, versions: int = 3, dim: int = 5, seed: int = 1) -> dict:
    """Beside :func:`write_image_folders`'s folders, Doodle2Search's own formats: ``versions`` sketch folders
    ``sketch_v<k>/<class>/<file>`` holding the same file names (version k: the sketch with its pixels
    shifted by 10·k grey levels) and the class vectors ``vectors.npy`` (row i: class i of the reversed
    class list, so order matters) with ``vocab.pkl``, a pickled list of the row names. Returns the
    dataset settings that read them."""
    import pickle

    rng = np.random.default_rng(seed)
    folders = []
    for k in range(versions):
        folder = f"sketch_v{k}"
        for path in sorted((root / "sketch").rglob("*.png")):
            target = root / folder / path.relative_to(root / "sketch")
            target.parent.mkdir(parents=True, exist_ok=True)
            pixels = np.asarray(Image.open(path), dtype=np.int16)
            Image.fromarray((pixels // 2 + 40 * k).astype(np.uint8)).save(target)
        folders.append(folder)
    names = list(reversed(classes))
    np.save(root / "vectors.npy", rng.normal(size=(len(names), dim)).astype(np.float32))
    (root / "vocab.pkl").write_bytes(pickle.dumps(names, protocol=2))
    return {"sketch_dir": folders, "word_vectors": "vectors.npy", "word_vocab": "vocab.pkl"}


def folder_task(root: Path, **dataset) -> dict:
    """A seconds-long variant of tasks/sketchy.yaml on the folders under ``root`` (from
    :func:`write_image_folders`): 12 × 12 images, a small CNN, 2 epochs, both methods; half of the seen classes
    validate (two of four: a validation split of one class would make a class metric meaningless)."""
    small = {"arch": "small", "widths": [4, 8], "dim": 8, "attention_hidden": 4}
    return {"base": str(Path(__file__).resolve().parent.parent / "tasks" / "sketchy.yaml"), "name": "tiny_folders",
            "version": "test",
            "dataset": {"root": str(root), "test_classes": ["bat", "saw"], "val_fraction": 0.5, "image_size": 12,
                        "workers": 2, "sketch_dir": "sketch", "photo_dir": "photo", "word_vectors": "word_vectors.txt",
                        "word_vocab": "", **dataset},
            "encoders": {"a": small, "b": small},
            "train": {"epochs": 2, "batch_size": 4, "eval_batch_size": 8},
            "methods": {"doodle2search": {"method": "doodle2search", "ramp_start": 0, "ramp_end": 2},
                        "doodle2search_swamp": {"method": "doodle2search_swamp", "K": 4, "queue": 8}}}
