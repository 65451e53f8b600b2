-- nagent: per-file LLM editing through the nagent-lsp language server.
--
--   require("nagent").setup({ cmd = { "nagent-lsp" }, settings = { model = "gpt-4o-mini" } })
--
-- Works on Neovim 0.7 (vim.lsp.start_client + buf_attach_client) and 0.8+ (vim.lsp.start).
-- Every nagent-lsp command takes one JSON object; results arrive asynchronously, so the
-- editor never blocks while the model works ($/progress is echoed as it comes, on one line).
-- Answers go to a float (or a split: `answer = "split"`), proposals to :NagentReview, conversations are
-- filetype `nagentconv`.

local M = {}
local ui = require("nagent.ui")

---@class nagent.Config
---@field cmd string[] the server command
---@field cmd_env table<string, string>? extra environment of the server process
---@field settings table the server's settings (camelCase), initializationOptions and section "nagent"
---@field filetypes string[]? nil: every file buffer
---@field autostart boolean attach when a file is opened
---@field root_markers string[] what marks a project's root
---@field timeout_ms integer how long one command may take
---@field capabilities table? extra client capabilities
---@field on_attach fun(client: table, bufnr: integer)? run after nagent attaches to a buffer
---@field keymaps boolean|string true: "<leader>n" mappings; a string: another prefix; false: none
---@field answer "float"|"split"|"none" where the answer goes
---@field review "auto"|"inline"|"manual" what a proposal opens
---@field notify fun(msg: string, level: integer)? shows nagent's messages
---@field message_request "ask"|"dismiss"|fun(message: string, titles: string[]): integer? the server's questions

---@type nagent.Config
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
  -- true: K (hover) where nothing maps it, and buffer mappings under "<leader>n" (e edit, c conversation,
  -- h history, r review, a answers, R recipe, x cancel, s status / send in a conversation); a string is
  -- another prefix; false maps nothing.
  keymaps = true,
  answer = "float", -- where the model's answer goes: "float", "split" (nagent://answers) or "none"
  -- "auto": open :NagentReview when an edit returns a proposal (its hunks are also marked in the source buffers);
  -- "inline": mark the hunks in the source buffers and open the quickfix list of them; "manual": mark, say so
  review = "auto",
  notify = nil, -- function(msg, level) to show nagent's one-line messages (default: the message area)
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
  ui.say(msg, level)
end

--- The mapping prefix ("<leader>n" by default), or nil when keymaps are off.
---@return string?
function M.keymap_prefix()
  local k = M.config.keymaps
  if k == true then
    return "<leader>n"
  elseif type(k) == "string" and k ~= "" then
    return k
  end
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
    local lines = ui.lines({ "nagent: " .. tostring(result.message) }) -- a question of several lines too
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

local function apply_edit_handler(_, params, ctx)
  local client = vim.lsp.get_client_by_id(ctx.client_id)
  if not (params and params.edit and client) then
    return { applied = false, failureReason = "no edit" }
  end
  local ok, err = pcall(vim.lsp.util.apply_workspace_edit, params.edit, client.offset_encoding or "utf-16")
  return { applied = ok, failureReason = (not ok) and tostring(err) or nil }
end

local progress_title = {}
M.progress = {} -- token -> the latest progress line (for M.statusline())

local function progress_handler(err, result, ctx, config)
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
    M.progress[result.token] = nil
  else
    M.progress[result.token] = text
  end
  -- Neovim's own handler feeds vim.lsp.status() / LspProgress for statusline plugins; it echoes nothing.
  local default = vim.lsp.handlers["$/progress"]
  if default then
    pcall(default, err, result, ctx, config)
  end
  vim.schedule(function()
    pcall(vim.cmd, "redraw")
    -- one line, not kept in :messages: progress never piles up into a "Press ENTER" prompt
    local shown = text:gsub("^nagent:%s*", "")
    vim.api.nvim_echo({ { ui.one_line("nagent: " .. shown), "Comment" } }, false, {})
  end)
end

--- For a statusline: what nagent is doing ("" when idle).
---@return string
function M.statusline()
  local _, text = next(M.progress)
  if text then
    return text
  end
  if next(M.running) then
    return "nagent: working…"
  end
  return ""
end

local function map(bufnr, modes, lhs, rhs, desc)
  for _, mode in ipairs(modes) do
    if vim.fn.maparg(lhs, mode) == "" then
      pcall(vim.keymap.set, mode, lhs, rhs, { buffer = bufnr, desc = "nagent: " .. desc })
    end
  end
end

