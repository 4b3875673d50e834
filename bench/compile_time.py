"""Cold compile time of a deep stack of identical blocks, before and after `recompile-fix apply`
(RF004: `@torch.compiler.nested_compile_region` on the block's forward), with regional
compilation (`for b in blocks: b.compile()`) and a model of one block for comparison, as
written and as rewritten (the second isolates what depth still costs after the fix from what the
region boundary costs: kernels it stops from fusing).

Two models:

* our own GPT-style transformer of 32 identical blocks (LayerNorm, QKV, causal SDPA, projection,
  MLP), written into a scratch directory as the "user's" source;
* a Llama from the transformers package, built from a tiny config with random weights (nothing is
  downloaded): its `modeling_llama.py` is copied into the scratch directory (relative imports made
  absolute) so the tool can edit the copy. Skipped, with the reason, when transformers is not
  installed (bench-only: `pip install "transformers==5.24.0"`, which works with torch 2.13).

The tool is really run: `recompile-fix profile --backend eager` on a program that compiles the
model, then `recompile-fix apply` on the model's file (`--unsafe-fixes` where the analysis cannot
see every call the block makes, as in transformers' attention dispatch; the findings are printed).

Each variant runs in a fresh process with a fresh inductor cache directory, caches disabled and
one compile thread (TORCHINDUCTOR_CACHE_DIR, TORCHINDUCTOR_FORCE_DISABLE_CACHES=1,
TORCHINDUCTOR_COMPILE_THREADS=1), default (inductor) backend. It measures the first call, which is
the compile (less one steady-state call, since the first call also runs the model once): CPU
seconds (RUSAGE_SELF + RUSAGE_CHILDREN, so gcc counts; the reliable number on a shared machine)
and wall seconds; then the steady-state forward time (median of timed calls after
warm-up), so the runtime cost of the fix is visible too. Variants run round-robin, `--runs` rounds,
so drift in machine load hits them alike; the tables show medians. Outputs of every variant are
compared with `torch.testing.assert_close` against the unmodified model's, and a training step
(forward and backward, inductor) runs through the rewritten 32-block model with its gradients
compared against eager, as torch compiles it and with inductor's buffer reuse off (torch 2.13
corrupts some gradients of a reused region otherwise: the bench prints how many).

    python bench/compile_time.py [--runs 3] [--blocks 32] [--llama-layers 8] [--no-transformers]

Steady-state forward times run on one intra-op thread (`torch.set_num_threads(1)`).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
TRANSFORMERS_PIN = "transformers==5.24.0"
BATCH, SEQ, VOCAB = 2, 64, 512
STEADY_CALLS = 20

MODEL_SOURCE = '''"""A GPT-style stack of identical blocks: the program recompile-fix profiles and rewrites."""

import torch
import torch.nn.functional as F
from torch import nn

NUM_BLOCKS = {blocks}
WIDTH = 256
HEADS = 4
VOCAB = {vocab}


class Block(nn.Module):
    def __init__(self, width, heads):
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(width)
        self.qkv = nn.Linear(width, 3 * width)
        self.proj = nn.Linear(width, width)
        self.ln2 = nn.LayerNorm(width)
        self.up = nn.Linear(width, 4 * width)
        self.down = nn.Linear(4 * width, width)

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(C, dim=2)
        q = q.view(B, T, self.heads, C // self.heads).transpose(1, 2)
        k = k.view(B, T, self.heads, C // self.heads).transpose(1, 2)
        v = v.view(B, T, self.heads, C // self.heads).transpose(1, 2)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        x = x + self.proj(y)
        return x + self.down(F.gelu(self.up(self.ln2(x))))


class Transformer(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, WIDTH)
        self.blocks = nn.ModuleList(Block(WIDTH, HEADS) for _ in range(NUM_BLOCKS))
        self.ln_f = nn.LayerNorm(WIDTH)
        self.head = nn.Linear(WIDTH, VOCAB, bias=False)

    def forward(self, idx):
        x = self.embed(idx)
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln_f(x))
'''

# The programs `recompile-fix profile` runs: they compile the model and call it once.
PROFILE_OURS = """import torch
from bench_model import Transformer

