#!/usr/bin/env python3
"""The machine code of every kernel in a cubin, as one hash per kernel.

    scripts/cubin_text_hashes.py FILE.cubin            prints "hash size name" per .text section
    scripts/cubin_text_hashes.py OLD.cubin NEW.cubin   compares them: exit 0 when every kernel's
                                                       code is byte for byte the same

For refactors that move code between headers (`nvcc -cubin` without -lineinfo, so that line
tables do not count): the same bytes in every kernel's .text section means the same SASS, so
behaviour and speed cannot have changed. Reads the ELF section table itself (no cuobjdump).
"""
import hashlib
import struct
import sys


def text_sections(path):
    data = open(path, "rb").read()
    if data[:4] != b"\x7fELF" or data[4] != 2:
        sys.exit(f"error: {path} is not a 64-bit ELF file (a cubin from nvcc -cubin)")
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    headers = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize) for i in range(shnum)]
    strtab = headers[shstrndx]
    names = data[strtab[4]:strtab[4] + strtab[5]]
    out = {}
    for h in headers:
        name = names[h[0]:names.index(b"\0", h[0])].decode()
        if name.startswith(".text."):
            body = data[h[4]:h[4] + h[5]]
            out[name[len(".text."):]] = (hashlib.sha256(body).hexdigest()[:16], len(body))
    return out


def main():
    if len(sys.argv) == 2:
        for name, (digest, size) in sorted(text_sections(sys.argv[1]).items()):
            print(digest, size, name)
        return 0
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    old, new = text_sections(sys.argv[1]), text_sections(sys.argv[2])
    only_old, only_new = sorted(set(old) - set(new)), sorted(set(new) - set(old))
    changed = sorted(k for k in set(old) & set(new) if old[k] != new[k])
    for k in only_old:
        print("only in", sys.argv[1], k)
    for k in only_new:
        print("only in", sys.argv[2], k)
    for k in changed:
        print("changed", k, old[k], new[k])
    same = len(set(old) & set(new)) - len(changed)
    print(f"{same} kernels the same, {len(changed)} changed, {len(only_old)} + {len(only_new)} in one file only")
    return 0 if not (changed or only_old or only_new) else 1


if __name__ == "__main__":
    sys.exit(main())
