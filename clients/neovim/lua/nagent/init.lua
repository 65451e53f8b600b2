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
  review = "auto", -- "auto": open :NagentReview when an edit returns a proposal; "manual": only say so
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
function M.statusline()
  for _, text in pairs(M.progress) do
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
  caps.experimental.nagent = { requestInput = true }
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
  ui.show_answer({ title = what .. " · " .. file, status = status, tokens = res.tokens, text = text, warning = outside })
  ui.config.answer = saved
  notify(string.format("%s %s: %s · %s", what, file, status, ui.tokens_text(res.tokens)), level)
  if outside then
    notify((outside:gsub("^nagent ", "")), vim.log.levels.WARN)
  end
  if pid then
    review.answers[tostring(pid)] = text
    if auto_review then
      review.review(pid, { answer = text, bufnr = bufnr, conversation = convo })
    else
      notify(string.format("%s %s: a proposal awaits review (:NagentReview)", what, file))
    end
  end
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

--- Pick an agent (nagent.agents.list) with vim.ui.select; callback(name) (nil when none was picked).
function M.pick_agent(callback, bufnr)
  bufnr = bufnr or vim.api.nvim_get_current_buf()
  run(bufnr, "nagent.agents.list", { uri = uri(bufnr) }, function(res)
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

--- :NagentEdit — edit the buffer (lines line1..line2 when given) according to request.
--- options: bufnr, line1/line2 or range, agent (a name), pick_agent (ask for one first).
function M.edit(request, options, callback)
  local opts, bufnr = target(options)
  if opts.pick_agent then
    opts.pick_agent = nil
    return M.pick_agent(function(name)
      opts.agent = name
      M.edit(request, opts, callback)
    end, bufnr)
  end
  if request then -- "agent=NAME request"
    local name, rest = request:match("^%s*agent=(%S+)%s*(.*)$")
    if name then
      opts.agent, request = name, rest
    end
  end
  if not request or vim.trim(request) == "" then
    vim.ui.input({ prompt = opts.agent and ("nagent edit (" .. opts.agent .. "): ") or "nagent edit: " }, function(input)
      if input and vim.trim(input) ~= "" then
        M.edit(input, opts, callback)
      end
    end)
    return
  end
  local arg = { uri = uri(bufnr), request = request, range = range_of(bufnr, opts), agent = opts.agent }
  notify("editing " .. short(vim.api.nvim_buf_get_name(bufnr)) .. (opts.agent and (" as " .. opts.agent) or "") .. "…")
  local snap = conversation.snapshot()
  run(bufnr, "nagent.edit", arg, function(res)
    present(bufnr, "edit", res, snap)
  end, callback)
end

--- :NagentRecipe [name] [request] — run a recipe on the buffer (or the range); without a name, pick one.
function M.recipe(name, request, options, callback)
  local opts, bufnr = target(options)
  if not name or name == "" then
    return run(bufnr, "nagent.recipes.list", { uri = uri(bufnr) }, function(res)
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
  local arg = { uri = uri(bufnr), recipe = name, range = range_of(bufnr, opts) }
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
function M.review(id, options, callback)
  local opts = options or {}
  review.review(id, opts, callback)
end

--- :NagentAnswers — every answer of this session.
function M.answers()
  return ui.answers()
end

--- :NagentConversation — open the file's conversation, at its end (Neovim 0.11 lets the server show it).
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
      M.edit(arg.request, { bufnr = bufnr, range = arg.range, agent = arg.agent })
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
    desc = "nagent: edit this buffer (or the range) with a request; ! or agent=NAME picks an agent" })

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
end

return M
