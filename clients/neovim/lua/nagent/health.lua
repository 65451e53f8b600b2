-- :checkhealth nagent — is nagent ready to work here? The server command found and its version, the model
-- configured, the state root writable (asked of a running server with nagent.status, else judged from the
-- settings), and which Neovim API the plugin uses (0.7's vim.lsp.start_client or 0.8+'s vim.lsp.start).

local M = {}

-- vim.health (0.10+: start/ok/warn/error/info; 0.8–0.9: report_*) or 0.7's require("health") (report_*).
local function reporter()
  local h = vim.health
  if type(h) ~= "table" or not (h.start or h.report_start) then
    h = require("health")
  end
  return {
    start = h.start or h.report_start,
    ok = h.ok or h.report_ok,
    warn = h.warn or h.report_warn,
    error = h.error or h.report_error,
    info = h.info or h.report_info,
  }
end

local function has(version)
  return vim.fn.has("nvim-" .. version) == 1
end

-- A running nagent client (the current buffer's first, else any).
local function running_client()
  local all = vim.lsp.get_clients and vim.lsp.get_clients({ name = "nagent" }) or vim.lsp.get_active_clients()
  for _, c in ipairs(all) do
    if c.name == "nagent" then
      return c
    end
  end
end

local function status_of(client)
  local params = { command = "nagent.status", arguments = { vim.empty_dict() } }
  local ok, res
  if has("0.11") then
    ok, res = pcall(client.request_sync, client, "workspace/executeCommand", params, 10000)
  else
    ok, res = pcall(client.request_sync, "workspace/executeCommand", params, 10000)
  end
  if ok and type(res) == "table" and type(res.result) == "table" then
    return res.result
  end
  return nil, ok and vim.inspect(res and res.err or res) or tostring(res)
end

-- Is `dir` (or, while it does not exist yet, its nearest existing parent) writable?
local function writable(dir)
  local d = dir
  while d and d ~= "" and vim.fn.isdirectory(d) == 0 do
    local parent = vim.fn.fnamemodify(d, ":h")
    if parent == d then
      return false
    end
    d = parent
  end
  return d ~= nil and vim.fn.filewritable(d) == 2, d
end

--- The checks of :checkhealth nagent.
function M.check()
  local r = reporter()
  local nagent = require("nagent")
  r.start("nagent: Neovim")
  local v = vim.version()
  local version = string.format("%d.%d.%d", v.major, v.minor, v.patch)
  if has("0.11") then
    r.ok("Neovim " .. version .. ": vim.lsp.start and the client's method API (client:request)")
  elseif has("0.8") then
    r.ok("Neovim " .. version .. ": vim.lsp.start")
  elseif has("0.7") then
    r.ok("Neovim " .. version .. ": the 0.7 API (vim.lsp.start_client + buf_attach_client); every command works")
  else
    r.error("Neovim " .. version .. " is too old: nagent needs 0.7 or newer")
  end

  r.start("nagent: server")
  local cmd = nagent.config.cmd
  if type(cmd) ~= "table" or type(cmd[1]) ~= "string" then
    r.error("cmd must be a list such as { \"nagent-lsp\" }: " .. vim.inspect(cmd))
    return
  end
  if vim.fn.executable(cmd[1]) ~= 1 then
    r.error("server not found: " .. cmd[1] .. " is not an executable (cmd = " .. vim.inspect(cmd) .. ")",
      { "pipx install <checkout of nagent-lsp> (or pip install -e . in a venv)", "or set cmd in setup()" })
    return
  end
  r.ok("server found: " .. vim.fn.exepath(cmd[1]))
  local vcmd = vim.deepcopy(cmd)
  table.insert(vcmd, "--version")
  local out = vim.fn.system(vcmd)
  if vim.v.shell_error == 0 and out:match("%S") then
    r.ok("version: " .. vim.trim(out))
  else
    r.warn("`" .. table.concat(vcmd, " ") .. "` failed: " .. vim.trim(out))
  end

  r.start("nagent: settings")
  local client = running_client()
  local status, why
  if client then
    status, why = status_of(client)
  end
  if status then
    if status.modelConfigured then
      r.ok("model configured: " .. tostring(status.model) .. " at " .. tostring(status.baseUrl))
    else
      r.error("no model configured (model " .. tostring(status.model) .. ")",
        { "set settings.model (and baseUrl / apiKeyEnv) in setup(), or NAGENT_MODEL / OPENAI_API_KEY" })
    end
    local ok, at = writable(tostring(status.stateRoot))
    if ok then
      r.ok("state root writable: " .. tostring(status.stateRoot))
    else
      r.error("state root not writable: " .. tostring(status.stateRoot) .. " (" .. tostring(at) .. ")")
    end
  else
    local settings = nagent.config.settings or {}
    local model = settings.model or os.getenv("NAGENT_MODEL")
    if model then
      r.ok("model configured in the settings: " .. tostring(model))
    else
      r.warn("no model in the settings (settings.model or NAGENT_MODEL); the server may still find one")
    end
    local root = settings.stateRoot or (vim.fn.getcwd() .. "/.nagent")
    local ok, at = writable(root)
    if ok then
      r.ok("state root writable: " .. root)
    else
      r.error("state root not writable: " .. root .. " (" .. tostring(at) .. ")")
    end
    r.info(client and ("the running server did not answer nagent.status: " .. tostring(why))
      or "no server running now: open a file in a project for the server's own answers")
  end
end

return M
