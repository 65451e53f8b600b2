-- nagent's messages and windows: one-line messages that never cause a "Press ENTER" prompt, the answer
-- window (a float or a split) and the log of every answer (nagent://answers).

local M = {}

M.config = { answer = "float", notify = nil }
M.messages = {} -- every message shown, newest last (tests check each fits on one line)

local LEVELS = vim.log.levels
local HL = { [LEVELS.ERROR] = "ErrorMsg", [LEVELS.WARN] = "WarningMsg" }

-- The room the message area has without scrolling (0.7 and 0.11 have v:echospace; fall back on columns).
local function room()
  local ok, space = pcall(function()
    return vim.v.echospace
  end)
  if not ok or type(space) ~= "number" or space <= 0 then
    space = vim.o.columns - 12
  end
  return math.max(space - 1, 20)
end

--- The canonical path of `path` (absolute, symlinks resolved): how two names of one file compare equal.
---@param path string
---@return string
function M.real_path(path)
  return vim.fn.resolve(vim.fn.fnamemodify(path, ":p"))
end

--- The loaded, ordinary buffer visiting `path`, if any.
---@param path string
---@return integer|nil
function M.loaded_buffer(path)
  local want = M.real_path(path)
  for _, b in ipairs(vim.api.nvim_list_bufs()) do
    if vim.api.nvim_buf_is_loaded(b) and vim.bo[b].buftype == "" and vim.api.nvim_buf_get_name(b) ~= ""
      and M.real_path(vim.api.nvim_buf_get_name(b)) == want then
      return b
    end
  end
end

--- One line that fits: the first line of `text`, cut with "…" to `width` display cells.
---@param text any
---@param width? integer display cells (default: the message area's room)
---@return string
function M.one_line(text, width)
  width = width or room()
  local first, rest = tostring(text):match("^([^\n]*)\n?(.*)$")
  first = first:gsub("%s+$", "")
  local more = rest ~= nil and vim.trim(rest) ~= ""
  if vim.fn.strdisplaywidth(first) <= width and not more then
    return first
  end
  local cut = first
  while vim.fn.strdisplaywidth(cut) > width - 1 do
    cut = vim.fn.strcharpart(cut, 0, vim.fn.strchars(cut) - math.max(1, vim.fn.strdisplaywidth(cut) - width + 1))
  end
  return cut .. "…"
end

---@type string[] every full text said at WARN or ERROR that did not fit on one line, newest last
M.long_messages = {}

--- Show "nagent: MSG" on one line (a longer text is cut). An error or a warning that does not fit is kept whole
--- as well: `:messages` gets the whole text, and an error's whole text opens in a float (the actionable half of
--- a long error is usually at its end: "… start the server with --log-file FILE").
---@param msg any the message (tostring'd); "nagent: " is put in front
---@param level? integer vim.log.levels.* (INFO by default)
---@param history? boolean false: not kept in :messages
function M.say(msg, level, history)
  level = level or LEVELS.INFO
  local full = "nagent: " .. tostring(msg)
  local text = M.one_line(full)
  table.insert(M.messages, text)
  if #M.messages > 200 then
    table.remove(M.messages, 1)
  end
  local long = text ~= vim.trim(full) and level >= LEVELS.WARN
  if long then
    table.insert(M.long_messages, full)
    if #M.long_messages > 50 then
      table.remove(M.long_messages, 1)
    end
  end
  local custom = M.config.notify
  vim.schedule(function()
    if custom then
      return custom(long and full or text, level)
    end
    -- nvim_echo (never nvim_err_writeln: inside :command an error message becomes an exception) after a
    -- redraw, so two messages in one tick do not stack into a "Press ENTER" prompt.
    pcall(vim.cmd, "redraw")
    if long and history ~= false then
      -- the whole text into :messages without a "Press ENTER": echoed while the message area is tall enough to
      -- hold it (so nothing scrolls), then the area shrinks back and the one line that fits stays on screen
      local height = vim.o.cmdheight
      local need = math.ceil((vim.fn.strdisplaywidth(full) + 1) / math.max(vim.o.columns, 1))
      need = math.max(height, math.min(need, vim.o.lines - 3))
      if need > height then
        vim.o.cmdheight = need
        pcall(vim.cmd, "redraw")
      end
      vim.api.nvim_echo({ { full, HL[level] or "None" } }, true, {})
      if need > height then
        vim.o.cmdheight = height
      end
      pcall(vim.cmd, "redraw")
      vim.api.nvim_echo({ { text, HL[level] or "None" } }, false, {})
      if level >= LEVELS.ERROR then
        M.float(M.lines(full), "nagent error")
      end
      return
    end
    vim.api.nvim_echo({ { text, HL[level] or "None" } }, history ~= false, {})
  end)
end

--- `list` with every element that holds newlines split into several (nvim_buf_set_lines rejects a "\n").
---@param list any[] lines; non-strings are tostring'd
---@return string[]
function M.lines(list)
  if type(list) ~= "table" then
    list = { list }
  end
  local out = {}
  for _, l in ipairs(list) do
    local s = type(l) == "string" and l or tostring(l)
    if s:find("[\r\n]") then
      for _, part in ipairs(vim.split((s:gsub("\r\n", "\n"):gsub("\r", "\n")), "\n", { plain = true })) do
        table.insert(out, part)
      end
    else
      table.insert(out, s)
    end
  end
  return out
end

--- nvim_buf_set_lines with server text made safe (see M.lines).
---@param buf integer
---@param first integer 0-based
---@param last integer 0-based, exclusive (-1: the end)
---@param lines any[]
function M.set_lines(buf, first, last, lines)
  vim.api.nvim_buf_set_lines(buf, first, last, false, M.lines(lines))
end

-- ------------------------------------------------------------------ scratch buffers and windows

--- A named scratch buffer (created once, reused); `lines` replace its text.
---@param name string e.g. "nagent://history"
---@param lines? any[] the new text (nil: keep it)
---@param filetype? string
---@return integer bufnr
function M.scratch(name, lines, filetype)
  local buf = vim.fn.bufnr(name)
  if buf == -1 or not vim.api.nvim_buf_is_valid(buf) then
    buf = vim.api.nvim_create_buf(false, true)
    vim.api.nvim_buf_set_name(buf, name)
  end
  vim.bo[buf].buftype = "nofile"
  vim.bo[buf].bufhidden = "hide"
  vim.bo[buf].swapfile = false
  if lines then
    vim.bo[buf].modifiable = true
    M.set_lines(buf, 0, -1, lines)
    vim.bo[buf].modifiable = false
    vim.bo[buf].modified = false
  end
  if filetype and vim.bo[buf].filetype ~= filetype then
    vim.bo[buf].filetype = filetype
  end
  return buf
end

--- Show `buf` in a window at the bottom (reusing one that shows it); returns the window.
---@param buf integer
---@param height? integer
---@return integer winid
function M.split(buf, height)
  local win = vim.fn.bufwinid(buf)
  if win == -1 then
    vim.cmd("botright " .. tostring(height or 12) .. "split")
    win = vim.api.nvim_get_current_win()
    vim.api.nvim_win_set_buf(win, buf)
  end
  return win
end

local float_win = nil

function M.close_float()
  if float_win and vim.api.nvim_win_is_valid(float_win) then
    pcall(vim.api.nvim_win_close, float_win, true)
  end
  float_win = nil
end

--- The answer float (top right of the editor); closes on `q`/<Esc> inside it, or when the cursor moves or
--- insert mode starts in another window. Returns the window.
---@param lines any[] the text (server text with newlines is split)
---@param title? string
---@param filetype? string
---@return integer winid
function M.float(lines, title, filetype)
  M.close_float()
  lines = M.lines(lines)
  local buf = vim.api.nvim_create_buf(false, true)
  vim.api.nvim_buf_set_lines(buf, 0, -1, false, lines)
  vim.bo[buf].modifiable = false
  vim.bo[buf].bufhidden = "wipe"
  if filetype then
    vim.bo[buf].filetype = filetype
  end
  local width = 20
  for _, l in ipairs(lines) do
    width = math.max(width, vim.fn.strdisplaywidth(l))
  end
  width = math.min(width, math.max(vim.o.columns - 6, 20), 100)
  local height = 0
  for _, l in ipairs(lines) do
    height = height + math.max(1, math.ceil(vim.fn.strdisplaywidth(l) / width))
  end
  height = math.max(1, math.min(height, math.floor((vim.o.lines - 4) * 0.6)))
  local config = {
    relative = "editor",
    row = 1,
    col = math.max(vim.o.columns - width - 3, 0),
    width = width,
    height = height,
    style = "minimal",
    border = "rounded",
    focusable = true,
  }
  if title and vim.fn.has("nvim-0.9") == 1 then
    config.title = " " .. title .. " "
  end
  local win = vim.api.nvim_open_win(buf, false, config)
  vim.wo[win].wrap = true
  vim.wo[win].linebreak = true
  float_win = win
  for _, key in ipairs({ "q", "<Esc>" }) do
    vim.keymap.set("n", key, M.close_float, { buffer = buf, nowait = true, desc = "nagent: close" })
  end
  -- Registered after this tick: the edit that came with the answer has already moved the cursor.
  vim.schedule(function()
    if not vim.api.nvim_win_is_valid(win) then
      return
    end
    local group = vim.api.nvim_create_augroup("nagent_float", { clear = true })
    vim.api.nvim_create_autocmd({ "CursorMoved", "InsertEnter" }, {
      group = group,
      callback = function()
        if vim.api.nvim_get_current_win() ~= win then
          M.close_float()
          pcall(vim.api.nvim_del_augroup_by_id, group)
        end
      end,
    })
  end)
  return win
end

function M.float_win()
  if float_win and vim.api.nvim_win_is_valid(float_win) then
    return float_win
  end
end

-- ------------------------------------------------------------------ answers

local ANSWERS = "nagent://answers"

local function human(n)
  if type(n) ~= "number" then
    return tostring(n or 0)
  end
  if n >= 1000 then
    return string.format("%.1fk", n / 1000)
  end
  return tostring(n)
end

--- "1.2k in / 340 out · 2 turns · $0.0042" from a result's `tokens`.
---@param tokens? table a result's `tokens` {input, output, turns?, cacheRead?, memory?, cost? (USD)}
---@return string
function M.tokens_text(tokens)
  tokens = type(tokens) == "table" and tokens or {}
  local parts = { string.format("%s in / %s out", human(tokens.input), human(tokens.output)) }
  if type(tokens.turns) == "number" then
    table.insert(parts, string.format("%d turn%s", tokens.turns, tokens.turns == 1 and "" or "s"))
  end
  if type(tokens.cacheRead) == "number" and tokens.cacheRead > 0 then
    table.insert(parts, "cached " .. human(tokens.cacheRead))
  end
  if type(tokens.memory) == "number" and tokens.memory > 0 then
    table.insert(parts, "memory " .. human(tokens.memory))
  end
  if type(tokens.cost) == "number" then -- USD (the server's contract)
    table.insert(parts, string.format("$%.4f", tokens.cost))
  end
  return table.concat(parts, " · ")
end

--- Keep an answer in nagent://answers and show it where config.answer says ("float", "split" or "none").
--- entry: { title, status, tokens, text }
-- 0-based line numbers as people read them: 1-based, sorted, runs compressed ("3, 10–12").
function M.line_ranges(lines)
  local seen, sorted = {}, {}
  for _, n in ipairs(type(lines) == "table" and lines or {}) do
    if type(n) == "number" and n >= 0 and not seen[n] then
      seen[n] = true
      table.insert(sorted, n)
    end
  end
  table.sort(sorted)
  local parts, i = {}, 1
  while i <= #sorted do
    local j = i
    while j < #sorted and sorted[j + 1] == sorted[j] + 1 do
      j = j + 1
    end
    table.insert(parts, j == i and tostring(sorted[i] + 1) or string.format("%d–%d", sorted[i] + 1, sorted[j] + 1))
    i = j + 1
  end
  return table.concat(parts, ", ")
end

--- A result's `outsideLines` as one line, or nil when it names no line:
--- "nagent also changed lines outside the selection: app.py 3, 10–12; util.py 1–4".
--- name(uri) shortens a file (default: its base name); the line is cut to max (default 92) characters.
function M.outside_selection_text(outside, name, max)
  name = name or function(u)
    return vim.fn.fnamemodify(vim.uri_to_fname(u), ":t")
  end
  max = max or 92
  local files = {}
  for _, f in ipairs(type(outside) == "table" and outside or {}) do
    if type(f) == "table" and type(f.lines) == "table" and #f.lines > 0 then
      table.insert(files, name(f.uri) .. " " .. M.line_ranges(f.lines))
    end
  end
  if #files == 0 then
    return nil
  end
  local text = "nagent also changed lines outside the selection: " .. table.concat(files, "; ")
  if vim.fn.strchars(text) <= max then
    return text
  end
  local cut = vim.fn.strcharpart(text, 0, max - 2)
  local at = 0
  for k = #cut - 1, 1, -1 do
    local two = cut:sub(k, k + 1)
    if two == ", " or two == "; " then
      at = k
      break
    end
  end
  return (at > 0 and cut:sub(1, at - 1) or cut) .. ", …"
end

local live_start = nil -- nagent://answers: the first line (0-based) of the answer being streamed, if any
local live_float_buf = nil

--- The answer so far (a `nagent/stream` reply) where config.answer says: the float (updated in place) or the end
--- of nagent://answers in its split. show_answer replaces it with the whole answer.
---@param title string
---@param text string
function M.show_live(title, text)
  local body = M.lines(text)
  local where = M.config.answer
  if where == "float" then
    local lines = vim.list_extend({ title, "" }, body)
    if float_win and vim.api.nvim_win_is_valid(float_win) and live_float_buf
      and vim.api.nvim_win_get_buf(float_win) == live_float_buf then
      vim.bo[live_float_buf].modifiable = true
      vim.api.nvim_buf_set_lines(live_float_buf, 0, -1, false, lines)
      vim.bo[live_float_buf].modifiable = false
      local width = vim.api.nvim_win_get_width(float_win)
      local height = 0
      for _, l in ipairs(lines) do
        height = height + math.max(1, math.ceil(vim.fn.strdisplaywidth(l) / width))
      end
      height = math.max(1, math.min(height, math.floor((vim.o.lines - 4) * 0.6)))
      pcall(vim.api.nvim_win_set_height, float_win, height)
      pcall(vim.api.nvim_win_set_cursor, float_win, { #lines, 0 })
    else
      local win = M.float(lines, "nagent", "markdown")
      live_float_buf = vim.api.nvim_win_get_buf(win)
    end
  elseif where == "split" then
    local log = M.scratch(ANSWERS, nil, "markdown")
    local count = vim.api.nvim_buf_line_count(log)
    local empty = count == 1 and vim.api.nvim_buf_get_lines(log, 0, 1, false)[1] == ""
    if not live_start then
      live_start = empty and 0 or count
    end
    vim.bo[log].modifiable = true
    vim.api.nvim_buf_set_lines(log, live_start, -1, false, vim.list_extend({ "## " .. title, "" }, body))
    vim.bo[log].modifiable = false
    local current = vim.api.nvim_get_current_win()
    local win = M.split(log, 12)
    pcall(vim.api.nvim_win_set_cursor, win, { vim.api.nvim_buf_line_count(log), 0 })
    if vim.api.nvim_win_is_valid(current) then
      vim.api.nvim_set_current_win(current)
    end
  end
end

---@class nagent.AnswerEntry
---@field title string
---@field status? string
---@field tokens? table
---@field text? string the answer
---@field warning? string
---@field notes? string[] the history's checks and mention problems

---@param entry nagent.AnswerEntry
---@return integer? winid
function M.show_answer(entry)
  local body = vim.split(tostring(entry.text or ""), "\n", { plain = true })
  while #body > 0 and vim.trim(body[#body]) == "" do
    table.remove(body)
  end
  local head = {
    entry.title or "nagent",
    (entry.status and (entry.status .. " · ") or "") .. M.tokens_text(entry.tokens),
  }
  if entry.warning then
    table.insert(head, "⚠ " .. entry.warning)
  end
  for _, n in ipairs(type(entry.notes) == "table" and entry.notes or {}) do
    vim.list_extend(head, M.lines({ "⚠ " .. n }))
  end
  local shown = vim.list_extend(vim.deepcopy(head), { "" })
  vim.list_extend(shown, #body > 0 and body or { "(no answer)" })
  M.last_answer = shown
  -- the log keeps every answer, newest last
  local log = M.scratch(ANSWERS, nil, "markdown")
  if live_start then -- the streamed text gives way to the whole answer
    vim.bo[log].modifiable = true
    vim.api.nvim_buf_set_lines(log, math.min(live_start, vim.api.nvim_buf_line_count(log)), -1, false, {})
    vim.bo[log].modifiable = false
    live_start = nil
  end
  live_float_buf = nil
  pcall(function()
    require("nagent.stream").finish_all()
  end)
  local old = vim.api.nvim_buf_get_lines(log, 0, -1, false)
  if #old == 1 and old[1] == "" then
    old = {}
  end
  local add = { "## " .. head[1] .. "  (" .. os.date("%H:%M:%S") .. ")", "_" .. head[2] .. "_", "" }
  if entry.warning then
    table.insert(add, 3, "**⚠ " .. entry.warning .. "**")
  end
  for i, n in ipairs(type(entry.notes) == "table" and entry.notes or {}) do
    table.insert(add, 2 + i + (entry.warning and 1 or 0), "⚠ " .. n)
  end
  vim.list_extend(add, body)
  table.insert(add, "")
  vim.bo[log].modifiable = true
  M.set_lines(log, #old, -1, add)
  vim.bo[log].modifiable = false
  local where = M.config.answer
  if where == "split" then
    local current = vim.api.nvim_get_current_win()
    local win = M.split(log, 12)
    pcall(vim.api.nvim_win_set_cursor, win, { vim.api.nvim_buf_line_count(log), 0 })
    if vim.api.nvim_win_is_valid(current) then
      vim.api.nvim_set_current_win(current)
    end
    return win
  elseif where == "float" then
    return M.float(shown, "nagent", "markdown")
  end
end

--- :NagentAnswers — every answer of this session in a split, newest at the bottom.
function M.answers()
  local log = M.scratch(ANSWERS, nil, "markdown")
  local win = M.split(log, 15)
  vim.api.nvim_set_current_win(win)
  vim.keymap.set("n", "q", "<cmd>close<cr>", { buffer = log, nowait = true })
  pcall(vim.api.nvim_win_set_cursor, win, { vim.api.nvim_buf_line_count(log), 0 })
  return win
end

return M
