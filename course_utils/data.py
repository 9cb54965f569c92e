"""Small real data for the course, read from files shipped inside the package (``files/data/``).

The course never downloads anything while it runs: a learner offline, behind a proxy or in an
exam room gets the same data as everyone else, and the tests can check it by its sha256
(see ``course_utils/files/data/README.md`` for where each file comes from and its licence).
The files are package data, so a learner who has only a chapter notebook and the installed
package (Colab, Kaggle, a hub) has them too.

The package's ``__init__`` does not import this module, so ``import course_utils`` stays cheap;
importing ``course_utils.data`` itself loads torch, because ``DigitsDataset`` subclasses
``torch.utils.data.Dataset``, but never matplotlib. ``DigitsDataset`` lives here, in a real module, rather than in a notebook cell: DataLoader
workers started by "spawn" or "forkserver" (macOS and Windows, and Linux from Python 3.14)
unpickle the dataset by importing the module that defines its class, and a class defined in a
notebook cannot be imported.
"""

from __future__ import annotations

import gzip
import time
from pathlib import Path

import numpy as np
import torch
from torch.utils.data import Dataset

DATA_DIR = Path(__file__).resolve().parent / "files" / "data"
DIGITS_FILE = DATA_DIR / "digits.csv.gz"

_DIGITS_N_PIXELS = 64
_DIGITS_MAX_VALUE = 16.0

# Filled by the first load_digits(); the file is read and parsed only once per process.
_digits_cache: dict = {}



def load_digits():
    """The 1797 UCI handwritten digits as ``(images, labels)``, ready for a model.

    Pixels are divided by 16 so they lie in [0, 1], the scale that default weight
    initialisations and learning rates expect; images stay flat, shape (1797, 64), so a
    linear layer takes them as they are (``images.view(-1, 8, 8)`` shows them as pictures).
    Labels are int64 because ``torch.nn.functional.cross_entropy`` wants class indices of that
    type. The file is parsed once and cached; each call returns clones, so a learner who edits
    the tensors in place cannot change what the next call (or the next exercise) sees.
    """
    if "digits" not in _digits_cache:
        _digits_cache["digits"] = _read_digits(DIGITS_FILE)
    images, labels = _digits_cache["digits"]
    return images.clone(), labels.clone()


def _read_digits(path: Path):
    """Parse the shipped CSV; kept apart from load_digits so the cache logic stays readable."""
    if not path.is_file():
        raise FileNotFoundError(
            f"The digits data file {path} is missing: it ships inside the course's package "
            "(course_utils/files/data/digits.csv.gz); in the course folder restore it with "
            "`git checkout -- course_utils/files/data/digits.csv.gz`, elsewhere reinstall the package."
        )
    with gzip.open(path, "rt", encoding="ascii") as f:
        table = np.loadtxt(f, delimiter=",", dtype=np.int64, ndmin=2)
    if table.shape[1] != _DIGITS_N_PIXELS + 1:
        raise ValueError(f"{path} has {table.shape[1]} columns per row, expected 65 (64 pixels and a label).")
    images = torch.from_numpy(table[:, :_DIGITS_N_PIXELS].astype(np.float32) / _DIGITS_MAX_VALUE)
    labels = torch.from_numpy(np.ascontiguousarray(table[:, _DIGITS_N_PIXELS]))
    return images, labels


def train_val_split(x, y, val_fraction: float = 0.2, seed: int = 0):
    """Hold out a random part of the data as ``(x_train, y_train, x_val, y_val)``.

    Measuring accuracy on examples the model never trained on is the only honest estimate of
    how it will do on new data. The split uses its own seeded ``torch.Generator`` so the same
    seed gives the same split on every machine and run, without touching the global random
    state that the rest of a notebook relies on. It is a plain shuffle, not stratified: with
    1797 roughly balanced digits every class still lands in both parts.
    """
    n = len(x)
    if len(y) != n:
        raise ValueError(f"x and y must have the same length, got {n} and {len(y)}.")
    if not 0.0 < val_fraction < 1.0:
        raise ValueError(f"val_fraction must be between 0 and 1 (exclusive), got {val_fraction}.")
    n_val = int(round(n * val_fraction))
    if n_val == 0 or n_val == n:
        raise ValueError(
            f"val_fraction={val_fraction} of {n} examples leaves an empty training or validation set."
        )
    generator = torch.Generator().manual_seed(seed)
    order = torch.randperm(n, generator=generator)
    val_idx, train_idx = order[:n_val], order[n_val:]
    return x[train_idx], y[train_idx], x[val_idx], y[val_idx]


class DigitsDataset(Dataset):
    """Pairs of (image, label) that a ``torch.utils.data.DataLoader`` can batch and shuffle.

    Wrapping tensors in a Dataset is the step that lets the same training loop later read data
    too large for memory, apply a random augmentation per example (``transform``), or load in
    parallel worker processes. Defined in this module, not in a notebook, so that workers
    started by "spawn" can unpickle it. A ``transform`` must be picklable too (a function
    defined at module level, not a lambda) when ``num_workers > 0`` on such platforms.
    """

    def __init__(self, x, y, transform=None):
        if len(x) != len(y):
            raise ValueError(f"x and y must have the same length, got {len(x)} and {len(y)}.")
        self.x = x
        self.y = y
        self.transform = transform

    def __len__(self) -> int:
        return len(self.x)

    def __getitem__(self, index):
        image = self.x[index]
        if self.transform is not None:
            image = self.transform(image)
        return image, self.y[index]


# --- a data set as slow as real ones (chapter 05) -------------------------------------------

SLOW_IMAGE_SIZE = 48  # what is "stored": 3 × 48 × 48 bytes per image
SLOW_OUTPUT_SIZE = 32  # what the model gets: 3 × 32 × 32 floats


