import torch as th


@th.compile
def energy(x):
    return (x * x).sum(dim=-1)


def total_energy(n):
    return energy(th.arange(n * 4, dtype=th.float32).reshape(n, 4)) * 2


for n in (2, 3, 5):
    print(total_energy(n))
