-- Review in the source buffer: a proposal's pending hunks shown where they apply (the lines they replace
-- highlighted, the new lines as virtual lines under them, the history's warnings beside), one key to accept or
-- reject the hunk under the cursor (nagent.review.apply {accept: [hunk], rest: "keep"} / nagent.review.discard
-- {hunks: [hunk]}; the proposal's other hunks stay pending), and every changed file of the proposal in the
-- quickfix list. The marks are extmarks: the buffer's text is not touched until a hunk is accepted.

local M = {}

local ns = vim.api.nvim_create_namespace("nagent_inline_review")

---@class nagent.InlineHunk
---@field proposal string the proposal's id
---@field id string the hunk's id
---@field bufnr integer
---@field mark integer the extmark spanning the hunk's lines
---@field applies boolean

---@type table<integer, nagent.InlineHunk[]> buffer -> its hunks on screen
M.hunks = {}

---@type table<string, table> proposal id -> the nagent.review.show result shown
M.proposals = {}

local function nagent()
  return require("nagent")
end

local function ui()
  return require("nagent.ui")
end

local function lines_of(text)
  if text == nil or text == vim.NIL or text == "" then
    return {}
  end
  local out = ui().lines({ tostring(text) })
  if out[#out] == "" then
    table.remove(out)
  end
  return out
end

local function file_path(file)
  if type(file.path) == "string" and file.path ~= "" then
    return file.path
  end
  return vim.uri_to_fname(file.uri)
end

local function loaded_buffer(path)
  return ui().loaded_buffer(path)
end

local function keys_text()
  local p = nagent().keymap_prefix()
  if p then
    return p .. "y accept · " .. p .. "n reject"
  end
  return ":NagentAccept · :NagentReject"
end

--- Remove the marks of proposal `id` (every proposal when nil) from every buffer.
---@param id? string
function M.clear(id)
  for b, list in pairs(M.hunks) do
    local keep = {}
    for _, h in ipairs(list) do
      if id == nil or h.proposal == tostring(id) then
        pcall(vim.api.nvim_buf_del_extmark, b, ns, h.mark)
        for _, extra in ipairs(h.extra or {}) do
          pcall(vim.api.nvim_buf_del_extmark, b, ns, extra)
        end
      else
        table.insert(keep, h)
      end
    end
    M.hunks[b] = #keep > 0 and keep or nil
  end
  if id == nil then
    M.proposals = {}
  else
    M.proposals[tostring(id)] = nil
  end
end

local function place(bufnr, pid, hunk)
  local count = vim.api.nvim_buf_line_count(bufnr)
  local range = type(hunk.range) == "table" and hunk.range or {}
  local start = type(range.start) == "table" and range.start.line or 0
  local stop = type(range["end"]) == "table" and range["end"].line or start
  start = math.max(0, math.min(start, count))
  stop = math.max(start, math.min(stop, count))
  local applies = hunk.applies ~= false
  local old, new = lines_of(hunk.oldText), lines_of(hunk.newText)
  local label = string.format("nagent hunk %s%s · %s", tostring(hunk.id),
    applies and "" or " · NO LONGER APPLIES", keys_text())
  local virt = {}
  for _, l in ipairs(new) do
    table.insert(virt, { { "+ " .. l, "DiffAdd" } })
  end
  for _, w in ipairs(type(hunk.warnings) == "table" and hunk.warnings or {}) do
    for _, l in ipairs(lines_of(w)) do
      table.insert(virt, { { "⚠ " .. l, "WarningMsg" } })
    end
  end
  local extra = {}
  -- the hunk's span: its old lines highlighted (a pure insertion spans no line: the mark sits where it goes)
  local anchor = math.min(start, count - 1)
  local opts = { virt_text = { { label, applies and "Comment" or "WarningMsg" } }, virt_text_pos = "eol" }
  if stop > start then
    opts.end_row = stop - 1
    opts.end_col = #(vim.api.nvim_buf_get_lines(bufnr, stop - 1, stop, false)[1] or "")
    opts.hl_group = "DiffDelete"
    opts.hl_eol = true
  end
  local mark = vim.api.nvim_buf_set_extmark(bufnr, ns, math.max(0, anchor), 0, opts)
  if #virt > 0 then
    local row, above
    if stop > start then
      row, above = stop - 1, false
    elseif start >= count then
      row, above = count - 1, false
    else
      row, above = start, true
    end
    table.insert(extra, vim.api.nvim_buf_set_extmark(bufnr, ns, math.max(0, row), 0,
      { virt_lines = virt, virt_lines_above = above }))
  end
  local first_new
  for _, l in ipairs(new) do
    if vim.trim(l) ~= "" then
      first_new = vim.trim(l)
      break
    end
  end
  local summary = first_new or (old[1] and ("- " .. vim.trim(old[1]))) or ""
  return { proposal = tostring(pid), id = hunk.id, bufnr = bufnr, mark = mark, extra = extra, applies = applies,
    line = start + 1, text = summary }
end

--- Show proposal `p` (a nagent.review.show result) in its files' buffers (loading them) and fill the quickfix
--- list with one entry per hunk. Returns the quickfix entries.
---@param p table
---@param opts? {open_quickfix: boolean?}
---@return table[]
function M.show(p, opts)
  opts = opts or {}
  M.clear(p.id)
  M.proposals[tostring(p.id)] = p
  local qf = {}
  for _, file in ipairs(p.files or {}) do
    local path = file_path(file)
    local b = loaded_buffer(path)
    if not b then
      b = vim.fn.bufadd(path)
      vim.fn.bufload(b)
      vim.bo[b].buflisted = true
    end
    for _, hunk in ipairs(file.hunks or {}) do
      local h = place(b, p.id, hunk)
      M.hunks[b] = M.hunks[b] or {}
      table.insert(M.hunks[b], h)
      local warnings = type(hunk.warnings) == "table" and #hunk.warnings > 0
        and (" ⚠ " .. table.concat(hunk.warnings, "; ")) or ""
      table.insert(qf, { bufnr = b, filename = path, lnum = h.line, col = 1, type = h.applies and "I" or "W",
        text = ui().one_line(string.format("nagent %s hunk %s: %s%s", tostring(p.id), tostring(hunk.id), h.text,
          warnings), 200) })
    end
  end
  for _, c in ipairs(type(p.coupling) == "table" and p.coupling or {}) do
    if type(c) == "table" and type(c.message) == "string" and type(c.uri) == "string" then
      table.insert(qf, { filename = vim.uri_to_fname(c.uri), lnum = 1, col = 1, type = "W",
        text = ui().one_line("nagent: " .. c.message, 200) })
    end
  end
  vim.fn.setqflist({}, " ", { title = "nagent review " .. tostring(p.id), items = qf })
  if opts.open_quickfix then
    local current = vim.api.nvim_get_current_win()
    vim.cmd("botright copen")
    if vim.api.nvim_win_is_valid(current) then
      vim.api.nvim_set_current_win(current)
    end
  end
  return qf
end

--- The hunk under the cursor of the current window (the one whose lines hold it; else the nearest one).
---@param bufnr? integer
---@param row? integer 1-based
---@return nagent.InlineHunk?
function M.hunk_at(bufnr, row)
  bufnr = bufnr or vim.api.nvim_get_current_buf()
  row = (row or vim.api.nvim_win_get_cursor(0)[1]) - 1
  local best, best_dist
  for _, h in ipairs(M.hunks[bufnr] or {}) do
    local m = vim.api.nvim_buf_get_extmark_by_id(bufnr, ns, h.mark, { details = true })
    if m and m[1] then
      local first = m[1]
      local last = (m[3] and m[3].end_row) or first
      local dist = (row < first and first - row) or (row > last and row - last) or 0
      if not best_dist or dist < best_dist then
        best, best_dist = h, dist
      end
    end
  end
  return best
end

-- After a decision: the proposal shown again as the server has it now (its other hunks), else cleared.
local function refresh(pid, bufnr, callback)
  local conversation = require("nagent.conversation")
  nagent().execute("nagent.review.show", { id = pid }, function(err, p)
    if not err and type(p) == "table" and #(p.files or {}) > 0 then
      M.show(p)
    else
      M.clear(pid)
      vim.fn.setqflist({}, "r", { title = "nagent review " .. tostring(pid) .. " (done)", items = {} })
    end
    conversation.sync_all(conversation.snapshot())
    if callback then
      callback(nil, p)
    end
  end, bufnr)
end

--- Accept (true) or reject (false) the hunk under the cursor; the proposal's other hunks stay pending.
---@param accept boolean
---@param callback? fun(err: table?, result: table?)
function M.decide(accept, callback)
  local bufnr = vim.api.nvim_get_current_buf()
  local h = M.hunk_at(bufnr)
  if not h then
    ui().say("no proposed change in this buffer (:NagentReview lists them)", vim.log.levels.WARN)
    return callback and callback({ message = "no hunk" })
  end
  if accept and not h.applies then
    ui().say(string.format("hunk %s no longer applies (its lines changed since); reject it", tostring(h.id)),
      vim.log.levels.WARN)
    return callback and callback({ message = "stale" })
  end
  local command, arg
  if accept then
    command, arg = "nagent.review.apply", { id = h.proposal, accept = { h.id }, rest = "keep" }
  else
    command, arg = "nagent.review.discard", { id = h.proposal, hunks = { h.id } }
  end
  nagent().execute(command, arg, function(err, res)
    if err then
      return callback and callback(err, res)
    end
    local conflicts = type(res) == "table" and type(res.conflicts) == "table" and res.conflicts or {}
    ui().say(string.format("hunk %s %s%s", tostring(h.id), accept and "accepted" or "rejected",
      #conflicts > 0 and (" (in conflict: " .. table.concat(conflicts, ", ") .. ")") or ""),
      #conflicts > 0 and vim.log.levels.WARN or nil)
    if accept and type(res) == "table" then
      pcall(nagent().open_created, res, bufnr)
    end
    refresh(h.proposal, bufnr, function()
      if callback then
        callback(nil, res)
      end
    end)
  end, bufnr)
end

--- :NagentInline [id] — show a pending proposal (the given one, else every pending one) in its files.
---@param id? string
---@param callback? fun(err: table?, shown: table[]?)
function M.review(id, callback)
  local bufnr = vim.api.nvim_get_current_buf()
  local function show_ids(ids)
    local shown, left = {}, #ids
    if left == 0 then
      ui().say("no proposal awaits review")
      return callback and callback(nil, shown)
    end
    for _, pid in ipairs(ids) do
      nagent().execute("nagent.review.show", { id = pid }, function(err, p)
        if not err and type(p) == "table" then
          table.insert(shown, p)
        end
        left = left - 1
        if left == 0 then
          local items = {}
          for _, q in ipairs(shown) do
            vim.list_extend(items, M.show(q))
          end
          if #shown > 1 then
            vim.fn.setqflist({}, " ", { title = "nagent review", items = items })
          end
          vim.cmd("botright copen")
          vim.cmd("wincmd p")
          if callback then
            callback(nil, shown)
          end
        end
      end, bufnr)
    end
  end
  if id and id ~= "" then
    return show_ids({ id })
  end
  nagent().execute("nagent.review.list", vim.empty_dict(), function(err, res)
    if err then
      return callback and callback(err)
    end
    show_ids(vim.tbl_map(function(p)
      return p.id
    end, res.proposals or {}))
  end, bufnr)
end

--- The inline marks of `bufnr` as text (for tests and scripts): one string per extmark's virtual text/lines.
---@param bufnr integer
---@return string[]
function M.marks_text(bufnr)
  local out = {}
  for _, m in ipairs(vim.api.nvim_buf_get_extmarks(bufnr, ns, 0, -1, { details = true })) do
    local d = m[4] or {}
    for _, chunk in ipairs(d.virt_text or {}) do
      table.insert(out, chunk[1])
    end
    for _, vl in ipairs(d.virt_lines or {}) do
      for _, chunk in ipairs(vl) do
        table.insert(out, chunk[1])
      end
    end
  end
  return out
end

return M
