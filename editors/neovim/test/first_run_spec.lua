-- The first run in a real Neovim: no model configured, an empty Hugging Face cache and the
-- loopback Hub of scripts/fake-hub.py (the test model posing as the Qwen coder the server
-- offers). The server asks with window/showMessageRequest, which Neovim shows through
-- vim.ui.select: the spec answers it as a user would, picking "Download …"; the download's
-- $/progress arrives (LspProgress), then "model ready", then a completion. Run by
-- scripts/test-editors.sh with GHOSTLINE_MODEL set and `ghostline` on PATH.
local H = dofile(vim.fs.joinpath(vim.fs.dirname(debug.getinfo(1, 'S').source:sub(2)), 'harness.lua'))
local repo = vim.fs.dirname(vim.fs.dirname(vim.fs.dirname(vim.fs.dirname(debug.getinfo(1, 'S').source:sub(2)))))

local model = assert(vim.env.GHOSTLINE_MODEL, 'GHOSTLINE_MODEL must name the test model')
assert(vim.fn.executable('ghostline') == 1, '`ghostline` must be on PATH')

-- The loopback Hub; its first line is its endpoint, its stderr the requests it saw.
local endpoint, hub_requests = nil, {}
local hub = vim.system({ 'python3', vim.fs.joinpath(repo, 'scripts', 'fake-hub.py'), model }, {
  stdout = function(_, data)
    endpoint = endpoint or (data and data:match('^(http://[^\n]+)'))
  end,
  stderr = function(_, data)
    for l in (data or ''):gmatch('[^\n]+') do
      table.insert(hub_requests, l)
    end
  end,
})

-- A fresh user: no model anywhere the server looks, nothing configured.
local home = vim.fn.tempname()
vim.fn.mkdir(home, 'p')
vim.env.GHOSTLINE_MODEL = nil
vim.env.HF_HOME = vim.fs.joinpath(home, 'hf')
vim.env.HF_HUB_CACHE = nil
vim.env.HF_TOKEN = nil
vim.env.HF_HUB_OFFLINE = nil
vim.env.XDG_CACHE_HOME = vim.fs.joinpath(home, 'cache')
vim.env.LLAMA_CACHE = vim.fs.joinpath(home, 'llama.cpp')
vim.env.OLLAMA_MODELS = vim.fs.joinpath(home, 'ollama')
vim.env.GHOSTLINE_LMSTUDIO_MODELS = vim.fs.joinpath(home, 'lmstudio')

-- The question, answered the way a user picks an item in vim.ui.select.
local asked = {}
vim.ui.select = function(items, opts, on_choice)
  table.insert(asked, { prompt = opts.prompt, titles = vim.tbl_map(opts.format_item, items) })
  for _, item in ipairs(items) do
    if vim.startswith(item.title, 'Download ') then
      return on_choice(item)
    end
  end
  on_choice(nil)
end

local logs, progress = {}, {}
vim.lsp.handlers['window/logMessage'] = function(_, params)
  table.insert(logs, params.message)
end
vim.api.nvim_create_autocmd('LspProgress', {
  callback = function(ev)
    local p = ev.data.params
    if type(p.token) == 'string' and vim.startswith(p.token, 'ghostline/pull/') then
      table.insert(progress, p.value)
    end
  end,
})

local dir = vim.fn.tempname()
vim.fn.mkdir(dir, 'p')
local path = vim.fs.joinpath(dir, 'first.py')
vim.fn.writefile({ 'def add(a, b):', '    return ' }, path)

local client, bufnr

H.test('the loopback Hub is up', function()
  H.wait(10000, function() return endpoint end, 'the fake Hub to print its endpoint')
  vim.env.HF_ENDPOINT = endpoint
  require('ghostline').setup({ settings = { model = { memoryBudgetMb = 4096 }, completion = { maxTokens = 16 } } })
end)

H.test('no model: the server asks, with the three choices', function()
  vim.cmd.edit(vim.fn.fnameescape(path))
  bufnr = vim.api.nvim_get_current_buf()
  client = H.wait(30000, function()
    return vim.lsp.get_clients({ bufnr = bufnr, name = 'ghostline' })[1]
  end, 'the ghostline client to attach')
  H.eq(nil, client.config.init_options.model.path, 'no model path configured')
  H.wait(30000, function() return #asked > 0 end, 'the first-run question')
  local titles = asked[1].titles
  H.eq(3, #titles, 'choices: ' .. vim.inspect(titles))
  H.ok(titles[1]:match('^Download qwen2%.5%-coder%-[%d.]+b %(%d+ MB%)$'), 'download choice: ' .. titles[1])
  H.eq({ 'Choose a file…', 'Not now' }, { titles[2], titles[3] }, 'other choices')
  H.ok(asked[1].prompt:find('no model configured', 1, true), asked[1].prompt)
end)

H.test('"Download": $/progress begin, report, end, then the model is ready', function()
  H.wait(120000, function()
    return progress[#progress] and progress[#progress].kind == 'end'
  end, function() return 'the download to end; progress ' .. vim.inspect(progress) .. ' logs ' .. vim.inspect(logs) end)
  H.eq('begin', progress[1].kind, 'first progress')
  H.ok(progress[1].title:find('downloading qwen2.5-coder-', 1, true), progress[1].title)
  local last_report
  for _, v in ipairs(progress) do
    if v.kind == 'report' then last_report = v end
  end
  H.ok(last_report and last_report.percentage == 100 and last_report.message:find('MB/s', 1, true), vim.inspect(progress))
  H.wait(120000, function()
    for _, m in ipairs(logs) do
      if m:find('model ready', 1, true) then return true end
    end
  end, '"model ready"')
  local got = false
  for _, r in ipairs(hub_requests) do
    got = got or r:match('^GET /cdn/') ~= nil
  end
  H.ok(got, 'the Hub served the model: ' .. vim.inspect(hub_requests))
end)

H.test('then a completion, with no setting edited', function()
  local params = { textDocument = { uri = vim.uri_from_bufnr(bufnr) }, position = { line = 1, character = 11 } }
  local result, err = H.request(client, 'textDocument/completion', params, bufnr)
  H.eq(nil, err, 'completion error')
  local items = result and (result.items or result) or {}
  H.ok(#items > 0 and items[1].textEdit.newText ~= '', 'a suggestion: ' .. vim.inspect(result))
  H.eq(1, #asked, 'asked once')
  hub:kill(15)
end)

H.run()
