;;; nagent.el --- Per-file LLM editing through the nagent-lsp language server  -*- lexical-binding: t -*-

;; Version: 0.1.0
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
;; Commands (all callable from Lisp with arguments):
;;
;;   `nagent-edit'                 edit the buffer (or the region) with a request
;;   `nagent-open-conversation'    open the file's conversation
;;   `nagent-history'              *nagent-history*: commits, authors, co-edits
;;   `nagent-coedits'              *nagent-coedits*: files that change together
;;   `nagent-split', `nagent-patch', `nagent-summarize',
;;   `nagent-clear-conversation', `nagent-status'
;;
;; Hover (eldoc) shows the file's history card with no extra set-up.

;;; Code:

(require 'cl-lib)
(require 'subr-x)
(require 'jsonrpc)
(require 'eglot)
(require 'button)

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
  "Seconds to wait for a nagent command before giving up (nil: no limit).
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
  "When non-nil, ask before applying an edit sent by the server (eglot).
nagent-lsp has its own `confirmEdits' setting; this only controls
eglot's `eglot-confirm-server-initiated-edits' while a nagent command runs."
  :type 'boolean)

(defcustom nagent-history-max-commits nil
  "Maximum number of commits `nagent-history' asks for (nil: server default)."
  :type '(choice (const :tag "Server default" nil) natnum))

(defcustom nagent-coedits-limit nil
  "Maximum number of rows `nagent-coedits' asks for (nil: server default)."
  :type '(choice (const :tag "Server default" nil) natnum))

(defvar nagent-request-history nil
  "Minibuffer history of `nagent-edit' requests.")

(defvar-local nagent-last-index-path nil
  "Index path returned by the last `nagent-split' of this buffer.")

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

;;;; Progress shown in the echo area

(defvar nagent--progress-text nil
  "Latest `$/progress' text received while a command waits.")

(defvar nagent--progress-title nil
  "Title of the running `$/progress' (reports only carry a message).")

(defun nagent--progress-update (value)
  "Record the `$/progress' VALUE (a plist) for the echo area."
  (let* ((value (nagent--normalize value))
         (kind (plist-get value :kind))
         (message (plist-get value :message))
         (pct (plist-get value :percentage)))
    (when (equal kind "begin")
      (setq nagent--progress-title (plist-get value :title)))
    (setq nagent--progress-text
          (if (equal kind "end")
              nil
            (string-join
             (delq nil (list nagent--progress-title
                             message
                             (and (numberp pct) (format "%d%%" pct))))
             " ")))))

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

(cl-defmethod eglot-client-capabilities :around ((_server nagent-eglot-server))
  "Tell nagent-lsp that this client shows work-done progress."
  (let* ((caps (cl-call-next-method))
         (window (copy-sequence (plist-get caps :window))))
    (plist-put caps :window (plist-put window :workDoneProgress t))))

(cl-defmethod eglot-handle-request
  ((_server nagent-eglot-server) (_method (eql window/workDoneProgress/create))
   &key _token)
  "Accept a progress token."
  nil)

(cl-defmethod eglot-handle-notification
  ((_server nagent-eglot-server) (_method (eql $/progress)) &key _token value)
  "Show nagent's progress in the echo area while a command waits."
  (nagent--progress-update value))

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

(defun nagent--eglot-server (&optional start)
  "Return the buffer's eglot connection to nagent-lsp.
With START, connect now when there is none."
  (let ((server (eglot-current-server)))
    (cond
     ((and server (jsonrpc-running-p server) (nagent--eglot-nagent-p server)) server)
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
        (eglot (list major-mode) project (quote nagent-eglot-server)
               (copy-sequence nagent-server-command) language-id)
        (or (eglot-current-server)
            (error "nagent: could not connect to %s"
                   (string-join nagent-server-command " "))))))))

(defun nagent--eglot-flush ()
  "Send eglot's pending didChange now (eglot debounces it on an idle timer)."
  (when (and (bound-and-true-p eglot--managed-mode)
             (fboundp 'eglot--signal-textDocument/didChange))
    (eglot--signal-textDocument/didChange)))

(defun nagent--eglot-send (server command argument on-success on-error)
  "Send COMMAND with ARGUMENT to eglot SERVER asynchronously.
Return a function that cancels the request."
  (let ((id-and-timer
         (jsonrpc--async-request-1
          server :workspace/executeCommand
          (list :command command :arguments (vector argument))
          :success-fn on-success
          :error-fn (lambda (err) (funcall on-error err))
          :timeout nil)))
    (lambda ()
      (when-let ((id (car id-and-timer)))
        (remhash id (jsonrpc--request-continuations server))
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

(define-error 'nagent-error "nagent command failed")

(defun nagent--error-message (err)
  "Human-readable text of the JSON-RPC error ERR."
  (let ((err (nagent--normalize err)))
    (cond ((stringp err) err)
          ((plist-get err :message))
          (t (format "%S" err)))))

(defun nagent-command (command &optional argument label)
  "Run the nagent-lsp COMMAND with the JSON object ARGUMENT and wait for it.
Starts the connection when needed, flushes pending buffer changes
first, shows LABEL and progress in the echo area while waiting, and
returns the result as a plist.  \\[keyboard-quit] cancels the request.
Signals `nagent-error' with the server's message on failure."
  (let* ((conn (or (nagent--connection t)
                   (error "nagent: no connection to nagent-lsp")))
         (backend (car conn))
         (server (cdr conn))
         (argument (or argument (make-hash-table)))
         (label (or label command))
         (buffer (current-buffer))
         (start (float-time))
         (done nil) (shown nil) result failure cancel)
    (if (eq backend 'lsp-mode) (nagent-lsp-mode--flush) (nagent--eglot-flush))
    (setq nagent--progress-text nil)
    (let ((eglot-confirm-server-initiated-edits (and nagent-confirm-edits 'confirm))
          (on-success (lambda (res) (setq result res done t)))
          (on-error (lambda (err) (setq failure err done t))))
      (setq cancel
            (if (eq backend 'lsp-mode)
                (nagent-lsp-mode--send server command argument on-success on-error)
              (nagent--eglot-send server command argument on-success on-error)))
      (let ((completed nil))
        (unwind-protect
            (progn
              (while (not done)
                (let ((elapsed (- (float-time) start)))
                  (when (and nagent-request-timeout (> elapsed nagent-request-timeout))
                    (setq failure (format "timed out after %ds" nagent-request-timeout)
                          done t))
                  (unless done
                    (let ((progress (if (eq backend 'lsp-mode)
                                        (with-current-buffer buffer
                                          (nagent-lsp-mode--progress-text server))
                                      nagent--progress-text)))
                      (when (> elapsed 0.5)
                        (let ((text (format "nagent: %s… %ds%s" label (round elapsed)
                                            (if progress
                                                (concat " — " (string-remove-prefix
                                                               "nagent: " progress))
                                              ""))))
                          (unless (equal text shown)
                            (setq shown text)
                            (let ((message-log-max nil))
                              (message "%s" text))))))
                    (accept-process-output nil 0.1))))
              (setq completed t))
          (unless completed
            ;; C-g or an error while waiting: tell the server to stop.
            (funcall cancel)
            (message "nagent: %s cancelled" label))))
      (when (and failure (stringp failure))
        (funcall cancel)))
    (setq nagent--progress-text nil)
    (if failure
        (signal 'nagent-error (list (format "nagent: %s: %s" command
                                            (nagent--error-message failure))))
      (nagent--normalize result))))

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

;;;; Commands

;;;###autoload
(defun nagent-edit (request &optional beg end)
  "Ask nagent to edit the current buffer according to REQUEST.
With BEG and END (interactively: the active region), the request is
about that range.  Waits for the model, applies the edit the server
sends, and returns the result plist (:applied :response :edits
:conversation :tokens ...)."
  (interactive
   (let ((region (use-region-p)))
     (list (read-string (if region "nagent edit region: " "nagent edit: ")
                        nil 'nagent-request-history)
           (and region (region-beginning))
           (and region (region-end)))))
  (when (string-empty-p (string-trim request))
    (user-error "nagent: empty request"))
  (let* ((backend (car (nagent--connection t)))
         (arg (list :uri (nagent--uri backend) :request request)))
    (when (and beg end)
      (setq arg (append arg (list :range (nagent--range (min beg end) (max beg end) backend)))))
    (let* ((res (nagent-command "nagent.edit" arg "editing"))
           (applied (nagent--true-p (plist-get res :applied)))
           (tokens (plist-get res :tokens))
           (response (or (plist-get res :response) "")))
      (nagent--report "nagent: %s%s (%s turn(s), %s in / %s out tokens)%s"
                      (if applied
                          (format "applied %s edit(s)" (or (plist-get res :edits) 0))
                        "nothing applied")
                      (if (and (not applied) (plist-get res :reason))
                          (format ": %s" (plist-get res :reason))
                        "")
                      (or (plist-get tokens :turns) "?")
                      (or (plist-get tokens :input) "?")
                      (or (plist-get tokens :output) "?")
                      (if (string-empty-p response) ""
                        (concat "\n" (string-trim response))))
      res)))

;;;###autoload
(defun nagent-open-conversation ()
  "Open the current file's nagent conversation in another window.
Returns the conversation's path."
  (interactive)
  (let* ((res (nagent-command "nagent.conversation.open" (nagent--uri-argument)
                              "opening conversation"))
         (path (plist-get res :path)))
    (unless path (error "nagent: the server returned no conversation path"))
    (find-file-other-window path)
    path))

(defun nagent-clear-conversation (&optional no-confirm)
  "Archive the current file's conversation and start a fresh one.
Interactively asks first; NO-CONFIRM skips that.  Returns the archive path."
  (interactive)
  (when (or no-confirm (not (called-interactively-p 'any))
            (y-or-n-p "Archive this file's nagent conversation and start afresh? "))
    (let ((archived (plist-get (nagent-command "nagent.conversation.clear"
                                               (nagent--uri-argument) "clearing")
                               :archivedPath)))
      (nagent--report "nagent: conversation archived to %s" archived)
      archived)))

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

(defun nagent--show-commit (root hash file)
  "Show commit HASH of the repository at ROOT (limited to FILE) in a buffer."
  (let ((buf (get-buffer-create "*nagent-commit*"))
        (default-directory (file-name-as-directory root)))
    (with-current-buffer buf
      (let ((inhibit-read-only t))
        (erase-buffer)
        (process-file "git" nil t nil "--no-pager" "show" "--stat" "--patch" hash "--" file)
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
                            'action (lambda (_b) (nagent--show-commit root hash rel)))
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

;;;; Split, patch, summarize, status

;;;###autoload
(defun nagent-split (&optional target-bytes)
  "Split the current file into indexed segments.
TARGET-BYTES (interactively: a numeric prefix argument) sets the
segment size.  Returns the result plist; its :indexPath is remembered
for `nagent-patch'."
  (interactive (list (and current-prefix-arg (prefix-numeric-value current-prefix-arg))))
  (let* ((res (nagent-command "nagent.split"
                              (nagent--uri-argument :targetBytes target-bytes)
                              "splitting"))
         (segments (nagent--list (plist-get res :segments))))
    (setq nagent-last-index-path (plist-get res :indexPath))
    (nagent--report "nagent: split into %d segment(s) (%s); index %s"
                    (length segments) (or (plist-get res :splitType) "?")
                    (plist-get res :indexPath))
    res))

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
  (let* ((arg (list :indexPath (expand-file-name index-path))))
    (when force (setq arg (append arg (list :force t))))
    (when dry-run (setq arg (append arg (list :dryRun t))))
    (let ((res (nagent-command "nagent.patch" arg "patching")))
      (nagent--report "nagent: patch %s%s"
                      (if (nagent--true-p (plist-get res :changed)) "changed the file" "found no change")
                      (if (nagent--true-p (plist-get res :applied)) ", applied" ""))
      res)))

;;;###autoload
(defun nagent-summarize ()
  "Show nagent's summary of the current file in *nagent-summary*.
Returns the summary text."
  (interactive)
  (let* ((res (nagent-command "nagent.summarize" (nagent--uri-argument) "summarizing"))
         (summary (or (plist-get res :summary) ""))
         (buf (get-buffer-create "*nagent-summary*")))
    (with-current-buffer buf
      (let ((inhibit-read-only t))
        (erase-buffer)
        (insert summary "\n")
        (goto-char (point-min)))
      (special-mode))
    (display-buffer buf)
    summary))

;;;###autoload
(defun nagent-status ()
  "Show nagent-lsp's status (version, state root, model, settings sources).
Returns the status plist."
  (interactive)
  (let ((res (nagent-command "nagent.status" (make-hash-table) "status")))
    (nagent--report "nagent %s — model %s%s, state %s"
                    (or (plist-get res :version) "?")
                    (or (plist-get res :model) "none")
                    (if (nagent--true-p (plist-get res :modelConfigured)) "" " (not configured)")
                    (or (plist-get res :stateRoot) "?"))
    res))

(defun nagent-settings-changed ()
  "Tell the running nagent-lsp that `nagent-settings' changed."
  (interactive)
  (let ((conn (nagent--connection)))
    (pcase (car conn)
      ('eglot (jsonrpc-notify (cdr conn) :workspace/didChangeConfiguration
                              (list :settings (list :nagent (nagent--settings-json)))))
      ('lsp-mode (nagent-lsp-mode--notify-settings (cdr conn)))
      (_ (user-error "nagent: not connected")))))

;;;; Key map

(defvar nagent-command-map
  (let ((map (make-sparse-keymap)))
    (define-key map (kbd "e") #'nagent-edit)
    (define-key map (kbd "c") #'nagent-open-conversation)
    (define-key map (kbd "k") #'nagent-clear-conversation)
    (define-key map (kbd "h") #'nagent-history)
    (define-key map (kbd "o") #'nagent-coedits)
    (define-key map (kbd "s") #'nagent-split)
    (define-key map (kbd "p") #'nagent-patch)
    (define-key map (kbd "S") #'nagent-summarize)
    (define-key map (kbd "?") #'nagent-status)
    map)
  "Prefix map of the nagent commands; bind it, e.g. to \`C-c n'.")
(fset 'nagent-command-map nagent-command-map)

;;;; lsp-mode support

(provide 'nagent)

;; After `provide', so that nagent-lsp-mode's (require 'nagent) is satisfied
;; even when lsp-mode was loaded first.
(with-eval-after-load 'lsp-mode
  (require 'nagent-lsp-mode nil t))
;;; nagent.el ends here
