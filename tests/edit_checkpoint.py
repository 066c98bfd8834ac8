#!/usr/bin/env python3
"""Writes a copy of a safetensors checkpoint with edits, to make hostile inputs for the tests.

  tests/edit_checkpoint.py IN OUT meta KEY RAW_JSON      metadata KEY set to RAW_JSON, written
                                                         verbatim (so it may be invalid JSON,
                                                         e.g. '"\\uZZZZ"')
  tests/edit_checkpoint.py IN OUT train_arg KEY RAW_JSON  one field of the train_args JSON
  tests/edit_checkpoint.py IN OUT tensor NAME VALUE       first element of tensor NAME (F32)
Standard library only.
"""
import json
import struct
import sys


def main():
    src, dst, what, key, value = sys.argv[1:6]
    with open(src, "rb") as f:
        blob = f.read()
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + n])
    data = bytearray(blob[8 + n:])
    meta = header.pop("__metadata__")
    raw = {k: json.dumps(v) for k, v in meta.items()}
    if what == "meta":
        raw[key] = value
    elif what == "train_arg":
        args = json.loads(meta["train_args"])
        text = json.dumps(args, separators=(",", ":"))
        fields = {k: json.dumps(v) for k, v in args.items()}
        fields[key] = value
        text = "{" + ",".join(f"{json.dumps(k)}:{v}" for k, v in fields.items()) + "}"
        raw["train_args"] = json.dumps(text)
    elif what == "tensor":
        begin = header[key]["data_offsets"][0]
        data[begin:begin + 4] = struct.pack("<f", float(value))
    else:
        sys.exit(f"unknown edit {what}")
    text = "{\"__metadata__\":{" + ",".join(f"{json.dumps(k)}:{v}" for k, v in raw.items()) + "}"
    for name, t in header.items():
        text += "," + json.dumps(name) + ":" + json.dumps(t, separators=(",", ":"))
    text += "}"
    text += " " * (-len(text) % 8)
    with open(dst, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text.encode() + bytes(data))


if __name__ == "__main__":
    main()
