;;; nagent-core.el --- Settings and small helpers of nagent  -*- lexical-binding: t -*-

;; This file is not part of GNU Emacs.

;;; Commentary:

;; Part of nagent.el (see there): the customization group, JSON helpers shared
;; by every other nagent-*.el file, the mode-line progress table and paths.

;;; Code:

(require 'cl-lib)
(require 'subr-x)
(require 'seq)
(require 'json)
(require 'url-util)

;;;; Customization

(defgroup nagent nil
  "Per-file LLM editing through the nagent-lsp language server."
  :group 'tools
  :prefix "nagent-")

(defcustom nagent-server-command '("nagent-lsp")
  "Command line that starts the nagent-lsp server (program and arguments)."
  :type '(repeat string))

(defcustom nagent-settings nil
  "Settings for nagent-lsp, as a plist with keyword keys (camelCase names).
They are sent as `initializationOptions' and returned when the server
asks for the \"nagent\" section of `workspace/configuration'.  Dotted
settings are nested plists, for example:

  (:model \"gpt-4o-mini\" :baseUrl \"http://127.0.0.1:8000/v1\"
   :history (:maxCommits 200 :summarize t)
   :confirmEdits :json-false)

Use `:json-false' for a JSON false.  After changing it in a running
session, call `nagent-settings-changed'."
  :type '(plist :key-type (symbol :tag "Setting (keyword)")
                :value-type (sexp :tag "Value")))

(defcustom nagent-request-timeout 600
  "Seconds before a nagent request is given up and cancelled (nil: no limit).
Edits call the model, possibly several times, so this is generous."
  :type '(choice (const :tag "No limit" nil)
                 (number :tag "Seconds")))

(defcustom nagent-backend 'auto
  "Which LSP client carries nagent's commands.
`auto' uses lsp-mode when the buffer is managed by lsp-mode, else eglot."
  :type '(choice (const :tag "lsp-mode when active, else eglot" auto)
                 (const :tag "Always eglot" eglot)
                 (const :tag "Always lsp-mode" lsp-mode)))

(defcustom nagent-confirm-edits nil
  "When non-nil, eglot asks before applying an edit sent by nagent-lsp.
nagent-lsp has its own `confirmEdits' setting (which turns every change
into a proposal to review with `nagent-review'); this one only
controls eglot's confirmation prompt for nagent's edits."
  :type 'boolean)

(defcustom nagent-show-answers t
  "When non-nil, show the *nagent* answer buffer when an answer arrives."
  :type 'boolean)

(defcustom nagent-review-on-proposal 'open
  "What to do when a change comes back as a proposal awaiting review.
`open' opens it in `nagent-review' at once, `ask' asks first, nil
only says so in the echo area."
  :type '(choice (const :tag "Open the review" open)
                 (const :tag "Ask" ask)
                 (const :tag "Only tell" nil)))

(defcustom nagent-history-max-commits nil
  "Maximum number of commits `nagent-history' asks for (nil: server default)."
  :type '(choice (const :tag "Server default" nil) natnum))

(defcustom nagent-coedits-limit nil
  "Maximum number of rows `nagent-coedits' asks for (nil: server default)."
  :type '(choice (const :tag "Server default" nil) natnum))

(defcustom nagent-ask-function #'nagent-ask
  "Function that asks the user a question of nagent-lsp.
Called with the MESSAGE (a string, possibly several lines: e.g. the
shell command nagent wants to run) and the CHOICES (strings, e.g.
\"Run once\" \"Always\" \"Deny\"); returns the chosen string, or nil for
no answer (the server then refuses what it asked about).  It must not
wait for nagent-lsp: through eglot, the server's output is held until
the question is answered."
  :type 'function)

(defvar nagent-request-history nil
  "Minibuffer history of `nagent-edit' requests.")

(defvar nagent-agent-history nil
  "Minibuffer history of agent names.")

(defvar nagent-recipe-history nil
  "Minibuffer history of recipe names.")

(defvar-local nagent-last-index-path nil
  "Index path returned by the last `nagent-split' of this buffer.")

(defconst nagent--code-action-commands
  '("nagent.edit" "nagent.history" "nagent.split" "nagent.patch"
    "nagent.instruction.apply" "nagent.recipe.run" "nagent.codeAction.run"
    "nagent.review.apply" "nagent.review.discard" "nagent.conversation.open")
  "Commands of nagent's code actions that the client runs its own way.
See `nagent-run-code-action-command'.")

;;;; Small helpers

(defun nagent--true-p (value)
  "Non-nil when the JSON VALUE is true."
  (and value (not (eq value :json-false))))

(defun nagent--get (object &rest keys)
  "Follow KEYS (keywords) through the plist OBJECT."
  (let ((v object))
    (dolist (k keys v)
      (setq v (and (listp v) (plist-get v k))))))

(defun nagent--list (value)
  "Turn the JSON array VALUE (vector or list) into a list."
  (append value nil))

(defun nagent--normalize (value)
  "Turn hash tables (lsp-mode's JSON objects) in VALUE into keyword plists."
  (cond ((hash-table-p value)
         (let (plist)
           (maphash (lambda (k v)
                      (setq plist (cons (nagent--normalize v)
                                        (cons (if (keywordp k) k (intern (format ":%s" k)))
                                              plist))))
                    value)
           (nreverse plist)))
        ((vectorp value) (vconcat (mapcar #'nagent--normalize value)))
        ((and (consp value) (keywordp (car value)))
         (cl-loop for (k v) on value by #'cddr
                  append (list k (nagent--normalize v))))
        (t value)))

(defun nagent--file-or-error ()
  "Return the current buffer's file name, or signal a `user-error'."
  (or buffer-file-name
      (user-error "nagent: this buffer is not visiting a file")))

(defun nagent--settings-json ()
  "Return `nagent-settings' as a JSON-ready object ({} when empty)."
  (or (nagent--normalize nagent-settings) (make-hash-table)))

(defun nagent--uri-to-path (uri)
  "File name of the file: URI."
  (if (fboundp 'eglot--uri-to-path) (eglot--uri-to-path uri)
    (url-unhex-string (string-remove-prefix "file://" uri))))

(defun nagent--short-number (n)
  "N (a number) as 950, 1.2k or 3.4M."
  (cond ((not (numberp n)) (format "%s" (or n "?")))
        ((< n 1000) (format "%d" n))
        ((< n 1000000) (format "%.1fk" (/ n 1000.0)))
        (t (format "%.1fM" (/ n 1000000.0)))))

(defun nagent-format-tokens (tokens)
  "One line for the TOKENS object of a result: turns, in/out, cache, cost.
The cost is in US dollars, as the server reckons it."
  (let ((turns (plist-get tokens :turns))
        (cache (plist-get tokens :cacheRead))
        (memory (plist-get tokens :memory))
        (cost (plist-get tokens :cost)))
    (string-join
     (delq nil
           (list (and turns (format "%s turn%s" turns (if (equal turns 1) "" "s")))
                 (format "%s in / %s out tokens"
                         (nagent--short-number (plist-get tokens :input))
                         (nagent--short-number (plist-get tokens :output)))
                 (and (numberp cache) (> cache 0)
                      (format "%s cached" (nagent--short-number cache)))
                 (and (numberp memory) (> memory 0)
                      (format "%s on memory" (nagent--short-number memory)))
                 (and (numberp cost) (format "cost $%s" (nagent--format-cost cost)))))
     ", ")))

(defun nagent--format-cost (cost)
  "COST (a number) with enough digits to be meaningful."
  (cond ((= cost 0) "0")
        ((< cost 1) (format "%.4f" cost))
        (t (format "%.2f" cost))))

;;;; Progress from the server

(defvar nagent--progress (make-hash-table :test #'eq :weakness 'key)
  "Latest `$/progress' text per eglot connection.")

(defvar nagent--progress-titles (make-hash-table :test #'eq :weakness 'key)
  "Title of the running `$/progress' per eglot connection.")

(defun nagent--progress-update (server value)
  "Record the `$/progress' VALUE (a plist) of SERVER for the mode line."
  (let* ((value (nagent--normalize value))
         (kind (plist-get value :kind))
         (message (plist-get value :message))
         (pct (plist-get value :percentage)))
    (when (equal kind "begin")
      (puthash server (plist-get value :title) nagent--progress-titles))
    (puthash server
             (if (equal kind "end")
                 nil
               (string-join
                (delq nil (list (gethash server nagent--progress-titles)
                                message
                                (and (numberp pct) (format "%d%%" pct))))
                " "))
             nagent--progress)
    (force-mode-line-update t)))


;;;; Questions from the server (window/showMessageRequest)

(defun nagent-ask (message choices)
  "Ask MESSAGE with `completing-read' over CHOICES; nil when dismissed."
  (condition-case nil
      (let ((answer (completing-read
                     (concat (propertize "nagent asks" 'face 'bold) ": "
                             (string-trim message)
                             (format "\nAnswer (%s): " (string-join choices " / ")))
                     choices nil t nil nil (car choices))))
        (and (member answer choices) answer))
    (quit nil)))

(defun nagent--answer-message-request (_type message actions)
  "The answer to window/showMessageRequest MESSAGE with ACTIONS (a JSON array).
A plist (:title CHOICE), or :null when the user gave no answer."
  (let* ((titles (delq nil (mapcar (lambda (a) (plist-get (nagent--normalize a) :title))
                                   (nagent--list actions))))
         (choice (and titles (funcall nagent-ask-function (or message "") titles))))
    (if choice (list :title choice) :null)))

;;;; Leaving the process filter

;; The answer to a request arrives inside the connection's process filter.  A
;; callback may wait for another answer (the review reads its proposal with
;; `nagent-command'), and waiting there runs the filter again while the outer
;; call still holds the buffer narrowed to the message it is reading: Emacs
;; 28's jsonrpc (1.0.14) then inserts the new output in the wrong place and
;; reads a header as a body ("invalid token near 'Content'").  So a request's
;; end is handled from a timer, once the filter has returned, and not while
;; a question is open: eglot holds the server's output then
;; (`nagent--eglot-holding-output'), so a callback waiting for an answer
;; would wait for the question to end, and the question for it.

(defvar nagent--asking 0
  "How many of the server's questions are open (asked, not yet answered).")

(defvar nagent--after-asking nil
  "Calls (FN . ARGS) waiting for the open questions to end, newest first.")

(defun nagent--outside-filter (fn &rest args)
  "Call FN with ARGS once the current process filter has returned and no
question is open."
  (run-at-time 0 nil #'nagent--call-when-free fn args))

(defun nagent--call-when-free (fn args)
  "Call FN with ARGS now, or after the open questions end."
  (if (> nagent--asking 0)
      (push (cons fn args) nagent--after-asking)
    (apply fn args)))

(defun nagent--run-after-asking ()
  "Make the calls that waited for the questions to end, in their order."
  (let ((calls (nreverse nagent--after-asking)))
    (setq nagent--after-asking nil)
    (dolist (call calls)
      (apply (car call) (cdr call)))))

;;;; Paths

(defun nagent--visit (path)
  "A buffer visiting PATH: the one there is (asking nothing), else a new one."
  (or (find-buffer-visiting path) (find-file-noselect path)))

(defun nagent--buffer-file (buffer)
  "The file BUFFER visits, or nil."
  (and (buffer-live-p buffer) (buffer-local-value 'buffer-file-name buffer)))

(defun nagent--resolve-path (path root)
  "Absolute file name of PATH, relative paths taken from ROOT."
  (if (file-name-absolute-p path) path
    (expand-file-name path (or root default-directory))))

(defun nagent--repo-root (file)
  "Git top level of FILE, or its directory."
  (let ((dir (locate-dominating-file file ".git")))
    (expand-file-name (or dir (file-name-directory file)))))

;;;; Proposals

(defvar nagent--proposal-answers (make-hash-table :test #'equal)
  "The model's answer for each proposal id seen in this session.")

(defun nagent--proposal-id (proposal)
  "Id of PROPOSAL (an id, or an object with :id)."
  (cond ((stringp proposal) proposal)
        ((numberp proposal) proposal)
        ((listp proposal) (plist-get proposal :id))))


(defun nagent--show-text (name text)
  "Show TEXT in a read-only buffer NAME (created or emptied) and display it."
  (let ((buf (get-buffer-create name)))
    (with-current-buffer buf
      (let ((inhibit-read-only t))
        (erase-buffer)
        (insert (or text "") "\n")
        (goto-char (point-min)))
      (special-mode))
    (display-buffer buf)))


(provide 'nagent-core)
;;; nagent-core.el ends here
