;;; nagent-ui-tests.el --- ERT tests of nagent.el's interface (wave 2)  -*- lexical-binding: t -*-

;;; Commentary:

;; Loaded by nagent-tests.el, so they run once per back end (eglot and
;; lsp-mode) against the real server and the fake OpenAI server:
;; asynchronous edits and cancellation, the *nagent* answer buffer with
;; tokens and cost, the conversation view, review of a two-file proposal,
;; agents and recipes, plain error messages, status sources, the whole
;; hover card and history across a rename.

;;; Code:

(require 'nagent-test-helpers)

(defconst nagent-test-b-v2 "from a import fetch, size\n\nprint(fetch('x'), size([]))\n")
(defconst nagent-test-b-edited
  "from a import fetch, size\n\nprint(fetch('x'), size([]))\nprint('REJECTED-LINE')\n")
(defconst nagent-test-a-retries
  "def fetch(url, retries=3):\n    return get(url)\n\n\ndef size(items):\n    return len(items)\n")

(defun nagent-test--text-of (file)
  "Contents of FILE on disk."
  (with-temp-buffer (insert-file-contents file) (buffer-string)))

(defun nagent-test--delayed (seconds entry)
  "The script ENTRY answered after SECONDS."
  (cons (cons 'delay seconds) entry))

(defun nagent-test--conversation-path ()
  "Path of the current file's conversation."
  (plist-get (nagent-command "nagent.conversation.open" (nagent--uri-argument)) :path))

;;;; Asynchronous edits

(ert-deftest nagent-edit-stays-responsive ()
  "While the model's reply is delayed, a timer fires and a key is processed;
the edit arrives afterwards."
  (nagent-test-with-file (:replies (lambda (target)
                                     (list (nagent-test--delayed
                                            3 (nagent-test-write-reply target nagent-test-a-retries))
                                           (nagent-test-response-reply "Added retries."))))
    (nagent-test-require-command "nagent.edit")
    (pop-to-buffer-same-window (current-buffer))
    (let* ((source (current-buffer))
           (events nil)
           (job (nagent-edit "add retries")))
      ;; `nagent-edit' returned before the model answered.
      (should (nagent-job-p job))
      (should-not (nagent-job-done job))
      ;; The mode line shows it (`format-mode-line' renders nothing in batch).
      (should (member nagent--mode-line-entry mode-line-misc-info))
      (should (string-match-p "nagent: editing a\\.py" (nagent--mode-line-text)))
      (run-with-timer
       0.1 nil
       (lambda ()
         (push (list 'timer (nagent-job-done job)) events)
         ;; A key typed by the user: C-e in the selected window (the edited buffer).
         (with-current-buffer source (goto-char (point-min)))
         (execute-kbd-macro (kbd "C-e"))
         (with-current-buffer source
           (push (list 'key (nagent-job-done job) (point)
                       (save-excursion (goto-char (point-min)) (line-end-position)))
                 events))))
      (should (equal (nagent-wait job) (nagent-job-result job)))
      (push (list 'done) events)
      (setq events (nreverse events))
      ;; Both happened while the request was still running, in that order.
      (should (equal (mapcar #'car events) '(timer key done)))
      (should-not (nth 1 (nth 0 events)))
      (should-not (nth 1 (nth 1 events)))
      (should (= (nth 2 (nth 1 events)) (nth 3 (nth 1 events))))
      (should (> (nth 2 (nth 1 events)) 1))
      (should (equal (with-current-buffer source (buffer-string)) nagent-test-a-retries))
      (should-not nagent--jobs)
      (should-not (nagent--mode-line-text)))))

(ert-deftest nagent-cancel-stops-edit ()
  "`nagent-cancel' ends a running edit at once; the server records the interruption."
  (nagent-test-with-file (:replies (lambda (target)
                                     (list (nagent-test--delayed
                                            60 (nagent-test-write-reply target nagent-test-a-retries)))))
    (nagent-test-require-command "nagent.edit")
    (let ((job (nagent-edit "a slow request")))
      (should (nagent-test-wait-for (lambda () (nagent-test-fake-requests fake)) 30))
      (should (eq (nagent-cancel) job))
      (should (nagent-job-done job))
      (should (equal (nagent-job-error job) "cancelled"))
      (should-not nagent--jobs)
      (should (equal (buffer-string) nagent-test-a-v3))
      (let ((conv (nagent-test--conversation-path)))
        (should (nagent-test-wait-for
                 (lambda () (string-match-p "Interrupted" (nagent-test--text-of conv)))
                 15))))))

;;;; The answer buffer, tokens and cost

(ert-deftest nagent-answer-buffer-keeps-answers ()
  "Every answer stays in *nagent* with its file, request, tokens and cost."
  (nagent-test-with-file (:replies (lambda (target)
                                     (list (nagent-test-write-reply target nagent-test-a-retries)
                                           (nagent-test-response-reply
                                            "ANSWER-ONE line 1\nline 2\nline 3\nline 4\nline 5\nline 6\nline 7\nline 8")
                                           (nagent-test-response-reply "ANSWER-TWO")))
                          :settings (list :models (list :priced (list :model "fake-model"
                                                                      :price (list :input 10 :output 20)))
                                          :model "priced"))
    (nagent-test-require-command "nagent.edit")
    (let ((first (nagent-wait (nagent-edit "add retries"))))
      (should (numberp (nagent--get first :tokens :cost))))
    (nagent-wait (nagent-edit "explain yourself"))
    (let ((text (nagent-test-buffer-text "*nagent*")))
      (should (string-match-p "a\\.py — add retries" text))
      (should (string-match-p "a\\.py — explain yourself" text))
      (should (string-match-p "ANSWER-ONE line 1" text))
      (should (string-match-p "line 8" text))
      (should (string-match-p "ANSWER-TWO" text))
      (should (string-match-p "applied [0-9]+ edit(s)" text))
      (should (string-match-p "[0-9.k]+ in / [0-9.k]+ out tokens" text))
      ;; The cost says its unit (USD).
      (should (string-match-p "cost \\$[0-9]+\\.[0-9]+" text)))
    (should (get-buffer-window "*nagent*"))))

;;;; The conversation view

(ert-deftest nagent-conversation-view ()
  "The conversation opens at its end in `nagent-conversation-mode', context folded, tags
highlighted, managed by the LSP connection."
  (nagent-test-with-file (:replies (lambda (target)
                                     (list (nagent-test-write-reply target nagent-test-a-retries)
                                           (nagent-test-response-reply "ok"))))
    (nagent-test-require-command "nagent.edit")
    (nagent-wait (nagent-edit "add retries please"))
    (let* ((path (save-window-excursion (nagent-open-conversation)))
           (conv (find-buffer-visiting path)))
      (with-current-buffer conv
        (should (eq major-mode 'nagent-conversation-mode))
        (should (= (point) (point-max)))
        (dolist (w (get-buffer-window-list conv nil t))
          (should (= (window-point w) (point-max))))
        ;; <initial_context> is folded.
        (should nagent--context-overlay)
        (should (eq (overlay-get nagent--context-overlay 'invisible) 'nagent-context))
        (should (> (- (overlay-end nagent--context-overlay) (overlay-start nagent--context-overlay))
                   100))
        (nagent-conversation-toggle-context)
        (should-not nagent--context-overlay)
        (nagent-conversation-toggle-context)
        (should nagent--context-overlay)
        ;; Tags are highlighted.
        (font-lock-ensure)
        (goto-char (point-min))
        (search-forward "<user-prompt>")
        (should (eq (get-text-property (match-beginning 0) 'face) 'nagent-conversation-user-tag))
        ;; The server reads this buffer: it is managed by the connection.
        (should (nagent-test-wait-for #'nagent--managed-p 10))))))

(ert-deftest nagent-conversation-unsaved-edit-reaches-next-request ()
  "An unsaved change to the open conversation is what the next run reads; after the run
the buffer shows the server's text, unmodified, without a conflict."
  (nagent-test-with-file (:replies (lambda (target)
                                     (list (nagent-test-write-reply target nagent-test-a-retries)
                                           (nagent-test-response-reply "first done")
                                           (nagent-test-response-reply "second done"))))
    (nagent-test-require-command "nagent.edit")
    (nagent-wait (nagent-edit "add retries please"))
    (let* ((path (save-window-excursion (nagent-open-conversation)))
           (conv (find-buffer-visiting path)))
      (with-current-buffer conv
        (should (nagent-test-wait-for #'nagent--managed-p 10))
        (goto-char (point-min))
        (search-forward "add retries please")
        (insert " USER-NOTE-42")
        (goto-char (point-max))
        (should (buffer-modified-p))
        ;; From the conversation view itself.
        (let ((res (nagent-wait (nagent-conversation-send "second request"))))
          (should (string-match-p "second done" (plist-get res :response))))
        (let ((sent (json-encode (nth 2 (nagent-test-fake-requests fake)))))
          (should (string-match-p "USER-NOTE-42" sent))
          (should (string-match-p "second request" sent)))
        (should-not (buffer-modified-p))
        (should (verify-visited-file-modtime conv))
        (should (string-match-p "USER-NOTE-42" (buffer-string)))
        (should (string-match-p "second request" (buffer-string)))
        (should (string-match-p "second done" (buffer-string)))
        (should (= (point) (point-max)))
        (should (equal (buffer-string) (nagent-test--text-of path)))))))

;;;; Review

(ert-deftest nagent-review-two-files ()
  "A two-file proposal: the a.py hunk accepted, the b.py hunk rejected."
  (nagent-test-with-file (:replies (lambda (target)
                                     (let ((b (expand-file-name "b.py" (file-name-directory target))))
                                       (list (list (cons 'text
                                                         (concat
                                                          (format "<nagent-write path=\"%s\">%s</nagent-write>\n"
                                                                  target nagent-test-a-retries)
                                                          (format "<nagent-write path=\"%s\">%s</nagent-write>"
                                                                  b nagent-test-b-edited))))
                                             (nagent-test-response-reply "REVIEW-ANSWER: changed both files."))))
                          :settings (list :confirmEdits t))
    (nagent-test-require-command "nagent.review.show")
    (let* ((source (current-buffer))
           (res (nagent-wait (nagent-edit "add retries and log")))
           (id (nagent--proposal-id (plist-get res :proposal))))
      (should id)
      (should-not (nagent--true-p (plist-get res :applied)))
      ;; Nothing changed yet.
      (should (equal (buffer-string) nagent-test-a-v3))
      ;; The review opened by itself.
      (let ((review (get-buffer (format "*nagent-review %s*" id))))
        (should review)
        (pop-to-buffer review)
        (should (eq major-mode 'nagent-review-mode))
        (should (derived-mode-p 'diff-mode))
        (should (string-match-p "REVIEW-ANSWER: changed both files" (buffer-string)))
        (should (string-match-p "^\\+\\+\\+ b/a\\.py" (buffer-string)))
        (should (string-match-p "^\\+\\+\\+ b/b\\.py" (buffer-string)))
        (should (= (length nagent-review--hunks) 2))
        (let ((a-hunk (cl-find "a.py" nagent-review--hunks
                               :key (lambda (h) (file-name-nondirectory (nth 2 h))) :test #'equal))
              (b-hunk (cl-find "b.py" nagent-review--hunks
                               :key (lambda (h) (file-name-nondirectory (nth 2 h))) :test #'equal)))
          ;; RET on a hunk visits its source.
          (goto-char (cadr b-hunk))
          (save-window-excursion
            (execute-kbd-macro (kbd "RET"))
            (should (equal (file-name-nondirectory (buffer-file-name)) "b.py")))
          (pop-to-buffer review)
          (goto-char (cadr a-hunk))
          (execute-kbd-macro "a")
          (should (eq (gethash (car a-hunk) nagent-review--decisions) 'accept))
          (should-not nagent-review-resolved)
          (goto-char (cadr b-hunk))
          (execute-kbd-macro "r")
          ;; Every hunk decided: the decision is sent.
          (should (nagent-test-wait-for
                   (lambda () (and nagent-review-resolved
                                   (not (eq nagent-review-resolved 'sending))))
                   30))
          (should (equal (append (plist-get nagent-review-resolved :rejected) nil)
                         (list (car b-hunk))))
          (should (string-match-p "Resolved:" (buffer-string)))))
      (with-current-buffer source
        (should (equal (buffer-string) nagent-test-a-retries)))
      (let ((b (expand-file-name "b.py" repo)))
        (should (equal (nagent-test--text-of b) nagent-test-b-v2))
        (let ((bb (find-buffer-visiting b)))
          (when bb (should (equal (with-current-buffer bb (buffer-string)) nagent-test-b-v2)))))
      ;; The conversation says what was accepted and refused.
      (let ((conv (nagent-test--text-of (nagent--get res :conversation :path))))
        (should (string-match-p "nagent-review-result" conv))
        (should (string-match-p "REJECTED-LINE" conv))))))

;;;; Review: hunks as git diff shows them

(defconst nagent-test--twelve
  (mapconcat (lambda (i) (format "line %d\n" i)) (number-sequence 1 12) ""))
(defconst nagent-test--twelve-edited
  (replace-regexp-in-string
   "^line 11$" "LINE ELEVEN"
   (replace-regexp-in-string "^line 6$" "LINE SIX" nagent-test--twelve)))

(defun nagent-test--review-hunk-text (id)
  "The text of hunk ID in the current review buffer (its header to the next one)."
  (let* ((entry (assoc id nagent-review--hunks))
         (beg (marker-position (cadr entry)))
         (next (cl-find-if (lambda (h) (> (cadr h) beg)) nagent-review--hunks)))
    (buffer-substring-no-properties beg (if next (marker-position (cadr next)) (point-max)))))

(defun nagent-test--visit-line (review pos)
  "RET at POS of REVIEW: the line number and text where it lands."
  (with-current-buffer review
    (goto-char pos)
    (save-window-excursion
      (execute-kbd-macro (kbd "RET"))
      (list (line-number-at-pos)
            (buffer-substring-no-properties (line-beginning-position) (line-end-position))
            (file-name-nondirectory (buffer-file-name))))))

(ert-deftest nagent-review-hunks-read-as-git-diff ()
  "A hunk in the middle of a file shows three lines around it and its line numbers
in the buffer's text; RET lands on the line at point; a hunk whose lines the user
changed shows as no longer applying and cannot be accepted, only rejected."
  (nagent-test-with-file (:replies (lambda (target)
                                     (list (nagent-test-write-reply target nagent-test--twelve-edited)
                                           (nagent-test-response-reply "Two lines changed.")))
                          :settings (list :confirmEdits t))
    (nagent-test-require-command "nagent.review.show")
    (let ((source (current-buffer)))
      ;; The buffer's (unsaved) text is what the change and the context come from.
      (erase-buffer)
      (insert nagent-test--twelve)
      (let* ((res (nagent-wait (nagent-edit "change lines six and eleven")))
             (id (nagent--proposal-id (plist-get res :proposal)))
             (review (get-buffer (format "*nagent-review %s*" id))))
        (should id)
        (should review)
        (with-current-buffer review
          (should (string-match-p "^--- a/a\\.py$" (buffer-string)))
          (should (string-match-p "^\\+\\+\\+ b/a\\.py$" (buffer-string)))
          (should (= (length nagent-review--hunks) 2))
          (pcase-let ((`(,six ,eleven) (mapcar #'car nagent-review--hunks)))
            (should (equal (nagent-test--review-hunk-text six)
                           (format "@@ -3,7 +3,7 @@ hunk %s\n line 3\n line 4\n line 5\n-line 6\n+LINE SIX\n line 7\n line 8\n line 9\n" six)))
            (should (equal (nagent-test--review-hunk-text eleven)
                           (format "@@ -8,5 +8,5 @@ hunk %s\n line 8\n line 9\n line 10\n-line 11\n+LINE ELEVEN\n line 12\n" eleven)))
            ;; RET on the header: the changed line; on a context line: that line.
            (let ((header (cadr (assoc six nagent-review--hunks))))
              (should (equal (nagent-test--visit-line review header) '(6 "line 6" "a.py")))
              (should (equal (nagent-test--visit-line
                              review (save-excursion (goto-char header)
                                                     (re-search-forward "^ line 8$")
                                                     (line-beginning-position)))
                             '(8 "line 8" "a.py")))
              (should (equal (nagent-test--visit-line
                              review (save-excursion (goto-char header)
                                                     (re-search-forward "^\\+LINE SIX$")
                                                     (line-beginning-position)))
                             '(6 "line 6" "a.py"))))
            ;; The user changes line 11: that hunk no longer applies.
            (with-current-buffer source
              (goto-char (point-min))
              (re-search-forward "^line 11$")
              (replace-match "changed by the user"))
            (setq review (with-current-buffer source (save-window-excursion (nagent-review id))))
            (with-current-buffer review
              (should-not (nth 4 (assoc eleven nagent-review--hunks)))
              (should (nth 4 (assoc six nagent-review--hunks)))
              (let ((text (nagent-test--review-hunk-text eleven)))
                (should (string-prefix-p (format "@@ -8,5 +8,5 @@ hunk %s  NO LONGER APPLIES" eleven)
                                         text))
                ;; Where its lines were, with the context around them now.
                (should (string-match-p "^ line 10\n-line 11\n\\+LINE ELEVEN\n line 12\n\\'" text)))
              (should-not (string-match-p "NO LONGER APPLIES" (nagent-test--review-hunk-text six)))
              ;; It cannot be accepted ...
              (goto-char (cadr (assoc eleven nagent-review--hunks)))
              (should-error (nagent-review-accept) :type 'user-error)
              (should-not (gethash eleven nagent-review--decisions))
              ;; ... only rejected; the other one is accepted.
              (execute-kbd-macro "r")
              (should (eq (gethash eleven nagent-review--decisions) 'reject))
              (goto-char (cadr (assoc six nagent-review--hunks)))
              (execute-kbd-macro "a")
              (should (nagent-test-wait-for
                       (lambda () (and nagent-review-resolved
                                       (not (eq nagent-review-resolved 'sending))))
                       30))
              (should (equal (append (plist-get nagent-review-resolved :rejected) nil)
                             (list eleven))))))
        (with-current-buffer source
          (should (string-match-p "^LINE SIX$" (buffer-string)))
          (should (string-match-p "^changed by the user$" (buffer-string)))
          (should-not (string-match-p "LINE ELEVEN" (buffer-string))))))))

;;;; Agents and recipes

(defun nagent-test--write-agent (_repo home)
  "A user agent `tester' in HOME."
  (nagent-test--write (expand-file-name ".nagent/agents/tester.md" home)
                      "---\ndescription: Test agent of the Emacs suite\n---\nAGENT-MARKER-42: be brief.\n"))

(ert-deftest nagent-agent-edit-with-prefix-argument ()
  "C-u nagent-edit picks an agent with `completing-read' over nagent.agents.list."
  (nagent-test-with-file (:replies (lambda (target)
                                     (list (nagent-test-write-reply target nagent-test-a-retries)
                                           (nagent-test-response-reply "done by tester")))
                          :setup #'nagent-test--write-agent)
    (nagent-test-require-command "nagent.agents.list")
    (let* ((offered nil)
           (job (cl-letf (((symbol-function 'completing-read)
                           (lambda (_prompt collection &rest _)
                             (setq offered (all-completions "" collection))
                             "tester"))
                          ((symbol-function 'read-string)
                           (lambda (&rest _) "add retries")))
                  (let ((current-prefix-arg '(4)))
                    (call-interactively #'nagent-edit))))
           (res (nagent-wait job)))
      (should (member "tester" offered))
      (should (member "edit" offered))
      (should (member "plan" offered))
      (should (nagent--true-p (plist-get res :applied)))
      (should (equal (buffer-string) nagent-test-a-retries))
      (should (string-match-p "AGENT-MARKER-42" (json-encode (nagent-test-fake-requests fake))))
      (should (string-match-p "add retries (tester)" (nagent-test-buffer-text "*nagent*"))))))

(defun nagent-test--write-recipe (_repo home)
  "A user recipe `rewrite' in HOME: one LLM step producing fileText."
  (nagent-test--write
   (expand-file-name ".nagent/recipes/rewrite.json" home)
   (json-encode
    '((description . "Rewrite the file as asked")
      (steps . [((step . "rewrite")
                 (inputs . ["fileText" "userRequest"])
                 (outputs . ((fileText . "string")))
                 (systemPrompt . "RECIPE-MARKER {{userRequest}}\n{{fileText}}"))])))))

(ert-deftest nagent-run-recipe-edits-buffer ()
  "`nagent-run-recipe' picks a recipe, runs it, and its fileText arrives as an edit."
  (nagent-test-with-file (:replies (list (list (cons 'text nagent-test-a-retries)))
                          :setup #'nagent-test--write-recipe)
    (nagent-test-require-command "nagent.recipes.list")
    (let* ((offered nil)
           (job (cl-letf (((symbol-function 'completing-read)
                           (lambda (_prompt collection &rest _)
                             (setq offered (all-completions "" collection))
                             "rewrite"))
                          ((symbol-function 'read-string)
                           (lambda (&rest _) "add retries")))
                  (call-interactively #'nagent-run-recipe)))
           (res (nagent-wait job)))
      (should (member "rewrite" offered))
      (should (plist-get res :outputs))
      (should (nagent-test-wait-for (lambda () (equal (buffer-string) nagent-test-a-retries)) 10))
      (should (string-match-p "RECIPE-MARKER add retries" (json-encode (nagent-test-fake-requests fake))))
      (let ((text (nagent-test-buffer-text "*nagent*")))
        (should (string-match-p "recipe rewrite: add retries" text))
        (should (string-match-p "### Outputs" text))
        (should (string-match-p "fileText" text))))))

;;;; Defects of wave 1

(ert-deftest nagent-errors-are-plain-messages ()
  "A server error reads `nagent: MESSAGE', without a nested error form."
  (nagent-test-with-file ()
    (nagent-test-require-command "nagent.patch")
    (let ((err (should-error
                (cl-letf (((symbol-function 'read-file-name)
                           (lambda (&rest _) (expand-file-name "no/such/index.json" repo))))
                  (call-interactively #'nagent-patch))
                :type 'user-error)))
      (let ((text (error-message-string err)))
        (should (string-prefix-p "nagent: " text))
        (should-not (string-match-p "nagent command failed\\|\"\\|nagent: nagent" text))))
    ;; From Lisp, the error is a `nagent-error' whose data is the server's message.
    (let ((err (should-error (nagent-command "nagent.status" (list :bogus 1)) :type 'nagent-error)))
      (should (stringp (cadr err)))
      (should (string-match-p "bogus" (cadr err))))))

(ert-deftest nagent-status-names-settings-sources ()
  (nagent-test-with-file ()
    (let ((text (nagent-status-text (nagent-status))))
      (should (string-match-p "model fake-model" text))
      (should (string-match-p "settings from .*initializationOptions" text)))))

(ert-deftest nagent-hover-shows-whole-card ()
  "`nagent-hover' shows the whole history card, not the echo area's first lines."
  (nagent-test-with-file ()
    (goto-char (point-min))
    ;; The first hover after start may answer "building history…".
    (should (nagent-test-wait-for (lambda () (string-match-p "3 commits" (or (nagent-hover-text) "")))
                                  20))
    (let ((text (nagent-hover)))
      (should (string-match-p "3 commits" text))
      (let ((shown (nagent-test-buffer-text "*nagent-hover*")))
        (should (string-match-p "3 commits" shown))
        (should (string-match-p "Alice Example" shown))
        (should (string-match-p "Fix off-by-one in size" shown))
        (should (string-match-p "b\\.py" shown))
        (should (> (length (split-string shown "\n")) 8)))
      ;; The echo area (eldoc) gets a digest that fits, naming where the rest is.
      (let ((digest (nagent-card-digest text)))
        (should (string-match-p "3 commits" digest))
        (should (string-match-p "whole card" digest))
        (should (<= (length (split-string digest "\n")) 3)))
      (when (eq nagent-test-backend 'eglot)
        (should (memq #'nagent--eldoc-display-in-echo-area eldoc-display-functions))))))

(defun nagent-test--rename-a (repo _home)
  "Rename a.py to d.py in REPO, in a commit."
  (nagent-test--git repo "mv" "a.py" "d.py")
  (let ((process-environment
         (append '("GIT_AUTHOR_NAME=Carol" "GIT_AUTHOR_EMAIL=carol@example.com"
                   "GIT_COMMITTER_NAME=Carol" "GIT_COMMITTER_EMAIL=carol@example.com"
                   "GIT_AUTHOR_DATE=2024-04-01T10:00:00+00:00"
                   "GIT_COMMITTER_DATE=2024-04-01T10:00:00+00:00")
                 process-environment)))
    (nagent-test--git repo "commit" "-q" "--no-gpg-sign" "-m" "Rename a.py to d.py")))

(ert-deftest nagent-history-commit-before-rename ()
  "RET on a commit from before a rename shows that commit's change of the file."
  (nagent-test-with-file (:file "d.py" :setup #'nagent-test--rename-a)
    (nagent-test-require-command "nagent.history")
    (nagent-history)
    (with-current-buffer "*nagent-history*"
      (goto-char (point-min))
      (search-forward "Add fetch helper and its caller")
      (beginning-of-line)
      (forward-button 1)
      (save-window-excursion (push-button))
      (let ((shown (nagent-test-buffer-text "*nagent-commit*")))
        (should (string-match-p "Add fetch helper and its caller" shown))
        (should (string-match-p "^\\+def fetch(url):" shown))
        (should (string-match-p "a\\.py" shown))))))

;;;; The README's set-up, literally, on a fresh HOME

(defun nagent-test--readme-snippet (readme heading)
  "The first elisp block after HEADING in README."
  (with-temp-buffer
    (insert-file-contents readme)
    (goto-char (point-min))
    (search-forward heading)
    (re-search-forward "^```elisp\n")
    (let ((beg (point)))
      (re-search-forward "^```$")
      (buffer-substring-no-properties beg (match-beginning 0)))))

(defconst nagent-test--lsp-driver
  "(progn
  (require 'cl-lib)
  (setq lsp-client-packages nil lsp-auto-guess-root t lsp-enable-file-watchers nil
        lsp-restart 'ignore lsp-keep-workspace-alive nil lsp-enable-snippet nil
        lsp-headerline-breadcrumb-enable nil lsp-modeline-code-actions-enable nil
        lsp-modeline-diagnostics-enable nil lsp-lens-enable nil lsp-diagnostics-provider :none)
  (require 'lsp-mode)
  (with-current-buffer (find-file-noselect (getenv \"NAGENT_SNIPPET_FILE\"))
    (python-mode)
    (lsp)
    (let ((deadline (+ (float-time) 40)) ws)
      (while (and (not (setq ws (cl-find-if
                                 (lambda (w) (and (eq (lsp--client-server-id (lsp--workspace-client w))
                                                      'nagent-lsp)
                                                  (eq (lsp--workspace-status w) 'initialized)))
                                 lsp--buffer-workspaces)))
                  (< (float-time) deadline))
        (accept-process-output nil 0.1))
      (nagent-snippet-press-prefix)
      (princ (format \"KEY=%s\\nNAGENT=%s\\n\" (key-binding (kbd \"C-c n e\"))
                     (and ws (lsp--workspace-status ws))))
      (kill-emacs 0))))"
  "Starts lsp-mode the way a user does, with no nagent command.")

(defconst nagent-test--eglot-driver
  "(with-current-buffer (find-file-noselect (getenv \"NAGENT_SNIPPET_FILE\"))
  (python-mode)
  (let ((status (nagent-status)))
    (nagent-snippet-press-prefix)
    (princ (format \"KEY=%s\\nMODEL=%s\\n\" (key-binding (kbd \"C-c n e\")) (plist-get status :model)))
    (kill-emacs 0)))"
  "Runs a nagent command, which starts eglot on demand.")

(defconst nagent-test--press-prefix
  "(defun nagent-snippet-press-prefix ()
  \"Press C-c n once when it is use-package's :bind-keymap loader, as a user would.\"
  (let ((prefix (key-binding (kbd \"C-c n\"))))
    (when (and (commandp prefix) (not (keymapp prefix)))
      (execute-kbd-macro (kbd \"C-c n\"))
      (setq unread-command-events nil))))"
  "Defines `nagent-snippet-press-prefix' for the drivers.")

(defun nagent-test--run-snippet (snippet driver)
  "Run SNIPPET as the init file of a fresh HOME, then DRIVER; return the output."
  (let* ((repo (nagent-test-make-repo))
         (home (file-name-as-directory (make-temp-file "nagent-fresh-home" t)))
         (bin (expand-file-name "bin" home))
         (init (expand-file-name ".emacs.d/init.el" home))
         (drv (expand-file-name "driver.el" home)))
    (unwind-protect
        (progn
          ;; The README's path, literally: ~/src/nagent-lsp is this checkout.
          (make-directory (expand-file-name "src" home) t)
          (make-symbolic-link (directory-file-name nagent-test-repo-root)
                              (expand-file-name "src/nagent-lsp" home))
          ;; `nagent-lsp' on PATH runs the server under test.
          (nagent-test--write (expand-file-name "nagent-lsp" bin)
                              (format "#!/bin/sh\nexec %s \"$@\"\n"
                                      (mapconcat #'shell-quote-argument nagent-test-server-command " ")))
          (set-file-modes (expand-file-name "nagent-lsp" bin) #o755)
          (nagent-test--write init snippet)
          (nagent-test--write drv (concat nagent-test--press-prefix "\n" driver))
          (let ((process-environment
                 (append (list (concat "HOME=" home)
                               (concat "PATH=" bin ":" (getenv "PATH"))
                               (concat "NAGENT_SNIPPET_FILE=" (expand-file-name "a.py" repo)))
                         process-environment)))
            (with-temp-buffer
              (let ((rc (call-process "emacs" nil t nil "--batch" "-l" init "-l" drv)))
                (list rc (buffer-string))))))
      (delete-directory repo t)
      (delete-directory home t))))

(defun nagent-test--check-snippet (snippet)
  "Run SNIPPET on a fresh HOME through the suite's back end; check nagent started."
  (let ((out (nagent-test--run-snippet snippet (if (eq nagent-test-backend 'lsp-mode)
                                                   nagent-test--lsp-driver
                                                 nagent-test--eglot-driver))))
    (should (equal (car out) 0))
    (should (string-match-p "^KEY=nagent-edit$" (cadr out)))
    (if (eq nagent-test-backend 'lsp-mode)
        (should (string-match-p "^NAGENT=initialized$" (cadr out)))
      (should (string-match-p "^MODEL=gpt-4.1-mini$" (cadr out))))))

(ert-deftest nagent-readme-snippet-on-fresh-home ()
  "The README's Emacs set-up, loaded as the init file of a fresh HOME, starts nagent:
through lsp-mode beside the usual server with no nagent command, through eglot on demand."
  (dolist (readme (list (expand-file-name "README.md" nagent-test-repo-root)
                        (expand-file-name "clients/emacs/README.md" nagent-test-repo-root)))
    (let ((snippet (nagent-test--readme-snippet
                    readme (if (string-match-p "clients/emacs" readme) "## Install" "### Emacs"))))
      (should-not (string-match-p "use-package" snippet))
      (nagent-test--check-snippet snippet))))

(ert-deftest nagent-readme-use-package-snippet-on-fresh-home ()
  "clients/emacs/README.md's `use-package' form, after (require \='use-package) as the
README says for Emacs 28, works on a fresh HOME (C-c n e is `nagent-edit' once C-c n is
pressed: :bind-keymap loads the keymap then)."
  (unless (locate-library "use-package")
    (ert-skip "use-package is not installed (Debian: elpa-use-package)"))
  (let ((snippet (nagent-test--readme-snippet
                  (expand-file-name "clients/emacs/README.md" nagent-test-repo-root)
                  "With `use-package`")))
    (should (string-match-p "\\`(use-package nagent" snippet))
    (nagent-test--check-snippet (concat "(require 'use-package)\n" snippet))))

(provide 'nagent-ui-tests)
;;; nagent-ui-tests.el ends here
