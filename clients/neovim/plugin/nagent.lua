-- nagent user commands (:NagentEdit, :NagentHistory, ...). They work before setup() too:
-- the first command attaches nagent-lsp to the buffer with the default settings.
-- Conversation files (.nagent/conversations/*) get filetype `nagentconv` here, so this works under
-- `-u NONE` and without `filetype on` as well.
if vim.g.loaded_nagent then
  return
end
vim.g.loaded_nagent = true

require("nagent").create_commands()

local group = vim.api.nvim_create_augroup("nagent_filetype", { clear = true })
vim.api.nvim_create_autocmd({ "BufRead", "BufNewFile" }, {
  group = group,
  pattern = "*/.nagent/conversations/*",
  callback = function(args)
    local name = vim.api.nvim_buf_get_name(args.buf)
    if require("nagent.conversation").is_conversation(name) then
      vim.bo[args.buf].filetype = "nagentconv"
    end
  end,
})
vim.api.nvim_create_autocmd("FileType", {
  group = group,
  pattern = "nagentconv",
  callback = function(args)
    require("nagent.conversation").setup_buffer(args.buf)
  end,
})
