;;; nagent-trust.el --- Trust in a repository's nagent definitions  -*- lexical-binding: t -*-

;; This file is not part of GNU Emacs.

;;; Commentary:

;; Part of nagent.el: `nagent-trust' and `nagent-trust-revoke' (DESIGN §12).

;;; Code:

(require 'subr-x)
(require 'nagent-core)
(require 'nagent-connection)

;;;; Trust in a repository's definitions (DESIGN §12)

;; A repository's .nagent/ (config, agents, recipes) comes with every clone.
;; Until the user trusts it, its recipes' command steps do not run and its
;; recipes are not offered as code actions.  The server records the trust
;; under a hash of those files, in the user's own state; any change revokes it.

(defun nagent--trust-argument ()
  "Argument of the trust commands: this file's repository, else (a buffer
visiting no file) the server's first workspace folder."
  (if buffer-file-name (nagent--uri-argument) (make-hash-table)))

(defun nagent--trust-nothing-p (status)
  "Non-nil when STATUS says the repository defines nothing to trust."
  (or (not (stringp (plist-get status :hash)))
      (null (nagent--list (plist-get status :files)))))

(defun nagent--trust-message (result)
  "One line for the trust RESULT: the server's message, prefixed once."
  (let ((text (string-trim (or (plist-get result :message) ""))))
    (cond ((string-empty-p text)
           (format "nagent: the definitions in %s are %s" (plist-get result :stateRoot)
                   (if (nagent--true-p (plist-get result :trusted)) "trusted" "not trusted")))
          ((string-match-p "\\`nagent\\b" text) text)
          (t (concat "nagent: " text)))))

(defun nagent-trust-text (status)
  "What `nagent-trust' shows before asking: the files STATUS covers, the
hash, and what trusting allows."
  (let ((files (nagent--list (plist-get status :files)))
        (hash (or (plist-get status :hash) "")))
    (concat
     (format "Definitions in %s%s\n\n" (plist-get status :stateRoot)
             (if (nagent--true-p (plist-get status :changedSinceTrusted))
                 " (changed since you trusted them)" ""))
     (format "%d file%s (hash %s):\n" (length files) (if (= (length files) 1) "" "s")
             (substring hash 0 (min 12 (length hash))))
     (mapconcat (lambda (f) (format "  %s\n" f)) files "")
     "\nTrusting lets this repository's recipes run their command steps (under\n"
     "your shell setting) and offers its recipes as code actions.  Any change\n"
     "to these files revokes the trust; `nagent-trust-revoke' revokes it now.\n")))

;;;###autoload
(defun nagent-trust (&optional no-confirm)
  "Show what this repository's .nagent/ defines, and trust it if you agree.
The files and their hash are shown in *nagent-trust*, then
`yes-or-no-p' asks; NO-CONFIRM (from Lisp) trusts without asking.
Returns the nagent.trust result, or the nagent.trust.status result
when nothing was trusted."
  (interactive)
  (nagent--with-user-errors
    (let* ((arg (nagent--trust-argument))
           (status (nagent-command "nagent.trust.status" arg "trust status")))
      (cond
       ((nagent--trust-nothing-p status)
        (nagent--report "%s" (nagent--trust-message status))
        status)
       ((and (nagent--true-p (plist-get status :trusted))
             (not (nagent--true-p (plist-get status :changedSinceTrusted))))
        (nagent--report "%s" (nagent--trust-message status))
        status)
       (t
        (let ((buf (get-buffer-create "*nagent-trust*"))
              (n (length (nagent--list (plist-get status :files)))))
          (with-current-buffer buf
            (let ((inhibit-read-only t))
              (erase-buffer)
              (insert (nagent-trust-text status))
              (goto-char (point-min)))
            (special-mode))
          (if (or no-confirm
                  (save-window-excursion
                    (display-buffer buf)
                    (yes-or-no-p (format "Trust these %d nagent definition file%s of %s? "
                                         n (if (= n 1) "" "s") (plist-get status :stateRoot)))))
              ;; The hash the user saw: the server refuses when the files changed meanwhile.
              (let ((res (nagent-command "nagent.trust"
                                         (append (and (listp arg) arg)
                                                 (list :hash (plist-get status :hash)))
                                         "trusting")))
                (nagent--report "%s" (nagent--trust-message res))
                res)
            (message "nagent: not trusted")
            status)))))))

;;;###autoload
(defun nagent-trust-revoke ()
  "Revoke your trust in this repository's .nagent/ definitions.
Returns the nagent.trust.revoke result."
  (interactive)
  (nagent--with-user-errors
    (let ((res (nagent-command "nagent.trust.revoke" (nagent--trust-argument) "revoking trust")))
      (nagent--report "%s" (nagent--trust-message res))
      res)))


(provide 'nagent-trust)
;;; nagent-trust.el ends here
