;;; nagent-answers.el --- The *nagent* answer buffer  -*- lexical-binding: t -*-

;; This file is not part of GNU Emacs.

;;; Commentary:

;; Part of nagent.el: every answer of the session, in *nagent*.

;;; Code:

(require 'cl-lib)
(require 'subr-x)
(require 'seq)
(require 'nagent-core)
(require 'nagent-connection)

;;;; The answer buffer

(defconst nagent-answer-buffer "*nagent*"
  "Name of the buffer that keeps every answer.")

(defvar nagent-answer-mode-map
  (let ((map (make-sparse-keymap)))
    (set-keymap-parent map special-mode-map)
    map)
  "Keymap of `nagent-answer-mode'.")

(define-derived-mode nagent-answer-mode special-mode "nagent-answers"
  "Mode of the *nagent* buffer when `markdown-mode' is not installed."
  (setq-local font-lock-defaults
              '((("^## .*" . 'bold)
                 ("^_.*_$" . 'shadow)))))

(declare-function markdown-view-mode "markdown-mode" ())

(defun nagent--answer-buffer ()
  "The *nagent* buffer, created in `markdown-view-mode' when available."
  (or (get-buffer nagent-answer-buffer)
      (with-current-buffer (get-buffer-create nagent-answer-buffer)
        (if (require 'markdown-mode nil t)
            (markdown-view-mode)
          (nagent-answer-mode))
        (setq-local truncate-lines nil)
        (current-buffer))))

(defun nagent--file-key (file)
  "FILE's true name, the key of its live answer."
  (and file (file-truename file)))

(defun nagent--created-files (result)
  "Paths of the files RESULT's run created (its :files with :created true)."
  (delq nil (mapcar (lambda (f)
                      (and (nagent--true-p (plist-get f :created))
                           (plist-get f :uri)
                           (nagent--uri-to-path (plist-get f :uri))))
                    (nagent--list (plist-get result :files)))))

(defun nagent--history-markdown (result)
  "Markdown of RESULT's history checks: `coupling' hints and `historyWarnings'."
  (let ((lines (append
                (mapcar (lambda (c) (plist-get c :message))
                        (nagent--list (plist-get result :coupling)))
                (mapcar (lambda (w)
                          (let ((line (plist-get w :line)))
                            (concat (if (numberp line) (format "line %d: " (1+ line)) "")
                                    (or (plist-get w :message) ""))))
                        (nagent--list (plist-get result :historyWarnings))))))
    (setq lines (seq-filter (lambda (l) (and (stringp l) (not (string-empty-p l)))) lines))
    (when lines
      (concat "**History checks:**\n\n"
              (mapconcat (lambda (l) (concat "- ⚠ " l)) lines "\n")))))

(defun nagent--mentions-markdown (result)
  "Markdown of RESULT's `mentions' (files named with @path)."
  (let ((mentions (nagent--list (plist-get result :mentions))))
    (when mentions
      (concat "**Mentioned files:** "
              (mapconcat (lambda (m)
                           (format "`@%s` %s" (plist-get m :path)
                                   (if (nagent--true-p (plist-get m :included)) "included"
                                     (format "not included (%s)" (or (plist-get m :reason) "refused")))))
                         mentions ", ")))))

(defun nagent--add-answer (file title result &optional extra)
  "Add RESULT's answer for FILE under TITLE to *nagent*; return the buffer.
EXTRA is more Markdown to show below the answer.  The text streamed
for FILE while the run went on (see `nagent--stream-delta') is
replaced by the final answer."
  (let* ((buf (nagent--answer-buffer))
         (response (string-trim (or (plist-get result :response) "")))
         (applied (nagent--true-p (plist-get result :applied)))
         (reason (plist-get result :reason))
         (tokens (plist-get result :tokens))
         (conv (nagent--get result :conversation :path))
         (summary (plist-get result :message))
         (created (nagent--created-files result))
         (more (delq nil (list (nagent--history-markdown result)
                               (nagent--mentions-markdown result)
                               (and created
                                    (concat "**Created:** "
                                            (mapconcat #'abbreviate-file-name created ", "))))))
         start)
    (nagent--stream-forget file)
    (with-current-buffer buf
      (let ((inhibit-read-only t))
        (goto-char (point-max))
        (unless (bobp) (insert "\n---\n\n"))
        (setq start (point))
        (insert (format "## %s — %s\n\n" (if file (file-name-nondirectory file) "nagent") title))
        (insert (if (string-empty-p response) "_(no answer text)_" response) "\n\n")
        (when extra (insert extra "\n\n"))
        (dolist (m more) (insert m "\n\n"))
        (when (and (stringp summary) (not (string-empty-p summary)))
          (insert (format "**%s**\n\n" summary)))
        (insert (format "_%s · %s%s · %s%s · %s_\n"
                        (format-time-string "%F %T")
                        (if applied (format "applied %s edit(s)" (or (plist-get result :edits) 0))
                          "nothing applied")
                        (if (and (not applied) reason) (format " (%s)" reason) "")
                        (nagent-format-tokens tokens)
                        (if file (format " · %s" (abbreviate-file-name file)) "")
                        (if conv (format "conversation %s" (abbreviate-file-name conv))
                          "no conversation")))))
    (nagent--show-answer-window buf start)
    buf))

(defun nagent--show-answer-window (buf start)
  "Show BUF (*nagent*) from START, in its windows and, with
`nagent-show-answers', in a window of its own."
  (dolist (w (get-buffer-window-list buf nil t))
    (set-window-point w start)
    (set-window-start w start))
  (when nagent-show-answers
    (let ((w (display-buffer buf '(nil (inhibit-same-window . t)))))
      (when w (set-window-point w start) (set-window-start w start)))))

;;;; Streaming: the answer as it is written (`nagent/stream')

(defvar nagent--streams (make-hash-table :test #'equal)
  "Live answers by file (true name): plists (:turn N :text STRING
:start MARKER :end MARKER) — the markers bound its text in *nagent*.")

(defvar nagent-stream-functions nil
  "Functions called with (FILE TEXT TURN DONE) each time a live answer grows.
FILE is the run's target, TEXT the latest reply's text so far.")

(defun nagent-stream-text (file)
  "The answer streamed so far for the run on FILE, or nil."
  (plist-get (gethash (nagent--file-key file) nagent--streams) :text))

(defun nagent--stream-section (file key)
  "Start the live section of FILE (KEY: its true name) in *nagent*; return it."
  (let ((buf (nagent--answer-buffer))
        (job (cl-find-if (lambda (j)
                           (let ((b (nagent-job-buffer j)))
                             (and (buffer-live-p b)
                                  (equal (nagent--file-key (nagent--buffer-file b)) key))))
                         nagent--jobs))
        start end)
    (with-current-buffer buf
      (let ((inhibit-read-only t))
        (goto-char (point-max))
        (unless (bobp) (insert "\n---\n\n"))
        (setq start (point-marker))
        (insert (format "## %s — %s (writing…)\n\n" (file-name-nondirectory file)
                        (if job (nagent-job-label job) "answer")))
        (setq end (point-marker))
        (set-marker-insertion-type end t)))
    (nagent--show-answer-window buf start)
    (let ((state (list :turn nil :text "" :start start :end end :body (marker-position end))))
      (puthash key state nagent--streams)
      state)))

(defun nagent--stream-delta (params)
  "Handle a `nagent/stream' notification PARAMS {token, uri, delta, turn, done}.
The latest reply's text goes to *nagent* as it arrives (a new turn
starts afresh) and to `nagent-stream-functions'; the mode line counts it."
  (let* ((p (nagent--normalize params))
         (uri (plist-get p :uri))
         (file (and (stringp uri) (nagent--uri-to-path uri)))
         (key (nagent--file-key file))
         (delta (or (plist-get p :delta) ""))
         (turn (plist-get p :turn))
         (done (nagent--true-p (plist-get p :done))))
    (when key
      (let ((state (let ((known (gethash key nagent--streams)))
                     ;; *nagent* may have been killed meanwhile: start the section again.
                     (if (and known (buffer-live-p (marker-buffer (plist-get known :start))))
                         known
                       (nagent--stream-section file key)))))
        (with-current-buffer (marker-buffer (plist-get state :start))
          (let ((inhibit-read-only t)
                (body (plist-get state :body)))
            (unless (equal turn (plist-get state :turn))
              ;; A new reply (a retry, a correction): show it instead.
              (delete-region body (plist-get state :end))
              (setq state (plist-put (plist-put state :turn turn) :text "")))
            (unless (string-empty-p delta)
              (save-excursion
                (goto-char (plist-get state :end))
                (insert delta))
              (setq state (plist-put state :text (concat (plist-get state :text) delta))))))
        (puthash key state nagent--streams)
        (dolist (w (get-buffer-window-list (marker-buffer (plist-get state :end)) nil t))
          (when (>= (window-point w) (plist-get state :body))
            (set-window-point w (plist-get state :end))))
        (run-hook-with-args 'nagent-stream-functions file (plist-get state :text) turn done)
        (force-mode-line-update t)))))

(defun nagent--stream-forget (file &optional stopped)
  "Remove FILE's live answer from *nagent* (the final answer replaces it).
With STOPPED (a reason), keep the text written so far and say why it stopped."
  (let* ((key (nagent--file-key file))
         (state (and key (gethash key nagent--streams))))
    (when state
      (remhash key nagent--streams)
      (let ((start (plist-get state :start)) (end (plist-get state :end)))
        (when (buffer-live-p (marker-buffer start))
          (with-current-buffer (marker-buffer start)
            (let ((inhibit-read-only t))
              (if stopped
                  (save-excursion (goto-char end) (insert (format "\n\n_(stopped: %s)_\n" stopped)))
                (delete-region start end)
                ;; The separator before it, when it was the last section.
                (when (and (= start (point-max))
                           (save-excursion (goto-char start)
                                           (looking-back "\n---\n\n" nil)))
                  (delete-region (- start 6) start))))))
        (set-marker start nil)
        (set-marker end nil))
      (run-hook-with-args 'nagent-stream-functions file nil nil t))))

(defun nagent--outputs-markdown (outputs)
  "Markdown of a recipe's OUTPUTS plist."
  (when outputs
    (concat "### Outputs\n"
            (mapconcat (lambda (pair)
                         (let ((v (cadr pair)))
                           (format "\n**%s**:\n\n```\n%s\n```\n"
                                   (substring (symbol-name (car pair)) 1)
                                   (string-trim (if (stringp v) v (json-encode v))))))
                       (seq-partition outputs 2)
                       ""))))


(provide 'nagent-answers)
;;; nagent-answers.el ends here
