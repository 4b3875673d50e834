"""model.generate() on a tiny Qwen2 whose forward is compiled (the recipe in the
transformers docs: model.forward = torch.compile(model.forward))."""

import torch
from transformers import GenerationConfig, Qwen2Config, Qwen2ForCausalLM

torch.manual_seed(0)
config = Qwen2Config(
    vocab_size=128,
    hidden_size=32,
    intermediate_size=64,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    max_position_embeddings=128,
    pad_token_id=0,
    eos_token_id=None,
)
model = Qwen2ForCausalLM(config).eval()
model.generation_config = GenerationConfig(pad_token_id=0, eos_token_id=None, do_sample=False)
model.forward = torch.compile(model.forward, backend="eager", dynamic=True)

results = {}
for prompt_len in (6, 10):
    input_ids = torch.randint(1, config.vocab_size, (2, prompt_len))
    attention_mask = torch.ones_like(input_ids)
    out = model.generate(input_ids=input_ids, attention_mask=attention_mask, max_new_tokens=8)
    results[f"prompt{prompt_len}"] = out
    print(prompt_len, out[:, prompt_len:].tolist())
