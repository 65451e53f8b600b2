;;; nagent-lsp-mode-test.el --- nagent's ERT suite through lsp-mode  -*- lexical-binding: t -*-

;;; Commentary:

;; emacs --batch -L clients/emacs -L clients/emacs/test \
;;   -l nagent-lsp-mode-test.el -f ert-run-tests-batch-and-exit

;;; Code:

(require 'nagent-test-helpers)
(nagent-test-setup-lsp-mode)
(setq nagent-test-backend 'lsp-mode)
(require 'nagent-tests)

(provide 'nagent-lsp-mode-test)
;;; nagent-lsp-mode-test.el ends here
