-- The model's answer as it arrives (issue 23): the server sends `nagent/stream` {token, uri, delta, turn, done?}
-- to a client that opted in (capabilities.experimental.nagent.stream). The latest reply of a run is shown live
-- where the answer goes (the float, or the end of nagent://answers in a split) and, when the file's conversation
-- is open, as virtual lines at the end of the conversation buffer (the server writes the file; the buffer is
-- reloaded with the whole reply after the run, so nothing is typed into it meanwhile). A new `turn` starts afresh.

local M = {}

---@class nagent.StreamState
---@field uri string the run's target file
---@field turn any the conversation turn of the reply being shown
---@field text string the reply so far
---@field done boolean the reply has ended

---@type table<string, nagent.StreamState> token (or uri when the run has no progress token) -> state
M.runs = {}

local ns = vim.api.nvim_create_namespace("nagent_stream")

local function ui()
  return require("nagent.ui")
end

local function key_of(params)
  if params.token ~= nil and params.token ~= vim.NIL then
    return "token:" .. tostring(params.token)
  end
  return "uri:" .. tostring(params.uri)
end

-- The loaded conversation buffer of the run's file, if it is open.
local function conversation_buffer(uri)
  local ok, path = pcall(vim.uri_to_fname, uri)
  if not ok then
    return nil
  end
  local conversation = require("nagent.conversation")
  local want = vim.fn.resolve(vim.fn.fnamemodify(path, ":p"))
  for _, b in ipairs(vim.api.nvim_list_bufs()) do
    if vim.api.nvim_buf_is_loaded(b) and vim.b[b].nagent_conversation then
      local target = conversation.target_of(vim.api.nvim_buf_get_name(b))
      if target and vim.fn.resolve(vim.fn.fnamemodify(target, ":p")) == want then
        return b
      end
    end
  end
end

--- The reply so far as virtual lines at the end of the conversation buffer (nothing when `text` is nil).
---@param buf integer
---@param text? string
function M.show_in_conversation(buf, text)
  vim.api.nvim_buf_clear_namespace(buf, ns, 0, -1)
  if not text then
    return
  end
  local virt = { { { "▍ nagent is answering…", "Comment" } } }
  for _, l in ipairs(ui().lines(text)) do
    table.insert(virt, { { l, "Normal" } })
  end
  local last = math.max(0, vim.api.nvim_buf_line_count(buf) - 1)
  vim.api.nvim_buf_set_extmark(buf, ns, last, 0, { virt_lines = virt })
end

--- The virtual lines now at the end of conversation buffer `buf` (for tests and scripts).
---@param buf integer
---@return string[]
function M.conversation_lines(buf)
  local out = {}
  for _, m in ipairs(vim.api.nvim_buf_get_extmarks(buf, ns, 0, -1, { details = true })) do
    for _, vl in ipairs((m[4] or {}).virt_lines or {}) do
      local parts = {}
      for _, chunk in ipairs(vl) do
        table.insert(parts, chunk[1])
      end
      table.insert(out, table.concat(parts))
    end
  end
  return out
end

--- Forget the live text of every run (the final answer replaced it) and clear the conversations' virtual lines.
function M.finish_all()
  M.runs = {}
  for _, b in ipairs(vim.api.nvim_list_bufs()) do
    if vim.api.nvim_buf_is_loaded(b) then
      pcall(vim.api.nvim_buf_clear_namespace, b, ns, 0, -1)
    end
  end
end

--- The `nagent/stream` notification handler.
---@param params {token: any, uri: string, delta: string, turn: any, done: boolean?}
function M.on_stream(params)
  if type(params) ~= "table" then
    return
  end
  local key = key_of(params)
  local state = M.runs[key]
  if not state or state.turn ~= params.turn or state.done then
    state = { uri = params.uri, turn = params.turn, text = "", done = false }
    M.runs[key] = state
  end
  if type(params.delta) == "string" then
    state.text = state.text .. params.delta
  end
  state.done = params.done == true
  local text = state.text
  vim.schedule(function()
    if M.runs[key] ~= state then
      return
    end
    ui().show_live("nagent · answering (turn " .. tostring(state.turn) .. ")", text)
    local cbuf = conversation_buffer(state.uri)
    if cbuf then
      M.show_in_conversation(cbuf, text)
    end
  end)
end

return M
