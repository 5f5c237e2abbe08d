#!/usr/bin/env python3
"""The chapter's ResMLPClassifier in PyTorch: the reference cltensor is checked
and measured against.

  init  --out FILE [--hiddens H --blocks K --seed S]   PyTorch-initialised safetensors
  train --data DIR --load FILE --steps N --out FILE [--batch-size B --lr LR]
        SGD without shuffling, from a checkpoint; writes the parameters after N steps
  bench --data DIR [--epochs E --batch-size B --threads T --hiddens H --limit N --lr LR]
        images/s of training with the data already in memory (the first N
        training images only with --limit)
  bench-mlp --x X.npy --y Y.npy --hiddens H1,H2,... [--epochs E --batch-size B --threads T --lr LR]
        examples/s of a plain MLP (Linear and ReLU per hidden width) on a
        user's table as `clt train --data X.npy --labels Y.npy` trains it:
        cross-entropy for int32 class ids in Y, the mean squared error for
        float32 targets
  diff  A B        largest absolute difference between two safetensors files

Exits 77 (skip) when PyTorch is not installed. Reads IDX files (gzip or raw)
and reads/writes safetensors with the standard library only; bench-mlp
reads .npy files with NumPy."""
import argparse
import gzip
import json
import struct
import sys
import time

try:
    import torch
    from torch import nn
except ImportError:
    print("PyTorch is not installed: skipping", file=sys.stderr)
    sys.exit(77)


class ResidualBlock(nn.Module):
    def __init__(self, h):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(h, h), nn.ReLU(), nn.Linear(h, h), nn.ReLU())

    def forward(self, x):
        return x + self.body(x)


class ResMLPClassifier(nn.Module):
    def __init__(self, num_hiddens=256, num_blocks=2):
        super().__init__()
        self.net = nn.Sequential(nn.Flatten(), nn.Linear(784, num_hiddens), nn.ReLU(),
                                 *[ResidualBlock(num_hiddens) for _ in range(num_blocks)],
                                 nn.Linear(num_hiddens, 10))

    def forward(self, x):
        return self.net(x)


def save_safetensors(path, tensors):
    header, blobs, offset = {}, [], 0
    for name, t in tensors.items():
        data = t.detach().contiguous().to(torch.float32).numpy().tobytes()
        header[name] = {"dtype": "F32", "shape": list(t.shape), "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def load_safetensors(path):
    with open(path, "rb") as f:
        blob = f.read()
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + n])
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        if info["dtype"] != "F32":
            raise SystemExit(f"{path}: {name} has dtype {info['dtype']}, expected F32")
        b, e = info["data_offsets"]
        buf = bytearray(blob[8 + n + b:8 + n + e])
        out[name] = torch.frombuffer(buf, dtype=torch.float32).reshape(info["shape"]).clone()
    return out


