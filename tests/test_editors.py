"""The editor guide (recompile_fix/docs/editors.md, shipped in the package) as a user follows it:
Debian's Neovim (0.7.2, installed by the README's setup command), headless, with the guide's
Neovim 0.7 block as its whole configuration, against `recompile-fix lsp` (found on PATH, as the
guide says): diagnostics on the Finding's line, a quick fix taken, and the file Neovim writes
equal to the one `recompile-fix apply` writes. The guide's other setups are checked for syntax
(Lua by Neovim itself, TOML, JSON)."""

import json
import os
import re
import shutil
import subprocess
import tomllib

import pytest

from conftest import run_cli

GUIDE = __import__("recompile_fix").__path__[0] + "/docs/editors.md"

# Run after the guide's configuration; the buffer is main.py of the two-file project.
DRIVER = r"""
local out = { diagnostics = {}, titles = {} }
local function finish(code)
  local file = io.open(os.getenv("DRIVER_OUT"), "w")
  file:write(vim.fn.json_encode(out))
  file:close()
  vim.cmd(code == 0 and "qa!" or "cquit")
end

local function ours()
  local found = {}
  for _, d in ipairs(vim.diagnostic.get(0)) do
    local lsp = d.user_data and d.user_data.lsp or {}
    if (d.source or lsp.source) == "recompile-fix" then
      table.insert(found, { line = d.lnum, col = d.col, code = d.code or lsp.code, message = d.message })
    end
  end
  return found
end

local ok, err = pcall(function()
  out.version = vim.version().major .. "." .. vim.version().minor .. "." .. vim.version().patch
  out.clients = #vim.lsp.buf_get_clients(0)
  if not vim.wait(60000, function() return #ours() > 0 end, 50) then
    out.error = "no diagnostics from recompile-fix"
    return
  end
  out.diagnostics = ours()
  local target = out.diagnostics[1]
  vim.api.nvim_win_set_cursor(0, { target.line + 1, target.col })
  local params = vim.lsp.util.make_range_params()
  params.context = { diagnostics = vim.lsp.diagnostic.get_line_diagnostics(0) }
  local responses = vim.lsp.buf_request_sync(0, "textDocument/codeAction", params, 30000) or {}
  local chosen, client
  for client_id, response in pairs(responses) do
    for _, action in ipairs(response.result or {}) do
      table.insert(out.titles, action.title)
      if chosen == nil and action.title:match("^Fix RF001") then
        chosen, client = action, vim.lsp.get_client_by_id(client_id)
      end
    end
  end
  if chosen == nil then
    out.error = "no quick fix offered"
    return
  end
  if chosen.edit == nil then
    local resolved = client.request_sync("codeAction/resolve", chosen, 30000, 0)
    chosen = resolved and resolved.result or chosen
  end
  vim.lsp.util.apply_workspace_edit(chosen.edit, client.offset_encoding)
  vim.cmd("write")
  out.written = true
end)
if not ok then
  out.error = tostring(err)
end
finish(out.error and 1 or 0)
"""


def _nvim() -> str:
    found = shutil.which("nvim")
    if found is None:
        pytest.fail("no Neovim: the editor test needs Debian's (`apt-get install neovim`), it does not skip")
    return found


def _blocks(language: str) -> list[tuple[str, str]]:
    """(heading above it, code) of each fenced block of ``language`` in the guide."""
    text = open(GUIDE, encoding="utf-8").read()
    found = []
    heading = ""
    for match in re.finditer(r"^(#+ [^\n]*)$|^( *)```" + language + r"\n(.*?)^\2```$", text, re.M | re.S):
        if match.group(1):
            heading = match.group(1)
        else:
            indent = match.group(2)
            code = "".join(line[len(indent) :] + "\n" for line in match.group(3).splitlines())
            found.append((heading, code))
    return found


def _neovim_07_block() -> str:
    (code,) = [code for heading, code in _blocks("lua") if heading.startswith("### Neovim 0.7")]
    return code


def test_the_guide_ships_with_the_package_and_lsp_help_names_it(cli):
    help_text = cli("lsp", "--help", check=0).stdout
    assert "editors.md" in " ".join(help_text.split()).replace(" ", "")
    assert cli("lsp", "--guide", check=0).stdout == open(GUIDE, encoding="utf-8").read()


def test_the_guides_other_setups_parse(tmp_path):
    lua = _blocks("lua")
    assert {h for h, _ in lua} >= {"### Neovim 0.11 and later", "### Neovim 0.10 and later"}
    for index, (_, code) in enumerate(lua):
        chunk = tmp_path / f"block{index}.lua"
        chunk.write_text(code)
        # Compiled, not run: 0.11's API does not exist in the 0.7 the test machine has.
        checked = subprocess.run(
            [_nvim(), "--headless", "-u", "NONE", "-i", "NONE", "-c",
             f"lua local f, e = loadfile('{chunk}'); if not f then print(e); vim.cmd('cquit') end", "-c", "qa!"],
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert checked.returncode == 0, (code, checked.stderr)
    (toml,) = [code for _, code in _blocks("toml")]
    helix = tomllib.loads(toml)
    assert helix["language-server"]["recompile-fix"] == {"command": "recompile-fix", "args": ["lsp"]}
    assert "recompile-fix" in helix["language"][0]["language-servers"]
    settings = [json.loads(code) for _, code in _blocks("json")]
    assert settings[0]["glspc.server.commandArguments"] == ["lsp"]
    assert "source.fixAll.recompile-fix" in settings[1]["[python]"]["editor.codeActionsOnSave"]


@pytest.mark.slow  # an editor (Neovim): seconds, no torch
def test_neovim_07_with_the_guides_setup_fixes_like_apply(project, tmp_path):
    expected_dir = tmp_path / "expected"
    shutil.copytree(project, expected_dir)
    run_cli("apply", "main.py", cwd=expected_dir, check=0)
    expected = (expected_dir / "main.py").read_text(encoding="utf-8")
    original = (project / "main.py").read_text(encoding="utf-8")
    assert expected != original

    init = tmp_path / "init.lua"
    init.write_text(_neovim_07_block())
    driver = tmp_path / "driver.lua"
    driver.write_text(DRIVER)
    out = tmp_path / "out.json"
    home = tmp_path / "home"
    env = {
        **os.environ,
        "DRIVER_OUT": str(out),
        "XDG_CONFIG_HOME": str(home / "config"),
        "XDG_DATA_HOME": str(home / "data"),
        "XDG_STATE_HOME": str(home / "state"),
        "XDG_CACHE_HOME": str(home / "cache"),
    }
    done = subprocess.run(
        [_nvim(), "--headless", "-i", "NONE", "-u", str(init), "main.py", "-c", f"luafile {driver}"],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=180,
        env=env,
    )
    result = json.loads(out.read_text()) if out.exists() else {}
    assert done.returncode == 0 and not result.get("error"), (result, done.stdout[-2000:], done.stderr[-2000:])
    assert result["version"].startswith("0.7."), result["version"]  # Debian's, the one the guide was failing on
    # The diagnostic sits on the call the fix goes before: main.py line 12, `fn(torch.ones(n))`.
    (diagnostic,) = result["diagnostics"]
    assert (diagnostic["line"], diagnostic["col"], diagnostic["code"]) == (11, 4, "RF001")
    assert "`x` dim 0 passed to compiled `fn` changes size" in diagnostic["message"]
    assert any(t.startswith("Suppress RF001") for t in result["titles"])
    assert (project / "main.py").read_text(encoding="utf-8") == expected  # byte for byte what apply writes
