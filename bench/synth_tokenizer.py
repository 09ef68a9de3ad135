#!/usr/bin/env python3
"""synth_tokenizer.py OUT_DIR [VOCAB] [SEED]: a tokenizer.json shaped like Llama 3's (byte-level BPE, its split
pattern, ignore_merges, 256 special tokens from <|begin_of_text|>, a BOS template) with VOCAB ids in all
(default 128256), its merges drawn at random: for device runs of a package with random weights, where kiln
serve needs a tokenizer to turn ids into text and no real one can be carried (the device reaches no hub).
The text it decodes is gibberish; what is timed is the server's path (detokenize, stop checks, SSE)."""
import os
import random
import sys

from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, processors

LLAMA3 = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|"
          r"\s*[\r\n]+|\s+(?!\S)|\s+")

out = sys.argv[1]
vocab_size = int(sys.argv[2]) if len(sys.argv) > 2 else 128256
rng = random.Random(int(sys.argv[3]) if len(sys.argv) > 3 else 1)
n_special = 256 if vocab_size > 1024 else 2
alphabet = pre_tokenizers.ByteLevel.alphabet()
alphabet.sort()
letters = [c for c in alphabet if c.isalpha() and ord(c) < 128]
tokens, seen, merges = list(alphabet), set(alphabet), []
while len(tokens) < vocab_size - n_special:
    a = tokens[int(len(tokens) * rng.random() ** 3)]  # short, early tokens most often: words grow
    b = rng.choice(letters) if rng.random() < 0.7 else rng.choice(tokens[:len(tokens) // 4 + 1])
    if len(a) + len(b) > 16 or a + b in seen:
        continue
    seen.add(a + b)
    tokens.append(a + b)
    merges.append((a, b))
tok = Tokenizer(models.BPE(vocab={t: i for i, t in enumerate(tokens)}, merges=merges, ignore_merges=True))
tok.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Split(Regex(LLAMA3), behavior="isolated"),
                                             pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
tok.decoder = decoders.ByteLevel()
special = ["<|begin_of_text|>", "<|end_of_text|>"] + [f"<|reserved_special_token_{i}|>" for i in range(n_special - 2)]
tok.add_special_tokens(special)
tok.post_processor = processors.TemplateProcessing(
    single="<|begin_of_text|> $A", special_tokens=[("<|begin_of_text|>", tok.token_to_id("<|begin_of_text|>"))])
os.makedirs(out, exist_ok=True)
tok.save(os.path.join(out, "tokenizer.json"))
print(f"{out}/tokenizer.json: {tok.get_vocab_size()} tokens, {len(merges)} merges")
