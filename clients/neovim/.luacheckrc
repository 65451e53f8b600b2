-- luacheck configuration of the Neovim client (clients/ci-editors.sh runs `luacheck clients/neovim`; zero warnings).
std = "luajit"
globals = { "vim" } -- vim.bo/vim.wo/vim.g/vim.ui/vim.env fields are set on purpose
max_line_length = 140
files["test/*.lua"] = {
  unused_args = false, -- each test gets ctx whether it needs it or not
}
