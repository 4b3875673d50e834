"""Run every example program in one process, as `recompile-fix profile` sees them together.

    recompile-fix profile --backend eager -- python examples/run_all.py
"""

import time

import deep_blocks
import float_constants
import growing_shape
import large_tail
import limit_hit
import lr_scheduler
import ragged_batch
import train_eval

PROGRAMS = (growing_shape, ragged_batch, float_constants, lr_scheduler, limit_hit, deep_blocks,
            large_tail, train_eval)


def main():
    results = {}
    for program in PROGRAMS:
        started = time.perf_counter()
        tensors = program.main()
        seconds = time.perf_counter() - started
        shapes = ", ".join(f"{name} {tuple(t.shape)}" for name, t in tensors.items())
        print(f"{program.__name__:16s} {seconds:6.2f} s  {shapes}")
        results[program.__name__] = tensors
    return results


if __name__ == "__main__":
    main()