model = Transformer().eval()
compiled = torch.compile(model)
with torch.no_grad():
    compiled(torch.randint(0, {vocab}, ({batch}, {seq})))
"""
PROFILE_LLAMA = """import torch
from transformers import LlamaConfig
from modeling_llama import LlamaForCausalLM

config = LlamaConfig(**{config!r})
model = LlamaForCausalLM(config).eval()
compiled = torch.compile(model)
with torch.no_grad():
    compiled(input_ids=torch.randint(0, {vocab}, ({batch}, {seq})), use_cache=False)
"""


def llama_config(layers: int) -> dict:
    return dict(
        vocab_size=VOCAB,
        hidden_size=128,
        intermediate_size=256,
        num_hidden_layers=layers,
        num_attention_heads=4,
        num_key_value_heads=4,
        max_position_embeddings=2 * SEQ,
        attn_implementation="sdpa",
    )


# -- the child: one variant, one fresh process ---------------------------------------------------
def child(kind: str, variant: str, model_dir: str, out: str, layers: int) -> None:
    import resource

    import torch

    sys.path.insert(0, model_dir)
    torch.set_num_threads(1)  # one intra-op thread: steadier steady-state times on a shared machine

    def cpu_seconds() -> float:
        own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
        return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime

    torch.manual_seed(0)
    if kind == "ours":
        import bench_model

        if variant in ("one_block", "one_block_after"):
            bench_model.NUM_BLOCKS = 1
        model = bench_model.Transformer()
        blocks = model.blocks
        inputs = {"idx": torch.randint(0, VOCAB, (BATCH, SEQ), generator=torch.Generator().manual_seed(1))}
    else:
        from modeling_llama import LlamaForCausalLM
        from transformers import LlamaConfig

        model = LlamaForCausalLM(LlamaConfig(**llama_config(1 if variant.startswith("one_block") else layers)))
        blocks = model.model.layers
        inputs = {
            "input_ids": torch.randint(0, VOCAB, (BATCH, SEQ), generator=torch.Generator().manual_seed(1)),
            "use_cache": False,
        }

    if variant == "train":
        train_check(torch, model, inputs, kind, out)
        return
    model.eval()
    if variant == "regional":
        for block in blocks:
            block.compile()
        run = model
    else:
        run = torch.compile(model)

    def call():
        result = run(**inputs)
        return result if isinstance(result, torch.Tensor) else result.logits

    with torch.no_grad():
        cpu0, wall0 = cpu_seconds(), time.perf_counter()
        first = call()
        wall, cpu = time.perf_counter() - wall0, cpu_seconds() - cpu0
        for _ in range(3):
            call()
        walls, cpus = [], []
        for _ in range(STEADY_CALLS):
            cpu0, wall0 = cpu_seconds(), time.perf_counter()
            call()
            walls.append(time.perf_counter() - wall0)
            cpus.append(cpu_seconds() - cpu0)
    torch.save(first, out + ".pt")
    # The first call compiles and then runs the model once: count the compile only.
    steady_wall, steady_cpu = statistics.median(walls), statistics.median(cpus)
    Path(out).write_text(
        json.dumps({"cpu": cpu - steady_cpu, "wall": wall - steady_wall, "steady_ms": 1000 * steady_wall})
    )


def train_check(torch, model, inputs, kind: str, out: str) -> None:
    """Forward and backward through the compiled (inductor) rewritten model; gradients against eager.
    Twice: as torch 2.13 compiles it, and with inductor's buffer reuse off (see RF004's notes)."""
    import copy

    import torch._inductor.config as inductor_config

    reference = copy.deepcopy(model).train()

    def loss_of(m):
        result = m(**inputs)
        logits = result if isinstance(result, torch.Tensor) else result.logits
        return logits.float().pow(2).mean()

    expected = loss_of(reference)
    expected.backward()
    report = {}
    for label, reuse in (("default", True), ("no_buffer_reuse", False)):
        trained = copy.deepcopy(model).train()
        torch._dynamo.reset()
        with inductor_config.patch(allow_buffer_reuse=reuse):
            compiled = torch.compile(trained)
            cpu0 = time.process_time()
            loss = loss_of(compiled)
            loss.backward()
            seconds = time.process_time() - cpu0
        torch.testing.assert_close(loss, expected, rtol=1e-4, atol=1e-5)
        # Relative error of each gradient as a whole (float32 reassociation leaves element noise).
        errors = {
            name: ((got.grad - want.grad).norm() / want.grad.norm().clamp_min(1e-12)).item()
            for (name, got), want in zip(trained.named_parameters(), reference.parameters())
        }
        worst = max(errors, key=errors.get)
        report[label] = {
            "seconds": seconds,
            "worst": worst,
            "error": errors[worst],
            "over": sum(e > 1e-3 for e in errors.values()),
            "params": len(errors),
        }
    report["loss"] = expected.item()
    Path(out).write_text(json.dumps(report))


# -- the parent ----------------------------------------------------------------------------------
def cold_env(cache_dir: str) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        {
            "TORCHINDUCTOR_CACHE_DIR": cache_dir,
            "TORCHINDUCTOR_FORCE_DISABLE_CACHES": "1",
            "TORCHINDUCTOR_COMPILE_THREADS": "1",
            "PYTHONWARNINGS": "ignore",
        }
    )
    return env


def run_child(kind: str, variant: str, model_dir: Path, out: Path, layers: int) -> dict:
    with tempfile.TemporaryDirectory(prefix="compile-time-cache-") as cache:
        argv = [sys.executable, __file__, "--child", kind, variant, str(model_dir), str(out), str(layers)]
        done = subprocess.run(argv, env=cold_env(cache), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if done.returncode != 0:
        tail = "\n".join(done.stdout.splitlines()[-25:])
        raise RuntimeError(f"{kind}/{variant} failed ({done.returncode}):\n{tail}")
    return json.loads(out.read_text())


def tool(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    return subprocess.run(
        [sys.executable, "-m", "recompile_fix", *args],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def profile_and_apply(model_dir: Path, model_file: str, unsafe: bool) -> str:
    """`recompile-fix profile` the program, then `apply` the model file; return the diff."""
    profiled = tool("profile", "--backend", "eager", "--", sys.executable, "profile_me.py", cwd=model_dir)
    if profiled.returncode != 0:
        raise RuntimeError(f"profile failed:\n{profiled.stderr[-3000:]}")
    flags = ["--unsafe-fixes"] if unsafe else []
    diff = tool("apply", model_file, "--diff", *flags, cwd=model_dir).stdout
    applied = tool("apply", model_file, *flags, cwd=model_dir)
    print(textwrap.indent(applied.stdout.strip() + "\n" + applied.stderr.strip(), "    "))
    if applied.returncode != 0 or "nested_compile_region" not in diff:
        raise RuntimeError(f"apply did not add the decorator (exit {applied.returncode})")
    return diff


def copy_llama(dest: Path) -> None:
    """transformers' modeling_llama.py, with its relative imports made absolute."""
    import transformers.models.llama.modeling_llama as original

    package = original.__name__.rsplit(".", 1)[0].split(".")  # transformers.models.llama

    def absolute(match: re.Match) -> str:
        dots, rest = match.group(2), match.group(3)
        base = package[: len(package) - (len(dots) - 1)]
        return f"{match.group(1)}from {'.'.join(base + ([rest] if rest else []))} import"

    text = Path(original.__file__).read_text(encoding="utf-8")
    text = re.sub(r"^(\s*)from (\.+)([\w.]*) import", absolute, text, flags=re.M)
    (dest / "modeling_llama.py").write_text(text, encoding="utf-8")


