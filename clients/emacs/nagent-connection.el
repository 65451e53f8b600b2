;;; nagent-connection.el --- Asynchronous requests to nagent-lsp  -*- lexical-binding: t -*-

;; This file is not part of GNU Emacs.

;;; Commentary:

;; Part of nagent.el: picks the back end (eglot or lsp-mode), sends commands
;; asynchronously as jobs shown in the mode line, and keeps open conversation
;; buffers in step with what the server wrote.

;;; Code:

(require 'cl-lib)
(require 'subr-x)
(require 'nagent-core)
(require 'nagent-eglot)

(declare-function nagent-stream-text "nagent-answers" (file))
(declare-function nagent--stream-forget "nagent-answers" (file &optional stopped))

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

;; The commands the server offers, to use a newer command only where it exists.
(declare-function nagent-lsp-mode--server-commands "nagent-lsp-mode" (workspace))

(defun nagent-server-commands (&optional conn)
  "The commands the nagent-lsp of CONN (default: this buffer's) offers."
  (let ((conn (or conn (nagent--connection))))
    (pcase (car conn)
      ('eglot (append (nagent--get (eglot--capabilities (cdr conn))
                                   :executeCommandProvider :commands)
                      nil))
      ('lsp-mode (nagent-lsp-mode--server-commands (cdr conn))))))

(defun nagent-server-has-command-p (command)
  "Non-nil when this buffer's nagent-lsp offers COMMAND."
  (and (member command (nagent-server-commands (nagent--connection t))) t))

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
  "Mode-line text of the running requests.
The request's label and time, the server's progress (turn, tokens, the
step: \"reading diff.c\", \"running pytest\"), and how much of the answer
has streamed in so far."
  (when nagent--jobs
    (let* ((job (car nagent--jobs))
           (progress (nagent--job-progress job))
           (file (nagent--buffer-file (nagent-job-buffer job)))
           (streamed (and file (nagent-stream-text file))))
      (propertize
       (format " [nagent: %s %ds%s%s%s]"
               (nagent-job-label job)
               (round (- (float-time) (nagent-job-start job)))
               (if progress
                   (concat " · " (string-remove-prefix "nagent: " progress))
                 "")
               (if (and streamed (> (length streamed) 0))
                   (format " · answer %s chars" (nagent--short-number (length streamed)))
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
    (let ((file (nagent--buffer-file (nagent-job-buffer job))))
      (if error
          (progn
            (when file (nagent--stream-forget file error))
            (if (nagent-job-else job)
                (nagent--run-callback job (nagent-job-else job) error)
              (message "nagent: %s: %s" (nagent-job-label job) error)))
        (nagent--run-callback job (nagent-job-then job) result)
        ;; A run whose callback showed no answer: its live text goes.
        (when file (nagent--stream-forget file))))))

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
    (let ((on-success (lambda (res)
                        (nagent--outside-filter #'nagent--job-finish job (nagent--normalize res) nil)))
          (on-error (lambda (err)
                      (nagent--outside-filter #'nagent--job-finish job nil (nagent--error-message err))))
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


(provide 'nagent-connection)
;;; nagent-connection.el ends here
