"""Sampling parameters swept at the call (nanoGPT's sampling step): temperature only meets
tensor arithmetic (through `max` with a constant) and is wrapped; top_k becomes a size, so it
stays an int, and its None calls stay None."""

import torch
import torch.nn.functional as F


@torch.compile
def sample(logits, temperature, top_k):
    logits = logits[:, -1, :] / max(temperature, 1e-5)
    if top_k is not None:
        v, _ = torch.topk(logits, min(top_k, logits.size(-1)))
        logits[logits < v[:, [-1]]] = -float("Inf")
    probs = F.softmax(logits, dim=-1)
    return probs, torch.multinomial(probs, num_samples=1)


torch.manual_seed(0)
logits = torch.randn(2, 3, 64)
for temperature in (0.8, 1.0, 0.0, 1.3):
    for top_k in (None, 5, 10, 100):
        torch.manual_seed(1)
        sample(logits.clone(), temperature, top_k)
