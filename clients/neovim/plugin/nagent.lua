-- nagent user commands (:NagentEdit, :NagentHistory, ...). They work before setup() too:
-- the first command attaches nagent-lsp to the buffer with the default settings.
if vim.g.loaded_nagent then
  return
end
vim.g.loaded_nagent = true

require("nagent").create_commands()
