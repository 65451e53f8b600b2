;;; nagent-chat.el --- The conversation view of nagent  -*- lexical-binding: t -*-

;; This file is not part of GNU Emacs.

;;; Commentary:

;; Part of nagent.el: conversation files open in `nagent-conversation-mode';
;; the conversation is the chat: type at its end and send.

;;; Code:

(require 'cl-lib)
(require 'subr-x)
(require 'json)
(require 'nagent-core)
(require 'nagent-connection)
(require 'nagent-run)


(declare-function nagent-review "nagent-review" (&optional id))
(declare-function nagent-lsp-mode--uri "nagent-lsp-mode" ())
(require 'button)
;;;; Conversations

(defconst nagent-conversation-file-regexp
  "/\\.nagent/conversations/\\(?:saved/\\)?[^/.]+\\'"
  "File names of nagent conversations (and their archives and saves).")

;;;###autoload
(add-to-list 'auto-mode-alist
             (cons "/\\.nagent/conversations/\\(?:saved/\\)?[^/.]+\\'" 'nagent-conversation-mode))

(defface nagent-conversation-tag '((t :inherit font-lock-keyword-face))
  "Face of the block tags of a conversation."
  :group 'nagent)

(defface nagent-conversation-user-tag '((t :inherit font-lock-function-name-face :weight bold))
  "Face of the <user-prompt> tags."
  :group 'nagent)

(defface nagent-conversation-agent-tag '((t :inherit font-lock-type-face :weight bold))
  "Face of the <agent-response> tags."
  :group 'nagent)

(defface nagent-conversation-status '((t :inherit shadow))
  "Face of turn-status telemetry lines."
  :group 'nagent)

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
    (define-key map (kbd "C-c @") #'nagent-insert-mention)
    (define-key map (kbd "C-c C-s") #'nagent-conversation-save)
    (define-key map (kbd "C-c C-l") #'nagent-conversation-load)
    (define-key map (kbd "C-c C-k") #'nagent-conversation-compact)
    (define-key map (kbd "C-c C-m") #'nagent-conversation-summarize)
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
The conversation is the chat: type the next request at its end (several
lines if you like; \\[nagent-insert-mention] mentions a file) and
\\[nagent-conversation-send] sends it; the answer streams in below.

\\{nagent-conversation-mode-map}"
  (setq-local font-lock-defaults '(nagent-conversation-font-lock-keywords t))
  (add-to-invisibility-spec '(nagent-context . t))
  (setq-local outline-regexp "<\\(?:initial_context\\|user-prompt\\|agent-response\\|nagent-[-a-z]+\\|system\\)")
  (setq-local require-final-newline nil)
  (setq-local header-line-format '(:eval (nagent-conversation-hint)))
  (nagent-conversation-fold-context)
  (nagent--conversation-note-turns)
  (add-hook 'after-revert-hook #'nagent-conversation-fold-context nil t)
  (add-hook 'after-revert-hook #'nagent--conversation-note-turns nil t)
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

;;;; The conversation is the chat

(defvar-local nagent--conversation-has-turns nil
  "Non-nil when the conversation holds a request already.")

(defun nagent--conversation-note-turns ()
  "Record whether the conversation holds a request yet (for the hint)."
  (setq nagent--conversation-has-turns
        (save-excursion (goto-char (point-min)) (and (search-forward "<user-prompt>" nil t) t))))

(defun nagent-conversation-hint ()
  "The header line of a conversation: how to send, what keys there are."
  (substitute-command-keys
   (if nagent--conversation-has-turns
       (concat " Type the next request at the end · \\<nagent-conversation-mode-map>\\[nagent-conversation-send] sends it"
               " · \\[nagent-insert-mention] mentions a file · \\[nagent-conversation-toggle-context] context")
     (concat " No request yet: type one at the end of this buffer and press"
             " \\<nagent-conversation-mode-map>\\[nagent-conversation-send] to send it"
             " (\\[nagent-insert-mention] mentions a file)"))))

(defvar-local nagent--conversation-source-cache nil
  "(FILE . SOURCE): the source of this conversation, read once.")

(defun nagent--conversation-source-cached ()
  "`nagent--conversation-source', remembered per buffer."
  (if (and nagent--conversation-source-cache
           (equal (car nagent--conversation-source-cache) buffer-file-name))
      (cdr nagent--conversation-source-cache)
    (let ((source (ignore-errors (nagent--conversation-source))))
      (when source
        (setq nagent--conversation-source-cache (cons buffer-file-name source)))
      source)))