def read_idx(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        data = f.read()
    magic, = struct.unpack(">I", data[:4])
    ndim = magic & 0xFF
    dims = struct.unpack(">" + "I" * ndim, data[4:4 + 4 * ndim])
    return torch.frombuffer(bytearray(data[4 + 4 * ndim:]), dtype=torch.uint8).reshape(dims)


def find(data_dir, stem):
    import os
    for name in (stem, stem + ".gz"):
        p = os.path.join(data_dir, name)
        if os.path.exists(p):
            return p
    raise SystemExit(f"{data_dir}: no {stem}[.gz]")


def load_split(data_dir, train=True):
    prefix = "train" if train else "t10k"
    x = read_idx(find(data_dir, f"{prefix}-images-idx3-ubyte")).to(torch.float32) / 255.0
    y = read_idx(find(data_dir, f"{prefix}-labels-idx1-ubyte")).to(torch.int64)
    return x.reshape(-1, 784), y


def cmd_init(a):
    torch.manual_seed(a.seed)
    save_safetensors(a.out, ResMLPClassifier(a.hiddens, a.blocks).state_dict())


def cmd_train(a):
    state = load_safetensors(a.load)
    blocks = len({k.split(".")[1] for k in state if ".body." in k})
    hiddens = state["net.1.weight"].shape[0]
    model = ResMLPClassifier(hiddens, blocks)
    model.load_state_dict(state)
    x, y = load_split(a.data)
    opt = torch.optim.SGD(model.parameters(), lr=a.lr)
    step, start = 0, 0
    while step < a.steps:
        if start >= len(x):
            start = 0
        xb, yb = x[start:start + a.batch_size], y[start:start + a.batch_size]
        start += a.batch_size
        loss = nn.functional.cross_entropy(model(xb), yb)
        opt.zero_grad()
        loss.backward()
        opt.step()
        step += 1
    save_safetensors(a.out, model.state_dict())


def train_epochs(model, loss_fn, x, y, a):
    """SGD over shuffled batches of the in-memory (x, y): examples/s as JSON."""
    opt = torch.optim.SGD(model.parameters(), lr=a.lr)
    seen, t0 = 0, time.perf_counter()
    for _ in range(a.epochs):
        perm = torch.randperm(len(x))
        for i in range(0, len(x), a.batch_size):
            idx = perm[i:i + a.batch_size]
            loss = loss_fn(model(x[idx]), y[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
            seen += len(idx)
    dt = time.perf_counter() - t0
    print(json.dumps({"images_per_second": seen / dt, "seconds": dt, "threads": a.threads,
                      "torch": torch.__version__}))


def cmd_bench(a):
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    x, y = load_split(a.data)
    if a.limit > 0:
        x, y = x[:a.limit], y[:a.limit]
    train_epochs(ResMLPClassifier(a.hiddens, a.blocks), nn.functional.cross_entropy, x, y, a)


def cmd_bench_mlp(a):
    import numpy as np
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    y = np.load(a.y)
    x = torch.from_numpy(np.load(a.x).astype(np.float32).reshape(len(y), -1))
    regress = y.dtype.kind == "f"
    y = torch.from_numpy(y.astype(np.float32 if regress else np.int64))
    outputs = 1 if regress else int(y.max()) + 1
    layers, width = [], x.shape[1]
    for h in (int(v) for v in a.hiddens.split(",")):
        layers += [nn.Linear(width, h), nn.ReLU()]
        width = h
    model = nn.Sequential(*layers, nn.Linear(width, outputs))
    if regress:
        y = y.reshape(-1, 1)
    train_epochs(model, nn.functional.mse_loss if regress else nn.functional.cross_entropy, x, y, a)


def cmd_diff(a):
    ta, tb = load_safetensors(a.a), load_safetensors(a.b)
    if ta.keys() != tb.keys():
        raise SystemExit(f"names differ: {sorted(ta.keys() ^ tb.keys())}")
    worst = max(float((ta[k] - tb[k]).abs().max()) for k in ta)
    print(f"{worst:.3e}")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("init")
    s.add_argument("--out", required=True)
    s.add_argument("--hiddens", type=int, default=256)
    s.add_argument("--blocks", type=int, default=2)
    s.add_argument("--seed", type=int, default=0)
    s = sub.add_parser("train")
    s.add_argument("--data", required=True)
    s.add_argument("--load", required=True)
    s.add_argument("--out", required=True)
    s.add_argument("--steps", type=int, required=True)
    s.add_argument("--batch-size", type=int, default=256)
    s.add_argument("--lr", type=float, default=0.1)
    s = sub.add_parser("bench")
    s.add_argument("--data", required=True)
    s.add_argument("--epochs", type=int, default=1)
    s.add_argument("--batch-size", type=int, default=256)
    s.add_argument("--hiddens", type=int, default=256)
    s.add_argument("--blocks", type=int, default=2)
    s.add_argument("--threads", type=int, default=2)
    s.add_argument("--limit", type=int, default=0)
    s.add_argument("--lr", type=float, default=0.1)
    s = sub.add_parser("bench-mlp")
    s.add_argument("--x", required=True)
    s.add_argument("--y", required=True)
    s.add_argument("--hiddens", required=True)
    s.add_argument("--epochs", type=int, default=1)
    s.add_argument("--batch-size", type=int, default=32)
    s.add_argument("--threads", type=int, default=1)
    s.add_argument("--lr", type=float, default=0.1)
    s = sub.add_parser("diff")
    s.add_argument("a")
    s.add_argument("b")
    a = p.parse_args()
    {"init": cmd_init, "train": cmd_train, "bench": cmd_bench, "bench-mlp": cmd_bench_mlp,
     "diff": cmd_diff}[a.cmd](a)


if __name__ == "__main__":
    main()
