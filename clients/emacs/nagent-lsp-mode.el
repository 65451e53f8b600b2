;;; nagent-lsp-mode.el --- lsp-mode support for nagent  -*- lexical-binding: t -*-

;; Package-Requires: ((emacs "28.1") (eglot "1.9"))

;; This file is not part of GNU Emacs.

;;; Commentary:

;; Registers nagent-lsp as an lsp-mode *add-on* client, so it runs beside
;; the buffer's usual language server, and lets the `nagent-*' commands talk
;; through lsp-mode when the buffer uses it.  nagent.el loads this file
;; automatically once lsp-mode is loaded; nothing here needs lsp-mode at
;; compile time.

;;; Code:

(require 'cl-lib)
(require 'subr-x)
(require 'nagent)

(defvar lsp-mode)
(defvar lsp--buffer-workspaces)
(defvar lsp--cur-workspace)
(defvar lsp-client-settings)
(declare-function lsp "lsp-mode" (&optional arg))
(declare-function lsp-register-client "lsp-mode" (client))
(declare-function make-lsp-client "lsp-mode" (&rest args))
(declare-function lsp-stdio-connection "lsp-mode" (command &optional test-command))
(declare-function lsp-request-async "lsp-mode" (method params callback &rest args))
(declare-function lsp-cancel-request-by-token "lsp-mode" (cancel-token))
(declare-function lsp-notify "lsp-mode" (method params))
(declare-function lsp--buffer-uri "lsp-mode" ())
(declare-function lsp--region-to-range "lsp-mode" (start end))
(declare-function lsp--flush-delayed-changes "lsp-mode" ())
(declare-function lsp--workspace-client "lsp-mode" (workspace))
(declare-function lsp--workspace-status "lsp-mode" (workspace))
(declare-function lsp--workspace-work-done-tokens "lsp-mode" (workspace))
(declare-function lsp--client-server-id "lsp-mode" (client))
(declare-function lsp-configuration-section "lsp-mode" (section))
(declare-function lsp-request "lsp-mode" (method params &rest args))
(declare-function lsp--text-document-position-params "lsp-mode" (&optional identifier position))
(declare-function lsp-session "lsp-mode" ())
(declare-function lsp--session-workspaces "lsp-mode" (session))
(declare-function lsp--workspace-root "lsp-mode" (workspace))
(defvar lsp-language-id-configuration)
(declare-function lsp--client-capabilities "lsp-mode" (&optional custom-capabilities))
(declare-function nagent--stream-delta "nagent-answers" (params))

(defcustom nagent-lsp-mode-activation t
  "Where lsp-mode starts nagent-lsp (as an add-on beside other servers).
t: every file buffer that uses lsp-mode; nil: only when a nagent
command asks for it; a list: buffers in one of these major modes."
  :type '(choice (const :tag "Every lsp-mode file buffer" t)
                 (const :tag "Only on demand" nil)
                 (repeat :tag "These major modes" symbol))
  :group 'nagent)

(defvar nagent-lsp-mode--force nil
  "Non-nil while a nagent command starts the server on demand.")

(defun nagent-lsp-mode--activate-p (file-name mode)
  "Whether lsp-mode should start nagent-lsp for FILE-NAME in MODE."
  (and file-name
       (or nagent-lsp-mode--force
           (eq nagent-lsp-mode-activation t)
           (and (consp nagent-lsp-mode-activation)
                (memq mode nagent-lsp-mode-activation)))
       t))

(defun nagent-lsp-mode--flatten (plist prefix)
  "Flatten the settings PLIST into (\"PREFIX.key\" value boolean?) triples."
  (cl-loop for (k v) on plist by #'cddr
           for path = (concat prefix "." (string-remove-prefix ":" (format "%s" k)))
           if (and (consp v) (keywordp (car v)))
           append (nagent-lsp-mode--flatten v path)
           else collect (list path
                              (cond ((eq v t) t) ((eq v :json-false) nil) (t v))
                              (memq v '(t :json-false)))))

(defun nagent-lsp-mode--register-settings ()
  "Publish `nagent-settings' as lsp-mode's \"nagent\" configuration section."
  (let ((mine (nagent-lsp-mode--flatten nagent-settings "nagent")))
    (if (hash-table-p lsp-client-settings)
        ;; Newer lsp-mode: path -> (value boolean?).
        (progn
          (dolist (path (cl-loop for k being the hash-keys of lsp-client-settings
                                 when (string-prefix-p "nagent." k) collect k))
            (remhash path lsp-client-settings))
          (dolist (entry mine)
            (puthash (car entry) (cdr entry) lsp-client-settings)))
      (setq lsp-client-settings
            (append mine
                    (cl-remove-if (lambda (entry) (string-prefix-p "nagent." (car entry)))
                                  lsp-client-settings))))))

(defun nagent-lsp-mode--init-options ()
  "Initialization options for a new nagent-lsp workspace."
  (nagent-lsp-mode--register-settings)
  (nagent--settings-json))

(defun nagent-lsp-mode--server-id (workspace)
  "lsp-mode server id of WORKSPACE."
  (lsp--client-server-id (lsp--workspace-client workspace)))

(defun nagent-lsp-mode--find ()
  "The buffer's initialized nagent-lsp workspace, if any."
  (cl-find-if (lambda (ws) (and (eq (nagent-lsp-mode--server-id ws) 'nagent-lsp)
                                (eq (lsp--workspace-status ws) 'initialized)))
              lsp--buffer-workspaces))

(defun nagent-lsp-mode--workspace (&optional start)
  "Return the buffer's nagent-lsp workspace; with START, start it if needed."
  (or (nagent-lsp-mode--find)
      (when start
        (nagent--file-or-error)
        (let ((nagent-lsp-mode--force t))
          (lsp))
        (let ((deadline (+ (float-time) 30)))
          (while (and (not (nagent-lsp-mode--find)) (< (float-time) deadline))
            (accept-process-output nil 0.05)))
        (or (nagent-lsp-mode--find)
            (error "nagent: lsp-mode could not start %s"
                   (string-join nagent-server-command " "))))))

(defun nagent-lsp-mode--send (workspace command argument on-success on-error)
  "Send COMMAND with ARGUMENT to WORKSPACE only; return a cancel function."
  (let ((token (format "nagent-%s-%s" command (float-time)))
        (lsp--cur-workspace workspace))
    (lsp-request-async "workspace/executeCommand"
                       (list :command command :arguments (vector argument))
                       on-success
                       :mode 'detached
                       :error-handler on-error
                       :cancel-token token)
    (lambda () (lsp-cancel-request-by-token token))))

(defun nagent-lsp-mode--flush ()
  "Send lsp-mode's debounced didChange notifications now."
  (when (fboundp 'lsp--flush-delayed-changes)
    (lsp--flush-delayed-changes)))

(defun nagent-lsp-mode--uri ()
  "URI of the current buffer as lsp-mode spells it."
  (lsp--buffer-uri))

(defun nagent-lsp-mode--range (beg end)
  "LSP range of BEG..END as lsp-mode computes it."
  (lsp--region-to-range beg end))

(defun nagent-lsp-mode--progress-text (workspace)
  "Text of WORKSPACE's running work-done progress, or nil."
  (let (texts)
    (maphash (lambda (_token value)
               (let ((v (nagent--normalize value)))
                 (push (string-join (delq nil (list (plist-get v :title)
                                                    (plist-get v :message)))
                                    " ")
                       texts)))
             (lsp--workspace-work-done-tokens workspace))
    (and texts (string-join texts " | "))))

(defun nagent-lsp-mode--hover (workspace)
  "textDocument/hover of WORKSPACE at point."
  (let ((lsp--buffer-workspaces (list workspace)))
    (lsp-request "textDocument/hover" (lsp--text-document-position-params))))

(defun nagent-lsp-mode--managed-p ()
  "Non-nil when nagent-lsp's lsp-mode workspace manages the current buffer."
  (and (bound-and-true-p lsp-mode) (nagent-lsp-mode--find) t))

(defun nagent-lsp-mode--workspace-for (file)
  "A running nagent-lsp workspace whose root holds FILE, or nil."
  (cl-find-if (lambda (ws)
                (and (eq (nagent-lsp-mode--server-id ws) 'nagent-lsp)
                     (eq (lsp--workspace-status ws) 'initialized)
                     (string-prefix-p (file-name-as-directory
                                       (file-truename (lsp--workspace-root ws)))
                                      (file-truename file))))
              (lsp--session-workspaces (lsp-session))))

(declare-function lsp--workspace-server-capabilities "lsp-mode" (workspace))

(defun nagent-lsp-mode--server-commands (workspace)
  "The commands WORKSPACE's server offers."
  (append (nagent--get (nagent--normalize (lsp--workspace-server-capabilities workspace))
                       :executeCommandProvider :commands)
          nil))

(defun nagent-lsp-mode--all-workspaces ()
  "Every initialized nagent-lsp workspace of the lsp-mode session."
  (cl-remove-if-not (lambda (ws) (and (eq (nagent-lsp-mode--server-id ws) 'nagent-lsp)
                                      (eq (lsp--workspace-status ws) 'initialized)))
                    (lsp--session-workspaces (lsp-session))))

(defun nagent-lsp-mode--manage-conversation ()
  "Connect a conversation buffer to the running nagent-lsp workspace.
The server then reads the conversation's unsaved text."
  (when (and buffer-file-name
             (not (eq nagent-backend 'eglot))
             (not (bound-and-true-p lsp-mode))
             (nagent-lsp-mode--workspace-for buffer-file-name))
    (let ((nagent-lsp-mode--force t))
      (lsp))))

(defun nagent-lsp-mode--notify-settings (workspace)
  "Send the current `nagent-settings' to WORKSPACE."
  (nagent-lsp-mode--register-settings)
  (let ((lsp--cur-workspace workspace))
    (lsp-notify "workspace/didChangeConfiguration"
                (list :settings (list :nagent (nagent--settings-json))))))

(add-to-list 'lsp-language-id-configuration
             '(nagent-conversation-mode . "nagent-conversation"))
(add-hook 'nagent-conversation-mode-hook #'nagent-lsp-mode--manage-conversation)
(dolist (buf (buffer-list))
  (with-current-buffer buf
    (when (derived-mode-p 'nagent-conversation-mode)
      (nagent-lsp-mode--manage-conversation))))

(defun nagent-lsp-mode--run-action (action)
  "Run the nagent code action ACTION (an LSP Command) the client's way.
See `nagent-run-code-action-command'."
  (let ((action (nagent--normalize action)))
    (nagent-run-code-action-command (plist-get action :command)
                                    (elt (plist-get action :arguments) 0))))

(defun nagent-lsp-mode--action-handlers ()
  "lsp-mode action handlers: nagent's code-action commands run in Emacs."
  (let ((handlers (make-hash-table :test #'equal)))
    (dolist (command nagent--code-action-commands handlers)
      (puthash command #'nagent-lsp-mode--run-action handlers))))

;; lsp-mode 8 sends `window.showMessage: null' whatever a client adds (its own
;; `window' entry comes first), so the server would never ask about a shell
;; command.  nagent's client (the one whose custom capabilities name
;; `experimental.nagent') says it answers window/showMessageRequest.
(defun nagent-lsp-mode--client-capabilities (caps &optional custom)
  "CAPS (lsp-mode's client capabilities) with window.showMessage for nagent.
CUSTOM is the client's custom capabilities; others' are left alone."
  (if (not (assq 'nagent (alist-get 'experimental custom)))
      caps
    (mapcar (lambda (entry)
              (if (eq (car entry) 'window)
                  (cons 'window
                        (cons '(showMessage . ((messageActionItem
                                                . ((additionalPropertiesSupport . :json-false)))))
                              (assq-delete-all 'showMessage (copy-sequence (cdr entry)))))
                entry))
            caps)))

(defun nagent-lsp-mode--capabilities-advice (orig &optional custom)
  "Around advice of `lsp--client-capabilities' (ORIG, CUSTOM)."
  (nagent-lsp-mode--client-capabilities (funcall orig custom) custom))

(advice-add 'lsp--client-capabilities :around #'nagent-lsp-mode--capabilities-advice)

(defun nagent-lsp-mode--request-handlers ()
  "lsp-mode request handlers: nagent's questions (shell commands, permissions)."
  (let ((handlers (make-hash-table :test #'equal)))
    (puthash "window/showMessageRequest"
             (lambda (_workspace params)
               (let* ((p (nagent--normalize params))
                      (answer (nagent--answer-message-request
                               (plist-get p :type) (plist-get p :message) (plist-get p :actions))))
                 (if (eq answer :null) nil answer)))
             handlers)
    handlers))

(defun nagent-lsp-mode--notification-handlers ()
  "lsp-mode notification handlers: the answer as it is written."
  (let ((handlers (make-hash-table :test #'equal)))
    (puthash "nagent/stream"
             (lambda (_workspace params) (nagent--stream-delta (nagent--normalize params)))
             handlers)
    handlers))

(lsp-register-client
 (make-lsp-client
  :new-connection (lsp-stdio-connection (lambda () nagent-server-command))
  :activation-fn #'nagent-lsp-mode--activate-p
  :add-on? t
  :priority -1
  :initialization-options #'nagent-lsp-mode--init-options
  ;; A nagent plugin: it asks for "edit selection"'s request and shows results itself.
  ;; (`nagent--plugin-capabilities' as lsp-mode's alist.)
  :custom-capabilities '((experimental . ((nagent . ((requestInput . t) (stream . t))))))
  :action-handlers (nagent-lsp-mode--action-handlers)
  :request-handlers (nagent-lsp-mode--request-handlers)
  :notification-handlers (nagent-lsp-mode--notification-handlers)
  :server-id 'nagent-lsp))

(provide 'nagent-lsp-mode)
;;; nagent-lsp-mode.el ends here
