#!/usr/bin/env python3
"""Writes a small random LlamaForCausalLM checkpoint with transformers
(hidden 128, intermediate 384, 2 layers, untied lm_head): dimensions that
are multiples of every group size, which compressed-tensors' decompression
requires (the stories260K fixture's 64 / 172 are not). Usage:
    make_tiny_llama.py OUT f16|bf16 TOKENIZER_DIR
"""
import shutil
import sys

import torch
from transformers import LlamaConfig, LlamaForCausalLM

out, dtype, tok = sys.argv[1], {"f16": torch.float16, "bf16": torch.bfloat16}[sys.argv[2]], sys.argv[3]
torch.manual_seed(0)
cfg = LlamaConfig(hidden_size=128, intermediate_size=384, num_hidden_layers=2, num_attention_heads=4,
                  num_key_value_heads=2, vocab_size=512, max_position_embeddings=512, tie_word_embeddings=False)
LlamaForCausalLM(cfg).to(dtype).save_pretrained(out)
for f in ["tokenizer.json", "tokenizer_config.json"]:
    shutil.copy(f"{tok}/{f}", out)
