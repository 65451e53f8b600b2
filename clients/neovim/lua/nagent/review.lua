-- :NagentReview — a proposal (nagent.review.show) as a diff in a split, every file of it, with the model's
-- answer above. a / r accept / reject the hunk under the cursor (the decisions are sent with
-- nagent.review.apply once every hunk has one), A / R accept / reject everything at once, c sends the
-- decisions now (undecided hunks are rejected), <CR> opens the source at the hunk, q closes.

local M = {}

M.answers = {} -- proposal id -> the model's answer of the run that proposed it

local KEYS = "a accept · r reject · A accept all · R reject all · c send now · <CR> source · q close"

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
  local line = type(hunk.range) == "table" and hunk.range.start and (hunk.range.start.line + 1) or "?"
  return string.format("@@ %s  %s:%s  hunk %s @@", mark(state.decisions[hunk.id]), hunk.shown, line, hunk.id)
end

local function render(state)
  local p = state.proposal
  local lines = { "nagent review  " .. tostring(p.id), "Request: " .. tostring(p.request or "") }
  local answer = state.answer or M.answers[tostring(p.id)]
  if answer and answer ~= "" then
    table.insert(lines, "Answer:")
    for _, l in ipairs(lines_of(answer)) do
      table.insert(lines, "  " .. l)
    end
  end
  table.insert(lines, KEYS)
  state.hunks, state.at = {}, {}
  for _, file in ipairs(p.files or {}) do
    local path = file_path(file)
    local shown = vim.fn.fnamemodify(path, ":~:.")
    table.insert(lines, "")
    table.insert(lines, "diff --nagent " .. shown .. (file.created and "  (new file)" or ""))
    table.insert(lines, "--- " .. (file.created and "/dev/null" or ("a/" .. shown)))
    table.insert(lines, "+++ b/" .. shown)
    for _, hunk in ipairs(file.hunks or {}) do
      table.insert(state.hunks, {
        id = hunk.id, path = path, shown = shown, range = hunk.range, file = file,
      })
      local h = #state.hunks
      table.insert(lines, header(state, h))
      state.hunks[h].header = #lines
      state.at[#lines] = h
      for _, l in ipairs(lines_of(hunk.oldText)) do
        table.insert(lines, "-" .. l)
        state.at[#lines] = h
      end
      for _, l in ipairs(lines_of(hunk.newText)) do
        table.insert(lines, "+" .. l)
        state.at[#lines] = h
      end
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
    for h, hunk in ipairs(state.hunks) do
      state.decisions[hunk.id] = value
      redraw_header(buf, state, h)
    end
    return submit(buf, state)
  end
  local h = hunk_at_cursor(buf, state)
  if not h then
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

local function goto_source(buf)
  local state = states[buf]
  local h = state and hunk_at_cursor(buf, state)
  if not h then
    return
  end
  local hunk = state.hunks[h]
  vim.cmd("wincmd p")
  vim.cmd("edit " .. vim.fn.fnameescape(hunk.path))
  local line = type(hunk.range) == "table" and hunk.range.start and hunk.range.start.line + 1 or 1
  pcall(vim.api.nvim_win_set_cursor, 0, { math.min(line, vim.api.nvim_buf_line_count(0)), 0 })
end

--- Show proposal `p` (the nagent.review.show result) in the review split; returns the buffer.
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
        return string.format("%s  %s  (%s)", tostring(p.createdAt or ""):sub(1, 16), tostring(p.request or ""),
          table.concat(files, ", "))
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
