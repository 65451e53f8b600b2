"""The path lists every session starts from (the `Settings` defaults), in a module of their own: read confinement
(agent/confine.py) and the CLI's cold `history` use them without importing attrs and the settings model (issue 29)."""

from __future__ import annotations

# `history.maxCommits` and `history.maxChangesetFiles` (HistorySettings)
DEFAULT_MAX_COMMITS = 200
DEFAULT_MAX_CHANGESET_FILES = 50
# Commits of a file's per-file `git log` before the repository's index is ready (nagent's own window)
FIRST_PAGE = 50
DEFAULT_DENY_READ = (".env", ".env.*", "*.pem", "*.key", "id_rsa*")
DEFAULT_MAX_FILE_BYTES = 50 * 1024 * 1024  # DESIGN §4.1: no file larger than this is read for any command
# DESIGN §9, §12: matched case-insensitively on the resolved path relative to its workspace folder, and on every
# tail of it, so each holds at any depth. `.git` is a nested repository's git dir, or a `.git` FILE whose `gitdir:`
# line hands git a directory the model wrote (its config could name programs); `.gitattributes` chooses which of a
# config's drivers and filters git runs; `.gitmodules` names URLs and paths git clones and checks out.
DEFAULT_DENY_WRITE = (
    ".git",
    ".git/**",
    ".gitattributes",
    ".gitmodules",
    ".nagent/**",
    ".env",
    ".env.*",
    "*.pem",
    "*.key",
    "id_rsa*",
)
# DESIGN §12: files that a tool runs by itself later — on a commit, on opening the folder, on `cd` — rather than
# when the user runs them. A change to one is always proposed for review, whatever confirmEdits or preview say
# (files with an exec bit too). Same matching as denyWrite. The README says why each is here.
DEFAULT_REVIEW_ALWAYS = (
    ".githooks/**",  # core.hooksPath's usual home: git runs them on commit, merge, checkout
    ".husky/**",  # husky's hooks
    ".pre-commit-config.yaml",  # pre-commit fetches and runs what it names on every commit
    "lefthook.yml",
    ".lefthook.yml",
    ".vscode/tasks.json",  # tasks may run on folder open
    ".vscode/launch.json",
    ".vscode/settings.json",  # interpreter and tool paths VS Code runs
    ".devcontainer/**",  # postCreateCommand and friends
    ".idea/**",  # JetBrains run configurations and startup tasks
    ".envrc",  # direnv runs it on cd
    ".dir-locals.el",  # Emacs evaluates it on opening a file
    ".nvim.lua",  # Neovim's exrc
    ".nvimrc",
    ".exrc",
    ".helix/**",
    ".zed/**",  # Zed tasks and settings
    ".github/workflows/**",  # CI runs it with the repository's secrets once pushed
    ".gitlab-ci.yml",
    "*.pth",  # Python runs a .pth file's import lines at start-up
)
