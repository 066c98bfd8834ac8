#!/usr/bin/env python3
"""Writes a copy of a safetensors checkpoint with edits, to make hostile inputs for the tests.

  tests/edit_checkpoint.py IN OUT meta KEY RAW_JSON      metadata KEY set to RAW_JSON, written
                                                         verbatim (so it may be invalid JSON,
                                                         e.g. '"\\uZZZZ"')
  tests/edit_checkpoint.py IN OUT drop_meta KEY          metadata KEY left out (e.g. "forward": a
                                                         checkpoint as written before that field)
  tests/edit_checkpoint.py IN OUT train_arg KEY RAW_JSON  one field of the train_args JSON
  tests/edit_checkpoint.py IN OUT tensor NAME VALUE [I]   element I (0) of tensor NAME (F32)
  tests/edit_checkpoint.py IN OUT offsets NAME OTHER      NAME's data_offsets set to OTHER's (the
                                                         data unchanged: NAME reads OTHER's bytes)
  tests/edit_checkpoint.py IN OUT add_tensor NAME         one more F32 tensor of shape [1], 0.5,
                                                         its bytes after the last tensor's
  tests/edit_checkpoint.py IN OUT drop_tensor NAME        tensor NAME and its bytes removed, the
                                                         tensors after it moved down
Standard library only.
"""
import json
import struct
import sys


def main():
    src, dst, what, key = sys.argv[1:5]
    value = sys.argv[5] if len(sys.argv) > 5 else None
    with open(src, "rb") as f:
        blob = f.read()
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + n])
    data = bytearray(blob[8 + n:])
    meta = header.pop("__metadata__")
    raw = {k: json.dumps(v) for k, v in meta.items()}
    if what == "meta":
        raw[key] = value
    elif what == "drop_meta":
        del raw[key]
    elif what == "train_arg":
        args = json.loads(meta["train_args"])
        text = json.dumps(args, separators=(",", ":"))
        fields = {k: json.dumps(v) for k, v in args.items()}
        fields[key] = value
        text = "{" + ",".join(f"{json.dumps(k)}:{v}" for k, v in fields.items()) + "}"
        raw["train_args"] = json.dumps(text)
    elif what == "tensor":
        begin = header[key]["data_offsets"][0] + 4 * (int(sys.argv[6]) if len(sys.argv) > 6 else 0)
        data[begin:begin + 4] = struct.pack("<f", float(value))
    elif what == "offsets":
        header[key]["data_offsets"] = list(header[value]["data_offsets"])
    elif what in ("add_tensor", "drop_tensor"):
        if what == "add_tensor":
            header[key] = {"dtype": "F32", "shape": [1], "data_offsets": [len(data), len(data) + 4]}
            data += struct.pack("<f", 0.5)
        else:
            del header[key]
        packed = bytearray()  # the tensors back to back again, in their order in the file
        for name in sorted(header, key=lambda n: header[n]["data_offsets"][0]):
            b, e = header[name]["data_offsets"]
            header[name]["data_offsets"] = [len(packed), len(packed) + e - b]
            packed += data[b:e]
        data = packed
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
