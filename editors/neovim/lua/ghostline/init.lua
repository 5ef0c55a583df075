-- ghostline for Neovim: starts the server and wires completion for the running version.
--   0.12+: ghost text through vim.lsp.inline_completion (Tab accepts, falling back to a literal
--          Tab; <M-]> / <M-[> cycle through suggestions).
--   0.11:  vim.lsp.config/enable; suggestions as completion items (vim.lsp.completion, with
--          <C-Space> to ask; Neovim has no inline completion UI before 0.12).
--   0.10:  vim.lsp.start per buffer; completion items through 'omnifunc' (<C-x><C-o>).
-- Next edits (next_edit.lua) on every version: shown at their targets, <M-n> jumps, then accepts.
local M = {}

---@class ghostline.Opts
---@field cmd? string[]            command that starts the server (default: { 'ghostline' })
---@field model? string            GGUF model path (default: $GHOSTLINE_MODEL)
---@field settings? table          more server settings, merged into init_options (camelCase, as in the README)
---@field filetypes? string[]      filetypes to attach to (default: lsp/ghostline.lua's list)
---@field inline? boolean          0.12+: ghost text (default true); false uses completion items
---@field next_edit? ghostline.NextEditOpts|false  next edits (default { enabled = true, debounce = 300 })
---@field keys? { accept?: string|false, next?: string|false, prev?: string|false, complete?: string|false, jump_edit?: string|false, accept_edit?: string|false }

M.defaults = {
  inline = true,
  next_edit = { enabled = true, debounce = 300 },
  keys = {
    accept = '<Tab>', next = '<M-]>', prev = '<M-[>', complete = '<C-Space>',
    -- Next edits, in Normal and Insert mode: jump to the proposed edit (pressed there: accept it);
    -- accept it from anywhere.
    jump_edit = '<M-n>', accept_edit = '<M-y>',
  },
}

--- The server's settings from the options: `model` becomes `model.path`.
---@param opts ghostline.Opts
---@return table
function M.init_options(opts)
  local options = vim.deepcopy(opts.settings or {})
  if opts.model then
    options.model = vim.tbl_extend('force', options.model or {}, { path = vim.fn.expand(opts.model) })
  end
  if options.model == nil and vim.env.GHOSTLINE_MODEL then
    options.model = { path = vim.env.GHOSTLINE_MODEL }
  end
  return options
end

--- Tab in insert mode: accept the displayed suggestion, else insert a literal Tab (an `expr`
--- mapping returns the key to use instead). Exposed for tests.
---@return string
function M.accept_or_tab()
  local inline = vim.lsp.inline_completion
  if inline and inline.get() then
    return ''
  end
  return '\t'
end

--- Neovim's built-in completion inserts a plain-text item's textEdit only up to its first
--- whitespace (the completion "word"); ghostline's item is a whole suggestion, so once it is
--- accepted (<C-y>) the rest of its newText is put in too.
---@param client vim.lsp.Client
---@param bufnr integer
function M.complete_whole_suggestion(client, bufnr)
  vim.api.nvim_create_autocmd('CompleteDone', {
    buffer = bufnr,
    group = vim.api.nvim_create_augroup('ghostline.complete.' .. bufnr, { clear = true }),
    desc = 'ghostline: insert the whole accepted suggestion',
    callback = function()
      local reason = vim.v.event and vim.v.event.reason
      if reason ~= nil and reason ~= 'accept' then
        return
      end
      local completed = vim.v.completed_item
      local lsp_data = vim.tbl_get(completed or {}, 'user_data', 'nvim', 'lsp') or {}
      local item = lsp_data.completion_item
      if lsp_data.client_id ~= client.id or not item or not item.textEdit or item.insertTextFormat == 2 then
        return
      end
      local word, new_text = completed.word, item.textEdit.newText
      local row, col = unpack(vim.api.nvim_win_get_cursor(0))
      local line = vim.api.nvim_get_current_line()
      if new_text == word or not vim.startswith(new_text, word) or line:sub(col - #word + 1, col) ~= word then
        return
      end
      local lines = vim.split(new_text:sub(#word + 1), '\n', { plain = true })
      vim.api.nvim_buf_set_text(bufnr, row - 1, col, row - 1, col, lines)
      local last = #lines == 1 and col + #lines[1] or #lines[#lines]
      vim.api.nvim_win_set_cursor(0, { row + #lines - 1, last })
    end,
  })
end

--- Where the cursor rests before the user types (entering insert mode, or holding still), ask
--- the server for the code actions there, as VS Code does whenever the cursor moves: ghostline
--- then decodes the prompt for that spot ahead, so the first key there is answered sooner. The
--- answer is not used.
---@param client vim.lsp.Client
---@param bufnr integer
function M.report_rest(client, bufnr)
  vim.api.nvim_create_autocmd({ 'InsertEnter', 'CursorHold' }, {
    buffer = bufnr,
    group = vim.api.nvim_create_augroup('ghostline.rest.' .. bufnr, { clear = true }),
    desc = 'ghostline: decode the prompt where the cursor rests',
    callback = function()
      -- After the key that entered insert mode has moved the cursor (`A`, `o`).
      vim.schedule(function()
        if not vim.api.nvim_buf_is_valid(bufnr) or vim.api.nvim_get_current_buf() ~= bufnr or client:is_stopped() then
          return
        end
        local params = vim.lsp.util.make_range_params(0, client.offset_encoding)
        params.range['end'] = params.range.start
        params.context = { diagnostics = {} }
        client:request('textDocument/codeAction', params, function() end, bufnr)
      end)
    end,
  })
end

--- Next edits for `bufnr` (next_edit.lua) with their keys, when the server offers them.
---@param client vim.lsp.Client
---@param bufnr integer
---@param opts ghostline.Opts
function M.attach_next_edit(client, bufnr, opts)
  local next_edit = require('ghostline.next_edit')
  if opts.next_edit == false or not next_edit.attach(client, bufnr, opts.next_edit or nil) then
    return
  end
  local keys = opts.keys or M.defaults.keys
  local function map(lhs, fn, desc)
    if lhs then
      vim.keymap.set({ 'n', 'i' }, lhs, function() fn(bufnr) end, { buffer = bufnr, desc = 'ghostline: ' .. desc })
    end
  end
  map(keys.jump_edit, next_edit.jump_or_accept, 'jump to the next edit (there: accept it)')
  map(keys.accept_edit, next_edit.accept, 'accept the next edit')
end

---@param client vim.lsp.Client
---@param bufnr integer
---@param opts ghostline.Opts
function M.on_attach(client, bufnr, opts)
  M.report_rest(client, bufnr)
  local keys = opts.keys or M.defaults.keys
  M.attach_next_edit(client, bufnr, opts)
  local function map(lhs, rhs, desc, extra)
    if lhs then
      vim.keymap.set('i', lhs, rhs, vim.tbl_extend('force', { buffer = bufnr, desc = 'ghostline: ' .. desc }, extra or {}))
    end
  end
  local inline_method = 'textDocument/inlineCompletion'
  if opts.inline ~= false and vim.lsp.inline_completion and client:supports_method(inline_method, bufnr) then
    vim.lsp.inline_completion.enable(true, { bufnr = bufnr, client_id = client.id })
    map(keys.accept, M.accept_or_tab, 'accept the suggestion, or Tab', { expr = true, replace_keycodes = false })
    map(keys.next, function() vim.lsp.inline_completion.select({ bufnr = bufnr, count = 1 }) end, 'next suggestion')
    map(keys.prev, function() vim.lsp.inline_completion.select({ bufnr = bufnr, count = -1 }) end, 'previous suggestion')
    return 'inline'
  end
  if vim.lsp.completion and vim.lsp.completion.enable then
    -- ghostline declares no trigger characters, so ask with <C-Space> (or <C-x><C-o>).
    vim.lsp.completion.enable(true, client.id, bufnr, { autotrigger = true })
    map(keys.complete, function() vim.lsp.completion.get() end, 'ask for a suggestion')
    M.complete_whole_suggestion(client, bufnr)
    return 'completion'
  end
  vim.bo[bufnr].omnifunc = 'v:lua.vim.lsp.omnifunc'
  M.complete_whole_suggestion(client, bufnr)
  return 'omnifunc'
end

---@param opts? ghostline.Opts
function M.setup(opts)
  opts = vim.tbl_deep_extend('force', M.defaults, opts or {})
  local group = vim.api.nvim_create_augroup('ghostline', { clear = true })
  vim.api.nvim_create_autocmd('LspAttach', {
    group = group,
    callback = function(event)
      local client = vim.lsp.get_client_by_id(event.data.client_id)
      if client and client.name == 'ghostline' then
        vim.b[event.buf].ghostline_mode = M.on_attach(client, event.buf, opts)
      end
    end,
  })

  local overrides = { init_options = M.init_options(opts) }
  if opts.cmd then overrides.cmd = opts.cmd end
  if opts.filetypes then overrides.filetypes = opts.filetypes end

  if vim.lsp.config and vim.lsp.enable then -- 0.11+
    vim.lsp.config('ghostline', overrides)
    vim.lsp.enable('ghostline')
    return
  end
  -- 0.10: start (or reuse) the client for each buffer of a listed filetype.
  local base = dofile(vim.api.nvim_get_runtime_file('lsp/ghostline.lua', false)[1])
  local config = vim.tbl_deep_extend('force', base, overrides, { name = 'ghostline' })
  vim.api.nvim_create_autocmd('FileType', {
    group = group,
    pattern = config.filetypes,
    callback = function(event)
      local root = vim.fs.root(event.buf, config.root_markers)
      vim.lsp.start(vim.tbl_extend('force', config, { root_dir = root }), { bufnr = event.buf })
    end,
  })
end

return M
