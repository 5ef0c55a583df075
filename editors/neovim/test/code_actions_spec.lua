-- Real-client test for code actions (issue 5): Neovim lists ghostline's code actions for the
-- function under the cursor and applies one through its own UI path (vim.lsp.buf.code_action:
-- codeAction/resolve, workspace/executeCommand, workspace/applyEdit), and the buffer changes.
-- Run by scripts/test-editors.sh (`run_nvim_spec code_actions_spec.lua`) after ghostline_spec.lua.
local H = dofile(vim.fs.joinpath(vim.fs.dirname(debug.getinfo(1, 'S').source:sub(2)), 'harness.lua'))

local model = assert(vim.env.GHOSTLINE_MODEL, 'GHOSTLINE_MODEL must name the test model')
assert(vim.fn.executable('ghostline') == 1, '`ghostline` must be on PATH')

local SOURCE = {
  'import math',
  '',
  '',
  'def hypotenuse(a, b):',
  '    return math.sqrt(a * a + b * b)',
}
local dir = vim.fn.tempname()
vim.fn.mkdir(dir, 'p')
vim.fn.mkdir(vim.fs.joinpath(dir, '.git'), 'p') -- the workspace root
local path = vim.fs.joinpath(dir, 'geometry.py')
vim.fn.writefile(SOURCE, path)

vim.o.showmode = false
require('ghostline').setup({ model = model, settings = { offline = true, privacy = 'local-only' } })

local client, bufnr

H.test('code actions for the function under the cursor are listed', function()
  vim.cmd.edit(vim.fn.fnameescape(path))
  bufnr = vim.api.nvim_get_current_buf()
  client = H.wait(30000, function() return vim.lsp.get_clients({ bufnr = bufnr, name = 'ghostline' })[1] end, 'ghostline to attach')
  H.ok(client.server_capabilities.codeActionProvider, 'codeActionProvider')
  vim.api.nvim_win_set_cursor(0, { 4, 6 }) -- on `hypotenuse`
  local params = vim.lsp.util.make_range_params(0, client.offset_encoding)
  params.context = { diagnostics = {}, triggerKind = 1 }
  local actions = H.request(client, 'textDocument/codeAction', params, bufnr, 10000)
  local titles = vim.tbl_map(function(a) return a.title end, actions or {})
  H.ok(#titles > 0, 'no code actions')
  H.ok(vim.iter(titles):any(function(t) return t:find('hypotenuse', 1, true) end),
    'a title names the function: ' .. vim.inspect(titles))
end)

H.test('applying "Add docstring" through vim.lsp.buf.code_action changes the buffer', function()
  H.ok(client and client.server_capabilities.codeActionProvider, 'codeActionProvider')
  vim.api.nvim_win_set_cursor(0, { 4, 6 })
  local before = vim.api.nvim_buf_get_lines(bufnr, 0, -1, false)
  vim.lsp.buf.code_action({
    apply = true,
    filter = function(action) return action.title:match('^Add docstring') ~= nil end,
  })
  H.wait(120000, function() return vim.api.nvim_buf_line_count(bufnr) > #before end, 'the edit to be applied')
  local after = vim.api.nvim_buf_get_lines(bufnr, 0, -1, false)
  H.eq(before[4], after[4], 'the def line is kept')
  H.ok(vim.trim(after[5]):match('^"""') or vim.trim(after[5]):match("^'''"), 'a docstring under the def: ' .. vim.inspect(after[5]))
  H.eq(before[5], after[#after], 'the body is kept')
end)

H.run()
