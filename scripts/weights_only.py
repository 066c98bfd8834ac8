#!/usr/bin/env python3
"""A training checkpoint's weights alone: what infer and train --init-from read, a third of the file.

  scripts/weights_only.py CKPT OUT    CKPT: a checkpoint file, or a run's folder (its newest one)

A training checkpoint (model/checkpoint.h) holds the parameters, the AdamW moments
("optim.m.<name>", "optim.v.<name>": twice the parameters again) and the training state in its
metadata. OUT keeps the parameters, byte for byte, and the metadata a checkpoint written without
training state has (format, config, forward, tokenizer): what comes back from a lent GPU machine
in one call (13.9M parameters: 56 MB, against 167 MB) so that a later hold can score the model or
train its 1M stage from it (--init-from) without training it again. It cannot be resumed.
Python's standard library only.
"""
import glob
import json
import os
import struct
import sys

KEEP_META = ("format", "config", "forward", "tokenizer")


def newest(path):
    """path itself, or a run's folder's newest checkpoint (scripts/logn_slopes.py reads it so too)."""
    if os.path.isdir(path):
        found = sorted(glob.glob(os.path.join(path, "ckpt_*.safetensors")))
        if not found:
            sys.exit(f"error: {path} holds no ckpt_*.safetensors: name a checkpoint file or a run's folder")
        return found[-1]
    return path


def parameters_alone(header, data):
    """The parameters (no "optim." tensor) in the order they lie in the file, packed again from 0."""
    keep = sorted((name for name in header if not name.startswith("optim.")), key=lambda k: header[k]["data_offsets"][0])
    new_header, chunks, at = {}, [], 0
    for name in keep:
        begin, end = header[name]["data_offsets"]
        if not 0 <= begin <= end <= len(data):
            raise ValueError(f"{name} lies at bytes {begin}..{end} of {len(data)}")
        chunks.append(data[begin:end])
        new_header[name] = {"dtype": header[name]["dtype"], "shape": header[name]["shape"], "data_offsets": [at, at + end - begin]}
        at += end - begin
    return keep, new_header, chunks, at


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: scripts/weights_only.py CKPT OUT")
    src, out = newest(sys.argv[1]), sys.argv[2]
    try:
        with open(src, "rb") as f:
            (n,) = struct.unpack("<Q", f.read(8))
            if n > os.path.getsize(src) - 8:  # a header longer than the file: not one train wrote
                raise ValueError(f"a header of {n} bytes in a file of {os.path.getsize(src)}")
            header = json.loads(f.read(n))
            data = f.read()
        meta = header.pop("__metadata__")
        missing = [k for k in KEEP_META if k not in meta]
        if meta.get("format") != "longnet-gpt/1" or missing:
            raise ValueError(f"format {meta.get('format')!r}, missing {missing}")
    except (OSError, ValueError, KeyError, TypeError, AttributeError, struct.error) as e:
        sys.exit(f"error: {src} is not a checkpoint train wrote ({e}): name one")
    try:
        keep, new_header, chunks, at = parameters_alone(header, data)
        new_header["__metadata__"] = {k: meta[k] for k in KEEP_META}
    except (KeyError, TypeError, ValueError) as e:
        sys.exit(f"error: {src} has a corrupt tensor table ({e!r}): name a checkpoint train wrote")
    if not keep:
        sys.exit(f"error: {src} holds no parameters: name a checkpoint train wrote")
    text = json.dumps(new_header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)  # the data 8-byte aligned, as train writes it
    tmp = out + ".part"
    with open(tmp, "wb") as f:  # written whole, then renamed: an interrupted run leaves OUT as it was
        f.write(struct.pack("<Q", len(text)) + text)
        for c in chunks:
            f.write(c)
    os.replace(tmp, out)
    print(f"{out}: {len(keep)} tensors, {at / 1e6:.1f} MB of parameters (from {src}, {os.path.getsize(src) / 1e6:.1f} MB)")


if __name__ == "__main__":
    main()
