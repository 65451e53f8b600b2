;;; nagent-code-action-tests.el --- ERT tests of nagent's code actions  -*- lexical-binding: t -*-

;;; Commentary:

;; Loaded by nagent-tests.el, so they run once per back end (eglot and
;; lsp-mode) against the real server.  The client says it is a nagent
;; plugin (capabilities.experimental.nagent.requestInput), so the server
;; offers "nagent: edit selection" and the plain commands; the client asks
;; for the request and shows the results its own way.

;;; Code:

(require 'nagent-test-helpers)

(defvar last-nonmenu-event)
(declare-function lsp-code-actions-at-point "lsp-mode" (&optional kind))
(declare-function lsp-execute-code-action "lsp-mode" (action))

(defconst nagent-test--a-documented
  "def fetch(url):\n    return get(url)\n\n\ndef size(items):\n    \"\"\"Count ITEMS.\"\"\"\n    return len(items)\n")

(defun nagent-test--select (beg end)
  "Make BEG..END the active region (no region when they are equal)."
  (transient-mark-mode 1)
  (if (= beg end)
      (progn (deactivate-mark) (goto-char beg))
    (set-mark beg)
    (goto-char end)
    (activate-mark)))

(defun nagent-test--code-actions (beg end)
  "The code actions of BEG..END as the back end gets them (plists)."
  (nagent-test--select beg end)
  (mapcar #'nagent--normalize
          (append (pcase nagent-test-backend
                    ('eglot (eglot-code-actions beg end))
                    ('lsp-mode (lsp-code-actions-at-point)))
                  nil)))

(defun nagent-test--action (actions title)
  "The action titled TITLE among ACTIONS."
  (cl-find title actions :key (lambda (a) (plist-get a :title)) :test #'equal))

(defun nagent-test--action-command (action)
  "(COMMAND ARGUMENT) of the code ACTION."
  (let ((command (plist-get action :command)))
    (if (stringp command)
        (list command (elt (plist-get action :arguments) 0))
      (list (plist-get command :command) (elt (plist-get command :arguments) 0)))))

(defun nagent-test--pick-code-action (title beg end)
  "Pick the code action TITLE at BEG..END the way a user does; return its value."
  (nagent-test--select beg end)
  (cl-letf (((symbol-function 'completing-read)
             (lambda (_prompt collection &rest _)
               (should (assoc title (if (functionp collection) nil collection)))
               title)))
    (pcase nagent-test-backend
      ;; `eglot-code-actions' pops a menu when the last event is a list (nil in batch).
      ('eglot (let ((last-nonmenu-event 0))
                (eglot-code-actions beg end nil t)))
      ('lsp-mode (call-interactively #'lsp-execute-code-action)))))

(ert-deftest nagent-plugin-capabilities-merge ()
  "experimental.nagent is added to whatever experimental capabilities eglot sends."
  (should (equal (nagent--with-plugin-capabilities nil) '(:nagent (:requestInput t :stream t))))
  (should (equal (nagent--with-plugin-capabilities (make-hash-table))
                 '(:nagent (:requestInput t :stream t))))
  (should (equal (nagent--with-plugin-capabilities '(:other 1))
                 '(:other 1 :nagent (:requestInput t :stream t))))
  (let ((h (make-hash-table :test #'equal)))
    (puthash "other" 1 h)
    (let ((merged (nagent--with-plugin-capabilities h)))
      (should (equal (gethash "other" merged) 1))
      (should (equal (gethash "nagent" merged) '(:requestInput t :stream t)))
      (should-not (gethash "nagent" h))
      (should (equal (json-parse-string (json-serialize (list :experimental merged))
                                        :object-type 'plist)
                     '(:experimental (:other 1 :nagent (:requestInput t :stream t))))))))

(ert-deftest nagent-code-action-edit-selection ()
  "\"nagent: edit selection\" is offered, asks for the request and edits the selection."
  (nagent-test-with-file (:replies (lambda (target)
                                     (list (nagent-test-write-reply target nagent-test--a-documented)
                                           (nagent-test-response-reply "Documented size."))))
    (nagent-test-require-command "nagent.edit")
    (goto-char (point-min))
    (search-forward "def size")
    (let* ((beg (line-beginning-position))
           (end (point-max))
           (actions (nagent-test--code-actions beg end))
           (edit (nagent-test--action actions "nagent: edit selection")))
      (should edit)
      ;; A plugin gets the plain commands, "edit selection" with the range and no request.
      (should-not (cl-find "nagent.codeAction.run" actions
                           :key (lambda (a) (car (nagent-test--action-command a)))
                           :test #'equal))
      (pcase-let ((`(,command ,argument) (nagent-test--action-command edit)))
        (should (equal command "nagent.edit"))
        (should-not (plist-member argument :request))
        (should (equal (plist-get argument :range)
                       '(:start (:line 4 :character 0) :end (:line 6 :character 0)))))
      (let* ((prompts nil)
             (value (cl-letf (((symbol-function 'read-string)
                               (lambda (prompt &optional _initial history &rest _)
                                 (push (list prompt history) prompts)
                                 "document this function")))
                      (nagent-test--pick-code-action "nagent: edit selection" beg end)))
             (job (if (nagent-job-p value) value (car nagent--jobs))))
        (should (equal prompts '(("nagent edit selection: " nagent-request-history))))
        ;; The client's asynchronous `nagent-edit': a job that the mode line shows.
        (should (nagent-job-p job))
        (should (equal (nagent-job-command job) "nagent.edit"))
        (let ((res (nagent-wait job)))
          (should (nagent--true-p (plist-get res :applied)))
          (should (equal (buffer-string) nagent-test--a-documented))
          (should (equal (nagent-test--file-text target) nagent-test-a-v3))
          ;; The request and the selection (lines 5-6 of a.py) reached the model.
          (let ((sent (json-encode (nagent-test-fake-requests fake))))
            (should (string-match-p "document this function" sent))
            (should (string-match-p "from line 5 column 1 to line 7 column 1" sent)))
          ;; The answer is in the client's *nagent* buffer.
          (should (string-match-p "Documented size\\."
                                  (nagent-test-buffer-text nagent-answer-buffer))))))))

(ert-deftest nagent-code-action-history-opens-history-view ()
  "\"nagent: show this file's history\" opens *nagent-history*, not a server message."
  (nagent-test-with-file ()
    (nagent-test-require-command "nagent.history")
    (goto-char (point-min))
    (let* ((actions (nagent-test--code-actions (point) (point)))
           (history (nagent-test--action actions "nagent: show this file's history"))
           (messages nil)
           (record (lambda (format-string &rest args)
                     (when format-string
                       (push (apply #'format-message format-string args) messages)))))
      (should history)
      ;; No "edit selection" without a selection.
      (should-not (nagent-test--action actions "nagent: edit selection"))
      (should (equal (car (nagent-test--action-command history)) "nagent.history"))
      (should-not (get-buffer "*nagent-history*"))
      (advice-add 'message :before record)
      (unwind-protect
          (let ((res (save-window-excursion
                       (nagent-test--pick-code-action "nagent: show this file's history"
                                                      (point) (point)))))
            (should (= (length (plist-get res :commits)) 3))
            ;; Anything the server might still send arrives now.
            (let ((deadline (+ (float-time) 1)))
              (while (< (float-time) deadline) (accept-process-output nil 0.1))))
        (advice-remove 'message record))
      (let ((text (nagent-test-buffer-text "*nagent-history*")))
        (should (string-match-p "History of a\\.py" text))
        (should (string-match-p "Fix off-by-one in size" text))
        (should (string-match-p "Alice Example" text)))
      ;; The server's one-line summary for clients without a plugin was not sent.
      (should-not (cl-find-if (lambda (m) (string-match-p "commits by [0-9]+ author" m)) messages)))))

(defconst nagent-test--a-two-changes
  "def fetch(url, retries=3):\n    return get(url)\n\n\ndef size(items):\n    return len(list(items))\n")

(ert-deftest nagent-code-action-review-reverts-conversation ()
  "\"nagent: accept this change\" and \"reject this change\" run from the code-action
menu; after each the open conversation shows the review the server recorded."
  (nagent-test-with-file (:replies (lambda (target)
                                     (list (nagent-test-write-reply target nagent-test--a-two-changes)
                                           (nagent-test-response-reply "Two changes.")))
                          :settings (list :confirmEdits t))
    (nagent-test-require-command "nagent.review.apply")
    (let* ((nagent-review-on-proposal nil)
           (source (current-buffer))
           (res (nagent-wait (nagent-edit "retries and a list")))
           (path (save-window-excursion (nagent-open-conversation)))
           (conv (find-buffer-visiting path)))
      (should (nagent--proposal-id (plist-get res :proposal)))
      (should conv)
      (with-current-buffer conv
        (should-not (string-match-p "nagent-review-result" (buffer-string))))
      (set-buffer source)
      ;; Accept the first change from the menu.
      (goto-char (point-min))
      (let* ((value (nagent-test--pick-code-action "nagent: accept this change" (point) (point)))
             (result (if (nagent-job-p value) (nagent-wait value) value)))
        (should (nagent--true-p (plist-get result :applied))))
      (should (string-match-p "retries=3" (buffer-string)))
      (with-current-buffer conv
        (should (string-match-p "nagent-review-result" (buffer-string)))
        (should (string-match-p "Accepted and applied" (buffer-string)))
        (should-not (buffer-modified-p))
        (should (equal (buffer-string) (nagent-test--file-text path))))
      ;; Reject the second one.
      (set-buffer source)
      (goto-char (point-min))
      (re-search-forward "len(items)")
      (let* ((value (nagent-test--pick-code-action "nagent: reject this change"
                                                   (line-beginning-position)
                                                   (line-beginning-position)))
             (result (if (nagent-job-p value) (nagent-wait value) value)))
        (should (= (length (plist-get result :rejected)) 1)))
      (should-not (string-match-p "list(items)" (buffer-string)))
      (with-current-buffer conv
        (should (string-match-p "Rejected by the user" (buffer-string)))
        (should (string-match-p "len(list(items))" (buffer-string)))
        (should (equal (buffer-string) (nagent-test--file-text path)))))))

(provide 'nagent-code-action-tests)
;;; nagent-code-action-tests.el ends here
