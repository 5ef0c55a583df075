-- Real-client test of next edits (issue 31): in headless Neovim with the plugin, a parameter is
-- renamed by typing (`ciw`); once the edit settles the plugin asks ghostline/nextEdit and shows
-- the rename at the other uses as virtual text; <M-n> jumps to the first, <M-n> there accepts,
-- and the buffer has every use renamed. Typing again dismisses what is shown. A module function
-- renamed: its uses in the file that imports it are part of the proposal, and accepting edits
-- that file too. Deterministic: a rename is made from the syntax tree and the index, not the
-- model. Run by scripts/test-editors.sh
-- (`run_nvim_spec next_edit_spec.lua`).
local H = dofile(vim.fs.joinpath(vim.fs.dirname(debug.getinfo(1, 'S').source:sub(2)), 'harness.lua'))

local model = assert(vim.env.GHOSTLINE_MODEL, 'GHOSTLINE_MODEL must name the test model')
assert(vim.fn.executable('ghostline') == 1, '`ghostline` must be on PATH')

local SOURCE = {
  'def area(w, h):',
  '    s = w * h',
  '    return s + w',
  '',
  '',
  'x = area(3, 4)',
}
local dir = vim.fn.tempname()
vim.fn.mkdir(vim.fs.joinpath(dir, '.git'), 'p') -- the workspace root
local path = vim.fs.joinpath(dir, 'shapes.py')
vim.fn.writefile(SOURCE, path)
local user_path = vim.fs.joinpath(dir, 'user.py')
vim.fn.writefile({ 'from shapes import area', '', 'y = area(1, 2)' }, user_path)

vim.o.showmode = false
require('ghostline').setup({ model = model, settings = { offline = true, privacy = 'local-only' } })
local next_edit = require('ghostline.next_edit')

local bufnr

--- The virtual texts shown now: { {row, col, text}, … } (0-based), sorted.
local function shown()
  local out = {}
  for _, m in ipairs(vim.api.nvim_buf_get_extmarks(bufnr, next_edit.ns, 0, -1, { details = true })) do
    local details = m[4]
    if details.virt_text then
      table.insert(out, { m[2], m[3], details.virt_text[1][1] })
    end
  end
  table.sort(out, function(a, b) return a[1] < b[1] or (a[1] == b[1] and a[2] < b[2]) end)
  return out
end

H.test('a renamed parameter: the rename is shown at its other uses', function()
  vim.cmd.edit(vim.fn.fnameescape(path))
  bufnr = vim.api.nvim_get_current_buf()
  local client = H.wait(30000, function() return vim.lsp.get_clients({ bufnr = bufnr, name = 'ghostline' })[1] end, 'ghostline to attach')
  H.ok(vim.tbl_get(client.server_capabilities, 'experimental', 'ghostline', 'nextEdit'), 'the server offers next edits')
  vim.api.nvim_win_set_cursor(0, { 1, 9 }) -- on `w`
  H.type('ciwwidth<Esc>')
  H.eq('def area(width, h):', vim.api.nvim_buf_get_lines(bufnr, 0, 1, false)[1], 'the typed rename')
  -- Nothing is asked for: once the edit settles, the plugin asks and shows the answer.
  local typed = vim.uv.hrtime()
  H.wait(60000, function() return #shown() == 2 end, function() return 'two next edits shown, got ' .. vim.inspect(shown()) end)
  H.out(('# shown %.0f ms after the last key'):format((vim.uv.hrtime() - typed) / 1e6))
  H.eq({ { 1, 9, '→ width' }, { 2, 16, '→ width' } }, shown(), 'after each `w` that is a use')
  H.eq({ 'def area(width, h):', '    s = w * h', '    return s + w' }, vim.api.nvim_buf_get_lines(bufnr, 0, 3, false), 'shown, not applied')
end)

H.test('<M-n> jumps to the next edit, and <M-n> there accepts it: every use is renamed', function()
  H.ok(#shown() == 2, 'the next edits of the last test are shown')
  vim.api.nvim_win_set_cursor(0, { 6, 0 })
  H.type('<M-n>')
  H.eq({ 2, 8 }, vim.api.nvim_win_get_cursor(0), 'the cursor on the first use')
  H.eq(2, #shown(), 'still shown after the jump')
  H.type('<M-n>')
  H.eq({
    'def area(width, h):',
    '    s = width * h',
    '    return s + width',
    '',
    '',
    'x = area(3, 4)',
  }, vim.api.nvim_buf_get_lines(bufnr, 0, -1, false), 'the buffer after accepting')
  H.eq({}, shown(), 'nothing shown once accepted')
  H.eq({ 2, 8 }, vim.api.nvim_win_get_cursor(0), 'the cursor at the edit')
  -- The accepted edit is not itself the start of another proposal.
  H.sleep(1500)
  H.eq({}, shown(), 'nothing proposed after the accept')
end)

H.test('<M-y> accepts the shown next edit from anywhere', function()
  vim.api.nvim_win_set_cursor(0, { 1, 16 }) -- on `h`
  H.type('ciwheight<Esc>')
  H.wait(30000, function() return #shown() == 1 end, function() return 'one next edit shown, got ' .. vim.inspect(shown()) end)
  H.eq({ { 1, 17, '→ height' } }, shown(), 'after `h` in `width * h`')
  vim.api.nvim_win_set_cursor(0, { 6, 0 })
  H.type('<M-y>')
  H.eq('    s = width * height', vim.api.nvim_buf_get_lines(bufnr, 1, 2, false)[1], 'accepted with <M-y>')
  H.eq({}, shown(), 'nothing shown once accepted')
end)

H.test('typing again dismisses the shown next edit', function()
  H.sleep(1500) -- a new edit event, not the accept's
  vim.api.nvim_win_set_cursor(0, { 2, 4 }) -- on the local `s`
  H.type('ciwsize<Esc>')
  H.wait(30000, function() return #shown() == 1 end, function() return 'one next edit shown, got ' .. vim.inspect(shown()) end)
  H.eq({ { 2, 12, '→ size' } }, shown(), 'after `s` in `return s + width`')
  -- Typing at the end of the file: what was shown goes at once.
  H.type('Go# done')
  H.eq({}, shown(), 'dismissed by typing')
  H.type('<Esc>')
  H.eq('    return s + width', vim.api.nvim_buf_get_lines(bufnr, 2, 3, false)[1], 'not applied')
end)

H.test('a renamed module function: the file that imports it is edited with it', function()
  H.sleep(1500) -- a new edit event
  vim.api.nvim_win_set_cursor(0, { 1, 4 }) -- on `area`
  H.type('ciwsurface<Esc>')
  H.wait(30000, function() return #shown() == 1 end, function() return 'one next edit shown, got ' .. vim.inspect(shown()) end)
  H.eq({ { 5, 8, '→ surface (+2 in 1 other file)' } }, shown(), 'the call in the file, and the count of the others')
  H.eq(2, #next_edit.others(bufnr), "user.py's import and use")
  H.type('<M-y>')
  H.eq('x = surface(3, 4)', vim.api.nvim_buf_get_lines(bufnr, 5, 6, false)[1], 'the call renamed')
  local user = vim.fn.bufnr(user_path)
  H.ok(user ~= -1, 'user.py loaded to be edited')
  H.eq({ 'from shapes import surface', '', 'y = surface(1, 2)' }, vim.api.nvim_buf_get_lines(user, 0, -1, false), 'user.py renamed too')
end)

H.run()