def transformers_problem() -> str | None:
    try:
        import transformers  # noqa: F401
        from transformers import LlamaConfig  # noqa: F401
    except Exception as exc:  # not installed, or broken against this torch
        return f"transformers is not usable here ({type(exc).__name__}: {exc}); install {TRANSFORMERS_PIN}"
    return None


def compare_outputs(results_dir: Path, kind: str, variants: list[str]) -> list[str]:
    import torch

    lines = []
    base = torch.load(results_dir / f"{kind}-full-0.json.pt", weights_only=True)
    for variant in variants:
        if variant in ("full", "one_block", "one_block_after"):
            continue
        got = torch.load(results_dir / f"{kind}-{variant}-0.json.pt", weights_only=True)
        torch.testing.assert_close(got, base)
        lines.append(f"{variant} vs full: assert_close ok (max abs diff {(got - base).abs().max().item():.2e})")
    return lines


def report(name: str, results: dict[str, list[dict]], runs: int) -> dict[str, float]:
    print(f"\n{name}: cold compile (first call), {runs} fresh process(es) per variant, medians")
    print(f"  {'variant':<22} {'CPU s per run':<28} {'CPU s':>7} {'wall s':>7} {'x 1-block':>9} {'fwd ms':>8}")
    one = statistics.median(r["cpu"] for r in results["one_block"])
    medians = {}
    labels = {
        "full": "full (before apply)",
        "after": "after apply (RF004)",
        "regional": "regional (b.compile())",
        "one_block": "one block",
        "one_block_after": "one block, after apply",
    }
    for variant, rows in results.items():
        cpu = statistics.median(r["cpu"] for r in rows)
        wall = statistics.median(r["wall"] for r in rows)
        steady = statistics.median(r["steady_ms"] for r in rows)
        medians[variant] = cpu
        per_run = ", ".join(f"{r['cpu']:.1f}" for r in rows)
        print(f"  {labels[variant]:<22} {per_run:<28} {cpu:7.1f} {wall:7.1f} {cpu / one:9.2f} {steady:8.2f}")
    return medians


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3, help="fresh processes per variant")
    parser.add_argument("--blocks", type=int, default=32, help="blocks of our own transformer")
    parser.add_argument("--llama-layers", type=int, default=8, help="decoder layers of the tiny Llama")
    parser.add_argument("--no-transformers", action="store_true", help="skip the transformers model")
    parser.add_argument("--no-train", action="store_true", help="skip the training-step check")
    parser.add_argument("--child", nargs=5, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        kind, variant, model_dir, out, layers = args.child
        child(kind, variant, model_dir, out, int(layers))
        return

    started = time.perf_counter()
    scratch = Path(tempfile.mkdtemp(prefix="compile-time-"))
    try:
        print(
            f"machine: {os.cpu_count()} CPUs (shared: wall times are noisy, CPU seconds less so); "
            f"python {sys.version.split()[0]}"
        )
        models = {}  # kind -> {variant: model dir}
        ours_before, ours_after = scratch / "ours-before", scratch / "ours-after"
        for directory in (ours_before, ours_after):
            directory.mkdir()
            (directory / "bench_model.py").write_text(MODEL_SOURCE.format(blocks=args.blocks, vocab=VOCAB))
            (directory / "profile_me.py").write_text(PROFILE_OURS.format(vocab=VOCAB, batch=BATCH, seq=SEQ))
        print(f"\n[{args.blocks}-block transformer] recompile-fix profile + apply bench_model.py:")
        print(textwrap.indent(profile_and_apply(ours_after, "bench_model.py", unsafe=False), "    "))
        models["ours"] = {
            "full": ours_before,
            "after": ours_after,
            "regional": ours_before,
            "one_block": ours_before,
            "one_block_after": ours_after,
        }

        skip = "--no-transformers given" if args.no_transformers else transformers_problem()
        if skip is None:
            llama_before, llama_after = scratch / "llama-before", scratch / "llama-after"
            for directory in (llama_before, llama_after):
                directory.mkdir()
                copy_llama(directory)
                (directory / "profile_me.py").write_text(
                    PROFILE_LLAMA.format(config=llama_config(args.llama_layers), vocab=VOCAB, batch=BATCH, seq=SEQ)
                )
            import transformers

            print(
                f"\n[transformers {transformers.__version__} Llama, {args.llama_layers} layers, random weights] "
                "recompile-fix profile + apply --unsafe-fixes modeling_llama.py:"
            )
            print(textwrap.indent(profile_and_apply(llama_after, "modeling_llama.py", unsafe=True), "    "))
            models["llama"] = {
                "full": llama_before,
                "after": llama_after,
                "regional": llama_before,
                "one_block": llama_before,
                "one_block_after": llama_after,
            }
        else:
            print(f"\n[transformers] skipped: {skip}")

        results_dir = scratch / "results"
        results_dir.mkdir()
        results = {kind: {v: [] for v in variants} for kind, variants in models.items()}
        for run in range(args.runs):
            for kind, variants in models.items():
                for variant, model_dir in variants.items():
                    out = results_dir / f"{kind}-{variant}-{run}.json"
                    row = run_child(kind, variant, model_dir, out, args.llama_layers)
                    results[kind][variant].append(row)
                    print(
                        f"  run {run + 1}/{args.runs} {kind:<5} {variant:<15} CPU {row['cpu']:6.1f} s  "
                        f"wall {row['wall']:6.1f} s  forward {row['steady_ms']:7.2f} ms",
                        flush=True,
                    )

        titles = {
            "ours": f"{args.blocks}-block transformer (ours)",
            "llama": f"transformers Llama, {args.llama_layers} layers (tiny config)",
        }
        summary = []
        for kind in models:
            medians = report(titles[kind], results[kind], args.runs)
            for line in compare_outputs(results_dir, kind, list(models[kind])):
                print(f"  outputs: {line}")
            one = medians["one_block"]
            summary.append(
                f"{titles[kind]}: after apply / one block = {medians['after'] / one:.2f} "
                f"(regional / one block = {medians['regional'] / one:.2f}; "
                f"full / one block = {medians['full'] / one:.2f}; "
                f"after / full = {medians['after'] / medians['full']:.2f}; "
                f"depth cost after apply, after / its own one-block model = "
                f"{medians['after'] / medians['one_block_after']:.2f})"
            )

        if not args.no_train:
            out = results_dir / "ours-train.json"
            train = run_child("ours", "train", ours_after, out, args.llama_layers)
            print(
                f"\ntraining step through the rewritten {args.blocks}-block model (inductor, forward + backward; "
                f"loss {train['loss']:.6f} equals eager's in both runs):"
            )
            for label, words in (("default", "as compiled"), ("no_buffer_reuse", "allow_buffer_reuse=False")):
                row = train[label]
                verdict = "gradients match eager" if row["over"] == 0 else "GRADIENTS DIFFER from eager"
                print(
                    f"  {words:<26} {verdict}: {row['over']}/{row['params']} parameters off by more than "
                    f"1e-3 (relative norm), worst {row['worst']} {row['error']:.1e}; {row['seconds']:.1f} CPU s"
                )
            if train["default"]["over"]:
                print(
                    "  (torch 2.13 inductor bug: buffer reuse overwrites a saved input of the reused region "
                    "in backward, pytorch/pytorch#193960; RF004 marks the fix unsafe for programs that train)"
                )

        print("\nratios (CPU seconds of the cold first call; target: after apply <= 1.2x one block)")
        for line in summary:
            print(f"  {line}")
        print(f"\ntotal {time.perf_counter() - started:.0f} s")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
