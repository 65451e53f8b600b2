;;; nagent-eglot-test.el --- nagent's ERT suite through eglot  -*- lexical-binding: t -*-

;;; Commentary:

;; emacs --batch -L clients/emacs -L clients/emacs/test \
;;   -l nagent-eglot-test.el -f ert-run-tests-batch-and-exit

;;; Code:

(require 'nagent-test-helpers)
(setq nagent-test-backend 'eglot)
(require 'nagent-tests)

;; eglot only: lsp-mode's filter reads a whole chunk before it dispatches.
(ert-deftest nagent-eglot-output-waits-while-a-question-is-open ()
  "What the server sends while nagent's question is open is handled once it
is answered, not inside the filter that asked it (jsonrpc 1.0.14)."
  (nagent-test-with-file
      (:replies (list (list (cons 'text "def test_x():\n    pass\n")))
       :setup #'nagent-test--write-tests-recipe)
    (nagent-test-require-command "nagent.recipe.run")
    (let* ((server (cdr (nagent--connection)))
           (status nil)
           (held-while-asking nil)
           (nagent-ask-function
            (lambda (_message choices)
              ;; The user is still thinking when another answer arrives.
              (setq status (nagent-command-async "nagent.status" nil :else #'ignore))
              (setq held-while-asking
                    (and (nagent-test-wait-for (lambda () (nagent--eglot-held-output server)) 30)
                         (not (nagent-job-done status))))
              (car (member "Deny" choices)))))
      (ignore-errors (nagent-wait (nagent-run-recipe "tests" "size")))
      (should held-while-asking)
      (should (nagent-test-wait-for (lambda () (nagent-job-done status)) 30))
      (should (stringp (plist-get (nagent-job-result status) :version)))
      (should-not (nagent--eglot-held-output server))
      (should (= (length (nagent-test-fake-requests fake)) 1))
      (should (equal (buffer-string) nagent-test-a-v3))
      (should (stringp (plist-get (nagent-status) :version))))))

(provide 'nagent-eglot-test)
;;; nagent-eglot-test.el ends here
