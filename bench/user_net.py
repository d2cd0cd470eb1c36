"""A network of one's own, outside hetsim's zoo, for bench/bench_ddp_accuracy.sh: what a user's
`module.path:factory` model is to tools/hetsim_profile.py and bench/ddp_train.py (run them from
bench/, or with bench/ on PYTHONPATH). An MLP for 1x28x28 Fashion-MNIST images, 10 classes."""
import torch.nn as nn


def build():
    return nn.Sequential(nn.Flatten(), nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 128), nn.ReLU(),
                         nn.Linear(128, 10))
