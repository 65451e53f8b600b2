;;; nagent-eglot.el --- The eglot back end of nagent  -*- lexical-binding: t -*-

;; This file is not part of GNU Emacs.

;;; Commentary:

;; Part of nagent.el: the eglot connection class, its client capabilities
;; and the server requests and notifications it answers.

;;; Code:

(require 'cl-lib)
(require 'subr-x)
(require 'seq)
(require 'jsonrpc)
(require 'eglot)
(require 'nagent-core)


(declare-function nagent-run-code-action-command "nagent-run" (command argument))
(declare-function nagent--stream-delta "nagent-answers" (params))
(defvar nagent-conversation-mode-map)
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

(defconst nagent--plugin-capabilities '(:requestInput t :stream t)
  "What this client tells nagent-lsp in `experimental.nagent'.
requestInput: it asks the user for the request of the code action
\"nagent: edit selection\"; the key itself says it shows the results
of nagent's commands (history, split, patch, instructions, recipes)
its own way, so the server offers them unwrapped.  stream: it shows
the answer as it is written (`nagent/stream' notifications).")

(defconst nagent--show-message-capability
  '(:messageActionItem (:additionalPropertiesSupport :json-false))
  "`window.showMessage' of the client capabilities: the client answers
window/showMessageRequest (the server asks about shell commands only then).")

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
    (setq window (plist-put window :workDoneProgress t))
    (setq caps (plist-put caps :window
                          (plist-put window :showMessage nagent--show-message-capability)))
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

(cl-defmethod eglot-handle-notification
  ((_server nagent-eglot-server) (_method (eql nagent/stream)) &rest params)
  "Show the answer as it is written (PARAMS: token, uri, delta, turn, done)."
  (nagent--stream-delta params))

(cl-defmethod eglot-handle-request
  ((server nagent-eglot-server) (_method (eql window/showMessageRequest))
   &key type message actions)
  "Ask nagent's question MESSAGE (TYPE, ACTIONS) with `nagent-ask-function'."
  (nagent--eglot-holding-output
   server (lambda () (nagent--answer-message-request type message actions))))

;; A question is asked inside the process filter that read the request (eglot
;; answers with the handler's value), and the minibuffer runs process filters
;; while the user thinks: jsonrpc 1.0.14 (Emacs 28) must not be entered again
;; there (see `nagent--outside-filter').  So what the server sends meanwhile
;; is held and handed to the filter once every question is answered and the
;; filter has returned; then the callbacks that waited for the questions run.
(defun nagent--eglot-holding-output (server fn)
  "Call FN while SERVER's output is held back; pass it on afterwards."
  (let ((proc (jsonrpc--process server)))
    (unless (process-get proc 'nagent-filter)
      (process-put proc 'nagent-filter (process-filter proc))
      (process-put proc 'nagent-held nil)
      (set-process-filter proc (lambda (p string)
                                 (process-put p 'nagent-held
                                              (cons string (process-get p 'nagent-held))))))
    (cl-incf nagent--asking)
    (unwind-protect
        (funcall fn)
      (cl-decf nagent--asking)
      (run-at-time 0 nil #'nagent--eglot-release-output proc))))

(defun nagent--eglot-release-output (proc)
  "Give PROC's held output to its own filter, unless a question is still open."
  (when (zerop nagent--asking)
    (let ((filter (process-get proc 'nagent-filter))
          (held (nreverse (process-get proc 'nagent-held))))
      (when filter
        (process-put proc 'nagent-filter nil)
        (process-put proc 'nagent-held nil)
        (set-process-filter proc filter)
        (when held
          (funcall filter proc (apply #'concat held)))))
    (nagent--run-after-asking)))

(defun nagent--eglot-held-output (server)
  "The output of SERVER held while a question is open (newest first)."
  (process-get (jsonrpc--process server) 'nagent-held))

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


(provide 'nagent-eglot)
;;; nagent-eglot.el ends here
