#!/usr/bin/env python3
"""gguf_prune.py IN.gguf OUT.gguf LAYERS: the first LAYERS blocks of a llama-family GGUF model (every tensor
of blk.N for N >= LAYERS dropped, <arch>.block_count set to LAYERS; metadata, tokenizer and the other
tensors copied as they are): a same-vocabulary draft model cut from the target, for speculative decoding
on real text (bench/spec_host.sh). Needs the `gguf` package (PyPI, llama.cpp's reader and writer)."""
import re
import sys

import gguf


def main():
    src, dst, layers = sys.argv[1], sys.argv[2], int(sys.argv[3])
    r = gguf.GGUFReader(src)
    arch = r.fields["general.architecture"]
    arch = bytes(arch.parts[arch.data[0]]).decode()
    w = gguf.GGUFWriter(dst, arch)
    for name, f in r.fields.items():
        if name.startswith("GGUF.") or name == "general.architecture":
            continue
        t = f.types[0]
        if name == f"{arch}.block_count":
            w.add_uint32(name, layers)
        elif t == gguf.GGUFValueType.ARRAY:
            sub = f.types[1]
            vals = [bytes(f.parts[i]).decode("utf-8", "surrogateescape") if sub == gguf.GGUFValueType.STRING
                    else f.parts[i].tolist()[0] for i in f.data]
            w.add_array(name, vals)
        elif t == gguf.GGUFValueType.STRING:
            w.add_string(name, bytes(f.parts[f.data[0]]).decode("utf-8", "surrogateescape"))
        else:
            w.add_key_value(name, f.parts[f.data[0]].tolist()[0], t)
    for t in r.tensors:
        m = re.match(r"blk\.(\d+)\.", t.name)
        if m and int(m.group(1)) >= layers:
            continue
        w.add_tensor(t.name, t.data, raw_dtype=t.tensor_type)  # quantized: bytes [rows, row bytes]
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


if __name__ == "__main__":
    main()