def _heavy_transform(image: torch.Tensor, mean: torch.Tensor, std: torch.Tensor) -> torch.Tensor:
    """Resize the way a careless pipeline does: float64, up-sample, then down with antialiasing."""
    import torch.nn.functional as F

    x = image.to(torch.float64).unsqueeze(0) / 255
    x = F.interpolate(x, size=(96, 96), mode="bicubic", align_corners=False)
    x = F.interpolate(x, size=(SLOW_OUTPUT_SIZE,) * 2, mode="bicubic", antialias=True, align_corners=False)
    return ((x.squeeze(0) - mean.double()) / std.double()).float()


def _light_transform(image: torch.Tensor, mean: torch.Tensor, std: torch.Tensor) -> torch.Tensor:
    """The same shape and scale in one cheap float32 step."""
    import torch.nn.functional as F

    x = image.to(torch.float32).unsqueeze(0) / 255
    x = F.interpolate(x, size=(SLOW_OUTPUT_SIZE,) * 2, mode="bilinear", align_corners=False)
    return (x.squeeze(0) - mean) / std


class SlowDataset(Dataset):
    """Small images that take time to get, for measuring a DataLoader (chapter 05).

    Real data sets are slow in a few typical ways, and each one is a switch here:

    - ``read_s``: every item "reads a file", a sleep, as waiting for a disk or a network is;
    - ``transform``: ``"heavy"`` resizes in float64 through a large intermediate image, a real
      CPU cost; ``"light"`` gives the same shape and scale in one cheap step;
    - ``setup_in_init``: ``False`` loads the normalisation statistics (a sleep of ``setup_s``,
      like opening a metadata file) again for every item; ``True`` does it once, in ``__init__``;
    - ``cache``: keep each finished item in memory, so a second epoch skips the work. With
      worker processes each worker has its own cache, which is lost when the workers stop at
      the end of an epoch, unless the DataLoader has ``persistent_workers=True``.

    ``setup_calls`` counts how often the statistics were loaded in this process. The class lives
    in a module, not a notebook, so that DataLoader workers started by "spawn" can unpickle it.
    """

    def __init__(
        self,
        n: int = 128,
        *,
        read_s: float = 0.002,
        transform: str = "heavy",
        setup_in_init: bool = False,
        setup_s: float = 0.004,
        cache: bool = False,
        seed: int = 0,
    ):
        if transform not in ("heavy", "light"):
            raise ValueError(f"transform is 'heavy' or 'light', not {transform!r}")
        generator = torch.Generator().manual_seed(seed)
        shape = (n, 3, SLOW_IMAGE_SIZE, SLOW_IMAGE_SIZE)
        self.images = torch.randint(0, 256, shape, dtype=torch.uint8, generator=generator)
        self.labels = torch.randint(0, 10, (n,), generator=generator)
        self.read_s = read_s
        self.setup_s = setup_s
        self.transform = transform
        self.setup_calls = 0
        self._cache: dict | None = {} if cache else None
        self._stats = self._load_stats() if setup_in_init else None

    def _load_stats(self) -> tuple[torch.Tensor, torch.Tensor]:
        self.setup_calls += 1
        time.sleep(self.setup_s)  # opening and parsing a metadata file
        return torch.full((3, 1, 1), 0.5), torch.full((3, 1, 1), 0.29)

    def __len__(self) -> int:
        return len(self.images)

    def __getitem__(self, index):
        if self._cache is not None and index in self._cache:
            return self._cache[index]
        mean, std = self._stats if self._stats is not None else self._load_stats()
        time.sleep(self.read_s)  # reading the file
        transform = _heavy_transform if self.transform == "heavy" else _light_transform
        item = (transform(self.images[index], mean, std), self.labels[index])
        if self._cache is not None:
            self._cache[index] = item
        return item


class JitteredDigits(Dataset):
    """Digits with random noise added to each image, as augmentation code does.

    With ``own_generator=True`` (the default) the noise comes from a NumPy generator the data
    set holds, ``self.rng``. Every DataLoader worker receives a copy of the data set, ``self.rng``
    included, in the same state: without a ``worker_init_fn`` that reseeds it, every worker
    draws the same noise. With ``own_generator=False`` the noise comes from NumPy's global
    ``np.random``, which PyTorch reseeds in each worker itself.
    """

    def __init__(self, x, y, noise=0.1, seed=0, own_generator=True):
        self.x, self.y = x, y
        self.noise = noise
        self.rng = np.random.default_rng(seed) if own_generator else None

    def __len__(self):
        return len(self.x)

    def __getitem__(self, index):
        shape = tuple(self.x[index].shape)
        if self.rng is not None:
            jitter = self.rng.normal(0.0, self.noise, size=shape)
        else:
            jitter = np.random.normal(0.0, self.noise, size=shape)
        return self.x[index] + torch.from_numpy(jitter).to(self.x.dtype), self.y[index]


def reseed_worker(worker_id):
    """A ``worker_init_fn``: give each worker's copy of the data set its own NumPy generator.

    ``get_worker_info().seed`` is this worker's torch seed, derived from the loader's
    generator, so it differs between workers and epochs yet repeats from run to run.
    """
    info = torch.utils.data.get_worker_info()
    if getattr(info.dataset, "rng", None) is not None:
        info.dataset.rng = np.random.default_rng(info.seed)


class ThreadsSeen(Dataset):
    """Each item is the number of torch threads of the process that loads it.

    Chapter 04 asks its DataLoader workers: PyTorch sets every worker to one thread. A class in
    a module, not in the notebook, so that workers started by spawn or forkserver can import it.
    """

    def __init__(self, n: int = 2):
        self.n = n

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, index: int) -> int:
        return torch.get_num_threads()
