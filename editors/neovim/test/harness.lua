-- A small test runner for headless Neovim driven by its own event loop: each test runs in a
-- coroutine that yields while Neovim processes typed keys (nvim_input), LSP messages and timers,
-- so keys go through insert mode exactly as a person's would. Prints TAP-like lines, then
-- "N passed, M failed", and exits non-zero on failure.
local H = { tests = {}, log = {} }

local function out(line)
  io.stdout:write(line .. '\n')
  io.stdout:flush()
end
H.out = out

---@param name string
---@param fn fun()
function H.test(name, fn)
  table.insert(H.tests, { name = name, fn = fn })
end

--- Yields to the event loop until `cond()` is truthy; fails after `ms`.
---@return any the value of cond()
function H.wait(ms, cond, what)
  local co = assert(coroutine.running(), 'H.wait outside a test')
  local deadline = vim.uv.now() + ms
  while true do
    local ok, value = pcall(cond)
    if ok and value then
      return value
    end
    if vim.uv.now() > deadline then
      local detail = type(what) == 'function' and what() or what
      error(('timed out after %d ms waiting for %s%s'):format(ms, detail or 'a condition', ok and '' or (': ' .. tostring(value))), 2)
    end
    vim.defer_fn(function()
      coroutine.resume(co)
    end, 10)
    coroutine.yield()
  end
end

--- Lets the event loop run for `ms`.
function H.sleep(ms)
  local t = vim.uv.now() + ms
  H.wait(ms + 1000, function() return vim.uv.now() >= t end, 'sleep')
end

--- Types keys as a user would (through the input queue), then waits until Neovim has read them.
function H.type(keys)
  vim.api.nvim_input(keys)
  H.wait(5000, function()
    return vim.fn.getchar(1) == 0 and vim.api.nvim_get_mode().blocking == false
  end, 'typeahead to drain')
end

--- Sends an LSP request through the client and waits for its answer.
---@return table|nil result, table|nil err
function H.request(client, method, params, bufnr, ms)
  local done, result, err = false, nil, nil
  local ok = client:request(method, params, function(e, r)
    err, result, done = e, r, true
  end, bufnr)
  assert(ok, 'request not sent: ' .. method)
  local started = vim.uv.hrtime()
  H.wait(ms or 120000, function() return done end, method)
  out(('# %s answered in %.0f ms'):format(method, (vim.uv.hrtime() - started) / 1e6))
  return result, err
end

function H.eq(expected, actual, what)
  if not vim.deep_equal(expected, actual) then
    error(('%s: expected %s, got %s'):format(what or 'values differ', vim.inspect(expected), vim.inspect(actual)), 2)
  end
end

function H.ok(value, what)
  if not value then
    error(what or 'assertion failed', 2)
  end
  return value
end

--- Runs every registered test in order, then quits Neovim with the result.
function H.run()
  local co = coroutine.create(function()
    local passed, failed = 0, 0
    for i, t in ipairs(H.tests) do
      local started = vim.uv.hrtime()
      local ok, err = xpcall(t.fn, debug.traceback)
      local ms = (vim.uv.hrtime() - started) / 1e6
      -- Each test starts in Normal mode, whatever the last one left.
      pcall(H.type, [[<C-\><C-n>]])
      if ok then
        passed = passed + 1
        out(('ok %d - %s (%.0f ms)'):format(i, t.name, ms))
      else
        failed = failed + 1
        out(('not ok %d - %s (%.0f ms)'):format(i, t.name, ms))
        for line in tostring(err):gmatch('[^\n]+') do
          out('    # ' .. line)
        end
      end
    end
    -- On a line of its own, whatever Neovim printed before.
    out(('\n%d passed, %d failed'):format(passed, failed))
    vim.schedule(function()
      vim.cmd(failed == 0 and 'qall!' or 'cquit! 1')
    end)
  end)
  vim.schedule(function()
    local ok, err = coroutine.resume(co)
    if not ok then
      out('runner crashed: ' .. tostring(err))
      vim.cmd('cquit! 2')
    end
  end)
end

return H
