-- Real-client test of the cross-file section: a two-file workspace (fixtures/editors/two-files:
-- plan.py imports and calls rectangle_area from its sibling geometry.py). Neovim opens plan.py,
-- types in floor_area's body, and the sibling's definition is in the prompt (`cross_file` of
-- ghostline/lastTimings); then geometry.py changes on disk, Neovim's own file watcher (asked for
-- by the server's client/registerCapability) sends workspace/didChangeWatchedFiles, and the
-- section follows. Run by scripts/test-editors.sh (`run_nvim_spec cross_file_spec.lua`).
local H = dofile(vim.fs.joinpath(vim.fs.dirname(debug.getinfo(1, 'S').source:sub(2)), 'harness.lua'))

local model = assert(vim.env.GHOSTLINE_MODEL, 'GHOSTLINE_MODEL must name the test model')
assert(vim.fn.executable('ghostline') == 1, '`ghostline` must be on PATH')

local fixture = vim.fs.joinpath(vim.fn.getcwd(), 'fixtures', 'editors', 'two-files')
local dir = vim.fn.tempname()
vim.fn.mkdir(vim.fs.joinpath(dir, '.git'), 'p') -- the workspace root (root_markers)
for _, name in ipairs({ 'geometry.py', 'plan.py' }) do
  vim.fn.writefile(vim.fn.readfile(vim.fs.joinpath(fixture, name)), vim.fs.joinpath(dir, name))
end
local plan = vim.fs.joinpath(dir, 'plan.py')
local geometry = vim.fs.joinpath(dir, 'geometry.py')

vim.o.showmode = false
require('ghostline').setup({ model = model, settings = { offline = true, privacy = 'local-only' } })
-- Neovim 0.11 advertises its file watcher only on macOS and Windows; on Linux a user turns it
-- on like this (its backend there: inotifywait when installed, else libuv's fs events).
vim.lsp.config('ghostline', { capabilities = { workspace = { didChangeWatchedFiles = { dynamicRegistration = true } } } })

local client, bufnr
local DEFINITION = 'def rectangle_area(width: float, height: float) -> float'
local CHANGED = 'def rectangle_area(width: float, height: float, scale: float = 1.0) -> float'

--- Asks for a suggestion at the cursor (as the plugin would) and returns ghostline/lastTimings.
local function complete_here()
  local params = vim.lsp.util.make_position_params(0, client.offset_encoding)
  local _, err = H.request(client, 'textDocument/inlineCompletion', vim.tbl_extend('force', params, { context = { triggerKind = 1 } }), bufnr)
  H.eq(nil, err, 'inline completion error')
  return H.ok(H.request(client, 'ghostline/lastTimings', vim.NIL, bufnr), 'lastTimings')
end

H.test("the sibling file's definition reaches the prompt of a file that imports and calls it", function()
  vim.cmd.edit(vim.fn.fnameescape(plan))
  bufnr = vim.api.nvim_get_current_buf()
  client = H.wait(30000, function() return vim.lsp.get_clients({ bufnr = bufnr, name = 'ghostline' })[1] end, 'ghostline to attach')
  H.eq(dir, client.root_dir, 'the workspace root')
  -- In floor_area's body, under the call: `o` opens a line, typed as a person would.
  vim.api.nvim_win_set_cursor(0, { 9, 0 })
  H.type('o')
  H.type('total = round(')
  H.eq('        total = round(', vim.api.nvim_get_current_line(), 'the typed line')
  -- The index is built in the background after `initialized`: ask until the section is there.
  local last
  H.wait(60000, function()
    last = complete_here()
    return last.cross_file:find('# path: geometry.py', 1, true)
  end, function() return 'geometry.py in the cross-file section, got ' .. vim.inspect(last and last.cross_file) end)
  H.ok(last.cross_file:find(DEFINITION, 1, true), 'the definition with its signature: ' .. last.cross_file)
  H.ok(vim.endswith(last.cross_file, '# path: plan.py\n'), 'the section ends with the file itself: ' .. last.cross_file)
  H.eq(plan, vim.uri_to_fname(last.uri), 'the completion was for plan.py')
  H.type('<Esc>')
end)

H.test("geometry.py changes on disk: Neovim's watcher tells the server and the section follows", function()
  -- The notifications the client sends, to see the watcher's.
  local sent = {}
  local notify = client.notify
  client.notify = function(self, method, params)
    if method == 'workspace/didChangeWatchedFiles' then table.insert(sent, params) end
    return notify(self, method, params)
  end
  local ok, err = pcall(function()
    local text = table.concat(vim.fn.readfile(geometry), '\n') .. '\n'
    local changed = text:gsub(vim.pesc(DEFINITION), CHANGED)
    H.ok(changed ~= text, 'the fixture has the definition')
    -- Written by another program (geometry.py is not open in Neovim).
    local f = assert(io.open(geometry, 'w'))
    f:write(changed)
    f:close()
    H.wait(30000, function()
      return vim.iter(sent):any(function(p)
        return vim.iter(p.changes):any(function(c) return vim.uri_to_fname(c.uri) == geometry end)
      end)
    end, function() return 'workspace/didChangeWatchedFiles for geometry.py, sent ' .. vim.inspect(sent) end)
    -- The index updates in the background: ask until the new signature is in the section.
    vim.api.nvim_win_set_cursor(0, { 10, #'        total = round(' })
    local last
    H.wait(30000, function()
      last = complete_here()
      return last.cross_file:find(CHANGED, 1, true)
    end, function() return 'the changed signature in the section, got ' .. vim.inspect(last and last.cross_file) end)
    H.ok(not last.cross_file:find(DEFINITION .. ':', 1, true), 'the old signature is gone: ' .. last.cross_file)
  end)
  client.notify = notify
  if not ok then error(err, 0) end
end)

H.run()