local function on_attach(client, bufnr)
  if M.config.keymaps then
    map(bufnr, { "n" }, "K", vim.lsp.buf.hover, "hover (the file's history)")
  end
  local p = M.keymap_prefix()
  if p then
    map(bufnr, { "n" }, p .. "e", ":NagentEdit ", "edit this file")
    map(bufnr, { "x" }, p .. "e", ":NagentEdit ", "edit the selected lines")
    map(bufnr, { "n" }, p .. "E", ":NagentEdit! ", "edit with an agent")
    map(bufnr, { "n" }, p .. "c", "<cmd>NagentConversation<cr>", "open this file's conversation")
    map(bufnr, { "n" }, p .. "h", "<cmd>NagentHistory<cr>", "this file's history")
    map(bufnr, { "n" }, p .. "r", "<cmd>NagentReview<cr>", "review proposed changes")
    map(bufnr, { "n" }, p .. "a", "<cmd>NagentAnswers<cr>", "every answer so far")
    map(bufnr, { "n", "x" }, p .. "R", ":NagentRecipe ", "run a recipe")
    map(bufnr, { "n" }, p .. "x", "<cmd>NagentCancel<cr>", "cancel the running command")
    map(bufnr, { "n" }, p .. "s", "<cmd>NagentStatus<cr>", "server status")
    map(bufnr, { "n" }, p .. "y", "<cmd>NagentAccept<cr>", "accept the proposed change at the cursor")
    map(bufnr, { "n" }, p .. "n", "<cmd>NagentReject<cr>", "reject the proposed change at the cursor")
    map(bufnr, { "n" }, p .. "w", "<cmd>NagentWhoWrote<cr>", "open the conversation that wrote this line")
    map(bufnr, { "n" }, p .. "@", "<cmd>NagentMention<cr>", "insert @path of a file to include")
    map(bufnr, { "n" }, p .. "m", ":NagentEdit! ", "edit with a chosen agent or model")
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
  -- This plugin asks the user for nagent.edit's request (the "nagent: edit selection" code action) and shows
  -- command results itself; the server offers that action, and stays quiet, only to clients that say so.
  caps.experimental = type(caps.experimental) == "table" and caps.experimental or {}
  -- stream: the answer arrives as `nagent/stream` notifications while the model writes it (lua/nagent/stream.lua)
  caps.experimental.nagent = { requestInput = true, stream = true }
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
    -- Changes go to the server at once: a command right after typing in the conversation (or the file) must
    -- see the typed text, and Neovim flushes only the command's own buffer before a request.
    flags = { debounce_text_changes = 0 },
    settings = { nagent = empty_dict_if_empty(vim.deepcopy(settings)) },
    handlers = {
      -- 0.7's own handler prints the edit's label: a second message line, so a "Press ENTER" prompt
      ["workspace/applyEdit"] = apply_edit_handler,
      ["window/showMessageRequest"] = message_request_handler,
      ["$/progress"] = progress_handler,
      ["nagent/stream"] = function(_, params)
        require("nagent.stream").on_stream(params)
      end,
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
  return fts == nil or vim.tbl_contains(fts, vim.bo[bufnr].filetype) or vim.bo[bufnr].filetype == "nagentconv"
end

-- Why the server cannot start, checked before spawning: Neovim would print its own error once per buffer.
M.spawn_error = nil
local function spawn_problem()
  local cmd = M.config.cmd
  if type(cmd) ~= "table" or type(cmd[1]) ~= "string" or cmd[1] == "" then
    return "cmd must be a list such as { \"nagent-lsp\" }"
  end
  if vim.fn.executable(cmd[1]) ~= 1 then
    return string.format("cannot start nagent-lsp: %s is not an executable (cmd = %s); install it or set cmd",
      cmd[1], vim.inspect(cmd))
  end
end

--- Attach nagent-lsp to a buffer (starting or reusing the server); returns the client id.
---@param bufnr? integer 0 or nil: the current buffer
---@return integer? client_id
function M.attach(bufnr)
  bufnr = (bufnr == nil or bufnr == 0) and vim.api.nvim_get_current_buf() or bufnr
  local existing = clients_for(bufnr)[1]
  if existing then
    return existing.id
  end
  if not attachable(bufnr) then
    return nil
  end
  local problem = spawn_problem()
  if problem then
    if M.spawn_error ~= problem then -- said once, not once per buffer
      M.spawn_error = problem
      notify(problem, vim.log.levels.ERROR)
    end
    return nil
  end
  M.spawn_error = nil
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

--- Configure nagent (see :help nagent-options), define the commands and attach to the open buffers.
---@param opts? nagent.Config|table
function M.setup(opts)
  M.config = vim.tbl_deep_extend("force", vim.deepcopy(defaults), opts or {})
  if opts and opts.settings then
    M.config.settings = vim.deepcopy(opts.settings) -- replace, do not merge, settings
  end
  M.spawn_error = nil
  ui.config.answer = M.config.answer
  ui.config.notify = M.config.notify
  M.create_commands()
  M.register_client_commands()
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
---@param settings table the server's settings (replacing the old ones)
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
---@param command string e.g. "nagent.edit"
---@param argument table? the command's argument (an empty table is sent as {})
---@param callback? fun(err: table?, result: any)
---@param bufnr? integer the buffer whose server runs it (nil: the current buffer)
function M.execute(command, argument, callback, bufnr)
  bufnr = (bufnr == nil or bufnr == 0) and vim.api.nvim_get_current_buf() or bufnr
  if not M._setup_done then
    M.setup({})
  end
  local id = M.attach(bufnr)
  local key = {}
  local function finish(err, result)
    M.running[key] = nil
    M.last[command] = { err = err, result = result }
    if err then
      notify(command .. ": " .. error_text(err), vim.log.levels.ERROR)
    end
    if callback then
      callback(err, result)
    end
  end
  if not id then
    return finish({ message = M.spawn_error or "cannot attach nagent-lsp to this buffer (not a file buffer?)" })
  end
  M.running[key] = { command = command }
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
    M.running[key] = M._pending
    vim.defer_fn(function()
      if not done then
        done = true
        client_cancel(client, request_id)
        finish({ message = "timed out after " .. M.config.timeout_ms .. " ms" })
      end
    end, M.config.timeout_ms)
  end)
end

M.running = {} -- the commands waiting for a reply

--- Cancel the command that is running (the latest one sent, if any).
function M.cancel()
  local p = M._pending
  if p then
    client_cancel(p.client, p.id)
    notify(p.command .. " cancelled")
    M._pending = nil
  else
    notify("nothing is running")
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

local conversation = require("nagent.conversation")
local review = require("nagent.review")
local trust = require("nagent.trust")

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
M.run = run -- for the feature modules (trust.lua): the same error policy

local function short(path)
  return vim.fn.fnamemodify(path, ":t")
end

-- A recipe's outputs as text (the answer when it has no `response`); fileText is the edit, not shown.
local function outputs_text(outputs)
  local out = {}
  for name, value in pairs(type(outputs) == "table" and outputs or {}) do
    if name ~= "fileText" then
      local text = type(value) == "string" and value or vim.fn.json_encode(value)
      local lines = vim.split(text, "\n", { plain = true })
      if #lines > 30 then
        lines = vim.list_slice(lines, 1, 30)
        table.insert(lines, "…")
      end
      table.insert(out, "**" .. name .. "**")
      vim.list_extend(out, lines)
      table.insert(out, "")
    end
  end
  return table.concat(out, "\n")
