"""RF004 checks what a compiled region would reject before it offers the decorator: outputs that
alias an input (T5's position_bias), two outputs that are views of one tensor (Flux's single
block), a view stored on an object (Mistral's sliding-window cache), and gives no fix there,
safe or unsafe. The patterns are the ones measured on torch 2.13 (a block of five lines each);
the models are the pinned transformers and diffusers ones, read from the installed packages
(static mode over copies of their model files) and, in the slow tests, run: the decorator RF004
would write fails exactly where RF004 refuses it, and works where it offers it (Llama); blocks
compiled one by one (RF007) work on all of them."""

import importlib.util
import json
import textwrap
from pathlib import Path

import pytest

from conftest import run_python
from recompile_fix.analysis.source import SourceFile
from recompile_fix.findings.finding import Safety
from recompile_fix.rules import rule_by_id

RF004 = rule_by_id("RF004")

BLOCK = """
import torch
from torch import nn


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)
        self.register_buffer("buf", torch.zeros(8))

{helpers}
    def forward(self, x, bias=None, rope=None, obj=None, lst=None):
{body}


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = nn.ModuleList(Block() for _ in range(4))

    def forward(self, x):
        for block in self.blocks:
            x = block(x)
        return x
"""


def verdict(body: str, helpers: str = ""):
    text = BLOCK.format(body=textwrap.indent(body, " " * 8), helpers=textwrap.indent(helpers, " " * 4))
    (finding,) = RF004.plan_static(SourceFile.parse(Path("m.py"), text), "m.py")
    return finding


@pytest.mark.parametrize(
    "body, why",
    [
        ("h = self.fc(x)\nreturn h, bias", "returns its input `bias`"),
        ("h = self.fc(x)\nreturn h, (rope, rope)", "returns its input `rope`"),
        ("h = self.fc(x)\nreturn h, self.buf", "returns its own tensor `self.buf`"),
        ("h = self.fc(x)\nreturn h, x.float()", "returns a view of its input `x`"),
        # T5: the input is replaced only when it is None, so it may come back as it went in
        (
            "if bias is None:\n    bias = torch.zeros(8)\nh = self.fc(x) + bias\nreturn h, bias",
            "returns its input `bias`",
        ),
        ("h = self.fc(x)\nself.last = h.detach()\nreturn h", "stores a view of a tensor on `self.last`"),
        ("obj.t = obj.t.to(x.device)\nreturn self.fc(x)", "stores a view of a tensor on `obj.t`"),
        # Flux's single block: two slices of one tensor
        ("h = self.fc(x)\nreturn h[:, :4], h[:, 4:]", "returns two views of one tensor (line"),
        ("a, b = self.fc(x).chunk(2, dim=-1)\nreturn a, b", "returns two views of one tensor"),
    ],
)
def test_what_a_region_rejects_gets_no_fix(body, why):
    finding = verdict(body)
    assert finding.safety is Safety.NONE and why in " ".join(finding.notes), finding.notes


def test_an_input_passed_back_through_a_helper_of_the_file():
    helpers = "def route(self, h, bias):\n    return self.fc(h), bias\n"
    finding = verdict("h, b = self.route(x, bias)\nreturn h, b", helpers)
    assert finding.safety is Safety.NONE
    assert "returns its input `bias` (line" in " ".join(finding.notes)
    assert "passed back by `self.route(...)` at line" in " ".join(finding.notes)


@pytest.mark.parametrize(
    "body",
    [
        "h = self.fc(x)\nreturn h, h",  # the same tensor twice: fine (measured)
        "h = self.fc(x)\nreturn h, None",
        'return {"h": self.fc(x)}',
        "h = self.fc(x)\nself.last = h\nreturn h",
        "h = self.fc(x)\nself.last = h * 2\nreturn h",
        "h = self.fc(x)\nlst.append(h.detach())\nreturn h",
        "q, k = self.fc(x).chunk(2, dim=-1)\nreturn torch.cat([k, q], dim=-1)",
        "x = self.fc(x)\nreturn x.view(-1, 8)",  # a view of a value made here, returned alone
    ],
)
def test_what_a_region_accepts_is_offered(body):
    finding = verdict(body)
    assert finding.safety is Safety.SAFE, finding.notes


# -- the pinned models ------------------------------------------------------------------------
def _installed(module: str) -> Path:
    spec = importlib.util.find_spec(module)
    assert spec is not None and spec.origin, f"{module} is not installed (pyproject's test extras pin it)"
    return Path(spec.origin)


MODEL_FILES = {
    "modeling_mistral.py": "transformers.models.mistral.modeling_mistral",
    "modeling_t5.py": "transformers.models.t5.modeling_t5",
    "modeling_llama.py": "transformers.models.llama.modeling_llama",
    "transformer_flux.py": "diffusers.models.transformers.transformer_flux",
}


@pytest.fixture(scope="module")
def model_findings():
    found = {}
    for name, module in MODEL_FILES.items():
        source = SourceFile.read(_installed(module), parse=False)
        for finding in RF004.plan_static(source, name):
            found[finding.params["class"]] = finding
    return found


