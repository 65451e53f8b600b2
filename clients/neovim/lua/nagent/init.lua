-- nagent: per-file LLM editing through the nagent-lsp language server.
--
--   require("nagent").setup({ cmd = { "nagent-lsp" }, settings = { model = "gpt-4o-mini" } })
--
-- Works on Neovim 0.7 (vim.lsp.start_client + buf_attach_client) and 0.8+ (vim.lsp.start).
-- Every nagent-lsp command takes one JSON object; results arrive asynchronously, so the
-- editor never blocks while the model works ($/progress is echoed as it comes).

local M = {}

local defaults = {
  cmd = { "nagent-lsp" },
  cmd_env = nil, -- extra environment for the server process
  settings = {}, -- sent as initializationOptions and as workspace/configuration section "nagent"
  filetypes = nil, -- nil: every file buffer; else a list of filetypes to attach to
  autostart = true, -- attach when a file is opened (else on the first :Nagent command)
  root_markers = { ".git" },
  timeout_ms = 600000, -- how long a command may take (edits call the model)
  capabilities = nil, -- extra client capabilities (merged into Neovim's defaults)
  on_attach = nil, -- function(client, bufnr) run after nagent attaches to a buffer
  keymaps = true, -- map K to hover where nothing else maps it (0.7 has no default K)
  -- window/showMessageRequest: "ask" prompts with inputlist when a UI is attached and
  -- dismisses (null) when headless; "dismiss" always answers null; or a function
  -- (message, titles) -> index|nil. Never blocks a headless Neovim.
  message_request = "ask",
}

M.config = vim.deepcopy(defaults)
M.last = {} -- command name -> { err = ..., result = ... } of the latest reply (handy in scripts)

local NAME = "nagent"
local ready = {} -- client id -> true once initialized
local roots = {} -- root dir -> client id (0.7 path)
local group = nil

local function has(version)
  return vim.fn.has("nvim-" .. version) == 1
end

local function notify(msg, level)
  vim.notify("nagent: " .. msg, level or vim.log.levels.INFO)
end

local function empty_dict_if_empty(t)
  if t == nil or next(t) == nil then
    return vim.empty_dict()
  end
  return t
end

-- Client helpers that work on 0.7 (dot calls) and 0.11 (method calls).
local function client_request(client, method, params, handler, bufnr)
  if has("0.11") then
    return client:request(method, params, handler, bufnr)
  end
  return client.request(method, params, handler, bufnr)
end

local function client_notify(client, method, params)
  if has("0.11") then
    return client:notify(method, params)
  end
  return client.notify(method, params)
end

local function client_cancel(client, id)
  if has("0.11") then
    return client:cancel_request(id)
  end
  return client.cancel_request(id)
end

local function clients_for(bufnr)
  local out = {}
  if vim.lsp.get_clients then
    for _, c in ipairs(vim.lsp.get_clients({ bufnr = bufnr, name = NAME })) do
      table.insert(out, c)
    end
  else
    for _, c in pairs(vim.lsp.buf_get_clients(bufnr)) do
      if c.name == NAME then
        table.insert(out, c)
      end
    end
  end
  return out
end

local function find_root(path)
  local dir = vim.fn.fnamemodify(path, ":p:h")
  local search = (dir:gsub("([ ,\\])", "\\%1")) .. ";"
  for _, marker in ipairs(M.config.root_markers) do
    local found = vim.fn.finddir(marker, search)
    if found == "" then
      found = vim.fn.findfile(marker, search)
    end
    if found ~= "" then
      local full = (vim.fn.fnamemodify(found, ":p"):gsub("/$", ""))
      return vim.fn.fnamemodify(full, ":h")
    end
  end
  return dir
end

-- window/showMessageRequest without blocking a headless Neovim (0.7's default does).
local function message_request_handler(_, result)
  local titles = {}
  for _, action in ipairs((result and result.actions) or {}) do
    table.insert(titles, action.title)
  end
  local policy = M.config.message_request
  local index
  if type(policy) == "function" then
    index = policy(result.message, titles)
  elseif policy == "ask" and #vim.api.nvim_list_uis() > 0 and #titles > 0 then
    local lines = { "nagent: " .. result.message }
    for i, t in ipairs(titles) do
      table.insert(lines, string.format("%d. %s", i, t))
    end
    index = vim.fn.inputlist(lines)
  else
    notify(result.message .. " (no answer: Neovim is headless)", vim.log.levels.WARN)
  end
  if index and index >= 1 and index <= #titles then
    return result.actions[index]
  end
  return vim.NIL
end

local progress_title = {}
local function progress_handler(err, result, ctx, config)
  local default = vim.lsp.handlers["$/progress"]
  if default then
    pcall(default, err, result, ctx, config)
  end
  local value = result and result.value
  if type(value) ~= "table" then
    return
  end
  if value.kind == "begin" then
    progress_title[result.token] = value.title
  end
  local text = table.concat(
    vim.tbl_filter(function(s)
      return s ~= nil and s ~= ""
    end, { progress_title[result.token], value.message }),
    " "
  )
  if value.kind == "end" then
    progress_title[result.token] = nil
  end
  vim.schedule(function()
    vim.api.nvim_echo({ { (text:gsub("^nagent: ", "nagent: ")), "Comment" } }, false, {})
  end)
end

local function on_attach(client, bufnr)
  if M.config.keymaps and vim.fn.maparg("K", "n") == "" then
    pcall(vim.keymap.set, "n", "K", vim.lsp.buf.hover, { buffer = bufnr, desc = "LSP hover (nagent history)" })
  end
  if M.config.on_attach then
    M.config.on_attach(client, bufnr)
  end
end

local function capabilities()
  local caps = vim.lsp.protocol.make_client_capabilities()
  if M.config.capabilities then
    caps = vim.tbl_deep_extend("force", caps, M.config.capabilities)
  end
  -- 0.7 answers workspace/configuration (from `settings`) but does not say so.
  caps.workspace = caps.workspace or {}
  caps.workspace.configuration = true
  return caps
end

local function client_config(root)
  local settings = M.config.settings or {}
  return {
    capabilities = capabilities(),
    name = NAME,
    cmd = M.config.cmd,
    cmd_env = M.config.cmd_env,
    root_dir = root,
    workspace_folders = { { uri = vim.uri_from_fname(root), name = root } },
    init_options = empty_dict_if_empty(vim.deepcopy(settings)),
    settings = { nagent = empty_dict_if_empty(vim.deepcopy(settings)) },
    handlers = {
      ["window/showMessageRequest"] = message_request_handler,
      ["$/progress"] = progress_handler,
    },
    on_init = function(client)
      ready[client.id] = true
    end,
    on_exit = function(_, _, client_id)
      ready[client_id] = nil
      for r, id in pairs(roots) do
        if id == client_id then
          roots[r] = nil
        end
      end
    end,
    on_attach = on_attach,
  }
end

local function attachable(bufnr)
  if not vim.api.nvim_buf_is_valid(bufnr) or vim.bo[bufnr].buftype ~= "" then
    return false
  end
  local name = vim.api.nvim_buf_get_name(bufnr)
  if name == "" or name:match("^%a[%w+.-]*://") then
    return false
  end
  local fts = M.config.filetypes
  return fts == nil or vim.tbl_contains(fts, vim.bo[bufnr].filetype)
end

--- Attach nagent-lsp to a buffer (starting or reusing the server); returns the client id.
function M.attach(bufnr)
  bufnr = (bufnr == nil or bufnr == 0) and vim.api.nvim_get_current_buf() or bufnr
  local existing = clients_for(bufnr)[1]
  if existing then
    return existing.id
  end
  if not attachable(bufnr) then
    return nil
  end
  local root = find_root(vim.api.nvim_buf_get_name(bufnr))
  if vim.lsp.start then
    return vim.lsp.start(client_config(root), { bufnr = bufnr })
  end
  local id = roots[root]
  if not id or not vim.lsp.get_client_by_id(id) then
    id = vim.lsp.start_client(client_config(root))
    roots[root] = id
  end
  if id then
    vim.lsp.buf_attach_client(bufnr, id)
  end
  return id
end

function M.setup(opts)
  M.config = vim.tbl_deep_extend("force", vim.deepcopy(defaults), opts or {})
  if opts and opts.settings then
    M.config.settings = vim.deepcopy(opts.settings) -- replace, do not merge, settings
  end
  M.create_commands()
  group = vim.api.nvim_create_augroup("nagent", { clear = true })
  if M.config.autostart then
    vim.api.nvim_create_autocmd({ "BufReadPost", "BufNewFile", "FileType" }, {
      group = group,
      callback = function(args)
        M.attach(args.buf)
      end,
    })
    for _, b in ipairs(vim.api.nvim_list_bufs()) do
      if vim.api.nvim_buf_is_loaded(b) then
        M.attach(b)
      end
    end
  end
  M._setup_done = true
end

--- Push changed settings to running servers (they pull workspace/configuration again).
function M.update_settings(settings)
  M.config.settings = vim.deepcopy(settings)
  local all = vim.lsp.get_clients and vim.lsp.get_clients({ name = NAME }) or vim.lsp.get_active_clients()
  for _, c in ipairs(all) do
    if c.name == NAME then
      local section = { nagent = empty_dict_if_empty(vim.deepcopy(settings)) }
      c.config.settings = section
      c.settings = section -- 0.11 answers workspace/configuration from client.settings
      client_notify(c, "workspace/didChangeConfiguration", { settings = section })
    end
  end
end

local function wait_ready(client_id, callback, deadline)
  deadline = deadline or (vim.loop.now() + 30000)
  local client = vim.lsp.get_client_by_id(client_id)
  if client and (ready[client_id] or client.initialized) then
    return callback(client)
  end
  if not client or vim.loop.now() > deadline then
    return callback(nil)
  end
  vim.defer_fn(function()
    wait_ready(client_id, callback, deadline)
  end, 20)
end

local function error_text(err)
  if type(err) == "table" then
    return err.message or vim.inspect(err)
  end
  return tostring(err)
end

--- Run a nagent-lsp command with one JSON object argument, asynchronously.
--- callback(err, result) runs when the server answers (errors are also notified).
function M.execute(command, argument, callback, bufnr)
  bufnr = (bufnr == nil or bufnr == 0) and vim.api.nvim_get_current_buf() or bufnr
  if not M._setup_done then
    M.setup({})
  end
  local id = M.attach(bufnr)
  local function finish(err, result)
    M.last[command] = { err = err, result = result }
    if err then
      notify(command .. ": " .. error_text(err), vim.log.levels.ERROR)
    end
    if callback then
      callback(err, result)
    end
  end
  if not id then
    return finish({ message = "cannot attach nagent-lsp to this buffer" })
  end
  M.last[command] = nil
  wait_ready(id, function(client)
    if not client then
      return finish({ message = "nagent-lsp did not start (cmd: " .. table.concat(M.config.cmd, " ") .. ")" })
    end
    local done = false
    local ok, request_id = client_request(client, "workspace/executeCommand", {
      command = command,
      arguments = { empty_dict_if_empty(argument) },
    }, function(err, result)
      if done then
        return
      end
      done = true
      finish(err, result)
    end, bufnr)
    if not ok then
      return finish({ message = "the request could not be sent" })
    end
    M._pending = { client = client, id = request_id, command = command }
    vim.defer_fn(function()
      if not done then
        done = true
        client_cancel(client, request_id)
        finish({ message = "timed out after " .. M.config.timeout_ms .. " ms" })
      end
    end, M.config.timeout_ms)
  end)
end

--- Cancel the command that is running (if any).
function M.cancel()
  local p = M._pending
  if p then
    client_cancel(p.client, p.id)
    notify(p.command .. " cancelled")
    M._pending = nil
  end
end

local function uri(bufnr)
  return vim.uri_from_bufnr(bufnr)
end

local function utf16_len(text)
  local ok, _, col16 = pcall(vim.str_utfindex, text)
  if ok and col16 then
    return col16
  end
  return #text
end

-- ---------------------------------------------------------------- commands

-- The options of a command (never nil) and the buffer it acts on: opts.bufnr, else the current one.
local function target(options)
  local opts = options or {}
  return opts, opts.bufnr or vim.api.nvim_get_current_buf()
end

-- M.execute(command, argument) for bufnr (nil: the current buffer); on_ok(result) runs when the
-- server answers without error and with a result, then callback(err, result) runs if given.
local function run(bufnr, command, argument, on_ok, callback)
  M.execute(command, argument, function(err, res)
    if not err and res then
      on_ok(res)
    end
    if callback then
      callback(err, res)
    end
  end, bufnr)
end

--- :NagentEdit — edit the buffer (lines line1..line2 when given) according to request.
function M.edit(request, options, callback)
  local opts, bufnr = target(options)
  if not request or vim.trim(request) == "" then
    vim.ui.input({ prompt = "nagent edit: " }, function(input)
      if input and vim.trim(input) ~= "" then
        M.edit(input, opts, callback)
      end
    end)
    return
  end
  local arg = { uri = uri(bufnr), request = request }
  if opts.line1 and opts.line2 then
    local last = vim.api.nvim_buf_get_lines(bufnr, opts.line2 - 1, opts.line2, false)[1] or ""
    arg.range = {
      start = { line = opts.line1 - 1, character = 0 },
      ["end"] = { line = opts.line2 - 1, character = utf16_len(last) },
    }
  end
  notify("editing…")
  run(bufnr, "nagent.edit", arg, function(res)
    local tokens = res.tokens or {}
    if res.applied then
      notify(string.format("applied %s edit(s) (%s turn(s), %s in / %s out tokens) %s",
        tostring(res.edits), tostring(tokens.turns), tostring(tokens.input), tostring(tokens.output),
        res.response or ""))
    else
      notify("nothing applied: " .. tostring(res.reason or "no change") .. " " .. (res.response or ""),
        vim.log.levels.WARN)
    end
  end, callback)
end

--- :NagentConversation — open the file's conversation (Neovim 0.11 lets the server show it).
function M.conversation(callback, bufnr)
  bufnr = bufnr or vim.api.nvim_get_current_buf()
  run(bufnr, "nagent.conversation.open", { uri = uri(bufnr) }, function(res)
    if res.path then
      local shown = res.shown == true
      local current = vim.api.nvim_buf_get_name(0)
      if not shown or vim.fn.fnamemodify(current, ":p") ~= vim.fn.fnamemodify(res.path, ":p") then
        if vim.fn.bufwinnr(res.path) == -1 then
          vim.cmd("split " .. vim.fn.fnameescape(res.path))
        end
      end
    end
  end, callback)
end

function M.clear_conversation(callback, bufnr)
  bufnr = bufnr or vim.api.nvim_get_current_buf()
  run(bufnr, "nagent.conversation.clear", { uri = uri(bufnr) }, function(res)
    notify("conversation archived to " .. tostring(res.archivedPath))
  end, callback)
end

-- A scratch buffer in a split; `targets[line]` is a file to open on <CR>.
local function show_list(name, lines, targets)
  local buf = vim.fn.bufnr(name)
  if buf == -1 then
    buf = vim.api.nvim_create_buf(false, true)
    vim.api.nvim_buf_set_name(buf, name)
  end
  vim.bo[buf].modifiable = true
  vim.api.nvim_buf_set_lines(buf, 0, -1, false, lines)
  vim.bo[buf].modifiable = false
  vim.bo[buf].bufhidden = "hide"
  vim.bo[buf].filetype = "nagent"
  vim.b[buf].nagent_targets = targets
  vim.keymap.set("n", "<CR>", function()
    local t = (vim.b[buf].nagent_targets or {})[tostring(vim.fn.line("."))]
    if t then
      vim.cmd("wincmd p")
      vim.cmd("edit " .. vim.fn.fnameescape(t))
    end
  end, { buffer = buf, desc = "nagent: open the file on this line" })
  vim.keymap.set("n", "q", "<cmd>close<cr>", { buffer = buf })
  if vim.fn.bufwinnr(buf) == -1 then
    vim.cmd("botright split")
    vim.api.nvim_win_set_buf(0, buf)
  end
  return buf
end

local function abs(path, root)
  if path:sub(1, 1) == "/" then
    return path
  end
  return root .. "/" .. path
end

local function coedit_lines(rows, root, lines, targets)
  for _, r in ipairs(rows or {}) do
    local rate = type(r.rate) == "number" and string.format("%d%%", math.floor(r.rate * 100 + 0.5)) or tostring(r.rate or "")
    table.insert(lines, string.format("  %-40s %5s  %5s  %s", r.path, tostring(r.count or ""), rate, tostring(r.level or "")))
    targets[tostring(#lines)] = abs(r.path, root)
  end
end

--- :NagentHistory — the file's commits, authors and co-edited files.
function M.history(options, callback)
  local opts, bufnr = target(options)
  local file = vim.api.nvim_buf_get_name(bufnr)
  run(bufnr, "nagent.history", { uri = uri(bufnr), maxCommits = opts.max_commits }, function(res)
    local root = res.repository or find_root(file)
    local commits = res.commits or {}
    local lines = {
      string.format("History of %s  (%d commit%s)", res.file or file, #commits, #commits == 1 and "" or "s"),
      "Repository: " .. tostring(root),
      "",
      "Authors",
    }
    local targets = {}
    for _, a in ipairs(res.authors or {}) do
      table.insert(lines, string.format("  %-30s <%s>  %s commit(s)", a.name or "", a.email or "", tostring(a.commits or 0)))
    end
    table.insert(lines, "")
    table.insert(lines, "Commits")
    for _, c in ipairs(commits) do
      local summary = c.summary
      if summary == nil or summary == vim.NIL or summary == "" then
        summary = c.subject
      end
      table.insert(lines, string.format("  %s  %s  %-20s  %s", c.short or (c.hash or ""):sub(1, 7),
        tostring(c.date or ""):sub(1, 10), tostring(c.author or ""), tostring(summary or "")))
    end
    local coedits = res.coedits
    if type(coedits) == "table" and coedits.rows then
      coedits = coedits.rows
    end
    if type(coedits) == "table" and #coedits > 0 then
      table.insert(lines, "")
      table.insert(lines, "Co-edited files")
      coedit_lines(coedits, root, lines, targets)
    end
    show_list("nagent://history", lines, targets)
  end, callback)
end

--- :NagentCoedits — files that change together with this one; <CR> opens a row's file.
function M.coedits(options, callback)
  local opts, bufnr = target(options)
  local file = vim.api.nvim_buf_get_name(bufnr)
  run(bufnr, "nagent.coedits", { uri = uri(bufnr), limit = opts.limit }, function(res)
    local root = find_root(file)
    local lines = {
      string.format("Files co-edited with %s  (over %s commit(s))", res.file or file, tostring(res.commits or "?")),
      "",
      string.format("  %-40s %5s  %5s  %s", "file", "count", "rate", "level"),
    }
    local targets = {}
    coedit_lines(res.rows, root, lines, targets)
    show_list("nagent://coedits", lines, targets)
  end, callback)
end

--- :NagentSplit [targetBytes]
function M.split(options, callback)
  local opts, bufnr = target(options)
  run(bufnr, "nagent.split", { uri = uri(bufnr), targetBytes = opts.target_bytes }, function(res)
    vim.b[bufnr].nagent_index_path = res.indexPath
    notify(string.format("split into %d segment(s) (%s); index %s", #(res.segments or {}),
      tostring(res.splitType), tostring(res.indexPath)))
  end, callback)
end

--- :NagentPatch[!] [indexPath] — merge split segments back (! skips the hash check).
function M.patch(options, callback)
  local opts, bufnr = target(options)
  local index = opts.index_path
  if not index or index == "" then
    index = vim.b[bufnr].nagent_index_path
  end
  if not index or index == "" then
    return notify("no split index: run :NagentSplit first or give the index path", vim.log.levels.ERROR)
  end
  run(bufnr, "nagent.patch", { indexPath = vim.fn.fnamemodify(index, ":p"), force = opts.force or nil }, function(res)
    notify(string.format("patch %s%s", res.changed and "changed the file" or "found no change",
      res.applied and ", applied" or ""))
  end, callback)
end

--- :NagentSummarize — the file's summary in a scratch buffer.
function M.summarize(options, callback)
  local _, bufnr = target(options)
  run(bufnr, "nagent.summarize", { uri = uri(bufnr) }, function(res)
    show_list("nagent://summary", vim.split(tostring(res.summary or ""), "\n", { plain = true }), {})
  end, callback)
end

--- :NagentStatus
function M.status(callback)
  run(nil, "nagent.status", vim.empty_dict(), function(res)
    notify(string.format("%s — model %s%s, state %s", tostring(res.version), tostring(res.model),
      res.modelConfigured and "" or " (not configured)", tostring(res.stateRoot)))
  end, callback)
end

--- Define the :Nagent* user commands (plugin/nagent.lua does this at start-up; setup() too).
function M.create_commands()
  local command = vim.api.nvim_create_user_command
  command("NagentEdit", function(opts)
    local range = nil
    if opts.range and opts.range > 0 then
      range = { line1 = opts.line1, line2 = opts.line2 }
    end
    M.edit(opts.args, range)
  end, { nargs = "*", range = true, desc = "nagent: edit this buffer (or the range) with a request" })

  command("NagentConversation", function()
    M.conversation()
  end, { desc = "nagent: open this file's conversation" })

  command("NagentClearConversation", function()
    M.clear_conversation()
  end, { desc = "nagent: archive this file's conversation and start afresh" })

  command("NagentHistory", function(opts)
    M.history({ max_commits = tonumber(opts.args) })
  end, { nargs = "?", desc = "nagent: this file's commits, authors and co-edits" })

  command("NagentCoedits", function(opts)
    M.coedits({ limit = tonumber(opts.args) })
  end, { nargs = "?", desc = "nagent: files that change together with this one" })

  command("NagentSplit", function(opts)
    M.split({ target_bytes = tonumber(opts.args) })
  end, { nargs = "?", desc = "nagent: split this file into indexed segments" })

  command("NagentPatch", function(opts)
    M.patch({ index_path = opts.args, force = opts.bang })
  end, { nargs = "?", bang = true, complete = "file", desc = "nagent: merge split segments back (! = force)" })

  command("NagentSummarize", function()
    M.summarize()
  end, { desc = "nagent: summarize this file" })

  command("NagentStatus", function()
    M.status()
  end, { desc = "nagent: server status" })

  command("NagentCancel", function()
    M.cancel()
  end, { desc = "nagent: cancel the running command" })
end

return M
