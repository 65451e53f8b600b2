;;; nagent.el --- Per-file LLM editing through the nagent-lsp language server  -*- lexical-binding: t -*-

;; Version: 0.3.0
;; Package-Requires: ((emacs "28.1") (eglot "1.9"))
;; Keywords: tools, convenience, languages
;; URL: https://example.invalid/nagent-lsp

;; This file is not part of GNU Emacs.

;;; Commentary:

;; nagent-lsp gives every source file its own durable LLM conversation,
;; with the file's git history and co-edit neighbourhood as context.
;; This package drives it from Emacs through eglot (started on demand) or
;; through lsp-mode when the buffer already uses lsp-mode (see
;; nagent-lsp-mode.el, loaded automatically once lsp-mode is loaded).
;;
;; Everything that waits for the model is asynchronous: `nagent-edit'
;; returns at once, the mode line shows the run's progress, the edit
;; arrives as an ordinary undoable change, the answer is added to the
;; *nagent* buffer, and `nagent-cancel' stops a run.
;;
;; Commands (all callable from Lisp with arguments):
;;
;;   `nagent-edit'                 edit the buffer (or the region) with a request
;;                                 (C-u: pick an agent)
;;   `nagent-run-recipe'           run a recipe on the buffer (or the region)
;;   `nagent-cancel'               stop a running request
;;   `nagent-review'               review a proposal hunk by hunk
;;   `nagent-open-conversation'    open the file's conversation
;;   `nagent-history'              *nagent-history*: commits, authors, co-edits
;;   `nagent-coedits'              *nagent-coedits*: files that change together
;;   `nagent-hover'                the whole history card in *nagent-hover*
;;   `nagent-review-inline'        pending hunks in the source buffer
;;                                 (C-c C-a / C-c C-k on one: accept / reject)
;;   `nagent-review-files'         the files of a change set
;;   `nagent-insert-mention'       insert @path (a file the request names)
;;   `nagent-open-attribution'     the conversation turn that wrote this line
;;   `nagent-conversation-save', `-load', `-compact', `-summarize', `-list'
;;   `nagent-split', `nagent-patch', `nagent-summarize',
;;   `nagent-clear-conversation', `nagent-status'
;;
;; Conversation files (.nagent/conversations/*) open in
;; `nagent-conversation-mode': tags highlighted, the initial context
;; folded, point at the end.  The conversation is the chat: type the
;; next request at its end and C-c C-c sends it; answers stream in.
;;
;; The code is split by concern (as gptel's is): nagent-core.el,
;; nagent-eglot.el, nagent-connection.el, nagent-answers.el,
;; nagent-run.el, nagent-chat.el, nagent-review.el, nagent-history.el,
;; nagent-trust.el, and nagent-lsp-mode.el for lsp-mode; this file
;; loads them and holds the rest and the key map.

;;; Code:

(require 'cl-lib)
(require 'subr-x)
(require 'seq)
(require 'json)
(require 'jsonrpc)
(require 'eglot)
(require 'nagent-core)
(require 'nagent-eglot)
(require 'nagent-connection)
(require 'nagent-answers)
(require 'nagent-run)
(require 'nagent-chat)
(require 'nagent-review)
(require 'nagent-history)
(require 'nagent-trust)

;;;; Split, patch, summarize, status, hover

(declare-function nagent-lsp-mode--notify-settings "nagent-lsp-mode" (workspace))
(declare-function nagent-lsp-mode--hover "nagent-lsp-mode" (workspace))
(declare-function nagent-lsp-mode--all-workspaces "nagent-lsp-mode" ())
(defvar eglot--servers-by-project)

;;;###autoload
(defun nagent-split (&optional target-bytes)
  "Split the current file into indexed segments.
TARGET-BYTES (interactively: a numeric prefix argument) sets the
segment size.  Returns the result plist; its :indexPath is remembered
for `nagent-patch'."
  (interactive (list (and current-prefix-arg (prefix-numeric-value current-prefix-arg))))
  (nagent--with-user-errors
    (let* ((res (nagent-command "nagent.split"
                                (nagent--uri-argument :targetBytes target-bytes)
                                "splitting"))
           (segments (nagent--list (plist-get res :segments))))
      (setq nagent-last-index-path (plist-get res :indexPath))
      (nagent--report "nagent: split into %d segment(s) (%s); index %s"
                      (length segments) (or (plist-get res :splitType) "?")
                      (plist-get res :indexPath))
      res)))

;;;###autoload
(defun nagent-patch (index-path &optional force dry-run)
  "Merge the segments of the split index INDEX-PATH back into its file.
FORCE skips the source hash check; DRY-RUN only reports.  The change
arrives as an edit of the buffer.  Returns the result plist."
  (interactive
   (list (read-file-name "Split index: "
                         (and nagent-last-index-path
                              (file-name-directory nagent-last-index-path))
                         nagent-last-index-path t
                         (and nagent-last-index-path
                              (file-name-nondirectory nagent-last-index-path)))
         current-prefix-arg nil))
  (nagent--with-user-errors
    (let* ((arg (list :indexPath (expand-file-name index-path))))
      (when force (setq arg (append arg (list :force t))))
      (when dry-run (setq arg (append arg (list :dryRun t))))
      (let ((res (nagent-command "nagent.patch" arg "patching")))
        (nagent--report "nagent: patch %s%s"
                        (if (nagent--true-p (plist-get res :changed)) "changed the file" "found no change")
                        (if (nagent--true-p (plist-get res :applied)) ", applied" ""))
        res))))

;;;###autoload
(defun nagent-summarize ()
  "Show nagent's summary of the current file in *nagent-summary*.
Asynchronous (the summary may call the model): returns the job; its
result's :summary is the text."
  (interactive)
  (let ((file (nagent--file-or-error)))
    (nagent-command-async
     "nagent.summarize" (nagent--uri-argument)
     :label (format "summarizing %s" (file-name-nondirectory file))
     :then (lambda (res) (nagent--show-text "*nagent-summary*" (plist-get res :summary))))))

(defun nagent-status-text (status)
  "One line describing the nagent.status result STATUS."
  (let ((sources (nagent--list (plist-get status :configSources)))
        (history (plist-get status :history)))
    (format "nagent %s — model %s%s, state %s; settings from %s%s"
            (or (plist-get status :version) "?")
            (or (plist-get status :model) "none")
            (if (nagent--true-p (plist-get status :modelConfigured)) "" " (not configured)")
            (or (plist-get status :stateRoot) "?")
            (if sources (mapconcat (lambda (s) (format "%s" s)) sources ", ") "defaults only")
            (if history
                (format "; history %s%s" (or (plist-get history :state) "?")
                        (if (plist-get history :commits)
                            (format " (%s commits)" (plist-get history :commits)) ""))
              ""))))

;;;###autoload
(defun nagent-status ()
  "Show nagent-lsp's status: version, model, state root, settings sources.
Returns the status plist."
  (interactive)
  (nagent--with-user-errors
    (let ((res (nagent-command "nagent.status" (make-hash-table) "status")))
      (nagent--report "%s" (nagent-status-text res))
      res)))

(declare-function markdown-mode "markdown-mode" ())
(declare-function markdown-view-mode "markdown-mode" ())

(defun nagent-hover-text ()
  "The hover Markdown (history card) at point, as a string."
  (let* ((conn (or (nagent--connection t) (error "nagent: not connected")))
         (raw (pcase (car conn)
                ('eglot (nagent--eglot-flush)
                        (jsonrpc-request (cdr conn) :textDocument/hover
                                         (eglot--TextDocumentPositionParams)
                                         :timeout 30))
                ('lsp-mode (nagent-lsp-mode--hover (cdr conn)))))
         (contents (plist-get (nagent--normalize raw) :contents)))
    (cond ((null contents) nil)
          ((stringp contents) contents)
          ((plist-get contents :value))
          (t (format "%s" contents)))))

;;;###autoload
(defun nagent-hover ()
  "Show the whole history card of point in *nagent-hover*.
The echo area (eldoc) only has room for its first lines.  Returns
the card's text."
  (interactive)
  (nagent--with-user-errors
    (let ((text (or (nagent-hover-text) (user-error "nagent: no history here")))
          (buf (get-buffer-create "*nagent-hover*")))
      (with-current-buffer buf
        (let ((inhibit-read-only t))
          (erase-buffer)
          (insert text "\n")
          (if (require 'markdown-mode nil t) (markdown-view-mode) (special-mode))
          (goto-char (point-min))))
      (display-buffer buf)
      text)))

(defun nagent-card-digest (card)
  "A few lines of the history CARD for the echo area.
The title line (commits, authors, dates) and the hovered line's last
change, then where to read the rest."
  (let* ((lines (split-string (or card "") "\n" t "[ \t]+"))
         (keep (cl-remove-if-not
                (lambda (l) (string-match-p "\\`\\(?:\\*\\*\\)?\\(?:History of\\|Line [0-9]\\)" l))
                lines)))
    (if (or (null keep) (<= (length lines) (length keep)))
        card
      (concat (string-join keep "\n")
              (substitute-command-keys
               "  (\\[nagent-hover] or \\[eldoc-doc-buffer]: the whole card)")))))

(defvar eldoc-display-functions)
(declare-function eldoc-display-in-echo-area "eldoc" (docs interactive))

(defun nagent--eldoc-display-in-echo-area (docs interactive)
  "Show DOCS in the echo area as a digest of nagent's history card.
INTERACTIVE as in `eldoc-display-in-echo-area'.  The doc buffer
\(\[eldoc-doc-buffer]) still gets the whole card."
  (eldoc-display-in-echo-area
   (mapcar (lambda (doc) (cons (nagent-card-digest (car doc)) (cdr doc))) docs)
   interactive))

(defun nagent--eglot-managed-setup ()
  "Show the card's digest in the echo area of nagent's eglot buffers."
  (if (not (bound-and-true-p eglot--managed-mode))
      (kill-local-variable 'eldoc-display-functions)
    (when (and (boundp 'eldoc-display-functions)
               (let ((s (eglot-current-server))) (and s (nagent--eglot-nagent-p s))))
      (setq-local eldoc-display-functions
                (mapcar (lambda (f) (if (eq f 'eldoc-display-in-echo-area)
                                        #'nagent--eldoc-display-in-echo-area
                                      f))
                        (default-value 'eldoc-display-functions))))))

(add-hook 'eglot-managed-mode-hook #'nagent--eglot-managed-setup)

(defun nagent--all-connections ()
  "Every running nagent connection, as (BACKEND . CONNECTION) pairs."
  (append
   (and (boundp 'eglot--servers-by-project)
        (let (servers)
          (maphash (lambda (_project list)
                     (dolist (s list)
                       (when (and (jsonrpc-running-p s) (nagent--eglot-nagent-p s))
                         (push (cons 'eglot s) servers))))
                   eglot--servers-by-project)
          (delete-dups (nreverse servers))))
   (and (featurep 'nagent-lsp-mode)
        (mapcar (lambda (ws) (cons 'lsp-mode ws)) (nagent-lsp-mode--all-workspaces)))))

(defun nagent-settings-changed ()
  "Tell the running nagent-lsp that `nagent-settings' changed.
From a file's buffer: its connection; from any other buffer (the
*scratch* buffer, Customize): every running nagent connection.
Returns the number of connections told."
  (interactive)
  (let* ((conn (and buffer-file-name (nagent--connection)))
         (conns (if conn (list conn) (nagent--all-connections))))
    (unless conns
      (user-error "nagent: no nagent-lsp is running; the settings apply when one starts"))
    (dolist (c conns)
      (pcase (car c)
        ('eglot (jsonrpc-notify (cdr c) :workspace/didChangeConfiguration
                                (list :settings (list :nagent (nagent--settings-json)))))
        ('lsp-mode (nagent-lsp-mode--notify-settings (cdr c)))))
    (when (called-interactively-p 'any)
      (message "nagent: settings sent to %d server%s" (length conns)
               (if (cdr conns) "s" "")))
    (length conns)))

;;;; Key map

(defvar nagent-conversation-command-map
  (let ((map (make-sparse-keymap)))
    (define-key map (kbd "s") #'nagent-conversation-save)
    (define-key map (kbd "l") #'nagent-conversation-load)
    (define-key map (kbd "k") #'nagent-conversation-compact)
    (define-key map (kbd "S") #'nagent-conversation-summarize)
    (define-key map (kbd "L") #'nagent-conversation-list)
    map)
  "The conversation commands, under \\`C-c n C' with the suggested binding.")
(fset 'nagent-conversation-command-map nagent-conversation-command-map)

(defvar nagent-command-map
  (let ((map (make-sparse-keymap)))
    (define-key map (kbd "e") #'nagent-edit)
    (define-key map (kbd "r") #'nagent-run-recipe)
    (define-key map (kbd "v") #'nagent-review)
    (define-key map (kbd "x") #'nagent-cancel)
    (define-key map (kbd "a") #'nagent-show-answers)
    (define-key map (kbd "c") #'nagent-open-conversation)
    (define-key map (kbd "k") #'nagent-clear-conversation)
    (define-key map (kbd "h") #'nagent-history)
    (define-key map (kbd ".") #'nagent-hover)
    (define-key map (kbd "o") #'nagent-coedits)
    (define-key map (kbd "s") #'nagent-split)
    (define-key map (kbd "p") #'nagent-patch)
    (define-key map (kbd "S") #'nagent-summarize)
    (define-key map (kbd "?") #'nagent-status)
    (define-key map (kbd "t") #'nagent-trust)
    (define-key map (kbd "w") #'nagent-open-attribution)
    (define-key map (kbd "@") #'nagent-insert-mention)
    (define-key map (kbd "i") #'nagent-review-inline)
    (define-key map (kbd "y") #'nagent-review-hunk-accept)
    (define-key map (kbd "n") #'nagent-review-hunk-reject)
    (define-key map (kbd "l") #'nagent-review-files)
    (define-key map (kbd "C") 'nagent-conversation-command-map)
    map)
  "Prefix map of the nagent commands; bind it, e.g. to \\`C-c n'.")
(fset 'nagent-command-map nagent-command-map)

;;;###autoload
(defun nagent-show-answers ()
  "Show the *nagent* buffer of answers."
  (interactive)
  (pop-to-buffer (nagent--answer-buffer)))

(provide 'nagent)

;; After `provide', so that nagent-lsp-mode's (require 'nagent) is satisfied
;; even when lsp-mode was loaded first.
(with-eval-after-load 'lsp-mode
  (require 'nagent-lsp-mode nil t))
;;; nagent.el ends here