end

-- After an edit, an instruction or a recipe: one line in the message area, the answer in its window, the
-- conversation buffer reloaded, and a proposal opened for review.
local function present(bufnr, what, res, snap)
  local file = short(vim.api.nvim_buf_get_name(bufnr))
  local pid = res.proposal ~= nil and res.proposal ~= vim.NIL and review.id_of(res.proposal) or nil
  local status, level
  if res.applied then
    local files = type(res.files) == "table" and #res.files or 0
    status = string.format("applied %s edit(s)%s", tostring(res.edits or 0), files > 1 and (" in " .. files .. " files") or "")
  elseif pid then
    status = "awaiting review"
  else
    status = "nothing applied: " .. tostring(res.reason or "no change")
    level = vim.log.levels.WARN
  end
  local text = res.response
  if (text == nil or text == vim.NIL or text == "") and res.outputs then
    text = outputs_text(res.outputs)
  end
  local convo = type(res.conversation) == "table" and res.conversation.path or nil
  if convo then
    conversation.remember(convo, vim.api.nvim_buf_get_name(bufnr))
    conversation.sync(convo, snap)
  end
  local auto_review = pid and M.config.review == "auto"
  local saved = ui.config.answer
  if auto_review then
    ui.config.answer = "none" -- the review split shows the answer
  end
  local outside = res.outsideSelection == true and ui.outside_selection_text(res.outsideLines, function(u)
    local path = vim.uri_to_fname(u)
    local root = find_root(path) .. "/"
    return path:sub(1, #root) == root and path:sub(#root + 1) or short(path)
  end) or nil
  local notes = M.result_notes(res)
  ui.show_answer({ title = what .. " · " .. file, status = status, tokens = res.tokens, text = text, warning = outside,
    notes = notes })
  ui.config.answer = saved
  if type(res.message) == "string" and res.message ~= "" then -- the server's own line, shown verbatim
    notify((res.message:gsub("^nagent:%s*", "")), level)
  else
    notify(string.format("%s %s: %s · %s", what, file, status, ui.tokens_text(res.tokens)), level)
  end
  if outside then
    notify((outside:gsub("^nagent ", "")), vim.log.levels.WARN)
  end
  for _, n in ipairs(notes) do
    notify(n, vim.log.levels.WARN)
  end
  M.open_created(res, bufnr)
  if pid then
    review.answers[tostring(pid)] = text
    if auto_review then
      review.review(pid, { answer = text, bufnr = bufnr, conversation = convo })
    else
      -- the hunks where they apply (review = "inline" also opens the quickfix list of them)
      M.execute("nagent.review.show", { id = pid }, function(err, p)
        if not err and type(p) == "table" then
          require("nagent.inline").show(p, { open_quickfix = M.config.review == "inline" })
        end
      end, bufnr)
      local p = M.keymap_prefix()
      notify(string.format("%s %s: a proposal awaits review (%s, or :NagentReview)", what, file,
        p and (p .. "y / " .. p .. "n on a hunk") or ":NagentAccept / :NagentReject on a hunk"))
    end
  end
end

local function present_text(v)
  return type(v) == "string" and v ~= ""
end

--- What a result says beside the answer, one line each: the history's checks (`coupling[].message`,
--- `historyWarnings[].message`) and the `@path` mentions that were not included.
---@param res table an edit-like result
---@return string[]
function M.result_notes(res)
  local notes = {}
  for _, c in ipairs(type(res.coupling) == "table" and res.coupling or {}) do
    if type(c) == "table" and present_text(c.message) then
      table.insert(notes, c.message)
    end
  end
  for _, w in ipairs(type(res.historyWarnings) == "table" and res.historyWarnings or {}) do
    if type(w) == "table" and present_text(w.message) then
      local where = type(w.uri) == "string" and short(vim.uri_to_fname(w.uri)) or nil
      local line = type(w.line) == "number" and (":" .. (w.line + 1)) or ""
      table.insert(notes, (where and (where .. line .. ": ") or "") .. w.message)
    end
  end
  for _, m in ipairs(type(res.mentions) == "table" and res.mentions or {}) do
    if type(m) == "table" and m.included == false then
      table.insert(notes, string.format("@%s not included%s", tostring(m.path),
        present_text(m.reason) and (": " .. m.reason) or ""))
    end
  end
  return notes
end

