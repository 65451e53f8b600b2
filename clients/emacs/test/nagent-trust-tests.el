;;; nagent-trust-tests.el --- ERT tests of trusting a repository's definitions  -*- lexical-binding: t -*-

;;; Commentary:

;; Loaded by nagent-tests.el, so they run once per back end (eglot and
;; lsp-mode) against the real server.  The repository ships
;; .nagent/recipes/x.yaml with a command step: `nagent-trust' shows its
;; files and asks, the server records the trust (nagent.trust.status), the
;; recipe's command runs only then, and `nagent-trust-revoke' undoes it.

;;; Code:

(require 'nagent-test-helpers)

(defconst nagent-test-trust-recipe
  "description: Shout the request
steps:
  - step: shout
    inputs: [userRequest]
    outputs: {loud: string}
    command: [python3, -c, \"import sys; print(sys.argv[1].upper())\", \"{{userRequest}}\"]
"
  "A repository recipe whose only step is a command.")

(defun nagent-test--write-repository-recipe (repo _home)
  "Commit the recipe x with a command step to REPO's .nagent/recipes/."
  (nagent-test--commit repo '("Mallory Example" . "mallory@example.com") "2024-04-01T10:00:00+00:00"
                       "Add a recipe" `((".nagent/recipes/x.yaml" . ,nagent-test-trust-recipe))))

(defun nagent-test--trust-status ()
  "The server's nagent.trust.status for the current file."
  (nagent-command "nagent.trust.status" (nagent--uri-argument)))

(defun nagent-test--run-x ()
  "Run the repository recipe x; its result, or the error's message."
  (condition-case err
      (nagent-command "nagent.recipe.run" (nagent--uri-argument :recipe "x" :request "quiet words"))
    (nagent-error (cadr err))))

(ert-deftest nagent-trust-shows-files-asks-and-is-recorded ()
  "`nagent-trust' lists the files and asks; no changes nothing, yes trusts;
the recipe's command runs only once trusted; `nagent-trust-revoke' undoes it."
  (nagent-test-with-file (:setup #'nagent-test--write-repository-recipe
                          :settings (list :shell "allow"))
    (dolist (c '("nagent.trust.status" "nagent.trust" "nagent.trust.revoke"))
      (nagent-test-require-command c))
    (let ((before (nagent-test--trust-status)))
      (should-not (nagent--true-p (plist-get before :trusted)))
      (should (stringp (plist-get before :hash)))
      (should (cl-some (lambda (f) (string-suffix-p "recipes/x.yaml" f))
                       (nagent--list (plist-get before :files))))
      ;; untrusted: the command step does not run, and the message says how to trust
      (let ((refused (nagent-test--run-x)))
        (should (stringp refused))
        (should (string-match-p "trust" refused)))
      ;; asked, answered no: nothing recorded
      (let ((asked nil))
        (cl-letf (((symbol-function 'yes-or-no-p) (lambda (prompt) (setq asked prompt) nil)))
          (call-interactively #'nagent-trust))
        (should (string-match-p "Trust these [0-9]+ nagent definition files? of " asked))
        (let ((shown (nagent-test-buffer-text "*nagent-trust*")))
          (should (string-match-p "recipes/x\\.yaml" shown))
          (should (string-match-p (regexp-quote (substring (plist-get before :hash) 0 12)) shown))
          (should (string-match-p "command steps" shown))
          (should (string-match-p "code actions" shown))))
      (should-not (nagent--true-p (plist-get (nagent-test--trust-status) :trusted)))
      ;; answered yes: trusted under the hash shown
      (let ((res (cl-letf (((symbol-function 'yes-or-no-p) (lambda (_) t)))
                   (call-interactively #'nagent-trust))))
        (should (nagent--true-p (plist-get res :trusted)))
        (should (equal (plist-get res :hash) (plist-get before :hash))))
      (let ((status (nagent-test--trust-status)))
        (should (nagent--true-p (plist-get status :trusted)))
        (should (equal (plist-get status :hash) (plist-get before :hash))))
      ;; trusted: the command step runs
      (let ((ran (nagent-test--run-x)))
        (should (listp ran))
        (should (equal (string-trim (format "%s" (nagent--get ran :outputs :loud))) "QUIET WORDS")))
      ;; already trusted: not asked again
      (cl-letf (((symbol-function 'yes-or-no-p) (lambda (_) (error "asked again"))))
        (should (nagent--true-p (plist-get (call-interactively #'nagent-trust) :trusted))))
      ;; revoked
      (should-not (nagent--true-p (plist-get (call-interactively #'nagent-trust-revoke) :trusted)))
      (should-not (nagent--true-p (plist-get (nagent-test--trust-status) :trusted)))
      (should (string-match-p "trust" (nagent-test--run-x))))))

(ert-deftest nagent-trust-of-changed-definitions-asks-again-and-checks-the-hash-shown ()
  "A change after trusting revokes the trust and `nagent-trust' says so;
a change while the question is open is refused (the hash shown is sent)."
  (nagent-test-with-file (:setup #'nagent-test--write-repository-recipe)
    (dolist (c '("nagent.trust.status" "nagent.trust"))
      (nagent-test-require-command c))
    (let ((recipe (expand-file-name ".nagent/recipes/x.yaml" repo)))
      (cl-letf (((symbol-function 'yes-or-no-p) (lambda (_) t)))
        (should (nagent--true-p (plist-get (call-interactively #'nagent-trust) :trusted))))
      (nagent-test--write recipe (concat nagent-test-trust-recipe "# changed\n"))
      (let ((status (nagent-test--trust-status)))
        (should-not (nagent--true-p (plist-get status :trusted)))
        (should (nagent--true-p (plist-get status :changedSinceTrusted))))
      ;; asked again; the file changes once more while the question is open
      (let ((err (cl-letf (((symbol-function 'yes-or-no-p)
                            (lambda (_)
                              (nagent-test--write recipe (concat nagent-test-trust-recipe "# again\n"))
                              t)))
                   (should-error (nagent-trust) :type 'nagent-error))))
        (should (string-match-p "changed since you trusted them" (nagent-test-buffer-text "*nagent-trust*")))
        (should (string-match-p "changed" (cadr err))))
      (should-not (nagent--true-p (plist-get (nagent-test--trust-status) :trusted))))))

(ert-deftest nagent-trust-with-nothing-to-trust-does-not-ask ()
  "A repository without .nagent/ definitions: a message, no question."
  (nagent-test-with-file ()
    (nagent-test-require-command "nagent.trust.status")
    (let ((res (cl-letf (((symbol-function 'yes-or-no-p) (lambda (_) (error "asked"))))
                 (call-interactively #'nagent-trust))))
      (should-not (stringp (plist-get res :hash)))
      (should (null (nagent--list (plist-get res :files)))))))

(provide 'nagent-trust-tests)
;;; nagent-trust-tests.el ends here
