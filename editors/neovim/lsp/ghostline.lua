-- ghostline: local AI code completion (ghost text and completion items) over LSP.
-- Neovim 0.11+: put this folder on 'runtimepath' (or copy this file to ~/.config/nvim/lsp/),
-- then `vim.lsp.enable('ghostline')`. Override any field with `vim.lsp.config('ghostline', {…})`.
-- Settings (README "Configuration") go in `init_options`; `settings` is sent again with
-- workspace/didChangeConfiguration whenever you change it, and layers over `init_options` key
-- by key (it names only what changes; the model stays loaded).

---@type vim.lsp.Config
return {
  cmd = { vim.g.ghostline_cmd or 'ghostline' },
  filetypes = {
    'c', 'cpp', 'cs', 'css', 'go', 'html', 'java', 'javascript', 'javascriptreact', 'json',
    'kotlin', 'lua', 'markdown', 'php', 'python', 'ruby', 'rust', 'scala', 'sh', 'sql',
    'swift', 'toml', 'typescript', 'typescriptreact', 'vim', 'yaml', 'zig',
  },
  root_markers = { '.git' },
  -- One server for all roots: the model is loaded once.
  workspace_required = false,
  init_options = {
    -- Empty: the server reads $GHOSTLINE_MODEL.
    model = { path = vim.env.GHOSTLINE_MODEL },
  },
}
