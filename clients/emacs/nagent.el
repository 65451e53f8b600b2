;;; nagent.el --- Per-file LLM editing through the nagent-lsp language server  -*- lexical-binding: t -*-

;; Version: 0.2.0
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
;;   `nagent-split', `nagent-patch', `nagent-summarize',
;;   `nagent-clear-conversation', `nagent-status'
;;
;; Conversation files (.nagent/conversations/*) open in
;; `nagent-conversation-mode': tags highlighted, the initial context
;; folded, point at the end, and C-c C-c sends the next request.

;;; Code:

(require 'cl-lib)
(require 'subr-x)
(require 'seq)
(require 'json)
(require 'jsonrpc)
(require 'eglot)
(require 'button)
(require 'diff-mode)

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
    "nagent.review.apply" "nagent.review.discard")
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
  "One line for the TOKENS object of a result: turns, in/out, cache, cost."
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
                 (and (numberp cost) (format "cost %s" (nagent--format-cost cost)))))
     ", ")))

(defun nagent--format-cost (cost)
  "COST (a number) with enough digits to be meaningful."
  (cond ((= cost 0) "0")
        ((< cost 0.01) (format "%.4f" cost))
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

;;;; eglot back end

(defclass nagent-eglot-server (eglot-lsp-server) ()
  :documentation "An eglot connection to nagent-lsp.")

(defun nagent-eglot-contact (&optional _interactive)
  "Contact for `eglot-server-programs' that starts nagent-lsp.
Example: (add-to-list \\='eglot-server-programs
           \\='((python-mode js-mode) . nagent-eglot-contact))"
  (cons 'nagent-eglot-server nagent-server-command))

(cl-defmethod eglot-initialization-options ((_server nagent-eglot-server))
  "Send `nagent-settings' as the initialization options."
  (nagent--settings-json))

(defconst nagent--plugin-capabilities '(:requestInput t)
  "What this client tells nagent-lsp in `experimental.nagent'.
requestInput: it asks the user for the request of the code action
\"nagent: edit selection\"; the key itself says it shows the results
of nagent's commands (history, split, patch, instructions, recipes)
its own way, so the server offers them unwrapped.")

(defun nagent--with-plugin-capabilities (experimental)
  "The `experimental' client capabilities EXPERIMENTAL with nagent's key added.
EXPERIMENTAL is a plist, a hash table (eglot's empty JSON object) or nil."
  (cond ((and (hash-table-p experimental) (> (hash-table-count experimental) 0))
         (let ((copy (copy-hash-table experimental)))
           (puthash "nagent" nagent--plugin-capabilities copy)
           copy))
        ((and (consp experimental) (keywordp (car experimental)))
         (plist-put (copy-sequence experimental) :nagent nagent--plugin-capabilities))
        (t (list :nagent nagent--plugin-capabilities))))

(cl-defmethod eglot-client-capabilities :around ((_server nagent-eglot-server))
  "Tell nagent-lsp that this client shows work-done progress and is a
nagent plugin (`experimental.nagent', see `nagent--plugin-capabilities')."
  (let* ((caps (cl-call-next-method))
         (window (copy-sequence (plist-get caps :window))))
    (setq caps (plist-put caps :window (plist-put window :workDoneProgress t)))
    (plist-put caps :experimental
               (nagent--with-plugin-capabilities (plist-get caps :experimental)))))

(cl-defmethod eglot-execute-command ((server nagent-eglot-server) command arguments)
  "Run nagent's code-action commands the client's way (see
`nagent-run-code-action-command'); send any other COMMAND with
ARGUMENTS to SERVER."
  (let ((name (format "%s" command)))
    (if (member name nagent--code-action-commands)
        (nagent-run-code-action-command name (elt arguments 0))
      (cl-call-next-method server command arguments))))

(cl-defmethod eglot-handle-request
  ((_server nagent-eglot-server) (_method (eql window/workDoneProgress/create))
   &key _token)
  "Accept a progress token."
  nil)

(cl-defmethod eglot-handle-notification
  ((server nagent-eglot-server) (_method (eql $/progress)) &key _token value)
  "Show nagent's progress in the mode line."
  (nagent--progress-update server value))

(defun nagent--workspace-edit-paths (edit)
  "Files the WorkspaceEdit EDIT (a plist) changes."
  (let (paths)
    (dolist (change (nagent--list (plist-get edit :documentChanges)))
      (let ((uri (nagent--get change :textDocument :uri)))
        (when uri (push (nagent--uri-to-path uri) paths))))
    (cl-loop for (uri _edits) on (plist-get edit :changes) by #'cddr
             do (push (nagent--uri-to-path (substring (symbol-name uri) 1)) paths))
    (delete-dups (nreverse paths))))

(cl-defmethod eglot-handle-request :around
  ((_server nagent-eglot-server) (_method (eql workspace/applyEdit)) &key _label edit)
  "Apply nagent's edits asynchronously, without eglot's prompts.
The files it changes are visited first (eglot 1.9 asks before editing
a file with no buffer), and `nagent-confirm-edits' decides whether
to confirm."
  (dolist (path (nagent--workspace-edit-paths edit))
    (when (file-exists-p path)
      (find-file-noselect path)))
  (let ((eglot-confirm-server-initiated-edits (and nagent-confirm-edits 'confirm)))
    (cl-call-next-method)))

(cl-defmethod eglot-handle-request
  ((server nagent-eglot-server) (_method (eql workspace/configuration)) &key items)
  "Answer the \"nagent\" section with `nagent-settings'."
  (let* ((items (nagent--list items))
         (others (cl-remove-if (lambda (it) (equal (plist-get it :section) "nagent"))
                               items))
         (answers (and others (nagent--list
                               (cl-call-next-method server 'workspace/configuration
                                                    :items (vconcat others))))))
    (vconcat
     (mapcar (lambda (it)
               (if (equal (plist-get it :section) "nagent")
                   (let ((root (ignore-errors (project-root (eglot--project server)))))
                     (with-temp-buffer
                       (when root (setq default-directory root))
                       (hack-dir-local-variables-non-file-buffer)
                       (nagent--settings-json)))
                 (pop answers)))
             items))))

(defun nagent--eglot-nagent-p (server)
  "Non-nil when the eglot SERVER is a nagent-lsp connection."
  (or (cl-typep server 'nagent-eglot-server)
      (let ((cmds (nagent--get (eglot--capabilities server)
                               :executeCommandProvider :commands)))
        (and (seq-contains-p cmds "nagent.status") t))))

(defun nagent--eglot-adopt-conversations (server)
  "Let the nagent eglot SERVER manage conversation buffers of its project.
The server then reads an open conversation's unsaved text."
  (when (and (nagent--eglot-nagent-p server)
             (not (memq 'nagent-conversation-mode (eglot--major-modes server))))
    (setf (eglot--major-modes server)
          (append (eglot--major-modes server) (list 'nagent-conversation-mode)))
    (dolist (buf (buffer-list))
      (with-current-buffer buf
        (when (and (derived-mode-p 'nagent-conversation-mode)
                   (not (bound-and-true-p eglot--managed-mode)))
          (eglot--maybe-activate-editing-mode))))))

(add-hook 'eglot-connect-hook #'nagent--eglot-adopt-conversations)

(defun nagent--eglot-server (&optional start)
  "Return the buffer's eglot connection to nagent-lsp.
With START, connect now when there is none."
  (let ((server (eglot-current-server)))
    (cond
     ((and server (jsonrpc-running-p server) (nagent--eglot-nagent-p server))
      (nagent--eglot-adopt-conversations server)
      server)
     ((not start) nil)
     ((and server (jsonrpc-running-p server)
           (or noninteractive
               (not (y-or-n-p (format "eglot runs %s here; replace it with nagent-lsp? "
                                      (jsonrpc-name server))))))
      (user-error "nagent: this buffer is managed by another eglot server; \
use lsp-mode to run nagent beside it"))
     (t
      (nagent--file-or-error)
      (let ((project (eglot--current-project))
            (language-id (string-remove-suffix "-mode" (symbol-name major-mode)))
            (eglot-sync-connect t))
        (eglot (delete-dups (list major-mode 'nagent-conversation-mode))
               project (quote nagent-eglot-server)
               (copy-sequence nagent-server-command) language-id)
        (or (eglot-current-server)
            (error "nagent: could not connect to %s"
                   (string-join nagent-server-command " "))))))))

(defun nagent--eglot-flush (&optional server)
  "Send eglot's pending didChange now (eglot debounces it on an idle timer).
With SERVER, for every buffer it manages (an open conversation too)."
  (if server
      (dolist (buf (eglot--managed-buffers server))
        (when (buffer-live-p buf)
          (with-current-buffer buf (nagent--eglot-flush))))
    (when (and (bound-and-true-p eglot--managed-mode)
               (fboundp 'eglot--signal-textDocument/didChange))
      (eglot--signal-textDocument/didChange))))

(defun nagent--eglot-send (server command argument on-success on-error)
  "Send COMMAND with ARGUMENT to eglot SERVER asynchronously.
Return a function that asks the server to cancel the request; the
server's final answer still reaches ON-SUCCESS or ON-ERROR."
  (let ((id-and-timer
         (jsonrpc--async-request-1
          server :workspace/executeCommand
          (list :command command :arguments (vector argument))
          :success-fn on-success
          :error-fn on-error
          :timeout nil)))
    (lambda ()
      (when-let ((id (car id-and-timer)))
        (ignore-errors (jsonrpc-notify server :$/cancelRequest (list :id id)))))))

;;;; Back-end dispatch

(declare-function nagent-lsp-mode--workspace "nagent-lsp-mode" (&optional start))
(declare-function nagent-lsp-mode--send "nagent-lsp-mode"
                  (workspace command argument on-success on-error))
(declare-function nagent-lsp-mode--flush "nagent-lsp-mode" ())
(declare-function nagent-lsp-mode--uri "nagent-lsp-mode" ())
(declare-function nagent-lsp-mode--range "nagent-lsp-mode" (beg end))
(declare-function nagent-lsp-mode--progress-text "nagent-lsp-mode" (workspace))
(declare-function nagent-lsp-mode--notify-settings "nagent-lsp-mode" (workspace))
(declare-function nagent-lsp-mode--hover "nagent-lsp-mode" (workspace))
(declare-function nagent-lsp-mode--managed-p "nagent-lsp-mode" ())

(defun nagent--use-lsp-mode-p ()
  "Non-nil when nagent should talk through lsp-mode in this buffer."
  (pcase nagent-backend
    ('eglot nil)
    ('lsp-mode t)
    (_ (and (bound-and-true-p lsp-mode) (featurep 'nagent-lsp-mode)))))

(defun nagent--connection (&optional start)
  "Return (BACKEND . CONNECTION) for the current buffer.
With START, start a connection when there is none."
  (if (nagent--use-lsp-mode-p)
      (progn
        (unless (featurep 'nagent-lsp-mode)
          (require 'nagent-lsp-mode))
        (let ((ws (nagent-lsp-mode--workspace start)))
          (and ws (cons 'lsp-mode ws))))
    (let ((server (nagent--eglot-server start)))
      (and server (cons 'eglot server)))))

(defun nagent--uri (&optional backend)
  "URI of the current buffer's file, as BACKEND spells it."
  (nagent--file-or-error)
  (if (eq (or backend (car (nagent--connection))) 'lsp-mode)
      (nagent-lsp-mode--uri)
    (eglot--path-to-uri buffer-file-name)))

(defun nagent--range (beg end backend)
  "LSP range of BEG..END in the current buffer for BACKEND."
  (if (eq backend 'lsp-mode)
      (nagent-lsp-mode--range beg end)
    (list :start (eglot--pos-to-lsp-position beg)
          :end (eglot--pos-to-lsp-position end))))

(defun nagent--managed-p ()
  "Non-nil when the current buffer's text reaches nagent-lsp (didOpen/didChange)."
  (or (and (bound-and-true-p eglot--managed-mode)
           (let ((s (eglot-current-server))) (and s (nagent--eglot-nagent-p s))))
      (and (featurep 'nagent-lsp-mode) (nagent-lsp-mode--managed-p))))

(define-error 'nagent-error "nagent")

(defun nagent--error-message (err)
  "Human-readable text of the JSON-RPC error ERR."
  (let ((err (nagent--normalize err)))
    (cond ((stringp err) err)
          ((plist-get err :message))
          ((and (consp err) (stringp (cadr err))) (cadr err))
          (t (format "%S" err)))))

(defmacro nagent--with-user-errors (&rest body)
  "Run BODY; when the command was called interactively, show a
`nagent-error' as a plain message (a `user-error') instead of a
nested error form."
  (declare (indent 0) (debug t))
  (let ((interactive (make-symbol "interactive")))
    `(let ((,interactive (called-interactively-p 'any)))
       (condition-case err
           (progn ,@body)
         (nagent-error
          (if ,interactive
              (user-error "nagent: %s" (cadr err))
            (signal (car err) (cdr err))))))))

;;;; Asynchronous requests ("jobs")

(cl-defstruct (nagent-job (:constructor nagent--job-create) (:copier nil))
  "A nagent request in flight, or finished."
  id command label buffer backend server start cancel timer
  done result error then else ticks)

(defvar nagent--jobs nil
  "Running nagent requests, newest first.")

(defvar nagent--job-counter 0)

(defvar nagent--tick-timer nil
  "Timer refreshing the mode line while requests run.")

(defconst nagent--mode-line-entry '(nagent--jobs (:eval (nagent--mode-line-text)))
  "The `mode-line-misc-info' entry showing running requests.")

(defvar nagent-mode-line-map
  (let ((map (make-sparse-keymap)))
    (define-key map [mode-line mouse-1] #'nagent-cancel)
    map)
  "Keymap of the mode-line indicator.")

(defun nagent--job-progress (job)
  "Progress text of JOB's connection, or nil."
  (pcase (nagent-job-backend job)
    ('eglot (gethash (nagent-job-server job) nagent--progress))
    ('lsp-mode (ignore-errors (nagent-lsp-mode--progress-text (nagent-job-server job))))))

(defun nagent--mode-line-text ()
  "Mode-line text of the running requests."
  (when nagent--jobs
    (let* ((job (car nagent--jobs))
           (progress (nagent--job-progress job)))
      (propertize
       (format " [nagent: %s %ds%s%s]"
               (nagent-job-label job)
               (round (- (float-time) (nagent-job-start job)))
               (if progress
                   (concat " · " (string-remove-prefix "nagent: " progress))
                 "")
               (if (cdr nagent--jobs) (format " +%d" (length (cdr nagent--jobs))) ""))
       'face 'mode-line-emphasis
       'help-echo "nagent is working; mouse-1 or M-x nagent-cancel stops it"
       'local-map nagent-mode-line-map))))

(defun nagent--tick ()
  "Refresh the mode line; stop the timer when nothing runs."
  (if nagent--jobs
      (force-mode-line-update t)
    (when nagent--tick-timer
      (cancel-timer nagent--tick-timer)
      (setq nagent--tick-timer nil))
    (force-mode-line-update t)))

(defun nagent--job-started (job)
  "Register JOB for the mode line."
  (push job nagent--jobs)
  (unless (member nagent--mode-line-entry mode-line-misc-info)
    (setq mode-line-misc-info (cons nagent--mode-line-entry mode-line-misc-info)))
  (unless nagent--tick-timer
    (setq nagent--tick-timer (run-with-timer 1 1 #'nagent--tick)))
  (force-mode-line-update t))

(defun nagent--run-callback (job fn &rest args)
  "Call FN with ARGS for JOB in its buffer; report an error in FN."
  (when fn
    (let ((buf (nagent-job-buffer job)))
      (with-current-buffer (if (buffer-live-p buf) buf (current-buffer))
        (condition-case err
            (apply fn args)
          (error (message "nagent: %s: %s" (nagent-job-label job)
                          (error-message-string err))))))))

(defun nagent--job-finish (job result error)
  "Finish JOB with RESULT, or with the message ERROR."
  (if (nagent-job-done job)
      ;; A late answer to a cancelled request: its conversation changed.
      (nagent--sync-conversations (nagent-job-ticks job))
    (setf (nagent-job-done job) t
          (nagent-job-result job) result
          (nagent-job-error job) error)
    (when (nagent-job-timer job) (cancel-timer (nagent-job-timer job)))
    (setq nagent--jobs (delq job nagent--jobs))
    (nagent--tick)
    (nagent--sync-conversations (nagent-job-ticks job))
    (if error
        (if (nagent-job-else job)
            (nagent--run-callback job (nagent-job-else job) error)
          (message "nagent: %s: %s" (nagent-job-label job) error))
      (nagent--run-callback job (nagent-job-then job) result))))

(defun nagent--job-abort (job reason)
  "Ask the server to stop JOB and finish it now with REASON."
  (unless (nagent-job-done job)
    (ignore-errors (funcall (nagent-job-cancel job)))
    (nagent--job-finish job nil reason)
    ;; The server records the interruption in the conversation shortly after.
    (let ((ticks (nagent-job-ticks job)))
      (dolist (delay '(1.5 4))
        (run-with-timer delay nil #'nagent--sync-conversations ticks)))))

(defun nagent--flush (backend server)
  "Send every pending buffer change to SERVER of BACKEND."
  (if (eq backend 'lsp-mode)
      (nagent-lsp-mode--flush)
    (nagent--eglot-flush server)))

(cl-defun nagent-command-async (command &optional argument &key label then else)
  "Send the nagent-lsp COMMAND with the JSON object ARGUMENT; do not wait.
Starts the connection when needed and sends pending buffer changes
first (an open conversation's unsaved text included).  LABEL names
the request in the mode line.  THEN is called with the result (a
plist) and ELSE with an error message, both in the current buffer.
Without ELSE, an error is shown in the echo area.  Returns the job;
`nagent-wait' waits for it and `nagent-cancel' stops it."
  (let* ((conn (or (nagent--connection t)
                   (error "nagent: no connection to nagent-lsp")))
         (backend (car conn))
         (server (cdr conn))
         (job (nagent--job-create :id (cl-incf nagent--job-counter)
                                  :command command :label (or label command)
                                  :buffer (current-buffer) :backend backend :server server
                                  :start (float-time) :then then :else else)))
    (nagent--prepare-conversations)
    (nagent--flush backend server)
    (setf (nagent-job-ticks job) (nagent--conversation-ticks))
    (let ((on-success (lambda (res) (nagent--job-finish job (nagent--normalize res) nil)))
          (on-error (lambda (err) (nagent--job-finish job nil (nagent--error-message err))))
          (argument (or argument (make-hash-table))))
      (setf (nagent-job-cancel job)
            (if (eq backend 'lsp-mode)
                (nagent-lsp-mode--send server command argument on-success on-error)
              (nagent--eglot-send server command argument on-success on-error))))
    (when nagent-request-timeout
      (setf (nagent-job-timer job)
            (run-with-timer nagent-request-timeout nil
                            (lambda ()
                              (nagent--job-abort
                               job (format "timed out after %ss (nagent-request-timeout)"
                                           nagent-request-timeout))))))
    (nagent--job-started job)
    job))

(defun nagent-wait (job)
  "Wait for JOB and return its result; signal `nagent-error' if it failed.
\\[keyboard-quit] while waiting cancels the request."
  (let ((completed nil))
    (unwind-protect
        (progn
          (while (not (nagent-job-done job))
            (accept-process-output nil 0.05))
          (setq completed t))
      (unless completed
        (nagent--job-abort job "cancelled"))))
  (if (nagent-job-error job)
      (signal 'nagent-error (list (nagent-job-error job)))
    (nagent-job-result job)))

(defun nagent-command (command &optional argument label)
  "Run the nagent-lsp COMMAND with the JSON object ARGUMENT and wait for it.
For quick commands; see `nagent-command-async' for the asynchronous
form.  LABEL names it in the mode line.  Returns the result as a plist
or signals `nagent-error' with the server's message."
  (nagent-wait (nagent-command-async command argument :label label :else #'ignore)))

;;;###autoload
(defun nagent-cancel (&optional job)
  "Stop the running nagent request JOB.
Interactively: the request of the current buffer, else the only one
running, else the one you pick."
  (interactive)
  (let ((job (or job
                 (cl-find (current-buffer) nagent--jobs :key #'nagent-job-buffer)
                 (and (null (cdr nagent--jobs)) (car nagent--jobs))
                 (and nagent--jobs
                      (let* ((names (mapcar (lambda (j)
                                              (cons (format "%d: %s (%s)" (nagent-job-id j)
                                                            (nagent-job-label j)
                                                            (buffer-name (nagent-job-buffer j)))
                                                    j))
                                            nagent--jobs))
                             (choice (completing-read "Cancel nagent request: " names nil t)))
                        (cdr (assoc choice names)))))))
    (if (not job)
        (progn (message "nagent: nothing is running") nil)
      (nagent--job-abort job "cancelled")
      (message "nagent: %s cancelled" (nagent-job-label job))
      job)))

(defun nagent--uri-argument (&rest more)
  "Plist {uri: <this buffer>} followed by the non-nil pairs of MORE."
  (let ((arg (list :uri (nagent--uri (car (nagent--connection t))))))
    (cl-loop for (k v) on more by #'cddr
             when v do (setq arg (append arg (list k v))))
    arg))

(defun nagent--report (fmt &rest args)
  "Show a message built from FMT and ARGS and return it."
  (let ((text (apply #'format fmt args)))
    (message "%s" text)
    text))

;;;; Keeping open conversations in step with the server

(defun nagent--conversation-buffers ()
  "Live buffers in `nagent-conversation-mode'."
  (cl-remove-if-not (lambda (b) (and (buffer-file-name b)
                                     (eq (buffer-local-value 'major-mode b)
                                         'nagent-conversation-mode)))
                    (buffer-list)))

(defun nagent--conversation-ticks ()
  "Alist (BUFFER . MODIFICATION-TICK) of the open conversations."
  (mapcar (lambda (b) (cons b (buffer-chars-modified-tick b)))
          (nagent--conversation-buffers)))

(defun nagent--prepare-conversations ()
  "Save modified conversations whose text the server cannot see.
A conversation managed by the LSP connection reaches the server
through didChange; any other one is saved so the next run reads it."
  (dolist (b (nagent--conversation-buffers))
    (with-current-buffer b
      (when (and (buffer-modified-p) (not (nagent--managed-p)))
        (let ((save-silently t)) (basic-save-buffer))))))

(defun nagent--revert-conversation ()
  "Revert the current conversation buffer from disk, keeping point at the end."
  (let ((at-end (>= (point) (point-max)))
        (windows (get-buffer-window-list nil nil t)))
    (let ((revert-without-query (list ".")))
      (revert-buffer t t t))
    (when at-end
      (goto-char (point-max))
      (dolist (w windows) (set-window-point w (point-max))))))

(defun nagent--sync-conversations (&optional ticks)
  "Revert open conversations the server changed on disk.
A buffer is reverted when it has no unsaved text or its text is what
the server read when the run began (TICKS, from
`nagent--conversation-ticks'); otherwise it is left alone and a
message says so."
  (dolist (b (nagent--conversation-buffers))
    (with-current-buffer b
      (when (and (file-exists-p buffer-file-name)
                 (not (verify-visited-file-modtime b)))
        (let ((tick (cdr (assq b ticks))))
          (if (or (not (buffer-modified-p))
                  (and tick (= tick (buffer-chars-modified-tick))))
              (nagent--revert-conversation)
            (message "nagent: %s changed on disk while you edited it; \
\\[revert-buffer] shows the new turns" (buffer-name))))))))

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

(defun nagent--add-answer (file title result &optional extra)
  "Add RESULT's answer for FILE under TITLE to *nagent*; return the buffer.
EXTRA is more Markdown to show below the answer."
  (let* ((buf (nagent--answer-buffer))
         (response (string-trim (or (plist-get result :response) "")))
         (applied (nagent--true-p (plist-get result :applied)))
         (reason (plist-get result :reason))
         (tokens (plist-get result :tokens))
         (conv (nagent--get result :conversation :path))
         start)
    (with-current-buffer buf
      (let ((inhibit-read-only t))
        (goto-char (point-max))
        (unless (bobp) (insert "\n---\n\n"))
        (setq start (point))
        (insert (format "## %s — %s\n\n" (if file (file-name-nondirectory file) "nagent") title))
        (insert (if (string-empty-p response) "_(no answer text)_" response) "\n\n")
        (when extra (insert extra "\n\n"))
        (insert (format "_%s · %s%s · %s%s · %s_\n"
                        (format-time-string "%F %T")
                        (if applied (format "applied %s edit(s)" (or (plist-get result :edits) 0))
                          "nothing applied")
                        (if (and (not applied) reason) (format " (%s)" reason) "")
                        (nagent-format-tokens tokens)
                        (if file (format " · %s" (abbreviate-file-name file)) "")
                        (if conv (format "conversation %s" (abbreviate-file-name conv))
                          "no conversation")))))
    (dolist (w (get-buffer-window-list buf nil t))
      (set-window-point w start)
      (set-window-start w start))
    (when nagent-show-answers
      (let ((w (display-buffer buf '(nil (inhibit-same-window . t)))))
        (when w (set-window-point w start) (set-window-start w start))))
    buf))

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

;;;; Edits, agents and recipes

(defvar nagent--proposal-answers (make-hash-table :test #'equal)
  "The model's answer for each proposal id seen in this session.")

(defun nagent--proposal-id (proposal)
  "Id of PROPOSAL (an id, or an object with :id)."
  (cond ((stringp proposal) proposal)
        ((numberp proposal) proposal)
        ((listp proposal) (plist-get proposal :id))))

(defun nagent--handle-proposal (result)
  "Offer or open the review of RESULT's proposal, if it has one."
  (let ((id (nagent--proposal-id (plist-get result :proposal))))
    (when id
      (puthash id (plist-get result :response) nagent--proposal-answers)
      (if (or (eq nagent-review-on-proposal 'open)
              (and (eq nagent-review-on-proposal 'ask)
                   (y-or-n-p "nagent: the change awaits review; review it now? ")))
          (nagent-review id)
        (message "nagent: the change awaits review: M-x nagent-review")))))

(defun nagent--line-ranges (lines)
  "0-based LINES (a list or vector) as people read them: \"3, 10–12\"."
  (let ((sorted (sort (delete-dups (seq-filter (lambda (n) (and (integerp n) (>= n 0)))
                                               (append lines nil)))
                      #'<))
        parts)
    (while sorted
      (let ((first (car sorted)) (last (car sorted)))
        (setq sorted (cdr sorted))
        (while (and sorted (= (car sorted) (1+ last)))
          (setq last (car sorted) sorted (cdr sorted)))
        (push (if (= first last) (format "%d" (1+ first))
                (format "%d–%d" (1+ first) (1+ last)))
              parts)))
    (string-join (nreverse parts) ", ")))

(defun nagent-outside-selection-text (outside &optional name max)
  "A result's :outsideLines OUTSIDE as one line, or nil when it names no line.
\"nagent also changed lines outside the selection: app.py 3, 10–12; util.py 1–4\".
NAME maps a file URI to the name shown (default: the file's base name);
the line is cut to MAX characters (default 160) with \"…\"."
  (let* ((name (or name (lambda (uri) (file-name-nondirectory (nagent--uri-to-path uri)))))
         (max (or max 160))
         (files (seq-filter (lambda (f) (> (length (plist-get f :lines)) 0))
                            (append outside nil))))
    (when files
      (let ((text (concat "nagent also changed lines outside the selection: "
                          (mapconcat (lambda (f)
                                       (format "%s %s" (funcall name (plist-get f :uri))
                                               (nagent--line-ranges (plist-get f :lines))))
                                     files "; "))))
        (if (<= (length text) max) text
          (let* ((cut (substring text 0 (1- max)))
                 (at (max (or (string-match-p ", [^,]*\\'" cut) -1)
                          (or (string-match-p "; [^;]*\\'" cut) -1))))
            (concat (if (> at 0) (substring cut 0 at) cut) ", …")))))))

(defun nagent--outside-name (uri)
  "URI's file name relative to its repository (or directory)."
  (let ((path (nagent--uri-to-path uri)))
    (file-relative-name path (nagent--repo-root path))))

(defun nagent--finish-run (file title result &optional extra)
  "Show RESULT of a run on FILE: answer buffer, echo line, proposal.
When the run changed lines outside the selection, say so in the answer and as
a warning (`display-warning')."
  (let ((outside (and (nagent--true-p (plist-get result :outsideSelection))
                      (nagent-outside-selection-text (plist-get result :outsideLines)
                                                     #'nagent--outside-name))))
    (nagent--add-answer file title result
                        (if outside
                            (concat (format "**⚠ %s**" outside) (if extra (concat "\n\n" extra) ""))
                          extra))
    (when outside (display-warning 'nagent outside :warning))
    (let ((applied (nagent--true-p (plist-get result :applied))))
      (message "nagent: %s%s — %s (answer in %s)%s"
               (if applied
                   (format "applied %s edit(s)" (or (plist-get result :edits) 0))
                 "nothing applied")
               (if (and (not applied) (plist-get result :reason))
                   (format ": %s" (plist-get result :reason))
                 "")
               (nagent-format-tokens (plist-get result :tokens))
               nagent-answer-buffer
               (if outside "; also changed lines outside the selection" ""))))
  (nagent--handle-proposal result))

(defun nagent--choose (prompt items &optional history default)
  "Read one of ITEMS (plists with :name :description :source) with PROMPT."
  (let* ((table (mapcar (lambda (it) (cons (plist-get it :name) it)) items))
         (completion-extra-properties
          (list :annotation-function
                (lambda (name)
                  (let ((it (cdr (assoc name table))))
                    (format "  %s%s" (or (plist-get it :description) "")
                            (if (plist-get it :source)
                                (format " (%s)" (plist-get it :source)) "")))))))
    (completing-read prompt table nil t nil history default)))

(defun nagent-agents ()
  "The agents nagent-lsp offers for the current file (a list of plists)."
  (nagent--list (plist-get (nagent-command "nagent.agents.list"
                                           (nagent--uri-argument) "listing agents")
                           :agents)))

(defun nagent-read-agent ()
  "Pick an agent for the current file with `completing-read'."
  (nagent--choose "nagent agent: " (nagent-agents) 'nagent-agent-history "edit"))

;;;###autoload
(defun nagent-edit (request &optional beg end agent)
  "Ask nagent to edit the current buffer according to REQUEST.
With BEG and END (interactively: the active region), the request is
about that range.  AGENT names the agent that runs it (interactively:
picked with a prefix argument).  Returns at once with the request's
job (see `nagent-wait'); the edit arrives as an ordinary change, the
answer goes to the *nagent* buffer, and a change awaiting review
opens in `nagent-review'."
  (interactive
   (let* ((agent (and current-prefix-arg (nagent-read-agent)))
          (region (use-region-p)))
     (list (read-string (format "nagent%s edit%s: "
                                (if agent (format " (%s)" agent) "")
                                (if region " region" ""))
                        nil 'nagent-request-history)
           (and region (region-beginning))
           (and region (region-end))
           agent)))
  (when (string-empty-p (string-trim request))
    (user-error "nagent: empty request"))
  (let* ((file (nagent--file-or-error))
         (backend (car (nagent--connection t)))
         (arg (list :uri (nagent--uri backend) :request request)))
    (when (and beg end)
      (setq arg (append arg (list :range (nagent--range (min beg end) (max beg end) backend)))))
    (when (and agent (not (string-empty-p agent)))
      (setq arg (append arg (list :agent agent))))
    (prog1 (nagent-command-async
            "nagent.edit" arg
            :label (format "editing %s" (file-name-nondirectory file))
            :then (lambda (res)
                    (nagent--finish-run file (if agent (format "%s (%s)" request agent) request)
                                        res)))
      (message "nagent: editing %s… (M-x nagent-cancel stops it)"
               (file-name-nondirectory file)))))

(defun nagent-recipes ()
  "The recipes nagent-lsp offers for the current file (a list of plists)."
  (nagent--list (plist-get (nagent-command "nagent.recipes.list"
                                           (nagent--uri-argument) "listing recipes")
                           :recipes)))

;;;###autoload
(defun nagent-run-recipe (recipe &optional request beg end)
  "Run the nagent RECIPE on the current buffer, with REQUEST if non-empty.
With BEG and END (interactively: the active region), the run is about
that range.  Returns at once with the request's job; the outputs and
the answer go to the *nagent* buffer, a changed `fileText' arrives as
an edit (or a proposal to review)."
  (interactive
   (let* ((recipe (nagent--choose "nagent recipe: " (nagent-recipes) 'nagent-recipe-history))
          (region (use-region-p)))
     (list recipe
           (read-string (format "nagent [%s] request (may be empty): " recipe)
                        nil 'nagent-request-history)
           (and region (region-beginning))
           (and region (region-end)))))
  (let* ((file (nagent--file-or-error))
         (backend (car (nagent--connection t)))
         (arg (list :uri (nagent--uri backend) :recipe recipe)))
    (when (and request (not (string-empty-p (string-trim request))))
      (setq arg (append arg (list :request request))))
    (when (and beg end)
      (setq arg (append arg (list :range (nagent--range (min beg end) (max beg end) backend)))))
    (prog1 (nagent-command-async
            "nagent.recipe.run" arg
            :label (format "recipe %s on %s" recipe (file-name-nondirectory file))
            :then (lambda (res)
                    (nagent--finish-run file (format "recipe %s%s" recipe
                                                     (if (plist-member arg :request)
                                                         (format ": %s" request) ""))
                                        res (nagent--outputs-markdown (plist-get res :outputs)))))
      (message "nagent: running recipe %s… (M-x nagent-cancel stops it)" recipe))))

;;;; Code actions

;; nagent-lsp offers code actions ("nagent: edit selection", "show this
;; file's history", split, patch, `nagent:' instructions, recipes).  This
;; client says it is a nagent plugin (`nagent--plugin-capabilities'), so
;; the server sends the plain commands, "edit selection" without a
;; request, and leaves showing their results to the client: eglot's
;; `eglot-execute-command' method above and lsp-mode's action handlers
;; (nagent-lsp-mode.el) run them here.

(defun nagent--lsp-point (position)
  "Buffer position of the LSP POSITION (a plist; character in UTF-16 units)."
  (save-excursion
    (save-restriction
      (widen)
      (goto-char (point-min))
      (forward-line (or (plist-get position :line) 0))
      (let ((eol (line-end-position))
            (units (or (plist-get position :character) 0)))
        (while (and (> units 0) (< (point) eol))
          (setq units (- units (if (> (char-after) #xFFFF) 2 1)))
          (forward-char))
        (point)))))

(defun nagent--action-buffer (argument)
  "The buffer visiting ARGUMENT's :uri, else the current buffer."
  (let* ((uri (plist-get argument :uri))
         (path (and (stringp uri) (ignore-errors (nagent--uri-to-path uri)))))
    (or (and path (find-buffer-visiting path))
        (current-buffer))))

(defun nagent--apply-instruction (argument)
  "Run the `nagent:' comment of ARGUMENT's :line (`nagent.instruction.apply').
Asynchronous like `nagent-edit': returns the job; the answer goes to
the *nagent* buffer and a change awaiting review opens in `nagent-review'."
  (let* ((file (nagent--file-or-error))
         (line (or (plist-get argument :line) 0))
         (comment (save-excursion
                    (save-restriction
                      (widen)
                      (goto-char (point-min))
                      (forward-line line)
                      (string-trim (buffer-substring-no-properties
                                    (point) (line-end-position)))))))
    (prog1 (nagent-command-async
            "nagent.instruction.apply" argument
            :label (format "instruction in %s" (file-name-nondirectory file))
            :then (lambda (res)
                    (nagent--finish-run file (format "line %d: %s" (1+ line) comment) res)))
      (message "nagent: applying the instruction on line %d… (M-x nagent-cancel stops it)"
               (1+ line)))))

(defun nagent-run-code-action-command (command argument)
  "Run nagent's code-action COMMAND (a string) with ARGUMENT (a plist).
\"nagent.edit\" without a request asks for one (history
`nagent-request-history') and runs `nagent-edit' on the range;
history, split, patch and recipes run through `nagent-history',
`nagent-split', `nagent-patch' and `nagent-run-recipe'; an
instruction runs asynchronously with its answer in *nagent*; accepting
or rejecting a proposed change (`nagent.review.apply' and
`nagent.review.discard') runs asynchronously too, and the open
conversations are reverted once the review is recorded in them.
Returns the command's result plist, or the job of a long run."
  (let ((argument (nagent--normalize argument)))
    (with-current-buffer (nagent--action-buffer argument)
      (let* ((range (plist-get argument :range))
             (beg (and range (nagent--lsp-point (plist-get range :start))))
             (end (and range (nagent--lsp-point (plist-get range :end)))))
        (pcase command
          ("nagent.edit"
           (let ((request (or (plist-get argument :request)
                              (read-string (format "nagent edit%s: " (if range " selection" ""))
                                           nil 'nagent-request-history))))
             (nagent-edit request beg end (plist-get argument :agent))))
          ("nagent.history" (nagent-history (plist-get argument :maxCommits)))
          ("nagent.split" (nagent-split (plist-get argument :targetBytes)))
          ("nagent.patch" (nagent-patch (plist-get argument :indexPath)
                                        (nagent--true-p (plist-get argument :force))
                                        (nagent--true-p (plist-get argument :dryRun))))
          ("nagent.recipe.run"
           (nagent-run-recipe (plist-get argument :recipe) (plist-get argument :request) beg end))
          ("nagent.instruction.apply" (nagent--apply-instruction argument))
          ((or "nagent.review.apply" "nagent.review.discard")
           (nagent--review-code-action command argument))
          ;; A server that wrapped a command anyway (it did not see the capability).
          ("nagent.codeAction.run"
           (nagent-run-code-action-command (plist-get argument :command)
                                           (plist-get argument :argument)))
          (_ (nagent-command command argument)))))))

;;;; Conversations

(defconst nagent-conversation-file-regexp
  "/\\.nagent/conversations/\\(?:saved/\\)?[^/.]+\\'"
  "File names of nagent conversations (and their archives and saves).")

;;;###autoload
(add-to-list 'auto-mode-alist
             (cons "/\\.nagent/conversations/\\(?:saved/\\)?[^/.]+\\'" 'nagent-conversation-mode))

(defface nagent-conversation-tag '((t :inherit font-lock-keyword-face))
  "Face of the block tags of a conversation.")

(defface nagent-conversation-user-tag '((t :inherit font-lock-function-name-face :weight bold))
  "Face of the <user-prompt> tags.")

(defface nagent-conversation-agent-tag '((t :inherit font-lock-type-face :weight bold))
  "Face of the <agent-response> tags.")

(defface nagent-conversation-status '((t :inherit shadow))
  "Face of turn-status telemetry lines.")

(defconst nagent-conversation-font-lock-keywords
  '(("^[ \t]*<nagent-turn-status\\b[^>\n]*/?>.*$" 0 'nagent-conversation-status)
    ("</?user-prompt>" 0 'nagent-conversation-user-tag)
    ("</?agent-response>" 0 'nagent-conversation-agent-tag)
    ("</?[A-Za-z_][-A-Za-z0-9_]*\\(?:[ \t][^<>\n]*\\)?/?>" 0 'nagent-conversation-tag)
    ("^{[-a-z_]+}$" 0 'font-lock-doc-face)
    ("^Interrupted\\.\\.\\.$" 0 'warning))
  "Highlighting of conversation files.")

(defvar nagent-conversation-mode-map
  (let ((map (make-sparse-keymap)))
    (define-key map (kbd "C-c C-c") #'nagent-conversation-send)
    (define-key map (kbd "C-c C-t") #'nagent-conversation-toggle-context)
    (define-key map (kbd "C-c C-r") #'nagent-review)
    (define-key map (kbd "C-c C-o") #'nagent-conversation-visit-source)
    map)
  "Keymap of `nagent-conversation-mode'.")

(defvar-local nagent--context-overlay nil
  "Overlay folding the <initial_context> block.")

(defun nagent-conversation-fold-context (&optional show)
  "Fold the <initial_context> block (with SHOW, unfold it)."
  (when nagent--context-overlay
    (delete-overlay nagent--context-overlay)
    (setq nagent--context-overlay nil))
  (unless show
    (save-excursion
      (goto-char (point-min))
      (when (re-search-forward "^<initial_context>[ \t]*$" nil t)
        (let ((beg (point)))
          (when (re-search-forward "^</initial_context>" nil t)
            (let ((ov (make-overlay beg (1- (match-beginning 0)) nil t nil)))
              (overlay-put ov 'invisible 'nagent-context)
              (overlay-put ov 'nagent-context t)
              (overlay-put ov 'isearch-open-invisible
                           (lambda (_ov) (nagent-conversation-fold-context t)))
              (overlay-put ov 'help-echo "initial context (C-c C-t shows it)")
              (setq nagent--context-overlay ov))))))))

(defun nagent-conversation-toggle-context ()
  "Show or fold the <initial_context> block."
  (interactive)
  (nagent-conversation-fold-context (and nagent--context-overlay t)))

;;;###autoload
(define-derived-mode nagent-conversation-mode text-mode "nagent-conversation"
  "Major mode of nagent conversation files (.nagent/conversations/*).
The file is the conversation: edit it freely, the next request reads
this buffer (unsaved changes included).  The <initial_context> block
is folded (\\[nagent-conversation-toggle-context] shows it), point
starts at the end, \\[nagent-conversation-send] sends the next request
about the conversation's file, and after a run the buffer is
reverted to the server's new text instead of conflicting with it.

\\{nagent-conversation-mode-map}"
  (setq-local font-lock-defaults '(nagent-conversation-font-lock-keywords t))
  (add-to-invisibility-spec '(nagent-context . t))
  (setq-local outline-regexp "<\\(?:initial_context\\|user-prompt\\|agent-response\\|nagent-[-a-z]+\\|system\\)")
  (setq-local require-final-newline nil)
  (nagent-conversation-fold-context)
  (add-hook 'after-revert-hook #'nagent-conversation-fold-context nil t)
  (unless (buffer-modified-p)
    (goto-char (point-max))))

(defun nagent--conversation-source ()
  "The file whose conversation the current buffer is, or nil."
  (let* ((file (nagent--file-or-error))
         (index (expand-file-name "file-index.json"
                                  (file-name-directory
                                   (directory-file-name (file-name-directory file)))))
         (index (if (file-exists-p index) index
                  (expand-file-name "file-index.json" (file-name-directory file))))
         (name (file-name-nondirectory file)))
    (when (file-exists-p index)
      (let* ((json-object-type 'alist) (json-array-type 'list) (json-key-type 'string)
             (doc (json-read-file index)))
        (cl-loop for (_id . entry) in (cdr (assoc "by_file_id" doc))
                 when (equal (file-name-nondirectory (or (cdr (assoc "conversation" entry)) ""))
                             name)
                 return (cdr (assoc "path" entry)))))))

(defun nagent-conversation-visit-source ()
  "Visit the file this conversation is about."
  (interactive)
  (let ((source (or (nagent--conversation-source)
                    (user-error "nagent: no file is recorded for this conversation"))))
    (find-file-other-window source)))

;;;###autoload
(defun nagent-conversation-send (request &optional agent)
  "Send REQUEST about the file of the current conversation.
AGENT (interactively: picked with a prefix argument) is as in
`nagent-edit'.  What you changed in this buffer, saved or not, is
what the run reads.
Returns the request's job."
  (interactive
   (let ((agent (and current-prefix-arg
                     (with-current-buffer (find-file-noselect
                                           (or (nagent--conversation-source)
                                               (user-error "nagent: no file is recorded \
for this conversation")))
                       (nagent-read-agent)))))
     (list (read-string "nagent next request: " nil 'nagent-request-history) agent)))
  (let ((source (or (nagent--conversation-source)
                    (user-error "nagent: no file is recorded for this conversation"))))
    (with-current-buffer (find-file-noselect source)
      (nagent-edit request nil nil agent))))

(defun nagent--show-conversation (path)
  "Visit the conversation PATH in another window, at its end.
Return the buffer."
  (let ((buf (find-file-noselect path)))
    (with-current-buffer buf
      (unless (derived-mode-p 'nagent-conversation-mode)
        (nagent-conversation-mode))
      (when (and (not (buffer-modified-p)) (not (verify-visited-file-modtime buf)))
        (nagent--revert-conversation))
      (goto-char (point-max)))
    (let ((w (display-buffer buf '(nil (inhibit-same-window . t)))))
      (when w
        (set-window-point w (with-current-buffer buf (point-max)))
        (select-window w)))
    buf))

;;;###autoload
(defun nagent-open-conversation ()
  "Open the current file's nagent conversation in another window, at its end.
Returns the conversation's path."
  (interactive)
  (nagent--with-user-errors
    (let* ((res (nagent-command "nagent.conversation.open" (nagent--uri-argument)
                                "opening conversation"))
           (path (plist-get res :path)))
      (unless path (error "nagent: the server returned no conversation path"))
      (nagent--show-conversation path)
      path)))

(defun nagent-clear-conversation (&optional no-confirm)
  "Archive the current file's conversation and start a fresh one.
Interactively asks first; NO-CONFIRM skips that.  Returns the archive path."
  (interactive)
  (nagent--with-user-errors
    (when (or no-confirm (not (called-interactively-p 'any))
              (y-or-n-p "Archive this file's nagent conversation and start afresh? "))
      (let ((archived (plist-get (nagent-command "nagent.conversation.clear"
                                                 (nagent--uri-argument) "clearing")
                                 :archivedPath)))
        (nagent--sync-conversations)
        (nagent--report "nagent: conversation archived to %s" archived)
        archived))))

;;;; Review of proposals

(defface nagent-review-accepted '((t :inherit success :weight bold))
  "Face of an accepted hunk's mark.")

(defface nagent-review-rejected '((t :inherit error :weight bold))
  "Face of a rejected hunk's mark.")

(defvar nagent-review-mode-map
  (let ((map (make-sparse-keymap)))
    (set-keymap-parent map (make-composed-keymap diff-mode-shared-map diff-mode-map))
    (define-key map (kbd "a") #'nagent-review-accept)
    (define-key map (kbd "r") #'nagent-review-reject)
    (define-key map (kbd "A") #'nagent-review-accept-all)
    (define-key map (kbd "R") #'nagent-review-reject-all)
    (define-key map (kbd "u") #'nagent-review-undecide)
    (define-key map (kbd "RET") #'nagent-review-visit)
    (define-key map (kbd "C-c C-c") #'nagent-review-finish)
    (define-key map (kbd "n") #'nagent-review-next-hunk)
    (define-key map (kbd "p") #'nagent-review-previous-hunk)
    (define-key map (kbd "e") #'nagent-review-ediff)
    (define-key map (kbd "g") #'nagent-review-refresh)
    (define-key map (kbd "q") #'quit-window)
    map)
  "Keymap of `nagent-review-mode'.")

(defvar-local nagent-review-id nil "Id of the proposal shown in this buffer.")
(defvar-local nagent-review--proposal nil "The proposal (nagent.review.show's result).")
(defvar-local nagent-review--hunks nil
  "List of (ID MARKER FILE LINE APPLIES NEW-LINES) in buffer order.
LINE: the hunk's first line (1-based) in the file's current text;
APPLIES: nil when its lines changed since (it can only be rejected);
NEW-LINES: how many lines it adds (negative: removes).")
(defvar-local nagent-review--decisions nil "Hash table hunk id -> `accept' or `reject'.")
(defvar-local nagent-review--marks nil "Hash table hunk id -> overlay showing the decision.")
(defvar-local nagent-review--source nil "A buffer whose connection carries the review commands.")
(defvar-local nagent-review-resolved nil "The apply/discard result once the proposal is resolved.")

(define-derived-mode nagent-review-mode diff-mode "nagent-review"
  "Review a nagent proposal hunk by hunk.
\\[nagent-review-accept] accepts the hunk at point, \\[nagent-review-reject] rejects it;
\\[nagent-review-accept-all] / \\[nagent-review-reject-all] decide all at once.  Once every hunk is
decided the decision is sent (\\[nagent-review-finish] sends it earlier, undecided
hunks rejected).  A hunk marked NO LONGER APPLIES (its lines changed
since) can only be rejected.  \\[nagent-review-visit] visits the source at the line at point,
\\[quit-window] quits (the proposal stays pending; \\[nagent-review] reopens it).

\\{nagent-review-mode-map}"
  (setq buffer-read-only t)
  ;; diff-mode binds its read-only keys through `minor-mode-overriding-map-alist';
  ;; ours come first.
  (setq-local minor-mode-overriding-map-alist
              (cons (cons 'buffer-read-only nagent-review-mode-map)
                    minor-mode-overriding-map-alist))
  (setq-local diff-update-on-the-fly nil)
  (setq nagent-review--decisions (make-hash-table :test #'equal)
        nagent-review--marks (make-hash-table :test #'equal)))

(defun nagent--review-file-path (file)
  "Absolute path of the proposal FILE (a plist with :uri and :path)."
  (let ((uri (plist-get file :uri)))
    (if uri (nagent--uri-to-path uri) (plist-get file :path))))

(defconst nagent-review-context-lines 3
  "Lines of the file shown before and after each hunk, as `git diff' does.")

(defface nagent-review-stale '((t :inherit warning :weight bold))
  "Face of the header of a hunk that no longer applies.")

(defun nagent--text-lines (text)
  "TEXT as (LINES . EOL): a vector of its lines and whether it ends with a newline."
  (if (or (null text) (string-empty-p text)) (cons [] t)
    (cons (vconcat (split-string (string-remove-suffix "\n" text) "\n"))
          (string-suffix-p "\n" text))))

(defun nagent--review-current-lines (path)
  "The current text of PATH as (LINES . EOL) (see `nagent--text-lines').
The text of the buffer visiting PATH when there is one, else the file's."
  (let ((buf (and path (find-buffer-visiting path))))
    (cond (buf (with-current-buffer buf
                 (save-restriction
                   (widen)
                   (nagent--text-lines (buffer-substring-no-properties (point-min) (point-max))))))
          ((and path (file-readable-p path) (not (file-directory-p path)))
           (with-temp-buffer
             (insert-file-contents path)
             (nagent--text-lines (buffer-string))))
          (t (cons [] t)))))

(defun nagent--hunk-span (start count)
  "A unified diff header's START,COUNT (1-based; \",1\" left out as git does)."
  (cond ((= count 1) (format "%d" (1+ start)))
        ((= count 0) (format "%d,0" start))
        (t (format "%d,%d" (1+ start) count))))

(defun nagent--review-insert-line (prefix text line)
  "Insert the diff line PREFIX TEXT, visiting LINE (1-based) of the file on RET."
  (insert (propertize (concat prefix text "\n") 'nagent-line line)))

(defun nagent--review-insert-hunk (file-path hunk lines eol from to offset)
  "Insert HUNK of FILE-PATH as `git diff' shows it; return its entry.
LINES and EOL are the file's current text (`nagent--review-current-lines');
FROM..TO bound the context lines (never another hunk's lines); OFFSET
is how many lines the file's earlier hunks add.  The entry is
\(ID MARKER FILE LINE APPLIES NEW-LINES), LINE the hunk's first line
\(1-based) in the current text."
  (let* ((id (plist-get hunk :id))
         (old (or (plist-get hunk :oldText) ""))
         (new (or (plist-get hunk :newText) ""))
         ;; false is :json-false under eglot, nil under lsp-mode; an older server sends none
         (applies (or (not (plist-member hunk :applies))
                      (nagent--true-p (plist-get hunk :applies))))
         (n (length lines))
         (start (min n (or (nagent--get hunk :range :start :line) 0)))
         (end (max start (min n (or (nagent--get hunk :range :end :line) start))))
         (old-lines (car (nagent--text-lines old)))
         (new-lines (car (nagent--text-lines new)))
         (before (max 0 (min start (max from (- start nagent-review-context-lines)))))
         (after (max end (min to (+ end nagent-review-context-lines))))
         (old-count (+ (- start before) (length old-lines) (- after end)))
         (new-count (+ (- start before) (length new-lines) (- after end)))
         (beg (point)))
    (insert (format "@@ -%s +%s @@ hunk %s" (nagent--hunk-span before old-count)
                    (nagent--hunk-span (+ before offset) new-count) id))
    (unless applies
      (insert (propertize "  NO LONGER APPLIES (its lines changed since; r rejects it)"
                          'face 'nagent-review-stale)))
    (insert "\n")
    (put-text-property beg (point) 'nagent-line (1+ start))
    (cl-loop for i from before below start
             do (nagent--review-insert-line " " (aref lines i) (1+ i)))
    (cl-loop for l across old-lines for k from 0
             do (nagent--review-insert-line "-" l (+ start 1 k)))
    (unless (or (string-empty-p old) (string-suffix-p "\n" old))
      (insert "\\ No newline at end of file\n"))
    (cl-loop for l across new-lines for k from 0
             do (nagent--review-insert-line
                 "+" l (+ start 1 (min k (max 0 (1- (length old-lines)))))))
    (unless (or (string-empty-p new) (string-suffix-p "\n" new))
      (insert "\\ No newline at end of file\n"))
    (cl-loop for i from end below after
             do (nagent--review-insert-line " " (aref lines i) (1+ i)))
    (when (and (> after end) (= after n) (not eol))
      (insert "\\ No newline at end of file\n"))
    (put-text-property beg (point) 'nagent-hunk id)
    (put-text-property beg (point) 'nagent-file file-path)
    (list id (copy-marker beg) file-path (1+ start) applies
          (- (length new-lines) (length old-lines)))))

(defun nagent--review-shown-path (file path)
  "The path of the proposal FILE (at PATH) relative to its project root."
  (let ((p (or (plist-get file :path) path)))
    (if (file-name-absolute-p p)
        (let ((root (nagent--repo-root p)))
          (if (file-in-directory-p p root) (file-relative-name p root) p))
      p)))

(defun nagent--review-render (proposal answer)
  "Fill the review buffer with PROPOSAL and the model's ANSWER.
Each hunk reads as `git diff' shows it: its line numbers in the file's
current text (its buffer, else the disk) and up to
`nagent-review-context-lines' lines around it."
  (let ((inhibit-read-only t)
        (files (nagent--list (plist-get proposal :files)))
        hunks)
    (erase-buffer)
    (insert (format "# nagent proposal %s\n" (plist-get proposal :id)))
    (insert (format "# Request: %s\n" (or (plist-get proposal :request) "")))
    (when-let ((conv (plist-get proposal :conversation)))
      (insert (format "# Conversation: %s\n"
                      (if (consp conv) (or (plist-get conv :path) conv) conv))))
    (insert "# a/r accept/reject the hunk at point, A/R all, C-c C-c send, RET visit, q quit\n")
    (when (and answer (not (string-empty-p (string-trim answer))))
      (insert "#\n# The model's answer:\n")
      (dolist (line (split-string (string-trim answer) "\n"))
        (insert "#   " line "\n")))
    (insert "\n")
    (dolist (file files)
      (let* ((path (nagent--review-file-path file))
             (rel (nagent--review-shown-path file path))
             (created (nagent--true-p (plist-get file :created)))
             (current (if created (cons [] t) (nagent--review-current-lines path)))
             (lines (car current))
             (file-hunks (sort (copy-sequence (nagent--list (plist-get file :hunks)))
                               (lambda (a b) (< (or (nagent--get a :range :start :line) 0)
                                                (or (nagent--get b :range :start :line) 0)))))
             (offset 0)
             (prev-end 0))
        (insert (format "diff --nagent a/%s b/%s%s\n" rel rel (if created "  (new file)" "")))
        (insert (if created "--- /dev/null\n" (format "--- a/%s\n" rel)))
        (insert (format "+++ b/%s\n" rel))
        (cl-loop for (hunk . rest) on file-hunks
                 do (let* ((next (if rest (or (nagent--get (car rest) :range :start :line) 0)
                                   (length lines)))
                           (entry (nagent--review-insert-hunk path hunk lines (cdr current)
                                                              prev-end next offset)))
                      (push entry hunks)
                      (setq offset (+ offset (nth 5 entry))
                            prev-end (max prev-end (or (nagent--get hunk :range :end :line) 0)))))))
    (setq nagent-review--hunks (nreverse hunks))
    (goto-char (point-min))
    (when nagent-review--hunks
      (goto-char (cadr (car nagent-review--hunks))))))

(defun nagent--review-source-buffer (proposal)
  "A buffer whose nagent connection can carry PROPOSAL's commands."
  (or (and (buffer-live-p nagent-review--source) nagent-review--source)
      (let ((file (car (nagent--list (plist-get proposal :files)))))
        (and file (find-file-noselect (nagent--review-file-path file))))))

;;;###autoload
(defun nagent-review (&optional id)
  "Review the pending nagent proposal ID in a `nagent-review-mode' buffer.
Interactively (or without ID): the proposal of the current file, the
only one pending, or the one you pick.  Returns the review buffer."
  (interactive)
  (nagent--with-user-errors
    (let* ((source (if (derived-mode-p 'nagent-review-mode)
                       nagent-review--source
                     (current-buffer)))
           (source (if (and (buffer-live-p source) (buffer-local-value 'buffer-file-name source))
                       source
                     (let ((conv-source (and (derived-mode-p 'nagent-conversation-mode)
                                             (nagent--conversation-source))))
                       (if conv-source (find-file-noselect conv-source)
                         (user-error "nagent: run nagent-review from a file's buffer")))))
           (id (or id (with-current-buffer source (nagent--pick-proposal))))
           (proposal (with-current-buffer source
                       (nagent-command "nagent.review.show" (list :id id) "reading proposal")))
           (answer (or (plist-get proposal :response) (gethash id nagent--proposal-answers)))
           (buf (get-buffer-create (format "*nagent-review %s*" id))))
      (with-current-buffer buf
        (nagent-review-mode)
        (setq nagent-review-id id
              nagent-review--proposal proposal
              nagent-review--source source)
        (nagent--review-render proposal answer))
      (pop-to-buffer buf)
      buf)))

(defun nagent--pick-proposal ()
  "Id of a pending proposal: this file's, the only one, or the one picked."
  (let* ((proposals (nagent--list (plist-get (nagent-command "nagent.review.list" nil
                                                             "listing proposals")
                                             :proposals)))
         (here (and buffer-file-name (file-truename buffer-file-name)))
         (mine (cl-remove-if-not
                (lambda (p)
                  (cl-some (lambda (f) (equal (file-truename
                                               (nagent--uri-to-path (plist-get f :uri)))
                                              here))
                           (nagent--list (plist-get p :files))))
                proposals)))
    (cond ((null proposals) (user-error "nagent: no proposal awaits review"))
          ((= (length mine) 1) (plist-get (car mine) :id))
          ((= (length proposals) 1) (plist-get (car proposals) :id))
          (t (let* ((table (mapcar (lambda (p)
                                     (cons (format "%s  %s  (%d file(s), %s)"
                                                   (plist-get p :id)
                                                   (truncate-string-to-width
                                                    (or (plist-get p :request) "") 50)
                                                   (length (plist-get p :files))
                                                   (or (plist-get p :createdAt) ""))
                                           (plist-get p :id)))
                                   (or mine proposals)))
                    (choice (completing-read "Review proposal: " table nil t)))
               (cdr (assoc choice table)))))))

(defun nagent--review-hunk-at-point ()
  "The entry of the hunk at point (see `nagent-review--hunks'), or nil."
  (let ((id (get-text-property (line-beginning-position) 'nagent-hunk)))
    (and id (assoc id nagent-review--hunks))))

(defun nagent--review-check-open ()
  "Signal an error when the proposal is already resolved."
  (when nagent-review-resolved
    (user-error "nagent: this proposal is resolved (q quits)")))

(defun nagent--review-mark (id decision)
  "Record DECISION (`accept', `reject' or nil) for hunk ID and show it."
  (let ((old (gethash id nagent-review--marks)))
    (when old (delete-overlay old)))
  (if (null decision)
      (remhash id nagent-review--decisions)
    (puthash id decision nagent-review--decisions)
    (let* ((entry (assoc id nagent-review--hunks))
           (pos (cadr entry))
           (eol (save-excursion (goto-char pos) (line-end-position)))
           (ov (make-overlay eol eol)))
      (overlay-put ov 'after-string
                   (if (eq decision 'accept)
                       (propertize "  [accepted]" 'face 'nagent-review-accepted)
                     (propertize "  [rejected]" 'face 'nagent-review-rejected)))
      (puthash id ov nagent-review--marks))))

(defun nagent--review-applies-p (entry)
  "Non-nil when the hunk ENTRY (see `nagent-review--hunks') still applies."
  (or (< (length entry) 5) (nth 4 entry)))

(defun nagent--review-decide (decision)
  "Mark the hunk at point with DECISION, go to the next; send when all are decided.
A hunk that no longer applies cannot be accepted."
  (nagent--review-check-open)
  (let ((entry (or (nagent--review-hunk-at-point)
                   (user-error "nagent: no hunk at point"))))
    (when (and (eq decision 'accept) (not (nagent--review-applies-p entry)))
      (user-error "nagent: hunk %s no longer applies (its lines changed since); r rejects it"
                  (car entry)))
    (nagent--review-mark (car entry) decision)
    (if (cl-every (lambda (h) (gethash (car h) nagent-review--decisions)) nagent-review--hunks)
        (nagent-review-finish)
      (nagent-review-next-hunk t))))

(defun nagent-review-accept ()
  "Accept the hunk at point."
  (interactive)
  (nagent--review-decide 'accept))

(defun nagent-review-reject ()
  "Reject the hunk at point."
  (interactive)
  (nagent--review-decide 'reject))

(defun nagent-review-undecide ()
  "Forget the decision about the hunk at point."
  (interactive)
  (nagent--review-check-open)
  (let ((entry (nagent--review-hunk-at-point)))
    (when entry (nagent--review-mark (car entry) nil))))

(defun nagent-review-accept-all ()
  "Accept every hunk and apply the proposal.
Hunks that no longer apply cannot be accepted: they are rejected."
  (interactive)
  (nagent--review-check-open)
  (let ((stale nil))
    (dolist (h nagent-review--hunks)
      (if (nagent--review-applies-p h)
          (nagent--review-mark (car h) 'accept)
        (push (car h) stale)
        (nagent--review-mark (car h) 'reject)))
    (when stale
      (message "nagent: %s no longer appl%s: rejected"
               (mapconcat #'identity (nreverse stale) ", ") (if (cdr stale) "y" "ies"))))
  (nagent-review-finish))

(defun nagent-review-reject-all ()
  "Reject every hunk (discard the proposal)."
  (interactive)
  (nagent--review-check-open)
  (dolist (h nagent-review--hunks) (nagent--review-mark (car h) 'reject))
  (nagent-review-finish))

(defun nagent-review-next-hunk (&optional undecided)
  "Go to the next hunk (with UNDECIDED, the next one not yet decided)."
  (interactive)
  (let* ((here (point))
         (next (cl-find-if (lambda (h)
                             (and (> (cadr h) here)
                                  (not (and undecided
                                            (gethash (car h) nagent-review--decisions)))))
                           nagent-review--hunks))
         (next (or next
                   (and undecided
                        (cl-find-if (lambda (h) (not (gethash (car h) nagent-review--decisions)))
                                    nagent-review--hunks)))))
    (if next (goto-char (cadr next))
      (unless undecided (message "nagent: no more hunks")))))

(defun nagent-review-previous-hunk ()
  "Go to the previous hunk."
  (interactive)
  (let* ((start (let ((e (nagent--review-hunk-at-point))) (if e (cadr e) (point))))
         (prev (cl-find-if (lambda (h) (< (cadr h) start)) (reverse nagent-review--hunks))))
    (when prev (goto-char (cadr prev)))))

(defun nagent-review-visit ()
  "Visit the source of the hunk at point.
On a context or removed line: that line of the file; on the hunk's
header or an added line: where the change goes."
  (interactive)
  (let* ((entry (or (nagent--review-hunk-at-point)
                    (user-error "nagent: no hunk at point")))
         (line (or (get-text-property (line-beginning-position) 'nagent-line)
                   (nth 3 entry))))
    (pop-to-buffer (find-file-noselect (nth 2 entry)))
    (widen)
    (goto-char (point-min))
    (forward-line (1- line))))

(defun nagent-review-refresh ()
  "Read the proposal again from the server."
  (interactive)
  (nagent--review-check-open)
  (let ((decisions nagent-review--decisions))
    (nagent-review nagent-review-id)
    (maphash (lambda (id d) (when (assoc id nagent-review--hunks) (nagent--review-mark id d)))
             decisions)))

(defun nagent-review-ediff ()
  "Compare the file of the hunk at point with its proposed text in ediff."
  (interactive)
  (let* ((entry (or (nagent--review-hunk-at-point) (user-error "nagent: no hunk at point")))
         (path (nth 2 entry))
         (file (cl-find path (nagent--list (plist-get nagent-review--proposal :files))
                        :key #'nagent--review-file-path :test #'equal))
         (current (find-file-noselect path))
         (proposed (get-buffer-create (format "*nagent proposed %s*" (file-name-nondirectory path)))))
    (with-current-buffer proposed
      (let ((inhibit-read-only t))
        (erase-buffer)
        (insert-buffer-substring current)
        ;; Apply the hunks bottom-up so earlier ranges stay valid.
        (dolist (hunk (sort (nagent--list (plist-get file :hunks))
                            (lambda (a b) (> (nagent--get a :range :start :line)
                                             (nagent--get b :range :start :line)))))
          (let ((s (nagent--get hunk :range :start)) (e (nagent--get hunk :range :end)))
            (goto-char (point-min)) (forward-line (plist-get s :line))
            (forward-char (min (plist-get s :character) (- (line-end-position) (point))))
            (let ((b (point)))
              (goto-char (point-min)) (forward-line (plist-get e :line))
              (forward-char (min (plist-get e :character) (- (line-end-position) (point))))
              (delete-region b (point))
              (insert (or (plist-get hunk :newText) "")))))))
    (ediff-buffers current proposed)))

(defun nagent--review-insert-outcome (text)
  "Show TEXT at the top of the review buffer."
  (let ((inhibit-read-only t))
    (save-excursion
      (goto-char (point-min))
      (insert (format "# %s\n" text)))))

(defun nagent-review-finish ()
  "Send the decisions: accepted hunks are applied, the others rejected.
Undecided hunks count as rejected (asked first when interactive)."
  (interactive)
  (nagent--review-check-open)
  (let* ((accepted (cl-loop for h in nagent-review--hunks
                            when (eq (gethash (car h) nagent-review--decisions) 'accept)
                            collect (car h)))
         (undecided (cl-count-if-not (lambda (h) (gethash (car h) nagent-review--decisions))
                                     nagent-review--hunks))
         (review-buf (current-buffer))
         (id nagent-review-id)
         (source (nagent--review-source-buffer nagent-review--proposal)))
    (when (and (> undecided 0) (called-interactively-p 'any)
               (not (y-or-n-p (format "Reject the %d undecided hunk(s)? " undecided))))
      (user-error "nagent: not sent"))
    (setq nagent-review-resolved 'sending)
    (let ((done (lambda (res)
                  (when (buffer-live-p review-buf)
                    (with-current-buffer review-buf
                      (setq nagent-review-resolved res)
                      (nagent--review-insert-outcome
                       (format "Resolved: %s edit(s) applied, rejected %s%s"
                               (or (plist-get res :edits) 0)
                               (json-encode (or (plist-get res :rejected) []))
                               (if (> (length (plist-get res :conflicts)) 0)
                                   (format ", CONFLICTS %s" (json-encode (plist-get res :conflicts)))
                                 "")))))
                  (message "nagent: review %s: %s edit(s) applied, %d hunk(s) rejected%s"
                           id (or (plist-get res :edits) 0) (length (plist-get res :rejected))
                           (if (> (length (plist-get res :conflicts)) 0)
                               (format ", %d in conflict" (length (plist-get res :conflicts)))
                             ""))))
          (failed (lambda (msg)
                    (when (buffer-live-p review-buf)
                      (with-current-buffer review-buf (setq nagent-review-resolved nil)))
                    (message "nagent: review %s failed: %s" id msg))))
      (with-current-buffer source
        (if accepted
            (nagent-command-async "nagent.review.apply"
                                  (if (= (length accepted) (length (buffer-local-value
                                                                    'nagent-review--hunks review-buf)))
                                      (list :id id)
                                    (list :id id :accept (vconcat accepted)))
                                  :label "applying review" :then done :else failed)
          (nagent-command-async "nagent.review.discard" (list :id id)
                                :label "discarding proposal" :then done :else failed))))))
(defun nagent--review-code-action (command argument)
  "Run the review COMMAND of a code action with ARGUMENT.
It accepts or rejects a proposed change.  Asynchronous: returns
the job.  When it ends the open conversations are reverted (the
server records the review in them, see `nagent--sync-conversations')
and an open review buffer of the proposal says what was decided."
  (let ((id (plist-get argument :id))
        (apply-p (equal command "nagent.review.apply")))
    (nagent-command-async
     command argument
     :label (if apply-p "applying the change" "rejecting the change")
     :then (lambda (res)
             (let ((pending (append (plist-get res :pending) nil))
                   (review (get-buffer (format "*nagent-review %s*" id))))
               (when (and review (not (buffer-local-value 'nagent-review-resolved review)))
                 (with-current-buffer review
                   (if pending
                       (nagent--review-insert-outcome
                        "Hunks were decided from a code action; g shows what is still pending")
                     (setq nagent-review-resolved res)
                     (nagent--review-insert-outcome "Resolved from a code action"))))
               (message "nagent: review %s: %s%s" id
                        (if apply-p
                            (format "%s edit(s) applied" (or (plist-get res :edits) 0))
                          (format "%d hunk(s) rejected" (length (plist-get res :rejected))))
                        (if (> (length (plist-get res :conflicts)) 0)
                            (format ", %d in conflict" (length (plist-get res :conflicts)))
                          "")))))))

;;;; History and co-edit buffers

(defvar nagent-list-mode-map
  (let ((map (make-sparse-keymap)))
    (set-keymap-parent map (make-composed-keymap button-buffer-map special-mode-map))
    (define-key map (kbd "n") #'forward-button)
    (define-key map (kbd "p") #'backward-button)
    map)
  "Keymap for `nagent-list-mode'.")

(defvar-local nagent--list-refresh nil
  "Function that refreshes the current nagent list buffer.")

(define-derived-mode nagent-list-mode special-mode "nagent"
  "Mode of the *nagent-history* and *nagent-coedits* buffers.
RET on a file opens it; RET on a commit shows it; \[revert-buffer] refreshes."
  (setq truncate-lines t)
  (setq-local revert-buffer-function
              (lambda (&rest _)
                (if nagent--list-refresh
                    (funcall nagent--list-refresh)
                  (user-error "nagent: nothing to refresh")))))

(defun nagent--resolve-path (path root)
  "Absolute file name of PATH, relative paths taken from ROOT."
  (if (file-name-absolute-p path) path
    (expand-file-name path (or root default-directory))))

(defun nagent--repo-root (file)
  "Git top level of FILE, or its directory."
  (let ((dir (locate-dominating-file file ".git")))
    (expand-file-name (or dir (file-name-directory file)))))

(defun nagent--insert-file-button (label path)
  "Insert LABEL as a button that visits PATH."
  (insert-text-button label
                      'nagent-path path
                      'help-echo (format "RET: visit %s" path)
                      'follow-link t
                      'action (lambda (b) (find-file-other-window (button-get b 'nagent-path)))))

(defun nagent--paths-at-commit (root hash file)
  "Names FILE had in commit HASH of ROOT (the new and the old name of a rename).
Follows renames with git log --follow; FILE itself when nothing is found."
  (let ((default-directory (file-name-as-directory root))
        names)
    (with-temp-buffer
      (when (eq 0 (process-file "git" nil t nil "--no-pager" "log" "--follow" "-M"
                                "--name-status" "--format=%x00%H" "--" file))
        (let ((records (split-string (buffer-string) "\0" t)))
          (dolist (rec records)
            (let ((lines (split-string rec "\n" t)))
              (when (equal (car lines) hash)
                (dolist (l (cdr lines))
                  (let ((fields (split-string l "\t")))
                    (setq names (append names (cdr fields)))))))))))
    (or (delete-dups names) (list file))))

(defun nagent--show-commit (root hash file &optional path)
  "Show commit HASH of the repository at ROOT, limited to FILE, in a buffer.
PATH, when known, is the name the file had in that commit; otherwise
it is found by following renames."
  (let ((buf (get-buffer-create "*nagent-commit*"))
        (default-directory (file-name-as-directory root))
        (paths (if path (list path) (nagent--paths-at-commit root hash file))))
    (with-current-buffer buf
      (let ((inhibit-read-only t))
        (erase-buffer)
        (apply #'process-file "git" nil t nil "--no-pager" "show" "-M" "--stat" "--patch"
               hash "--" paths)
        (goto-char (point-min))
        (diff-mode)
        (view-mode 1)))
    (display-buffer buf)))

(defun nagent--insert-coedit-rows (rows root)
  "Insert the co-edit ROWS, their paths relative to ROOT."
  (dolist (row (nagent--list rows))
    (let* ((path (plist-get row :path))
           (rate (plist-get row :rate)))
      (insert "  ")
      (nagent--insert-file-button (format "%-40s" path) (nagent--resolve-path path root))
      (insert (format " %4s  %5s  %s\n"
                      (or (plist-get row :count) "")
                      (if (numberp rate) (format "%d%%" (round (* 100 rate))) (or rate ""))
                      (or (plist-get row :level) ""))))))

(defun nagent--render-history (res file)
  "Fill the current buffer with the nagent.history result RES for FILE."
  (let* ((inhibit-read-only t)
         (root (or (plist-get res :repository) (nagent--repo-root file)))
         (commits (nagent--list (plist-get res :commits)))
         (rel (or (plist-get res :file) (file-relative-name file root))))
    (erase-buffer)
    (insert (propertize (format "History of %s" rel) 'face 'bold)
            (format "  (%d commit%s)\n" (length commits) (if (= (length commits) 1) "" "s")))
    (insert (format "Repository: %s\n\n" root))
    (insert (propertize "Authors\n" 'face 'bold))
    (dolist (a (nagent--list (plist-get res :authors)))
      (insert (format "  %-30s %-30s %s commit(s)\n"
                      (or (plist-get a :name) "") (format "<%s>" (or (plist-get a :email) ""))
                      (or (plist-get a :commits) 0))))
    (insert "\n" (propertize "Commits\n" 'face 'bold))
    (dolist (c commits)
      (let ((hash (or (plist-get c :hash) ""))
            (short (or (plist-get c :short) (substring (or (plist-get c :hash) "") 0 7))))
        (insert "  ")
        (insert-text-button short
                            'help-echo "RET: show this commit"
                            'follow-link t
                            'action (lambda (_b) (nagent--show-commit root hash rel (plist-get c :path))))
        (insert (format "  %-10s  %-20s  %s\n"
                        (substring (format "%s" (or (plist-get c :date) "")) 0
                                   (min 10 (length (format "%s" (or (plist-get c :date) "")))))
                        (truncate-string-to-width (format "%s" (or (plist-get c :author) "")) 20)
                        (or (plist-get c :summary) (plist-get c :subject) "")))))
    (let ((coedits (plist-get res :coedits)))
      (when (and coedits (> (length coedits) 0))
        (insert "\n" (propertize "Co-edited files\n" 'face 'bold))
        (nagent--insert-coedit-rows
         (if (and (listp coedits) (plist-get coedits :rows)) (plist-get coedits :rows) coedits)
         root)))
    (goto-char (point-min))))

;;;###autoload
(defun nagent-history (&optional max-commits)
  "Show the current file's history in the *nagent-history* buffer.
MAX-COMMITS (interactively: a numeric prefix argument) limits the
commits.  Returns the result plist."
  (interactive (list (and current-prefix-arg (prefix-numeric-value current-prefix-arg))))
  (nagent--with-user-errors (nagent--history max-commits)))

(defun nagent--history (max-commits)
  "Body of `nagent-history' (MAX-COMMITS)."
  (let* ((file (nagent--file-or-error))
         (source (current-buffer))
         (res (nagent-command "nagent.history"
                              (nagent--uri-argument
                               :maxCommits (or max-commits nagent-history-max-commits))
                              "reading history"))
         (buf (get-buffer-create "*nagent-history*")))
    (with-current-buffer buf
      (nagent-list-mode)
      (nagent--render-history res file)
      (setq nagent--list-refresh
            (lambda () (with-current-buffer source (nagent-history max-commits)))))
    (display-buffer buf)
    res))

;;;###autoload
(defun nagent-coedits (&optional limit)
  "Show the files that change together with this one in *nagent-coedits*.
LIMIT (interactively: a numeric prefix argument) caps the rows.  RET on
a row opens that file.  Returns the result plist."
  (interactive (list (and current-prefix-arg (prefix-numeric-value current-prefix-arg))))
  (nagent--with-user-errors (nagent--coedits limit)))

(defun nagent--coedits (limit)
  "Body of `nagent-coedits' (LIMIT)."
  (let* ((file (nagent--file-or-error))
         (root (nagent--repo-root file))
         (res (nagent-command "nagent.coedits"
                              (nagent--uri-argument :limit (or limit nagent-coedits-limit))
                              "reading co-edits"))
         (buf (get-buffer-create "*nagent-coedits*")))
    (with-current-buffer buf
      (nagent-list-mode)
      (setq nagent--list-refresh
            (let ((source (find-buffer-visiting file)))
              (lambda () (with-current-buffer source (nagent-coedits limit)))))
      (let ((inhibit-read-only t))
        (erase-buffer)
        (insert (propertize (format "Files co-edited with %s"
                                    (or (plist-get res :file) (file-relative-name file root)))
                            'face 'bold)
                (format "  (over %s commit(s))\n\n" (or (plist-get res :commits) "?")))
        (insert (format "  %-40s %5s  %5s  %s\n" "file" "count" "rate" "level"))
        (nagent--insert-coedit-rows (plist-get res :rows) root)
        (goto-char (point-min))
        (forward-line 3)))
    (display-buffer buf)
    res))

;;;; Split, patch, summarize, status, hover

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
     :then (lambda (res)
             (let ((buf (get-buffer-create "*nagent-summary*")))
               (with-current-buffer buf
                 (let ((inhibit-read-only t))
                   (erase-buffer)
                   (insert (or (plist-get res :summary) "") "\n")
                   (goto-char (point-min)))
                 (special-mode))
               (display-buffer buf))))))

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

(defun nagent-settings-changed ()
  "Tell the running nagent-lsp that `nagent-settings' changed."
  (interactive)
  (let ((conn (nagent--connection)))
    (pcase (car conn)
      ('eglot (jsonrpc-notify (cdr conn) :workspace/didChangeConfiguration
                              (list :settings (list :nagent (nagent--settings-json)))))
      ('lsp-mode (nagent-lsp-mode--notify-settings (cdr conn)))
      (_ (user-error "nagent: not connected")))))

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

;;;; Key map

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
