-- :NagentReview — a proposal (nagent.review.show) as a diff in a split, every file of it, with the model's
-- answer above. a / r accept / reject the hunk under the cursor (the decisions are sent with
-- nagent.review.apply once every hunk has one), A / R accept / reject everything at once, c sends the
-- decisions now (undecided hunks are rejected), <CR> opens the source at the line under the cursor, q closes.
-- Each hunk reads as `git diff` shows it: the path relative to the project root, `@@ -a,b +c,d @@` with its
-- line numbers in the file's current text (its buffer, else the disk) and up to three lines around it. A hunk
-- whose lines changed since (`applies: false`) says NO LONGER APPLIES and can only be rejected.

local M = {}

M.answers = {} -- proposal id -> the model's answer of the run that proposed it

local KEYS = "a accept · r reject · A accept all · R reject all · c send now · <CR> source · q close"
local CONTEXT = 3 -- lines shown before and after each hunk, as `git diff` does
local STALE = "NO LONGER APPLIES (its lines changed since; r rejects it)"

local function nagent()
  return require("nagent")
end

local function ui()
  return require("nagent.ui")
end

local function proposal_id(p)
  if type(p) == "table" then
    return p.id
  end
  return p
end

local function lines_of(text)
  if text == nil or text == vim.NIL or text == "" then
    return {}
  end
  local out = vim.split(tostring(text), "\n", { plain = true })
  if out[#out] == "" then
    table.remove(out)
  end
  return out
end

local function file_path(file)
  local path = file.path
  if type(path) ~= "string" or path == "" then
    path = vim.uri_to_fname(file.uri)
  end
  return path
end

local function mark(decision)
  if decision == true then
    return "[accept]"
  elseif decision == false then
    return "[reject]"
  end
  return "[ ? ]"
end

local function header(state, h)
  local hunk = state.hunks[h]
  return string.format("%s %s hunk %s%s", hunk.span, mark(state.decisions[hunk.id]), hunk.id,
    hunk.applies and "" or ("  " .. STALE))
end

local function real(path)
  return ui().real_path(path)
end

local function loaded_buffer(path)
  return ui().loaded_buffer(path)
end

-- The current text of `path` as (lines, eol): the loaded buffer visiting it, else the file on disk.
local function current_lines(path)
  local b = loaded_buffer(path)
  if b then
    local lines = vim.api.nvim_buf_get_lines(b, 0, -1, false)
    if #lines == 1 and lines[1] == "" then
      return {}, true
    end
    return lines, vim.bo[b].eol or vim.bo[b].fixeol
  end
  if vim.fn.filereadable(path) == 1 then
    local lines = vim.fn.readfile(path, "b")
    if lines[#lines] == "" then
      table.remove(lines)
      return lines, true
    end
    return lines, #lines == 0
  end
  return {}, true
end

-- The project root of `path` (the nearest folder with a .git), or nil.
local function project_root(path)
  local dir = vim.fn.fnamemodify(path, ":h")
  while dir ~= "" do
    if vim.loop.fs_stat(dir .. "/.git") then
      return dir
    end
    local parent = vim.fn.fnamemodify(dir, ":h")
    if parent == dir then
      return nil
    end
    dir = parent
  end
end

local function shown_path(path)
  local full = real(path)
  local root = project_root(full)
  if root and full:sub(1, #root + 1) == root .. "/" then
    return full:sub(#root + 2)
  end
  return vim.fn.fnamemodify(path, ":~:.")
end

-- A unified diff header's start,count (0-based start; ",1" left out, as git does).
local function span(start, count)
  if count == 1 then
    return tostring(start + 1)
  elseif count == 0 then
    return start .. ",0"
  end
  return (start + 1) .. "," .. count
end

local function start_line(hunk)
  return type(hunk.range) == "table" and type(hunk.range.start) == "table" and hunk.range.start.line or 0
end

local function end_line(hunk)
  return type(hunk.range) == "table" and type(hunk.range["end"]) == "table" and hunk.range["end"].line
    or start_line(hunk)
end

local function render(state)
  local p = state.proposal
  local lines = { "nagent review  " .. tostring(p.id) }
  -- the request may have several lines (a `nagent:` instruction gets the server's note appended): one buffer
  -- line each, as nvim_buf_set_lines wants
  local request = lines_of(p.request)
  for i, l in ipairs(#request > 0 and request or { "" }) do
    table.insert(lines, (i == 1 and "Request: " or "         ") .. l)
  end
  for _, c in ipairs(type(p.coupling) == "table" and p.coupling or {}) do
    if type(c) == "table" and type(c.message) == "string" and c.message ~= "" then
      for _, l in ipairs(lines_of(c.message)) do
        table.insert(lines, "⚠ " .. l)
      end
    end
  end
  local answer = state.answer or M.answers[tostring(p.id)]
  if answer and answer ~= "" then
    table.insert(lines, "Answer:")
    for _, l in ipairs(lines_of(answer)) do
      table.insert(lines, "  " .. l)
    end
  end
  table.insert(lines, KEYS)
  state.hunks, state.at, state.source_line = {}, {}, {}
  local function add(text, h, source)
    table.insert(lines, text)
    state.at[#lines] = h
    state.source_line[#lines] = source
  end
  for _, file in ipairs(p.files or {}) do
    local path = file_path(file)
    local shown = shown_path(path)
    local created = file.created == true
    local current, eol = {}, true
    if not created then
      current, eol = current_lines(path)
    end
    local n = #current
    local hunks = vim.deepcopy(file.hunks or {})
    table.sort(hunks, function(x, y)
      return start_line(x) < start_line(y)
    end)
    table.insert(lines, "")
    table.insert(lines, "diff --nagent a/" .. shown .. " b/" .. shown .. (created and "  (new file)" or ""))
    table.insert(lines, "--- " .. (created and "/dev/null" or ("a/" .. shown)))
    table.insert(lines, "+++ b/" .. shown)
    local offset, prev_end = 0, 0
    for k, hunk in ipairs(hunks) do
      local start = math.min(n, start_line(hunk))
      local stop = math.max(start, math.min(n, end_line(hunk)))
      local limit = hunks[k + 1] and math.min(n, start_line(hunks[k + 1])) or n
      local before = math.max(0, math.min(start, math.max(prev_end, start - CONTEXT)))
      local after = math.max(stop, math.min(limit, stop + CONTEXT))
      local old, new = lines_of(hunk.oldText), lines_of(hunk.newText)
      local around = (start - before) + (after - stop)
      local old_count, new_count = around + #old, around + #new
      table.insert(state.hunks, {
        id = hunk.id, path = path, shown = shown, range = hunk.range, file = file, line = start + 1,
        applies = hunk.applies ~= false,
        span = string.format("@@ -%s +%s @@", span(before, old_count), span(before + offset, new_count)),
      })
      local h = #state.hunks
      add(header(state, h), h, start + 1)
      state.hunks[h].header = #lines
      -- the history's warnings for this hunk ("changes lines from abc1234 'Fix race …' (Alice, 3 days ago)")
      for _, w in ipairs(type(hunk.warnings) == "table" and hunk.warnings or {}) do
        for _, l in ipairs(lines_of(w)) do
          add("⚠ " .. l, h, start + 1)
        end
      end
      for i = before, start - 1 do
        add(" " .. current[i + 1], h, i + 1)
      end
      for i, l in ipairs(old) do
        add("-" .. l, h, start + i)
      end
      for i, l in ipairs(new) do
        add("+" .. l, h, start + 1 + math.min(i - 1, math.max(0, #old - 1)))
      end
      for i = stop, after - 1 do
        add(" " .. current[i + 1], h, i + 1)
      end
      if after > stop and after == n and not eol then
        add("\\ No newline at end of file", h, n)
      end
      offset = offset + #new - #old
      prev_end = math.max(prev_end, end_line(hunk))
    end
  end
  return lines
end

local states = {} -- review buffer -> state

local function redraw_header(buf, state, h)
  local row = state.hunks[h].header
  vim.bo[buf].modifiable = true
  vim.api.nvim_buf_set_lines(buf, row - 1, row, false, { header(state, h) })
  vim.bo[buf].modifiable = false
  vim.bo[buf].modified = false
end

local function hunk_at_cursor(buf, state)
  local row = vim.api.nvim_win_get_cursor(0)[1]
  local h = state.at[row]
  if not h then -- on a file header: the next hunk
    for r = row, vim.api.nvim_buf_line_count(buf) do
      if state.at[r] then
        return state.at[r]
      end
    end
  end
  return h
end

local function close(buf)
  states[buf] = nil
  for _, w in ipairs(vim.fn.win_findbuf(buf)) do
    if #vim.api.nvim_list_wins() > 1 then
      pcall(vim.api.nvim_win_close, w, true)
    end
  end
  pcall(vim.api.nvim_buf_delete, buf, { force = true })
end

-- Send the decisions: accepted hunks applied, the rest rejected (all rejected: discard).
local function submit(buf, state, callback)
  if state.sent then
    return
  end
  state.sent = true
  local accept = {}
  for _, hunk in ipairs(state.hunks) do
    if state.decisions[hunk.id] == true then
      table.insert(accept, hunk.id)
    end
  end
  local id = state.proposal.id
  local snap = require("nagent.conversation").snapshot()
  local function done(err, res)
    if err then
      state.sent = false
      return callback and callback(err, res)
    end
    for _, path in ipairs(state.conversations or {}) do
      require("nagent.conversation").sync(path, snap)
    end
    local rejected = res and res.rejected or {}
    local conflicts = res and res.conflicts or {}
    local msg = string.format("review %s: %d accepted, %d rejected", tostring(id), #accept, #rejected)
    if #conflicts > 0 then
      msg = msg .. string.format(", %d in conflict (%s)", #conflicts, table.concat(conflicts, ", "))
    end
    ui().say(msg, #conflicts > 0 and vim.log.levels.WARN or nil)
    require("nagent.inline").clear(id)
    if type(res) == "table" and state.origin and vim.api.nvim_buf_is_valid(state.origin) then
      pcall(nagent().open_created, res, state.origin) -- files the accepted hunks created: named and opened
    end
    close(buf)
    if callback then
      callback(err, res)
    end
  end
  if #accept == 0 then
    nagent().execute("nagent.review.discard", { id = id }, done, state.origin)
  else
    nagent().execute("nagent.review.apply", { id = id, accept = accept }, done, state.origin)
  end
end

local function decide(buf, value, all)
  local state = states[buf]
  if not state or state.sent then
    return
  end
  if all then
    local stale = {}
    for h, hunk in ipairs(state.hunks) do
      if value == true and not hunk.applies then -- it cannot be accepted: rejected
        table.insert(stale, hunk.id)
        state.decisions[hunk.id] = false
      else
        state.decisions[hunk.id] = value
      end
      redraw_header(buf, state, h)
    end
    if #stale > 0 then
      ui().say(string.format("%s no longer appl%s: rejected", table.concat(stale, ", "), #stale > 1 and "y" or "ies"),
        vim.log.levels.WARN)
    end
    return submit(buf, state)
  end
  local h = hunk_at_cursor(buf, state)
  if not h then
    return
  end
  if value == true and not state.hunks[h].applies then
    ui().say(string.format("hunk %s no longer applies (its lines changed since); r rejects it",
      tostring(state.hunks[h].id)), vim.log.levels.WARN)
    return
  end
  state.decisions[state.hunks[h].id] = value
  redraw_header(buf, state, h)
  local pending = 0
  for _, hunk in ipairs(state.hunks) do
    if state.decisions[hunk.id] == nil then
      pending = pending + 1
    end
  end
  if pending == 0 then
    return submit(buf, state)
  end
  -- on to the next undecided hunk
  for k = 1, #state.hunks do
    local n = ((h + k - 1) % #state.hunks) + 1
    if state.decisions[state.hunks[n].id] == nil then
      pcall(vim.api.nvim_win_set_cursor, 0, { state.hunks[n].header, 0 })
      break
    end
  end
end

-- <CR>: the source at the line under the cursor (a context or removed line: that line; the header or an added
-- line: where the change goes).
local function goto_source(buf)
  local state = states[buf]
  local h = state and hunk_at_cursor(buf, state)
  if not h then
    return
  end
  local hunk = state.hunks[h]
  local row = vim.api.nvim_win_get_cursor(0)[1]
  local line = (state.at[row] == h and state.source_line[row]) or hunk.line or 1
  vim.cmd("wincmd p")
  local open = loaded_buffer(hunk.path)
  if open then -- (a modified buffer too: :edit would refuse it)
    vim.api.nvim_win_set_buf(0, open)
  else
    vim.cmd("edit " .. vim.fn.fnameescape(hunk.path))
  end
  pcall(vim.api.nvim_win_set_cursor, 0, { math.max(1, math.min(line, vim.api.nvim_buf_line_count(0))), 0 })
end

--- Show proposal `p` (the nagent.review.show result) in the review split; returns the buffer.
---@param p table {id, request, files[{uri, path, created, hunks[{id, range, oldText, newText, applies, warnings?}]}], coupling?}
---@param opts? {answer: string?, bufnr: integer?, conversation: string?}
---@return integer bufnr
function M.show(p, opts)
  opts = opts or {}
  local name = "nagent://review/" .. tostring(p.id)
  local state = { proposal = p, decisions = {}, answer = opts.answer, origin = opts.bufnr, conversations = {} }
  if opts.conversation then
    table.insert(state.conversations, opts.conversation)
  end
  if type(p.conversation) == "string" then
    table.insert(state.conversations, p.conversation)
  elseif type(p.conversation) == "table" and p.conversation.path then
    table.insert(state.conversations, p.conversation.path)
  end
  local buf = ui().scratch(name, render(state), "diff")
  states[buf] = state
  local win = ui().split(buf, math.min(30, math.max(10, vim.api.nvim_buf_line_count(buf) + 1)))
  vim.api.nvim_set_current_win(win)
  vim.wo[win].foldenable = false
  local function map(key, fn, desc)
    vim.keymap.set("n", key, fn, { buffer = buf, nowait = true, desc = "nagent review: " .. desc })
  end
  map("a", function() decide(buf, true) end, "accept this hunk")
  map("r", function() decide(buf, false) end, "reject this hunk")
  map("A", function() decide(buf, true, true) end, "accept every hunk")
  map("R", function() decide(buf, false, true) end, "reject every hunk")
  map("c", function() submit(buf, states[buf]) end, "send the decisions (undecided = rejected)")
  map("<CR>", function() goto_source(buf) end, "open the source at this hunk")
  map("q", function() close(buf) end, "close (the proposal stays pending)")
  if state.hunks[1] then
    pcall(vim.api.nvim_win_set_cursor, win, { state.hunks[1].header, 0 })
  end
  return buf
end

-- The open review buffer of proposal `id` (and its state), if any.
local function find_review(id)
  for b, st in pairs(states) do
    if tostring(st.proposal.id) == tostring(id) and vim.api.nvim_buf_is_valid(b) then
      return b, st
    end
  end
end

--- A review code action from Neovim's code-action menu (the server's "nagent: accept this change", "reject this
--- change", "accept/reject all proposed changes": `command` is nagent.review.apply or nagent.review.discard): run
--- it, then reload the open conversations (the server records the review in them) and bring an open review of
--- the proposal up to date (closed once nothing is pending). callback(err, result) when given.
function M.code_action(command, arg, bufnr, callback)
  local conversation = require("nagent.conversation")
  local snap = conversation.snapshot()
  arg = type(arg) == "table" and arg or {}
  nagent().execute(command, arg, function(err, res)
    if not err and type(res) == "table" then
      conversation.sync_all(snap)
      local id = arg.id
      local inline = require("nagent.inline")
      if id ~= nil and inline.proposals[tostring(id)] then
        nagent().execute("nagent.review.show", { id = id }, function(e, p)
          if not e and type(p) == "table" and #(p.files or {}) > 0 then
            inline.show(p)
          else
            inline.clear(id)
          end
        end, bufnr)
      end
      local conflicts = type(res.conflicts) == "table" and res.conflicts or {}
      local msg
      if command == "nagent.review.apply" then
        msg = string.format("review %s: %s edit(s) applied", tostring(id), tostring(res.edits or 0))
      else
        msg = string.format("review %s: %d hunk(s) rejected", tostring(id), #(res.rejected or {}))
      end
      if #conflicts > 0 then
        msg = msg .. string.format(", %d in conflict (%s)", #conflicts, table.concat(conflicts, ", "))
      end
      ui().say(msg, #conflicts > 0 and vim.log.levels.WARN or nil)
      local buf, state = find_review(id)
      if buf and not state.sent then
        if type(res.pending) == "table" and #res.pending == 0 then
          close(buf)
        else
          nagent().execute("nagent.review.show", { id = id }, function(e, p)
            if not e and type(p) == "table" and states[buf] == state then
              state.proposal = p
              local lines = render(state)
              vim.bo[buf].modifiable = true
              ui().set_lines(buf, 0, -1, lines)
              vim.bo[buf].modifiable = false
              vim.bo[buf].modified = false
            end
          end, bufnr)
        end
      end
    end
    if callback then
      callback(err, res)
    end
  end, bufnr)
end

--- Programmatic access for scripts and tests: the state of a review buffer.
function M.state(buf)
  return states[buf]
end

--- :NagentReview [id] — open a pending proposal (the only one, or pick one).
function M.review(id, opts, callback)
  opts = opts or {}
  local bufnr = opts.bufnr or vim.api.nvim_get_current_buf()
  local function open(pid)
    nagent().execute("nagent.review.show", { id = pid }, function(err, p)
      if not err and p then
        pcall(require("nagent.inline").show, p) -- the hunks in the source buffers too
        local buf = M.show(p, { answer = opts.answer, bufnr = bufnr, conversation = opts.conversation })
        if callback then
          callback(nil, buf)
        end
      elseif callback then
        callback(err)
      end
    end, bufnr)
  end
  id = proposal_id(id)
  if id and id ~= "" then
    return open(id)
  end
  nagent().execute("nagent.review.list", vim.empty_dict(), function(err, res)
    if err then
      return callback and callback(err)
    end
    local list = res and res.proposals or {}
    if #list == 0 then
      ui().say("no proposal awaits review")
      return callback and callback(nil, nil)
    end
    if #list == 1 then
      return open(list[1].id)
    end
    vim.ui.select(list, {
      prompt = "nagent: review which proposal?",
      format_item = function(p)
        local files = {}
        for _, f in ipairs(p.files or {}) do
          table.insert(files, vim.fn.fnamemodify(vim.uri_to_fname(f.uri), ":t"))
        end
        return string.format("%s  %s  (%s)", tostring(p.createdAt or ""):sub(1, 16),
          ui().one_line(tostring(p.request or ""), 60), table.concat(files, ", "))
      end,
    }, function(choice)
      if choice then
        open(choice.id)
      end
    end)
  end, bufnr)
end

M._decide = decide
M._submit = submit
M.id_of = proposal_id

return M
