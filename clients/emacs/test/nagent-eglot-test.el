;;; nagent-eglot-test.el --- nagent's ERT suite through eglot  -*- lexical-binding: t -*-

;;; Commentary:

;; emacs --batch -L clients/emacs -L clients/emacs/test \
;;   -l nagent-eglot-test.el -f ert-run-tests-batch-and-exit

;;; Code:

(require 'nagent-test-helpers)
(setq nagent-test-backend 'eglot)
(require 'nagent-tests)

(provide 'nagent-eglot-test)
;;; nagent-eglot-test.el ends here
