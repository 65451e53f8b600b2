-- nagent user commands. They work before setup() too: the first one attaches the server.
if vim.g.loaded_nagent then
  return
end
vim.g.loaded_nagent = true

local function nagent()
  return require("nagent")
end

local command = vim.api.nvim_create_user_command

command("NagentEdit", function(opts)
  local range = nil
  if opts.range and opts.range > 0 then
    range = { line1 = opts.line1, line2 = opts.line2 }
  end
  nagent().edit(opts.args, range)
end, { nargs = "*", range = true, desc = "nagent: edit this buffer (or the range) with a request" })

command("NagentConversation", function()
  nagent().conversation()
end, { desc = "nagent: open this file's conversation" })

command("NagentClearConversation", function()
  nagent().clear_conversation()
end, { desc = "nagent: archive this file's conversation and start afresh" })

command("NagentHistory", function(opts)
  nagent().history({ max_commits = tonumber(opts.args) })
end, { nargs = "?", desc = "nagent: this file's commits, authors and co-edits" })

command("NagentCoedits", function(opts)
  nagent().coedits({ limit = tonumber(opts.args) })
end, { nargs = "?", desc = "nagent: files that change together with this one" })

command("NagentSplit", function(opts)
  nagent().split({ target_bytes = tonumber(opts.args) })
end, { nargs = "?", desc = "nagent: split this file into indexed segments" })

command("NagentPatch", function(opts)
  nagent().patch({ index_path = opts.args, force = opts.bang })
end, { nargs = "?", bang = true, complete = "file", desc = "nagent: merge split segments back (! = force)" })

command("NagentSummarize", function()
  nagent().summarize()
end, { desc = "nagent: summarize this file" })

command("NagentStatus", function()
  nagent().status()
end, { desc = "nagent: server status" })

command("NagentCancel", function()
  nagent().cancel()
end, { desc = "nagent: cancel the running command" })
