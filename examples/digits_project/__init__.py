"""The digits classifier of chapter 07, laid out as a small project instead of notebook cells.

    data.py      where the examples come from, and how they are batched
    model.py     the network, built from the config
    train.py     the training run: config in, log + checkpoints out (the entry point)
    evaluate.py  load saved weights and measure them on the validation set
    config.json  every hyper-parameter, so a new run changes a file, not the code

Run from the repository root:

    python -m examples.digits_project.train --config examples/digits_project/config.json --out runs/first
    python -m examples.digits_project.evaluate --config examples/digits_project/config.json --weights runs/first/model.pt
"""