--- The files a run created: named in one message and opened (listed buffers; the first in a split), the cursor
--- staying where it was.
---@param res table an edit-like result (`files[{uri, edits, created}]`)
---@param bufnr integer the buffer the run was for
---@return string[] the created files' paths
function M.open_created(res, bufnr)
  local created = {}
  if res.applied ~= true then -- a proposal's new files do not exist until it is accepted
    return created
  end
  for _, f in ipairs(type(res.files) == "table" and res.files or {}) do
    if type(f) == "table" and f.created == true and type(f.uri) == "string" then
      table.insert(created, vim.uri_to_fname(f.uri))
    end
  end
  if #created == 0 then
    return created
  end
  local root = find_root(vim.api.nvim_buf_get_name(bufnr)) .. "/"
  local names = vim.tbl_map(function(path)
    return path:sub(1, #root) == root and path:sub(#root + 1) or path
  end, created)
  notify("created " .. table.concat(names, ", "))
  local current = vim.api.nvim_get_current_win()
  for i, path in ipairs(created) do
    local b = vim.fn.bufadd(path)
    vim.bo[b].buflisted = true
    if i == 1 and vim.fn.bufwinid(b) == -1 then
      vim.cmd("belowright split " .. vim.fn.fnameescape(path))
    end
  end
  if vim.api.nvim_win_is_valid(current) then
    vim.api.nvim_set_current_win(current)
  end
  return created
end

M.present = present

--- Does the nagent server attached to `bufnr` offer `command` (its executeCommandProvider)?
---@param bufnr integer
---@param command string
---@return boolean
function M.server_has(bufnr, command)
  for _, c in ipairs(clients_for(bufnr)) do
    local cmds = c.server_capabilities and c.server_capabilities.executeCommandProvider
    if cmds and vim.tbl_contains(cmds.commands or {}, command) then
      return true
    end
  end
  return false
end

local function range_of(bufnr, opts)
  if opts.range then
    return opts.range
  end
  if opts.line1 and opts.line2 then
    local last = vim.api.nvim_buf_get_lines(bufnr, opts.line2 - 1, opts.line2, false)[1] or ""
    return {
      start = { line = opts.line1 - 1, character = 0 },
      ["end"] = { line = opts.line2 - 1, character = utf16_len(last) },
    }
  end
end

--- A list result's `problems` (broken or shadowed agent/recipe files): one warning each, so a file that does not
--- parse is named instead of silently missing from the picker.
---@param res table nagent.agents.list / nagent.recipes.list result
---@param what string "agent" or "recipe"
function M.show_problems(res, what)
  local problems = type(res.problems) == "table" and res.problems or {}
  if #problems == 0 then
    return
  end
  local lines = { string.format("%d %s file%s with problems:", #problems, what, #problems == 1 and "" or "s") }
  for _, p in ipairs(problems) do
    table.insert(lines, "  " .. (type(p) == "table" and tostring(p.message or vim.inspect(p)) or tostring(p)))
  end
  for _, p in ipairs(problems) do
    notify(type(p) == "table" and tostring(p.message or vim.inspect(p)) or tostring(p), vim.log.levels.WARN)
  end
  M.last_problems = lines
  return lines
end

---@class nagent.Choice
---@field kind "agent"|"profile"
---@field name string
---@field description? string
---@field source? string

--- Pick the agent or model profile for one request with vim.ui.select: the agents of nagent.agents.list, then
--- the model profiles of nagent.status's `profiles`. callback(choice) with a nagent.Choice (not called when
--- nothing was picked).
---@param callback fun(choice: nagent.Choice)
---@param bufnr? integer
function M.pick_model(callback, bufnr)
  bufnr = bufnr or vim.api.nvim_get_current_buf()
  run(bufnr, "nagent.agents.list", { uri = uri(bufnr) }, function(res)
    M.show_problems(res, "agent")
    local items = {}
    for _, a in ipairs(res.agents or {}) do
      if a.shadowed ~= true then
        table.insert(items, { kind = "agent", name = a.name, description = a.description, source = a.source })
      end
    end
    run(bufnr, "nagent.status", vim.empty_dict(), function(st)
      for _, name in ipairs(type(st.profiles) == "table" and st.profiles or {}) do
        local pname = type(name) == "table" and name.name or name
        table.insert(items, { kind = "profile", name = tostring(pname),
          description = "model profile" .. (pname == st.modelProfile and " (the default)" or "") })
      end
      if #items == 0 then
        return notify("the server lists no agents or model profiles", vim.log.levels.WARN)
      end
      vim.ui.select(items, {
        prompt = "nagent: which agent or model for this request?",
        format_item = function(i)
          return string.format("%-7s %-14s %s%s", i.kind, tostring(i.name), tostring(i.description or ""),
            i.source and (" (" .. tostring(i.source) .. ")") or "")
        end,
      }, function(choice)
        if choice then
          callback(choice)
        end
      end)
    end)
  end)
end

--- Pick an agent (nagent.agents.list) with vim.ui.select; callback(name) (nil when none was picked).
---@param callback fun(name: string)
---@param bufnr? integer
function M.pick_agent(callback, bufnr)
  bufnr = bufnr or vim.api.nvim_get_current_buf()
  run(bufnr, "nagent.agents.list", { uri = uri(bufnr) }, function(res)
    M.show_problems(res, "agent")
    local agents = res.agents or {}
    if #agents == 0 then
      return notify("the server lists no agents", vim.log.levels.WARN)
    end
    vim.ui.select(agents, {
      prompt = "nagent: which agent?",
      format_item = function(a)
        return string.format("%-12s %s (%s)", tostring(a.name), tostring(a.description or ""), tostring(a.source or ""))
      end,
    }, function(choice)
      if choice then
        callback(choice.name)
      end
    end)
  end)
end

-- "agent=NAME profile=NAME request" -> opts.agent / opts.profile set, the request without them.
local function take_prefixes(request, opts)
  while request do
    local key, name, rest = request:match("^%s*(%a+)=(%S+)%s*(.*)$")
    if key == "agent" or key == "profile" then
      opts[key], request = name, rest
    else
      break
    end
  end
  return request
end

---@class nagent.EditOptions
---@field bufnr? integer the buffer to edit (default: the current one)
---@field line1? integer first line (1-based) of the range
---@field line2? integer last line (1-based) of the range
---@field range? table an LSP range instead of line1/line2
---@field agent? string an agent for this one request
---@field profile? string a model profile for this one request
---@field pick_agent? boolean ask for the agent or model profile first (:NagentEdit!)

--- :NagentEdit — edit the buffer (lines line1..line2 when given) according to request. "agent=NAME" and
--- "profile=NAME" in front of the request choose the agent / model profile of this one request.
---@param request? string the request (asked for when empty)
---@param options? nagent.EditOptions
---@param callback? fun(err: table?, result: table?)
function M.edit(request, options, callback)
  local opts, bufnr = target(options)
  if opts.pick_agent then
    opts.pick_agent = nil
    return M.pick_model(function(choice)
      opts[choice.kind] = choice.name
      M.edit(request, opts, callback)
    end, bufnr)
  end
  request = take_prefixes(request, opts)
  if not request or vim.trim(request) == "" then
    local as = opts.agent or opts.profile
    vim.ui.input({ prompt = as and ("nagent edit (" .. as .. "): ") or "nagent edit: " }, function(input)
      if input and vim.trim(input) ~= "" then
        M.edit(input, opts, callback)
      end
    end)
    return
  end
  local arg = { uri = uri(bufnr), request = request, range = range_of(bufnr, opts), agent = opts.agent,
    profile = opts.profile }
  local as = opts.agent or opts.profile
  notify("editing " .. short(vim.api.nvim_buf_get_name(bufnr)) .. (as and (" as " .. as) or "") .. "…")
  local snap = conversation.snapshot()
  run(bufnr, "nagent.edit", arg, function(res)
    present(bufnr, "edit", res, snap)
  end, callback)
end

--- :NagentRecipe [name] [request] — run a recipe on the buffer (or the range); without a name, pick one. The
--- request is asked for only when the recipe uses one (needsRequest).
---@param name? string
---@param request? string
---@param options? nagent.EditOptions
---@param callback? fun(err: table?, result: table?)
function M.recipe(name, request, options, callback)
  local opts, bufnr = target(options)
  local no_request = not request or vim.trim(request) == ""
  if name and name ~= "" and no_request and not opts.asked then
    -- ask for a request only when the recipe uses one (`needsRequest`)
    return run(bufnr, "nagent.recipes.list", { uri = uri(bufnr) }, function(res)
      M.show_problems(res, "recipe")
      local needs = false
      for _, r in ipairs(res.recipes or {}) do
        if r.name == name and not r.shadowed then
          needs = r.needsRequest == true
        end
      end
      opts.asked = true
      if not needs then
        return M.recipe(name, nil, opts, callback)
      end
      vim.ui.input({ prompt = "nagent " .. name .. ": " }, function(input)
        if input and vim.trim(input) ~= "" then
          M.recipe(name, input, opts, callback)
        end
      end)
    end)
  end
  if not name or name == "" then
    return run(bufnr, "nagent.recipes.list", { uri = uri(bufnr) }, function(res)
      M.show_problems(res, "recipe")
      local recipes = res.recipes or {}
      if #recipes == 0 then
        return notify("no recipes (~/.nagent/recipes/*.yaml or <state root>/recipes/)", vim.log.levels.WARN)
      end
      vim.ui.select(recipes, {
        prompt = "nagent: which recipe?",
        format_item = function(r)
          return string.format("%-16s %s (%s)", tostring(r.name), tostring(r.description or ""), tostring(r.source or ""))
        end,
      }, function(choice)
        if choice then
          M.recipe(choice.name, request, opts, callback)
        end
      end)
    end)
  end
  local arg = { uri = uri(bufnr), recipe = name, range = range_of(bufnr, opts), profile = opts.profile }
  if request and vim.trim(request) ~= "" then
    arg.request = request
  end
  notify("running recipe " .. name .. " on " .. short(vim.api.nvim_buf_get_name(bufnr)) .. "…")
  local snap = conversation.snapshot()
  run(bufnr, "nagent.recipe.run", arg, function(res)
    present(bufnr, "recipe " .. name, res, snap)
  end, callback)
end

--- :NagentReview [id] — review a pending proposal: see lua/nagent/review.lua.
---@param id? string
---@param options? table {answer?, bufnr?, conversation?}
---@param callback? fun(err: table?, buf: integer?)
function M.review(id, options, callback)
  local opts = options or {}
  review.review(id, opts, callback)
end

--- :NagentAnswers — every answer of this session.
function M.answers()
  return ui.answers()
end

--- :NagentConversation — open the file's conversation, at its end (Neovim 0.11 lets the server show it).
---@param callback? fun(err: table?, result: table?)
---@param bufnr? integer
function M.conversation(callback, bufnr)
  bufnr = bufnr or vim.api.nvim_get_current_buf()
  if vim.b[bufnr].nagent_conversation then
    return callback and callback(nil, { path = vim.api.nvim_buf_get_name(bufnr), shown = true })
  end
  local file = vim.api.nvim_buf_get_name(bufnr)
  run(bufnr, "nagent.conversation.open", { uri = uri(bufnr) }, function(res)
    if res.path then
      conversation.remember(res.path, file)
      local current = vim.api.nvim_buf_get_name(0)
      if vim.fn.resolve(vim.fn.fnamemodify(current, ":p")) ~= vim.fn.resolve(vim.fn.fnamemodify(res.path, ":p")) then
        if vim.fn.bufwinnr(res.path) == -1 then
          vim.cmd("split " .. vim.fn.fnameescape(res.path))
        else
          vim.cmd(vim.fn.bufwinnr(res.path) .. "wincmd w")
        end
      end
      local cbuf = vim.fn.bufnr(res.path)
      if cbuf ~= -1 then
        if vim.bo[cbuf].filetype ~= "nagentconv" then
          vim.bo[cbuf].filetype = "nagentconv"
        end
        conversation.setup_buffer(cbuf)
        -- where the next request is typed (the server's draftLine), else the end
        local win = vim.fn.bufwinid(cbuf)
        if type(res.draftLine) == "number" and win ~= -1 then
          local line = math.max(1, math.min(res.draftLine + 1, vim.api.nvim_buf_line_count(cbuf)))
          pcall(vim.api.nvim_win_set_cursor, win, { line, 0 })
        end
      end
    end
  end, callback)
end

function M.clear_conversation(callback, bufnr)
  bufnr = bufnr or vim.api.nvim_get_current_buf()
  run(bufnr, "nagent.conversation.clear", { uri = uri(bufnr) }, function(res)
    notify("conversation archived to " .. short(tostring(res.archivedPath)))
  end, callback)
end

-- The source file of a conversation buffer (the conversation commands act on that file), else the buffer itself.
local function conversation_source(bufnr)
  local name = vim.api.nvim_buf_get_name(bufnr)
  if vim.b[bufnr].nagent_conversation or conversation.is_conversation(name) then
    local t = conversation.target_of(name)
    if t then
      local b = vim.fn.bufadd(t)
      vim.fn.bufload(b)
      return b
    end
  end
  return bufnr
end

--- :NagentConversationSave NAME — keep a copy of this file's conversation under NAME.
---@param name string
---@param callback? fun(err: table?, result: table?)
---@param bufnr? integer
function M.conversation_save(name, callback, bufnr)
  local b = conversation_source(bufnr or vim.api.nvim_get_current_buf())
  if not name or vim.trim(name) == "" then
    return notify("give the saved conversation a name: :NagentConversationSave NAME", vim.log.levels.WARN)
  end
  run(b, "nagent.conversation.save", { uri = uri(b), name = vim.trim(name) }, function(res)
    notify("conversation saved to " .. tostring(res.path))
  end, callback)
end

--- :NagentConversationLoad NAME — make the conversation saved under NAME this file's conversation.
---@param name string
---@param callback? fun(err: table?, result: table?)
---@param bufnr? integer
function M.conversation_load(name, callback, bufnr)
  local b = conversation_source(bufnr or vim.api.nvim_get_current_buf())
  if not name or vim.trim(name) == "" then
    return notify("name the saved conversation: :NagentConversationLoad NAME", vim.log.levels.WARN)
  end
  local snap = conversation.snapshot()
  run(b, "nagent.conversation.load", { uri = uri(b), name = vim.trim(name) }, function(res)
    notify("conversation loaded from " .. tostring(res.path))
    conversation.sync_all(snap)
  end, callback)
end

--- :NagentConversationCompact [instruction] — archive the conversation and restart it from a summary.
---@param instruction? string what the summary keeps
---@param callback? fun(err: table?, result: table?)
---@param bufnr? integer
function M.conversation_compact(instruction, callback, bufnr)
  local b = conversation_source(bufnr or vim.api.nvim_get_current_buf())
  local arg = { uri = uri(b) }
  if instruction and vim.trim(instruction) ~= "" then
    arg.instruction = instruction
  end
  local snap = conversation.snapshot()
  notify("compacting the conversation of " .. short(vim.api.nvim_buf_get_name(b)) .. "…")
  run(b, "nagent.conversation.compact", arg, function(res)
    notify(string.format("conversation compacted: %s → %s tokens (archived to %s)", tostring(res.tokensBefore),
      tostring(res.tokensAfter), tostring(res.archivedPath)))
    conversation.sync_all(snap)
  end, callback)
end

--- :NagentConversationSummarize — the conversation's summary in a scratch buffer.
---@param callback? fun(err: table?, result: table?)
---@param bufnr? integer
function M.conversation_summarize(callback, bufnr)
  local b = conversation_source(bufnr or vim.api.nvim_get_current_buf())
  run(b, "nagent.conversation.summarize", { uri = uri(b) }, function(res)
    local buf = ui.scratch("nagent://conversation-summary", ui.lines(tostring(res.summary or "")), "markdown")
    vim.api.nvim_set_current_win(ui.split(buf, 12))
  end, callback)
end

--- :NagentConversations — every conversation of the workspace; <CR> opens one.
---@param callback? fun(err: table?, result: table?)
function M.conversations(callback)
  run(nil, "nagent.conversation.list", vim.empty_dict(), function(res)
    local lines, targets = { "Conversations  (<CR> opens one)", "" }, {}
    for _, f in ipairs(res.files or {}) do
      table.insert(lines, string.format("  %-40s %s", tostring(f.path), vim.fn.fnamemodify(tostring(f.conversation), ":t")))
      targets[tostring(#lines)] = f.conversation
      conversation.remember(f.conversation, f.path)
    end
    if #(res.files or {}) == 0 then
      table.insert(lines, "  (none yet)")
    end
    M.show_list("nagent://conversations", lines, targets)
  end, callback)
end

--- :NagentWhoWrote — open the conversation at the turn that wrote the line under the cursor
--- (nagent.attribution.at). A line nagent did not write: its attribution's message (git or notes) is shown.
---@param callback? fun(err: table?, result: table?)
---@param bufnr? integer
function M.attribution(callback, bufnr)
  bufnr = bufnr or vim.api.nvim_get_current_buf()
  local line = vim.api.nvim_win_get_cursor(0)[1] - 1
  run(bufnr, "nagent.attribution.at", { uri = uri(bufnr), line = line }, function(res)
    local a = res.attribution
    if a == nil or a == vim.NIL then
      return notify(string.format("line %d: nothing recorded about who wrote it", line + 1))
    end
    if present_text(a.message) then
      notify(a.message)
    end
    local path = a.conversationPath
    if not present_text(path) and present_text(a.conversationUri) then
      path = vim.uri_to_fname(a.conversationUri)
    end
    if not present_text(path) then
      return
    end
    conversation.remember(path, vim.api.nvim_buf_get_name(bufnr))
    if vim.fn.bufwinid(vim.fn.bufnr(path)) ~= -1 then
      vim.api.nvim_set_current_win(vim.fn.bufwinid(vim.fn.bufnr(path)))
    else
      vim.cmd("split " .. vim.fn.fnameescape(path))
    end
    local cbuf = vim.api.nvim_get_current_buf()
    if vim.bo[cbuf].filetype ~= "nagentconv" then
      vim.bo[cbuf].filetype = "nagentconv"
    end
    conversation.setup_buffer(cbuf)
    local at = type(a.conversationLine) == "number" and a.conversationLine + 1 or vim.api.nvim_buf_line_count(cbuf)
    at = math.max(1, math.min(at, vim.api.nvim_buf_line_count(cbuf)))
    vim.cmd("silent! normal! zv")
    pcall(vim.api.nvim_win_set_cursor, 0, { at, 0 })
    vim.cmd("silent! normal! zvzt")
  end, callback)
end

--- The workspace's files for the `@path` picker: `git ls-files` (tracked and untracked, not ignored) under the
--- buffer's root, else a glob; paths relative to the root.
---@param bufnr? integer
---@return string[] files, string root
function M.workspace_files(bufnr)
  bufnr = bufnr or vim.api.nvim_get_current_buf()
  local name = vim.api.nvim_buf_get_name(bufnr)
  if vim.b[bufnr].nagent_conversation then
    name = conversation.target_of(name) or name
  end
  local root = find_root(name ~= "" and name or vim.fn.getcwd() .. "/x")
  local out = vim.fn.systemlist({ "git", "-C", root, "ls-files", "--cached", "--others", "--exclude-standard" })
  if vim.v.shell_error ~= 0 then
    out = vim.tbl_map(function(p)
      return p:sub(#root + 2)
    end, vim.fn.globpath(root, "**/*", false, true))
  end
  local files = {}
  for _, f in ipairs(out) do
    if f ~= "" and not f:match("^%.nagent/") and vim.fn.isdirectory(root .. "/" .. f) == 0 then
      table.insert(files, f)
    end
  end
  table.sort(files)
  return files, root
end

--- `@path` as a request names it (quoted when the path has a space).
---@param path string
---@return string
function M.mention_text(path)
  if path:find("[%s\"]") then
    return '@"' .. path:gsub('"', '\\"') .. '"'
  end
  return "@" .. path
end

--- :NagentMention — pick a workspace file (vim.ui.select) and insert `@path` at the cursor: the request that
--- names it includes that file (read through the confinement rules, recorded in the conversation).
---@param callback? fun(text: string?)
function M.mention(callback)
  local bufnr = vim.api.nvim_get_current_buf()
  local win = vim.api.nvim_get_current_win()
  local files = M.workspace_files(bufnr)
  if #files == 0 then
    return notify("no files to mention", vim.log.levels.WARN)
  end
  vim.ui.select(files, { prompt = "nagent: mention which file?" }, function(choice)
    if not choice then
      return callback and callback(nil)
    end
    local text = M.mention_text(choice)
    if vim.api.nvim_win_is_valid(win) and vim.api.nvim_win_get_buf(win) == bufnr then
      local row, col = unpack(vim.api.nvim_win_get_cursor(win))
      local line = vim.api.nvim_buf_get_lines(bufnr, row - 1, row, false)[1] or ""
      local at = math.min(#line, col + (line == "" and 0 or 1))
      local before, after = line:sub(1, at), line:sub(at + 1)
      local pad = (before ~= "" and not before:match("%s$")) and " " or ""
      vim.api.nvim_buf_set_text(bufnr, row - 1, at, row - 1, at, { pad .. text .. " " })
      pcall(vim.api.nvim_win_set_cursor, win, { row, at + #pad + #text })
      local _ = after
    end
    if callback then
      callback(text)
    end
  end)
end

-- A scratch buffer in a split; `targets[line]` is a file to open on <CR>.
local function show_list(name, lines, targets)
  local buf = ui.scratch(name, lines, "nagent")
  vim.b[buf].nagent_targets = targets
  vim.keymap.set("n", "<CR>", function()
    local t = (vim.b[buf].nagent_targets or {})[tostring(vim.fn.line("."))]
    if t then
      vim.cmd("wincmd p")
      vim.cmd("edit " .. vim.fn.fnameescape(t))
    end
  end, { buffer = buf, desc = "nagent: open the file on this line" })
  vim.keymap.set("n", "q", "<cmd>close<cr>", { buffer = buf })
  local win = ui.split(buf, 15)
  vim.api.nvim_set_current_win(win)
  return buf
end
M.show_list = show_list

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
    notify(string.format("split into %d segment(s) (%s); :NagentPatch merges them back", #(res.segments or {}),
      tostring(res.splitType)))
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

--- :NagentStatus — the server's status (and the command that starts it) in the answer window.
function M.status(callback)
  local cmd = "cmd: " .. table.concat(M.config.cmd or {}, " ")
  if M.spawn_error or spawn_problem() then
    local problem = M.spawn_error or spawn_problem()
    ui.float({ "nagent-lsp is not running", cmd, problem }, "nagent status")
    notify("not running · " .. cmd, vim.log.levels.ERROR)
    local err = { message = problem }
    M.last["nagent.status"] = { err = err }
    return callback and callback(err)
  end
  run(nil, "nagent.status", vim.empty_dict(), function(res)
    local history = type(res.history) == "table" and res.history or {}
    local lines = {
      "nagent-lsp " .. tostring(res.version),
      cmd,
      "model: " .. tostring(res.model) .. (res.modelConfigured and "" or " (not configured)"),
      "baseUrl: " .. tostring(res.baseUrl),
      "state root: " .. tostring(res.stateRoot),
      "settings from: " .. table.concat(vim.tbl_map(tostring, res.configSources or {}), ", "),
      "workspace: " .. table.concat(vim.tbl_map(tostring, res.workspaceFolders or {}), ", "),
    }
    if history.state then
      table.insert(lines, "history: " .. tostring(history.state) .. (history.commits and (" · " .. history.commits .. " commits") or ""))
    end
    ui.float(lines, "nagent status")
    notify(string.format("%s · model %s%s · %s", tostring(res.version), tostring(res.model),
      res.modelConfigured and "" or " (not configured)", cmd))
  end, callback)
end

--- :NagentTrust — show what this repository's .nagent/ defines and trust it (lua/nagent/trust.lua).
function M.trust(options, callback)
  trust.trust(options, callback)
end

--- :NagentTrustRevoke — revoke the trust in this repository's definitions.
function M.trust_revoke(options, callback)
  trust.revoke(options, callback)
end

-- ---------------------------------------------------------------- code actions (vim.lsp.commands)

-- What vim.lsp.buf.code_action() runs for nagent's actions: the plugin asks for a request and shows results.
local function buffer_of(argument)
  local u = type(argument) == "table" and argument.uri
  if type(u) ~= "string" then
    return vim.api.nvim_get_current_buf()
  end
  local b = vim.uri_to_bufnr(u)
  vim.fn.bufload(b)
  return b
end

function M.register_client_commands()
  if not vim.lsp.commands then
    return
  end
  local handlers = {
    ["nagent.edit"] = function(arg, bufnr)
      M.edit(arg.request, { bufnr = bufnr, range = arg.range, agent = arg.agent, profile = arg.profile })
    end,
    ["nagent.instruction.apply"] = function(arg, bufnr)
      local snap = conversation.snapshot()
      notify("applying the instruction…")
      run(bufnr, "nagent.instruction.apply", arg, function(res)
        present(bufnr, "instruction", res, snap)
      end)
    end,
    ["nagent.history"] = function(_, bufnr)
      M.history({ bufnr = bufnr })
    end,
    ["nagent.split"] = function(arg, bufnr)
      M.split({ bufnr = bufnr, target_bytes = arg.targetBytes })
    end,
    ["nagent.patch"] = function(arg, bufnr)
      M.patch({ bufnr = bufnr, index_path = arg.indexPath })
    end,
    ["nagent.recipe.run"] = function(arg, bufnr)
      M.recipe(arg.recipe, arg.request, { bufnr = bufnr, range = arg.range })
    end,
    -- "nagent: accept this change" / "reject this change" / "accept (reject) all proposed changes": run, then
    -- the conversations (where the server records the review) reloaded
    ["nagent.review.apply"] = function(arg, bufnr)
      review.code_action("nagent.review.apply", arg, bufnr)
    end,
    ["nagent.review.discard"] = function(arg, bufnr)
      review.code_action("nagent.review.discard", arg, bufnr)
    end,
  }
  for name, handler in pairs(handlers) do
    vim.lsp.commands[name] = function(command)
      local arg = (command.arguments or {})[1] or {}
      handler(arg, buffer_of(arg))
    end
  end
end

--- Define the :Nagent* user commands (plugin/nagent.lua does this at start-up; setup() too).
function M.create_commands()
  local command = vim.api.nvim_create_user_command
  command("NagentEdit", function(opts)
    local options = { pick_agent = opts.bang }
    if opts.range and opts.range > 0 then
      options.line1, options.line2 = opts.line1, opts.line2
    end
    M.edit(opts.args, options)
  end, { nargs = "*", range = true, bang = true,
    desc = "nagent: edit this buffer (or the range) with a request; ! or agent=NAME picks an agent",
    complete = function(lead)
      -- "@" completes the workspace's files as @path mentions
      if lead:sub(1, 1) ~= "@" then
        return {}
      end
      local want = lead:sub(2)
      local out = {}
      for _, f in ipairs(M.workspace_files()) do
        if f:sub(1, #want) == want then
          table.insert(out, M.mention_text(f))
        end
      end
      return out
    end })

  command("NagentRecipe", function(opts)
    local name, request = opts.args:match("^%s*(%S*)%s*(.*)$")
    local options = {}
    if opts.range and opts.range > 0 then
      options.line1, options.line2 = opts.line1, opts.line2
    end
    M.recipe(name, request, options)
  end, { nargs = "*", range = true, desc = "nagent: run a recipe (pick one without a name)",
    complete = function()
      local last = M.last["nagent.recipes.list"]
      return vim.tbl_map(function(r)
        return r.name
      end, last and last.result and last.result.recipes or {})
    end })

  command("NagentReview", function(opts)
    M.review(opts.args)
  end, { nargs = "?", desc = "nagent: review a proposed change hunk by hunk" })

  command("NagentAnswers", function()
    M.answers()
  end, { desc = "nagent: every answer of this session" })

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

  command("NagentTrust", function()
    M.trust()
  end, { desc = "nagent: show this repository's nagent definitions and trust them" })

  command("NagentTrustRevoke", function()
    M.trust_revoke()
  end, { desc = "nagent: revoke the trust in this repository's nagent definitions" })

  command("NagentInline", function(opts)
    require("nagent.inline").review(opts.args)
  end, { nargs = "?", desc = "nagent: show pending proposed changes in their files, and list them (quickfix)" })

  command("NagentAccept", function()
    require("nagent.inline").decide(true)
  end, { desc = "nagent: accept the proposed change (hunk) at the cursor" })

  command("NagentReject", function()
    require("nagent.inline").decide(false)
  end, { desc = "nagent: reject the proposed change (hunk) at the cursor" })

  command("NagentMention", function()
    M.mention()
  end, { desc = "nagent: pick a file and insert @path (the request includes it)" })

  command("NagentWhoWrote", function()
    M.attribution()
  end, { desc = "nagent: open the conversation at the turn that wrote the line at the cursor" })

  command("NagentConversations", function()
    M.conversations()
  end, { desc = "nagent: every conversation of the workspace" })

  command("NagentConversationSave", function(opts)
    M.conversation_save(opts.args)
  end, { nargs = 1, desc = "nagent: save a copy of this file's conversation under a name" })

  command("NagentConversationLoad", function(opts)
    M.conversation_load(opts.args)
  end, { nargs = 1, desc = "nagent: make a saved conversation this file's conversation" })

  command("NagentConversationCompact", function(opts)
    M.conversation_compact(opts.args)
  end, { nargs = "*", desc = "nagent: archive this file's conversation and restart it from a summary" })

  command("NagentConversationSummarize", function()
    M.conversation_summarize()
  end, { desc = "nagent: summarize this file's conversation" })
end

return M
