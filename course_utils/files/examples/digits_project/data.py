"""The data: the digits shipped with the course, split by a seed, batched by loaders."""

from __future__ import annotations

from torch.utils.data import DataLoader

from course_utils.data import DigitsDataset, load_digits, train_val_split


def make_loaders(config: dict) -> tuple[DataLoader, DataLoader]:
    """Training loader (shuffled) and validation loader (in order).

    The split has its own seeded generator: the same examples are held out in every run. The
    shuffling draws from torch's global generator, which the run seeds and a checkpoint saves,
    so a resumed run sees the batches the uninterrupted one would have seen.
    """
    images, labels = load_digits()
    x_train, y_train, x_val, y_val = train_val_split(
        images, labels, val_fraction=config["val_fraction"], seed=config["seed"]
    )
    train = DataLoader(DigitsDataset(x_train, y_train), batch_size=config["batch_size"], shuffle=True)
    val = DataLoader(DigitsDataset(x_val, y_val), batch_size=512)
    return train, val