@pytest.mark.slow  # reads transformers' and diffusers' model code (imported: seconds), no torch run
@pytest.mark.parametrize(
    "block, why",
    [
        ("T5Block", "returns its input `position_bias` (line"),
        ("MistralDecoderLayer", "in a model with a sliding window"),
        ("FluxSingleTransformerBlock", "returns two views of one tensor"),
    ],
)
def test_the_models_a_region_breaks_get_no_fix(model_findings, block, why):
    finding = model_findings[block]
    assert finding.safety is Safety.NONE and why in " ".join(finding.notes), finding.notes


@pytest.mark.slow  # the same model code
@pytest.mark.parametrize("block", ["LlamaDecoderLayer", "FluxTransformerBlock"])
def test_the_models_a_region_runs_keep_their_fix(model_findings, block):
    assert model_findings[block].safety is Safety.UNSAFE  # they call code the analysis cannot see


PROOF = r"""
import json, sys
import torch

which, mode = sys.argv[1], sys.argv[2]
torch.manual_seed(0)
if which == "flux":
    from diffusers.models.transformers import transformer_flux as lib

    classes = [lib.FluxTransformerBlock, lib.FluxSingleTransformerBlock]
    model = lib.FluxTransformer2DModel(patch_size=1, in_channels=4, num_layers=2, num_single_layers=2,
        attention_head_dim=8, num_attention_heads=2, joint_attention_dim=16, pooled_projection_dim=16,
        axes_dims_rope=(2, 2, 4)).eval()
    stacks = [model.transformer_blocks, model.single_transformer_blocks]
    inputs = dict(hidden_states=torch.randn(1, 16, 4), encoder_hidden_states=torch.randn(1, 8, 16),
        pooled_projections=torch.randn(1, 16), timestep=torch.tensor([1.0]), img_ids=torch.zeros(16, 3),
        txt_ids=torch.zeros(8, 3), return_dict=False)
else:
    import transformers

    name = {"llama": "Llama", "mistral": "Mistral", "t5": "T5"}[which]
    base = dict(vocab_size=64, num_attention_heads=4, num_key_value_heads=4)
    if which == "t5":
        config = transformers.T5Config(vocab_size=64, d_model=32, d_kv=8, d_ff=64, num_layers=2,
                                       num_decoder_layers=2, num_heads=4)
        model = transformers.T5Model(config).eval()
        lib = sys.modules[type(model).__module__]
        classes, stacks = [lib.T5Block], [model.encoder.block, model.decoder.block]
        ids = torch.randint(0, 64, (2, 6))
        inputs = dict(input_ids=ids, decoder_input_ids=ids)
    else:
        config = getattr(transformers, name + "Config")(hidden_size=32, intermediate_size=64,
                                                        num_hidden_layers=2, **base)
        model = getattr(transformers, name + "ForCausalLM")(config).eval()
        lib = sys.modules[type(model).__module__]
        classes, stacks = [getattr(lib, name + "DecoderLayer")], [model.model.layers]
        inputs = dict(input_ids=torch.randint(0, 64, (2, 6)))

def first(out):
    out = out[0] if isinstance(out, tuple) else out
    return out.last_hidden_state if hasattr(out, "last_hidden_state") else getattr(out, "logits", out)

with torch.no_grad():
    expected = first(model(**inputs))
    if mode == "region":  # what RF004 writes: the decorator on the block class's forward
        for cls in classes:
            cls.forward = torch.compiler.nested_compile_region(cls.forward)
        run = torch.compile(model, backend="eager")
    else:  # what RF007 writes: the blocks compiled one by one
        for stack in stacks:
            for block in stack:
                block.compile(backend="eager")
        run = model
    try:
        got = first(run(**inputs))
    except Exception as exc:
        print(json.dumps({"error": f"{type(exc).__name__}: {exc}"[:4000]}))
    else:
        print(json.dumps({"equal": bool(torch.equal(got, expected))}))
"""


def _prove(tmp_path: Path, which: str, mode: str) -> dict:
    script = tmp_path / "prove.py"
    script.write_text(PROOF)
    done = run_python(script, which, mode, cwd=tmp_path, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.slow
@pytest.mark.parametrize(
    "which, error",
    [
        ("t5", "Encountered aliasing during higher order op tracing"),
        ("mistral", "aliases an input or output"),
        ("flux", "Output-to-output aliasing"),
    ],
)
def test_where_rf004_refuses_the_region_fails_and_regional_compilation_works(tmp_path, which, error):
    assert error in _prove(tmp_path, which, "region").get("error", ""), which
    assert _prove(tmp_path, which, "regional") == {"equal": True}


@pytest.mark.slow
def test_where_rf004_offers_the_region_it_runs(tmp_path):
    assert _prove(tmp_path, "llama", "region") == {"equal": True}
    assert _prove(tmp_path, "llama", "regional") == {"equal": True}
