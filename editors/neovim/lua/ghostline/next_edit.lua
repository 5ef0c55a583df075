-- ghostline's next edits in Neovim: once an edit settles, asks the server for `ghostline/nextEdit`,
-- shows each proposed edit as virtual text at its target (`→ new text` after the text it
-- replaces), jumps to it and accepts it (every edit of the proposal, in the client's offset
-- encoding, with the edits it carries for other files: a renamed definition's uses where it
-- is imported); typing again dismisses what is shown.
local M = {}

M.ns = vim.api.nvim_create_namespace('ghostline.next_edit')
M.METHOD = 'ghostline/nextEdit'

---@class ghostline.NextEditOpts
---@field enabled? boolean   ask for next edits and show them (default true)
---@field debounce? integer  ms of no change before asking (default 300)

M.defaults = { enabled = true, debounce = 300 }

--- Per buffer: what is shown (`edits`, other files' `others`, `changedtick` it is for,
--- `client_id`) and the timer.
---@type table<integer, { edits: table[], others?: table[], changedtick: integer, client_id: integer, timer?: uv.uv_timer_t }>
local state = {}

--- The default highlights (a colorscheme's `:hi clear` drops them: set again on ColorScheme).
local function highlights()
  vim.api.nvim_set_hl(0, 'GhostlineNextEdit', { link = 'Comment', default = true })
  vim.api.nvim_set_hl(0, 'GhostlineNextEditRange', { link = 'DiffDelete', default = true })
end
highlights()
vim.api.nvim_create_autocmd('ColorScheme', {
  group = vim.api.nvim_create_augroup('ghostline.next_edit.highlights', { clear = true }),
  callback = highlights,
})

--- The byte column of an LSP position in `bufnr`, counted in `encoding` (0.11's
--- vim.str_byteindex; 0.10's takes a utf-16 flag).
---@return integer
local function byte_col(bufnr, position, encoding)
  local line = vim.api.nvim_buf_get_lines(bufnr, position.line, position.line + 1, false)[1] or ''
  if encoding == 'utf-8' then
    return math.min(position.character, #line)
  end
  local ok, col = pcall(vim.str_byteindex, line, encoding, position.character, false)
  if not ok then
    ok, col = pcall(vim.str_byteindex, line, position.character, encoding == 'utf-16')
  end
  return ok and col or #line
end

--- What the virtual text says for one edit: its new text's first line (`…` when it has more),
--- or that the range is deleted.
---@param new_text string
---@return string
function M.label(new_text)
  if new_text == '' then
    return '→ (delete)'
  end
  local first, rest = new_text:match('^([^\n]*)\n?(.*)$')
  return '→ ' .. first .. (rest ~= '' and ' …' or '')
end

--- `bufnr`, with nil or 0 for the current buffer.
---@param bufnr integer?
---@return integer
local function buf(bufnr)
  return (bufnr == nil or bufnr == 0) and vim.api.nvim_get_current_buf() or bufnr
end

--- Clears what is shown in `bufnr`.
---@param bufnr integer
function M.dismiss(bufnr)
  bufnr = buf(bufnr)
  if vim.api.nvim_buf_is_valid(bufnr) then
    vim.api.nvim_buf_clear_namespace(bufnr, M.ns, 0, -1)
  end
  if state[bufnr] then
    state[bufnr].edits = {}
    state[bufnr].others = {}
  end
end

--- The proposal's edits of other files (`{textDocument = {uri, version}, range, newText}`,
--- `version` nil for a file not open), applied with the buffer's.
function M.others(bufnr)
  bufnr = buf(bufnr)
  return state[bufnr] and state[bufnr].others or {}
end

--- The edits shown in `bufnr` (LSP `{textDocument, range, newText}`), first the one to jump to.
---@return table[]
function M.shown(bufnr)
  bufnr = buf(bufnr)
  return state[bufnr] and state[bufnr].edits or {}
end

--- Shows `edits` (the server's answer for this buffer as it is now) as extmarks.
local function show(bufnr, client, edits, changedtick)
  M.dismiss(bufnr)
  local uri = vim.uri_from_bufnr(bufnr)
  local mine = vim.tbl_filter(function(e) return vim.tbl_get(e, 'textDocument', 'uri') == uri end, edits)
  local others = vim.tbl_filter(function(e) return vim.tbl_get(e, 'textDocument', 'uri') ~= uri end, edits)
  if #mine == 0 then
    return
  end
  local files = {}
  for _, e in ipairs(others) do
    files[e.textDocument.uri] = true
  end
  local n_files = vim.tbl_count(files)
  local enc = client.offset_encoding
  local last = vim.api.nvim_buf_line_count(bufnr) - 1
  for i, edit in ipairs(mine) do
    local s, e = edit.range.start, edit.range['end']
    if s.line > last or e.line > last then
      return M.dismiss(bufnr)
    end
    local scol, ecol = byte_col(bufnr, s, enc), byte_col(bufnr, e, enc)
    local text = M.label(edit.newText)
    if i == 1 and #others > 0 then
      text = text .. (' (+%d in %d other file%s)'):format(#others, n_files, n_files == 1 and '' or 's')
    end
    vim.api.nvim_buf_set_extmark(bufnr, M.ns, e.line, ecol, {
      virt_text = { { text, 'GhostlineNextEdit' } },
      virt_text_pos = 'inline',
    })
    if s.line ~= e.line or scol ~= ecol then
      vim.api.nvim_buf_set_extmark(bufnr, M.ns, s.line, scol, { end_row = e.line, end_col = ecol, hl_group = 'GhostlineNextEditRange' })
    end
  end
  state[bufnr] = vim.tbl_extend('force', state[bufnr] or {}, { edits = mine, others = others, changedtick = changedtick, client_id = client.id })
end

--- Asks the server for the next edits at the cursor and shows them, unless the buffer changed
--- before the answer came.
---@param client vim.lsp.Client
---@param bufnr integer
function M.request(client, bufnr)
  if not vim.api.nvim_buf_is_valid(bufnr) or client:is_stopped() then
    return
  end
  local win = vim.fn.bufwinid(bufnr)
  if win == -1 then
    return
  end
  local params = vim.lsp.util.make_position_params(win, client.offset_encoding)
  local changedtick = vim.api.nvim_buf_get_changedtick(bufnr)
  client:request(M.METHOD, params, function(err, result)
    if err or not result or not vim.api.nvim_buf_is_valid(bufnr) or vim.api.nvim_buf_get_changedtick(bufnr) ~= changedtick then
      return
    end
    show(bufnr, client, result.edits or {}, changedtick)
  end, bufnr)
end

--- What is shown in `bufnr` while it is still for the buffer as it is: the client it came from,
--- its edits, and the first edit's start as a cursor ({row, byte col}); nil when nothing is.
---@return vim.lsp.Client?, table[]?, integer[]?
local function current(bufnr)
  local s = state[bufnr]
  if not s or #s.edits == 0 then
    return nil
  end
  if s.changedtick ~= vim.api.nvim_buf_get_changedtick(bufnr) then
    M.dismiss(bufnr)
    return nil
  end
  local client = vim.lsp.get_client_by_id(s.client_id)
  if not client then
    return nil
  end
  local start = s.edits[1].range.start
  return client, s.edits, { start.line + 1, byte_col(bufnr, start, client.offset_encoding) }
end

--- Moves the cursor to the first shown edit's start; false when nothing is shown.
---@return boolean
function M.jump(bufnr)
  local _, _, at = current(buf(bufnr))
  if not at then
    return false
  end
  vim.api.nvim_win_set_cursor(0, at)
  return true
end

--- Applies every shown edit (one proposal: a rename's uses, a removed parameter's calls) and
--- puts the cursor at the first; false when nothing is shown.
---@return boolean
function M.accept(bufnr)
  bufnr = buf(bufnr)
  local client, edits, at = current(bufnr)
  if not client or not edits or not at then
    return false
  end
  local others = M.others(bufnr)
  local edits_command = edits[1] and edits[1].command
  M.dismiss(bufnr)
  edits = vim.tbl_map(function(e) return { range = e.range, newText = e.newText } end, edits)
  vim.lsp.util.apply_text_edits(edits, bufnr, client.offset_encoding)
  if #others > 0 then
    -- One text document edit per file, in the order the server sent them; an open buffer
    -- that moved past the edits' version is left as it is (apply_workspace_edit checks).
    local changes, by_uri = {}, {}
    for _, e in ipairs(others) do
      local uri = e.textDocument.uri
      if not by_uri[uri] then
        by_uri[uri] = { textDocument = { uri = uri, version = e.textDocument.version }, edits = {} }
        table.insert(changes, by_uri[uri])
      end
      table.insert(by_uri[uri].edits, { range = e.range, newText = e.newText })
    end
    vim.lsp.util.apply_workspace_edit({ documentChanges = changes }, client.offset_encoding)
  end
  -- The server's command for the proposal (statistics, edit history), once it is applied.
  local command = edits_command
  if command then
    client:request('workspace/executeCommand', { command = command.command, arguments = command.arguments }, function() end, bufnr)
  end
  pcall(vim.api.nvim_win_set_cursor, 0, at)
  return true
end

--- The one key for both: jump to the next edit, or accept it when the cursor is already there.
---@return boolean
function M.jump_or_accept(bufnr)
  bufnr = buf(bufnr)
  local _, _, at = current(bufnr)
  if not at then
    return false
  end
  local row, col = unpack(vim.api.nvim_win_get_cursor(0))
  if row == at[1] and col == at[2] then
    return M.accept(bufnr)
  end
  return M.jump(bufnr)
end

--- Wires next edits for `bufnr` when the server offers them: each change dismisses what is
--- shown and, `debounce` ms after the last one, asks again.
---@param client vim.lsp.Client
---@param bufnr integer
---@param opts? ghostline.NextEditOpts
---@return boolean whether the buffer asks for next edits
function M.attach(client, bufnr, opts)
  opts = vim.tbl_extend('force', M.defaults, opts or {})
  local offered = vim.tbl_get(client.server_capabilities or {}, 'experimental', 'ghostline', 'nextEdit')
  if not opts.enabled or not offered then
    return false
  end
  state[bufnr] = state[bufnr] or { edits = {}, changedtick = -1, client_id = client.id }
  local group = vim.api.nvim_create_augroup('ghostline.next_edit.' .. bufnr, { clear = true })
  vim.api.nvim_create_autocmd({ 'TextChanged', 'TextChangedI', 'TextChangedP' }, {
    buffer = bufnr,
    group = group,
    desc = 'ghostline: dismiss the next edit, ask again once the edit settles',
    callback = function()
      M.dismiss(bufnr)
      local s = state[bufnr]
      s.timer = s.timer or vim.uv.new_timer()
      s.timer:stop()
      s.timer:start(opts.debounce, 0, vim.schedule_wrap(function() M.request(client, bufnr) end))
    end,
  })
  vim.api.nvim_create_autocmd({ 'BufUnload', 'LspDetach' }, {
    buffer = bufnr,
    group = group,
    callback = function(event)
      if event.event == 'LspDetach' and vim.tbl_get(event, 'data', 'client_id') ~= client.id then
        return
      end
      M.dismiss(bufnr)
      local s = state[bufnr]
      if s and s.timer then
        s.timer:stop()
        s.timer:close()
      end
      state[bufnr] = nil
      pcall(vim.api.nvim_del_augroup_by_id, group)
    end,
  })
  return true
end

return M
