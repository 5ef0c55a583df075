#!/usr/bin/env python3
"""Writes a FIM *wiring* test model: a copy of the SmolLM2 test GGUF whose metadata declares
fill-in-the-middle tokens.

SmolLM2 has no FIM tokens. Real users bring a FIM coder model (Qwen2.5-Coder and others), so the
FIM prompt path must be exercised with a real GGUF through real llama.cpp. This script renames
three unused special tokens of the vocabulary to Qwen2.5-Coder's markers (<|fim_prefix|>,
<|fim_suffix|>, <|fim_middle|>) and sets tokenizer.ggml.fim_{pre,suf,mid}_token_id to them.
The weights are unchanged, so the model was never trained on these markers: this checks the
wiring (detection, token layout, KV reuse, stop tokens), not suggestion quality.

usage: make-fim-wiring-model.py INPUT.gguf OUTPUT.gguf
"""
import sys

import gguf

# Unused special tokens of SmolLM2's vocabulary, repurposed as FIM markers.
RENAMES = {3: "<|fim_prefix|>", 4: "<|fim_suffix|>", 5: "<|fim_middle|>"}
IDS = {
    "tokenizer.ggml.fim_pre_token_id": 3,
    "tokenizer.ggml.fim_suf_token_id": 4,
    "tokenizer.ggml.fim_mid_token_id": 5,
}


def main(src: str, dst: str) -> None:
    reader = gguf.GGUFReader(src)
    arch = reader.fields[gguf.Keys.General.ARCHITECTURE].contents()
    writer = gguf.GGUFWriter(dst, arch=arch, endianess=reader.endianess)
    for field in reader.fields.values():
        if field.name == gguf.Keys.General.ARCHITECTURE or field.name.startswith("GGUF."):
            continue
        value_type = field.types[0]
        sub_type = field.types[-1] if value_type == gguf.GGUFValueType.ARRAY else None
        value = field.contents()
        if field.name == gguf.Keys.Tokenizer.LIST:
            for index, text in RENAMES.items():
                value[index] = text
        if field.name == gguf.Keys.General.NAME:
            value = f"{value} (FIM wiring test, not a FIM-trained model)"
        writer.add_key_value(field.name, value, value_type, sub_type=sub_type)
    for key, token in IDS.items():
        writer.add_key_value(key, token, gguf.GGUFValueType.UINT32)
    for tensor in reader.tensors:
        writer.add_tensor_info(tensor.name, tensor.data.shape, tensor.data.dtype, tensor.data.nbytes, tensor.tensor_type)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_ti_data_to_file()
    for tensor in reader.tensors:
        writer.write_tensor_data(tensor.data, tensor_endianess=reader.endianess)
    writer.close()


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2])
