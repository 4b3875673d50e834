import torch


@torch.compile
def gram(m):
    return m @ m.T + m.sum()


for rows, cols in [(2, 3), (4, 5), (6, 7)]:
    m = torch.ones(rows, cols)
    torch._dynamo.mark_dynamic(m, [0, 1])
    print(gram(m).shape)
