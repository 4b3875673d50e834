"""generate() with a static cache, max_new_tokens 4, 8, 16: the cache is sized per call, and
the compiled forward recompiles for its length (4 compiles; with `max_cache_len=32`, 2 and
the same tokens). Its Profile: recorded on torch 2.13 / transformers 5.24, eager backend."""
import torch
from transformers import LlamaConfig, LlamaForCausalLM

torch.manual_seed(0)
config = LlamaConfig(vocab_size=128, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                     num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256)
model = LlamaForCausalLM(config).eval()
model.forward = torch.compile(model.forward, backend="eager")

prompt = torch.randint(0, 128, (1, 6))
outs = []
for max_new_tokens in (4, 8, 16):
    out = model.generate(prompt, max_new_tokens=max_new_tokens, do_sample=False,
                         cache_implementation="static")
    outs.append(out)
print([tuple(o.shape) for o in outs])
