-- Conversation files (.nagent/conversations/*) as filetype `nagentconv`: tags highlighted (syntax/nagentconv.vim),
-- <initial_context> folded, opened at the end, attached to nagent-lsp so the server reads the unsaved buffer,
-- reloaded after a run (instead of Neovim's "changed since reading it" warning), and :NagentSend to run the next
-- request from it.

local M = {}

local hint_ns = vim.api.nvim_create_namespace("nagent_conversation_hint")

M.targets = {} -- conversation path -> target file path (learnt from results; else file-index.json)

local function real(path)
  return vim.fn.resolve(vim.fn.fnamemodify(path, ":p"))
end

--- Is `path` a conversation file (not the index, not a folder)?
---@param path any
---@return boolean
function M.is_conversation(path)
  return type(path) == "string" and path:match("/%.nagent/conversations/[^/]+$") ~= nil
    and not path:match("%.json$") and not path:match("%.tmp$")
end

--- The line numbers (1-based) of <initial_context> … </initial_context>, if the buffer has them.
function M.initial_context(bufnr)
  local lines = vim.api.nvim_buf_get_lines(bufnr, 0, -1, false)
  local first
  for i, l in ipairs(lines) do
    if not first and l:match("^%s*<initial_context>") then
      first = i
    elseif first and l:match("</initial_context>%s*$") then
      return first, i
    end
  end
end

--- Fold <initial_context> (closed) in every window showing the buffer.
function M.fold(bufnr)
  local first, last = M.initial_context(bufnr)
  for _, win in ipairs(vim.fn.win_findbuf(bufnr)) do
    vim.api.nvim_win_call(win, function()
      vim.wo.foldmethod = "manual"
      vim.wo.foldenable = true
      vim.cmd("silent! normal! zE")
      if first and last and last > first then
        vim.cmd(string.format("silent! %d,%dfold", first, last))
        vim.cmd(string.format("silent! %dfoldclose", first))
      end
    end)
  end
end

local function to_end(win)
  if vim.api.nvim_win_is_valid(win) then
    local buf = vim.api.nvim_win_get_buf(win)
    pcall(vim.api.nvim_win_set_cursor, win, { vim.api.nvim_buf_line_count(buf), 0 })
    vim.api.nvim_win_call(win, function()
      vim.cmd("silent! normal! zb")
    end)
  end
end

--- The first line (1-based) of the draft: the text typed after the conversation's last record, or nil when
--- nothing is typed there. A record ends with a closing tag alone on its line (</user-prompt>, </nagent-response>…).
---@param bufnr integer
---@return integer? first, integer last_record_line
function M.draft(bufnr)
  local lines = vim.api.nvim_buf_get_lines(bufnr, 0, -1, false)
  local last_record = 0
  for i, l in ipairs(lines) do
    if l:match("^%s*</[%w_%-]+>%s*$") or l:match("^%s*<[%w_%-]+[^>]*/>%s*$") then
      last_record = i
    end
  end
  for i = last_record + 1, #lines do
    if vim.trim(lines[i]) ~= "" then
      return i, last_record
    end
  end
  return nil, last_record
end

--- The hint at the end of a conversation with no draft: how to send the next request (virtual text, not part of
--- the file). Returns the hint's text, or nil when a draft is typed.
---@param bufnr integer
---@return string?
function M.update_hint(bufnr)
  if not vim.api.nvim_buf_is_valid(bufnr) then
    return nil
  end
  vim.api.nvim_buf_clear_namespace(bufnr, hint_ns, 0, -1)
  if M.draft(bufnr) then
    return nil
  end
  local prefix = require("nagent").keymap_prefix()
  local text = "Type a request here, then :NagentSend" .. (prefix and (" (" .. prefix .. "s)") or "") ..
    " · @path includes a file"
  local last = math.max(0, vim.api.nvim_buf_line_count(bufnr) - 1)
  vim.api.nvim_buf_set_extmark(bufnr, hint_ns, last, 0, { virt_lines = { { { text, "Comment" } } } })
  return text
end

--- The hint shown now in conversation buffer `bufnr`, or nil.
---@param bufnr integer
---@return string?
function M.hint(bufnr)
  for _, m in ipairs(vim.api.nvim_buf_get_extmarks(bufnr, hint_ns, 0, -1, { details = true })) do
    local vl = (m[4] or {}).virt_lines
    if vl and vl[1] and vl[1][1] then
      return vl[1][1][1]
    end
  end
end

--- Set a conversation buffer up (FileType nagentconv): folding, the end in view, sync, :NagentSend.
function M.setup_buffer(bufnr)
  if vim.b[bufnr].nagent_conversation then
    return
  end
  vim.b[bufnr].nagent_conversation = true
  vim.api.nvim_buf_call(bufnr, function()
    vim.cmd("setlocal autoread") -- unmodified: take the server's appends without asking
  end)
  vim.bo[bufnr].swapfile = false
  local group = vim.api.nvim_create_augroup("nagent_conversation_" .. bufnr, { clear = true })
  vim.api.nvim_create_autocmd("BufWinEnter", {
    group = group,
    buffer = bufnr,
    callback = function()
      local win = vim.api.nvim_get_current_win()
      vim.wo[win].wrap = true
      vim.wo[win].linebreak = true
      M.fold(bufnr)
      if not vim.w[win].nagent_seen then -- opened at the end, once per window
        vim.w[win].nagent_seen = true
        to_end(win)
      end
    end,
  })
  vim.api.nvim_create_autocmd("FileChangedShell", {
    group = group,
    buffer = bufnr,
    callback = function()
      -- the server appended a turn: reload an unmodified buffer; a modified one is left to M.sync
      vim.v.fcs_choice = vim.bo[bufnr].modified and "" or "reload"
    end,
  })
  vim.api.nvim_create_autocmd({ "TextChanged", "TextChangedI", "BufReadPost" }, {
    group = group,
    buffer = bufnr,
    callback = function()
      M.update_hint(bufnr)
    end,
  })
  vim.api.nvim_buf_create_user_command(bufnr, "NagentSend", function(opts)
    M.send(opts.args, bufnr)
  end, { nargs = "*", desc = "nagent: send the request typed at the end of this conversation" })
  local nagent = require("nagent")
  local prefix = nagent.keymap_prefix()
  if prefix then
    vim.keymap.set("n", prefix .. "s", function()
      M.send(nil, bufnr)
    end, { buffer = bufnr, desc = "nagent: send the request typed at the end" })
    vim.keymap.set("n", prefix .. "@", function()
      nagent.mention()
    end, { buffer = bufnr, desc = "nagent: mention a file (@path)" })
  end
  M.update_hint(bufnr)
  nagent.attach(bufnr) -- the server reads this buffer, unsaved edits included
  for _, win in ipairs(vim.fn.win_findbuf(bufnr)) do
    if not vim.w[win].nagent_seen then
      vim.w[win].nagent_seen = true
      vim.api.nvim_win_call(win, function()
        vim.wo.wrap = true
        vim.wo.linebreak = true
      end)
      M.fold(bufnr)
      to_end(win)
    end
  end
end

--- Snapshot of the open conversation buffers (bufnr -> changedtick) taken when a run starts.
function M.snapshot()
  local snap = {}
  for _, b in ipairs(vim.api.nvim_list_bufs()) do
    if vim.api.nvim_buf_is_loaded(b) and vim.b[b].nagent_conversation then
      snap[b] = vim.api.nvim_buf_get_changedtick(b)
    end
  end
  return snap
end

local function reload(bufnr)
  local wins = vim.fn.win_findbuf(bufnr)
  local at_end = {}
  for _, w in ipairs(wins) do
    at_end[w] = vim.api.nvim_win_get_cursor(w)[1] >= vim.api.nvim_buf_line_count(bufnr) - 1
  end
  vim.api.nvim_buf_call(bufnr, function()
    vim.cmd("silent! edit!")
  end)
  M.fold(bufnr)
  M.update_hint(bufnr)
  for _, w in ipairs(wins) do
    if at_end[w] ~= false then
      to_end(w)
    end
  end
end

--- After a run that appended to `path`: reload its buffer if the user did not type in it during the run (the
--- server read the unsaved text at the start, so the file on disk has it plus the new turns).
---@param path string the conversation file
---@param snapshot? table<integer, integer> M.snapshot() taken when the run started
function M.sync(path, snapshot)
  if type(path) ~= "string" or path == "" then
    return
  end
  local want = real(path)
  for _, b in ipairs(vim.api.nvim_list_bufs()) do
    if vim.api.nvim_buf_is_loaded(b) and real(vim.api.nvim_buf_get_name(b)) == want then
      local tick = snapshot and snapshot[b]
      if not vim.bo[b].modified or tick == vim.api.nvim_buf_get_changedtick(b) then
        reload(b)
      else
        require("nagent.ui").say("the conversation changed during the run: :e! takes the server's version",
          vim.log.levels.WARN)
      end
    end
  end
end

--- After a command that may have appended to any conversation (a review decided from the code-action menu): every
--- open conversation whose file no longer holds the buffer's text is synced as M.sync does.
function M.sync_all(snapshot)
  for _, b in ipairs(vim.api.nvim_list_bufs()) do
    local name = vim.api.nvim_buf_get_name(b)
    if vim.api.nvim_buf_is_loaded(b) and (vim.b[b].nagent_conversation or M.is_conversation(name))
      and vim.fn.filereadable(name) == 1 then
      local disk = vim.fn.readfile(name, "b")
      if disk[#disk] == "" then
        table.remove(disk)
      end
      if not vim.deep_equal(disk, vim.api.nvim_buf_get_lines(b, 0, -1, false)) then
        M.sync(name, snapshot)
      end
    end
  end
end

--- Remember which file a conversation belongs to.
function M.remember(conversation_path, target_path)
  if type(conversation_path) == "string" and type(target_path) == "string" then
    M.targets[real(conversation_path)] = target_path
  end
end

--- The file a conversation belongs to: from results seen, else the conversations' file-index.json.
---@param conversation_path string
---@return string? path of the file the conversation is about
function M.target_of(conversation_path)
  local key = real(conversation_path)
  if M.targets[key] then
    return M.targets[key]
  end
  local index = vim.fn.fnamemodify(key, ":h") .. "/file-index.json"
  if vim.fn.filereadable(index) == 1 then
    local ok, doc = pcall(vim.fn.json_decode, table.concat(vim.fn.readfile(index), "\n"))
    local name = vim.fn.fnamemodify(key, ":t")
    if ok and type(doc) == "table" and type(doc.by_file_id) == "table" then
      for _, entry in pairs(doc.by_file_id) do
        if type(entry) == "table" and entry.conversation == name then
          return entry.path
        end
      end
    end
  end
end

--- :NagentSend in a conversation: the text typed at its end (the draft, several lines too) is the request
--- (nagent.conversation.send: the server takes the draft out of the conversation, runs it on the conversation's
--- file and records the turn). :NagentSend REQUEST sends REQUEST instead. The conversation's unsaved edits reach
--- the model: the server reads this buffer.
---@param request? string
---@param bufnr? integer the conversation buffer
---@param callback? fun(err: table?, result: table?)
function M.send(request, bufnr, callback)
  bufnr = bufnr or vim.api.nvim_get_current_buf()
  local ui = require("nagent.ui")
  local nagent = require("nagent")
  local target = M.target_of(vim.api.nvim_buf_get_name(bufnr))
  local typed = request and vim.trim(request) ~= ""
  if not typed and nagent.server_has(bufnr, "nagent.conversation.send") then
    if not M.draft(bufnr) then
      return ui.say("type a request at the end of the conversation, then :NagentSend", vim.log.levels.WARN)
    end
    local tbuf = bufnr
    if target then
      tbuf = vim.fn.bufadd(target)
      vim.fn.bufload(tbuf)
      vim.bo[tbuf].buflisted = true
    end
    local snap = M.snapshot()
    ui.say("sending the request typed in the conversation…")
    return nagent.execute("nagent.conversation.send", { uri = vim.uri_from_bufnr(bufnr) }, function(err, res)
      if not err and type(res) == "table" then
        nagent.present(tbuf, "edit", res, snap)
        M.sync(vim.api.nvim_buf_get_name(bufnr), snap)
      end
      if callback then
        callback(err, res)
      end
    end, bufnr)
  end
  if not target then
    return ui.say("no file is known for this conversation (open it with :NagentConversation)", vim.log.levels.WARN)
  end
  local tbuf = vim.fn.bufadd(target)
  vim.fn.bufload(tbuf)
  vim.bo[tbuf].buflisted = true
  nagent.edit(request, { bufnr = tbuf }, callback)
end

return M
