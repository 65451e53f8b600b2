-- :NagentTrust / :NagentTrustRevoke — the user's trust in a repository's nagent definitions (DESIGN §12).
--
-- A repository's .nagent/ (config, context, agents, recipes) comes with every clone. Until the user trusts it,
-- its recipes' command steps do not run and its recipes are not offered as code actions. The server records the
-- trust under a hash of those files in the user's own state; any change revokes it. Here: show the files and the
-- hash (nagent.trust.status), ask with vim.ui.select (so a picker plugin answers it), then send nagent.trust with
-- the hash that was shown (the server refuses if the files changed while the question was open).

local M = {}
local ui = require("nagent.ui")

-- Neovim's own vim.ui.select (inputlist): it would wait for input forever in a headless Neovim.
local builtin_select = vim.ui.select

local function nagent()
  return require("nagent")
end

local function is_true(v)
  return v == true
end

-- The argument: the buffer's file (its repository is meant), else nothing (the first workspace folder's).
local function argument(bufnr)
  local name = vim.api.nvim_buf_get_name(bufnr)
  if name ~= "" and vim.bo[bufnr].buftype == "" then
    return { uri = vim.uri_from_bufnr(bufnr) }
  end
  return {}
end

local function short_hash(hash)
  return type(hash) == "string" and hash:sub(1, 12) or ""
end

--- The server's message for a trust result (ui.say adds the "nagent: " prefix).
function M.message(res)
  local text = type(res.message) == "string" and vim.trim(res.message) or ""
  if text == "" then
    text = "the definitions in " .. tostring(res.stateRoot) .. (is_true(res.trusted) and " are trusted" or " are not trusted")
  end
  return (text:gsub("^nagent:%s*", ""))
end

--- Nothing to trust: the repository defines no config, context, agents or recipes.
function M.nothing(status)
  return type(status.hash) ~= "string" or type(status.files) ~= "table" or #status.files == 0
end

--- The lines shown before asking: the files, the hash, what trusting allows.
function M.lines(status)
  local files = status.files or {}
  local lines = {
    "Definitions in " .. tostring(status.stateRoot)
      .. (is_true(status.changedSinceTrusted) and " (changed since you trusted them)" or ""),
    string.format("%d file%s (hash %s):", #files, #files == 1 and "" or "s", short_hash(status.hash)),
  }
  for _, f in ipairs(files) do
    table.insert(lines, "  " .. tostring(f))
  end
  vim.list_extend(lines, {
    "",
    "Trusting lets this repository's recipes run their command steps (under your",
    "shell setting) and offers its recipes as code actions. Any change to these",
    "files revokes the trust; :NagentTrustRevoke revokes it now.",
  })
  return lines
end

--- :NagentTrust — show what the repository defines and trust it if the user picks "Trust".
--- callback(err, result) gets nagent.trust's result, or nagent.trust.status's when nothing was trusted.
function M.trust(options, callback)
  local opts = options or {}
  local bufnr = opts.bufnr or vim.api.nvim_get_current_buf()
  local arg = argument(bufnr)
  local function done(err, res)
    if callback then
      callback(err, res)
    end
  end
  nagent().execute("nagent.trust.status", arg, function(err, status)
    if err or not status then
      return done(err, status)
    end
    if M.nothing(status) or (is_true(status.trusted) and not is_true(status.changedSinceTrusted)) then
      ui.say(M.message(status))
      return done(nil, status)
    end
    local lines = M.lines(status)
    ui.float(lines, "nagent trust")
    local n = #status.files
    if vim.ui.select == builtin_select and #vim.api.nvim_list_uis() == 0 then
      ui.say(string.format("not trusted: Neovim is headless, nobody to ask (%d file%s in %s)", n,
        n == 1 and "" or "s", tostring(status.stateRoot)), vim.log.levels.WARN)
      return done(nil, status)
    end
    vim.ui.select({ "Trust", "Cancel" }, {
      prompt = string.format("Trust these %d nagent definition file%s of %s? ", n, n == 1 and "" or "s",
        tostring(status.stateRoot)),
      kind = "nagent.trust",
    }, function(choice)
      ui.close_float()
      if choice ~= "Trust" then
        ui.say("not trusted")
        return done(nil, status)
      end
      local trust_arg = vim.tbl_extend("force", arg, { hash = status.hash })
      nagent().execute("nagent.trust", trust_arg, function(terr, res)
        if not terr and res then
          ui.say(M.message(res), is_true(res.trusted) and vim.log.levels.INFO or vim.log.levels.WARN)
        end
        done(terr, res)
      end, bufnr)
    end)
  end, bufnr)
end

--- :NagentTrustRevoke — revoke the user's trust in the repository's definitions.
function M.revoke(options, callback)
  local opts = options or {}
  local bufnr = opts.bufnr or vim.api.nvim_get_current_buf()
  nagent().run(bufnr, "nagent.trust.revoke", argument(bufnr), function(res)
    ui.say(M.message(res))
  end, callback)
end

return M