(defun nagent--source-of-conversation-or-error ()
  "The source file of the current conversation, or a `user-error'."
  (or (nagent--conversation-source)
      (user-error "nagent: no file is recorded for this conversation")))

(defun nagent--path-uri (path backend)
  "The URI of PATH as BACKEND spells it."
  (with-temp-buffer
    (setq buffer-file-name path)
    (unwind-protect (if (eq backend 'lsp-mode) (nagent-lsp-mode--uri)
                      (eglot--path-to-uri path))
      (setq buffer-file-name nil))))

(defun nagent--conversation-add-draft (text)
  "Put TEXT at the end of the conversation as the draft (its own lines)."
  (goto-char (point-max))
  (unless (or (bobp) (eq (char-before) ?\n)) (insert "\n"))
  (insert (string-trim-right text) "\n"))

;;;###autoload
(defun nagent-conversation-send (&optional request agent profile)
  "Send the request typed at the end of the current conversation.
The conversation is the chat: what you typed after its last record
\(several lines if you like) is the request; the server takes it out of
the draft, runs it on the conversation's file as `nagent-edit' does,
and the reply streams into this buffer.  REQUEST (from Lisp) is added
to the end as the draft first.  AGENT and PROFILE (interactively: a
prefix argument picks them, as in `nagent-edit') are for this one
request.  What you changed in this buffer, saved or not, is what the
run reads.  Returns the request's job."
  (interactive
   (let ((source (nagent--source-of-conversation-or-error)))
     (if current-prefix-arg
         (let ((picked (with-current-buffer (find-file-noselect source)
                         (nagent-read-agent-or-profile))))
           (list nil (car picked) (cdr picked)))
       (list nil nil nil))))
  (let* ((conversation (current-buffer))
         (conv-file (nagent--file-or-error))
         (source (nagent--source-of-conversation-or-error))
         (source-buf (find-file-noselect source)))
    (unless (derived-mode-p 'nagent-conversation-mode)
      (user-error "nagent: not a conversation buffer"))
    (if (not (with-current-buffer source-buf (nagent-server-has-command-p "nagent.conversation.send")))
        ;; An older server: the request comes from the minibuffer.
        (with-current-buffer source-buf
          (nagent-edit (or request (nagent--read-request "nagent next request: ")) nil nil agent profile))
      (when request (nagent--conversation-add-draft request))
      (with-current-buffer source-buf
        (let* ((backend (car (nagent--connection t)))
               (arg (list :uri (nagent--path-uri conv-file backend)))
               (label (format "editing %s" (file-name-nondirectory source))))
          (when agent (setq arg (append arg (list :agent agent))))
          (when profile (setq arg (append arg (list :profile profile))))
          (prog1 (nagent-command-async
                  "nagent.conversation.send" arg
                  :label label
                  :then (lambda (res)
                          (when (buffer-live-p conversation)
                            (with-current-buffer conversation
                              (nagent--conversation-stream-clear)
                              ;; As in a chat: ready for the next request, below the reply.
                              (unless (buffer-modified-p)
                                (goto-char (point-max))
                                (dolist (w (get-buffer-window-list conversation nil t))
                                  (set-window-point w (point-max))))))
                          (nagent--finish-run source (or (plist-get res :request) "request from the conversation")
                                              res))
                  :else (lambda (err)
                          (message "nagent: %s: %s" label err)
                          (when (buffer-live-p conversation)
                            (with-current-buffer conversation (nagent--conversation-stream-clear)))))
            (with-current-buffer conversation
              (nagent--conversation-stream-show "")))
          )))))

;;;; Streaming into the conversation view

(defface nagent-conversation-streaming '((t :inherit font-lock-comment-face))
  "Face of the answer being written, shown at the end of the conversation."
  :group 'nagent)

(defvar-local nagent--conversation-stream-overlay nil
  "Overlay at the end of the conversation showing the answer being written.")

(defun nagent--conversation-stream-show (text)
  "Show TEXT (the answer so far) after the end of this conversation."
  (unless (overlayp nagent--conversation-stream-overlay)
    (setq nagent--conversation-stream-overlay (make-overlay (point-max) (point-max) nil nil nil))
    (overlay-put nagent--conversation-stream-overlay 'nagent-streaming t))
  (move-overlay nagent--conversation-stream-overlay (point-max) (point-max))
  (overlay-put nagent--conversation-stream-overlay 'after-string
               (propertize (concat "\n<agent-response> (writing…)\n" text)
                           'face 'nagent-conversation-streaming)))

(defun nagent--conversation-stream-clear ()
  "Remove the answer being written from this conversation's view."
  (when (overlayp nagent--conversation-stream-overlay)
    (delete-overlay nagent--conversation-stream-overlay))
  (setq nagent--conversation-stream-overlay nil))

(defun nagent-conversation-streamed-text ()
  "The answer shown as being written in this conversation, or nil."
  (and (overlayp nagent--conversation-stream-overlay)
       (overlay-get nagent--conversation-stream-overlay 'after-string)))

(defun nagent--conversation-on-stream (file text _turn _done)
  "Show the answer TEXT being written for FILE in FILE's open conversation.
TEXT nil: the run ended (the conversation is reverted to the server's text)."
  (let ((key (file-truename file)))
    (dolist (b (nagent--conversation-buffers))
      (with-current-buffer b
        (let ((source (nagent--conversation-source-cached)))
          (when (and source (equal (file-truename source) key))
            (if text
                (nagent--conversation-stream-show text)
              (nagent--conversation-stream-clear))))))))

(add-hook 'nagent-stream-functions #'nagent--conversation-on-stream)

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
In a conversation: that conversation itself (its end, where the next
request is typed).  Returns the conversation's path."
  (interactive)
  (if (derived-mode-p 'nagent-conversation-mode)
      (let ((path buffer-file-name))
        (goto-char (point-max))
        (message "%s" (substitute-command-keys
                       "nagent: this is the conversation; type the request at its end, \\<nagent-conversation-mode-map>\\[nagent-conversation-send] sends it"))
        path)
    (nagent--open-conversation)))

(defun nagent--open-conversation ()
  "Body of `nagent-open-conversation' in a source file's buffer."
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

;;;; Conversation commands: save, load, compact, summarize, list

(defmacro nagent--in-source (&rest body)
  "Run BODY in the buffer of the file whose conversation this is.
In a source file's buffer, in that buffer."
  (declare (indent 0) (debug t))
  `(with-current-buffer (if (derived-mode-p 'nagent-conversation-mode)
                            (find-file-noselect (nagent--source-of-conversation-or-error))
                          (current-buffer))
     ,@body))

(defun nagent--saved-conversation-names ()
  "Names of the saved conversations beside this file's conversation."
  (let* ((conv (ignore-errors (plist-get (nagent-command "nagent.conversation.open"
                                                          (nagent--uri-argument))
                                         :path)))
         (dir (and conv (expand-file-name "saved" (file-name-directory conv)))))
    (and dir (file-directory-p dir)
         (directory-files dir nil "\\`[^.]"))))

;;;###autoload
(defun nagent-conversation-save (name)
  "Save the current file's conversation under NAME; return the saved copy's path."
  (interactive (list (read-string "Save the conversation as: ")))
  (nagent--with-user-errors
    (nagent--in-source
      (let ((path (plist-get (nagent-command "nagent.conversation.save"
                                             (nagent--uri-argument :name name) "saving conversation")
                             :path)))
        (nagent--report "nagent: conversation saved to %s" path)
        path))))

;;;###autoload
(defun nagent-conversation-load (name)
  "Make the saved conversation NAME the current file's conversation.
Interactively NAME is picked among the saved ones.  Returns the path."
  (interactive (list (nagent--in-source
                       (completing-read "Load the saved conversation: "
                                        (nagent--saved-conversation-names)))))
  (nagent--with-user-errors
    (nagent--in-source
      (let ((path (plist-get (nagent-command "nagent.conversation.load"
                                             (nagent--uri-argument :name name) "loading conversation")
                             :path)))
        (nagent--sync-conversations)
        (nagent--report "nagent: conversation %s loaded (%s)" name path)
        path))))

;;;###autoload
(defun nagent-conversation-compact (&optional instruction)
  "Archive the current file's conversation and restart it from a summary.
INSTRUCTION (interactively: asked, may be empty) says what the summary
keeps.  Asynchronous (it calls the model): returns the job."
  (interactive (list (let ((s (read-string "Compact, keeping (may be empty): ")))
                       (and (not (string-empty-p (string-trim s))) s))))
  (nagent--in-source
    (nagent-command-async
     "nagent.conversation.compact" (nagent--uri-argument :instruction instruction)
     :label "compacting conversation"
     :then (lambda (res)
             (nagent--sync-conversations)
             (message "nagent: conversation compacted: %s → %s tokens (archived to %s)"
                      (nagent--short-number (plist-get res :tokensBefore))
                      (nagent--short-number (plist-get res :tokensAfter))
                      (plist-get res :archivedPath))))))

;;;###autoload
(defun nagent-conversation-summarize ()
  "Show a summary of this file's conversation in *nagent-conversation-summary*.
Asynchronous (it calls the model): returns the job."
  (interactive)
  (nagent--in-source
    (nagent-command-async
     "nagent.conversation.summarize" (nagent--uri-argument)
     :label "summarizing conversation"
     :then (lambda (res) (nagent--show-text "*nagent-conversation-summary*" (plist-get res :summary))))))

;;;###autoload
(defun nagent-conversation-list ()
  "List the workspace's conversations in *nagent-conversations*.
RET on a file visits it, on its conversation opens that.  Returns the
list (plists with :fileId :path :conversation)."
  (interactive)
  (nagent--with-user-errors
    (let* ((files (nagent--list (plist-get (nagent-command "nagent.conversation.list"
                                                           (make-hash-table) "listing conversations")
                                           :files)))
           (buf (get-buffer-create "*nagent-conversations*")))
      (with-current-buffer buf
        (let ((inhibit-read-only t))
          (erase-buffer)
          (insert (propertize (format "%d conversation%s\n\n" (length files)
                                      (if (= (length files) 1) "" "s"))
                              'face 'bold))
          (dolist (f files)
            (let ((path (plist-get f :path)) (conv (plist-get f :conversation)))
              (insert "  ")
              (insert-text-button (format "%-50s" (or path "?"))
                                  'follow-link t 'help-echo "RET: visit the file"
                                  'action (lambda (_b) (find-file-other-window path)))
              (insert "  ")
              (insert-text-button "conversation"
                                  'follow-link t 'help-echo (format "RET: open %s" conv)
                                  'action (lambda (_b) (nagent--show-conversation conv)))
              (insert "\n"))))
        (goto-char (point-min))
        (special-mode))
      (display-buffer buf)
      files)))

(provide 'nagent-chat)
;;; nagent-chat.el ends here
