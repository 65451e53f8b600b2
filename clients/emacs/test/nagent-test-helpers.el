;;; nagent-test-helpers.el --- Fixtures for nagent's ERT suites  -*- lexical-binding: t -*-

;;; Commentary:

;; Shared by nagent-eglot-test.el and nagent-lsp-mode-test.el.  Every test
;; runs the real nagent-lsp server (NAGENT_SERVER, default the repository's
;; .venv/bin/nagent-lsp) on a real git repository made in a temporary
;; folder, with HOME pointed at an empty folder, and, when it needs a model,
;; the fake OpenAI server (tests/harness/fake_openai.py) on 127.0.0.1 with a
;; per-test script.  `nagent-test-deftests' defines the same tests for a
;; given back end (eglot or lsp-mode).

;;; Code:

(require 'ert)
(require 'cl-lib)
(require 'subr-x)
(require 'json)
(require 'python)
(require 'nagent)

(defconst nagent-test-repo-root
  (expand-file-name "../../../" (file-name-directory (or load-file-name buffer-file-name)))
  "The nagent-lsp source tree.")

(defvar nagent-test-server-command
  (let ((env (getenv "NAGENT_SERVER")))
    (if (and env (not (string-empty-p env)))
        (split-string-and-unquote env)
      (list (expand-file-name ".venv/bin/nagent-lsp" nagent-test-repo-root))))
  "Command that starts the server under test.")

(defvar nagent-test-python
  (or (getenv "NAGENT_TEST_PYTHON")
      (let ((venv (expand-file-name ".venv/bin/python" nagent-test-repo-root)))
        (if (file-executable-p venv) venv "python3")))
  "Python that runs the fake OpenAI server.")

(defvar nagent-test-fake-openai
  (or (getenv "NAGENT_FAKE_OPENAI")
      (expand-file-name "tests/harness/fake_openai.py" nagent-test-repo-root))
  "Path of the fake OpenAI server script.")

(defvar nagent-test-api-key-env "NAGENT_TEST_API_KEY")

;;;; Processes and files

(defun nagent-test--git (dir &rest args)
  "Run git with ARGS in DIR; fail the test on a non-zero exit."
  (let ((default-directory (file-name-as-directory dir)))
    (with-temp-buffer
      (let ((rc (apply #'call-process "git" nil t nil args)))
        (unless (eq rc 0)
          (error "git %s failed (%s): %s" (string-join args " ") rc (buffer-string)))
        (string-trim (buffer-string))))))

(defun nagent-test--write (file text)
  "Write TEXT to FILE."
  (make-directory (file-name-directory file) t)
  (let ((coding-system-for-write 'utf-8-unix))
    (write-region text nil file nil 'silent)))

(defun nagent-test--commit (dir who date subject files)
  "Commit FILES ((NAME . TEXT) ...) in DIR as WHO (NAME . EMAIL) at DATE."
  (dolist (f files)
    (nagent-test--write (expand-file-name (car f) dir) (cdr f))
    (nagent-test--git dir "add" (car f)))
  (let ((process-environment
         (append (list (concat "GIT_AUTHOR_NAME=" (car who))
                       (concat "GIT_AUTHOR_EMAIL=" (cdr who))
                       (concat "GIT_COMMITTER_NAME=" (car who))
                       (concat "GIT_COMMITTER_EMAIL=" (cdr who))
                       (concat "GIT_AUTHOR_DATE=" date)
                       (concat "GIT_COMMITTER_DATE=" date))
                 process-environment)))
    (nagent-test--git dir "commit" "-q" "--no-gpg-sign" "-m" subject)))

(defconst nagent-test-a-v3 "def fetch(url):\n    return get(url)\n\n\ndef size(items):\n    return len(items)\n")

(defun nagent-test-make-repo ()
  "A git repository with a.py (3 commits, 2 authors), b.py (co-edited) and c.md."
  (let ((dir (file-name-as-directory (file-truename (make-temp-file "nagent-repo" t))))
        (alice '("Alice Example" . "alice@example.com"))
        (bob '("Bob Example" . "bob@example.com")))
    (nagent-test--git dir "init" "-q")
    (nagent-test--git dir "config" "commit.gpgsign" "false")
    (nagent-test--commit dir alice "2024-01-10T10:00:00+00:00" "Add fetch helper and its caller"
                         `(("a.py" . "def fetch(url):\n    return get(url)\n")
                           ("b.py" . "from a import fetch\n\nprint(fetch('x'))\n")))
    (nagent-test--commit dir bob "2024-02-11T11:00:00+00:00" "Teach the caller about sizes"
                         `(("a.py" . "def fetch(url):\n    return get(url)\n\n\ndef size(items):\n    return len(items) + 1\n")
                           ("b.py" . "from a import fetch, size\n\nprint(fetch('x'), size([]))\n")))
    (nagent-test--commit dir alice "2024-03-12T12:00:00+00:00" "Fix off-by-one in size"
                         `(("a.py" . ,nagent-test-a-v3)))
    (nagent-test--commit dir bob "2024-03-13T12:00:00+00:00" "Document the project"
                         `(("c.md" . "# Project\n")))
    dir))

(defun nagent-test-start-fake (replies)
  "Start the fake OpenAI server answering REPLIES (a list of script entries).
Return a plist (:process P :url BASE-URL :record FILE)."
  (let* ((script (make-temp-file "nagent-script" nil ".json"))
         (record (make-temp-file "nagent-record" nil ".jsonl"))
         (buf (generate-new-buffer " *nagent-fake-openai*"))
         (proc nil))
    (nagent-test--write script (json-encode (vconcat replies)))
    (setq proc (make-process :name "nagent-fake-openai" :buffer buf :noquery t
                             :connection-type 'pipe
                             :command (list nagent-test-python nagent-test-fake-openai
                                            "--port" "0" "--script" script
                                            "--record" record)))
    (let ((deadline (+ (float-time) 20)))
      (while (and (process-live-p proc)
                  (not (with-current-buffer buf
                         (save-excursion (goto-char (point-min))
                                         (re-search-forward "^http[^\n]*\n" nil t))))
                  (< (float-time) deadline))
        (accept-process-output proc 0.1)))
    (let ((url (with-current-buffer buf
                 (goto-char (point-min))
                 (and (re-search-forward "^\\(http[^\n]*\\)\n" nil t) (match-string 1)))))
      (unless url
        (error "fake OpenAI server did not start: %s"
               (with-current-buffer buf (buffer-string))))
      (list :process proc :url url :record record :script script))))

(defun nagent-test-fake-requests (fake)
  "The chat requests FAKE recorded, as a list of alists."
  (let ((file (plist-get fake :record)) out)
    (when (file-exists-p file)
      (with-temp-buffer
        (insert-file-contents file)
        (goto-char (point-min))
        (while (not (eobp))
          (let ((line (buffer-substring-no-properties (point) (line-end-position))))
            (unless (string-empty-p (string-trim line))
              (push (json-read-from-string line) out)))
          (forward-line 1))))
    (cl-remove-if-not (lambda (r) (string-suffix-p "/chat/completions" (alist-get 'path r)))
                      (nreverse out))))

(defun nagent-test-stop-fake (fake)
  "Stop FAKE and remove its files."
  (when fake
    (let ((proc (plist-get fake :process)))
      (when (process-live-p proc)
        (interrupt-process proc)
        (let ((deadline (+ (float-time) 3)))
          (while (and (process-live-p proc) (< (float-time) deadline))
            (accept-process-output proc 0.05)))
        (when (process-live-p proc) (kill-process proc)))
      (when (buffer-live-p (process-buffer proc)) (kill-buffer (process-buffer proc))))
    (ignore-errors (delete-file (plist-get fake :script)))
    (ignore-errors (delete-file (plist-get fake :record)))))

(defun nagent-test-write-reply (path text)
  "The model reply that writes TEXT to PATH."
  (list (cons 'text (format "<nagent-write path=\"%s\">%s</nagent-write>" path text))))

(defun nagent-test-response-reply (text)
  "The model reply that ends the run with TEXT."
  (list (cons 'text (format "<nagent-response>%s</nagent-response>" text))))

;;;; Back ends

(defvar nagent-test-backend 'eglot
  "Back end of the suite being run: `eglot' or `lsp-mode'.")

(defvar lsp-client-packages)
(defvar lsp-auto-guess-root)
(defvar lsp-enable-file-watchers)
(defvar lsp-restart)
(defvar lsp-keep-workspace-alive)
(defvar lsp-session-file)
(defvar lsp-log-io)
(defvar lsp-enable-snippet)
(defvar lsp-headerline-breadcrumb-enable)
(defvar lsp-modeline-code-actions-enable)
(defvar lsp-modeline-diagnostics-enable)
(defvar lsp-modeline-workspace-status-enable)
(defvar lsp-lens-enable)
(defvar lsp-diagnostics-provider)
(defvar lsp--buffer-workspaces)
(declare-function lsp "lsp-mode" (&optional arg))
(declare-function lsp-workspace-shutdown "lsp-mode" (workspace))
(declare-function lsp--workspace-server-capabilities "lsp-mode" (workspace))
(declare-function lsp-request "lsp-mode" (method params &rest args))
(declare-function lsp--text-document-position-params "lsp-mode" (&optional identifier position))
(declare-function lsp-session "lsp-mode" ())
(declare-function lsp-session-folders "lsp-mode" (session))
(declare-function nagent-lsp-mode--find "nagent-lsp-mode" ())

(defun nagent-test-setup-lsp-mode ()
  "Load lsp-mode with settings that never prompt."
  (setq lsp-client-packages nil
        lsp-auto-guess-root t
        lsp-enable-file-watchers nil
        lsp-restart 'ignore
        lsp-keep-workspace-alive nil
        lsp-session-file (make-temp-file "nagent-lsp-session")
        lsp-log-io nil
        lsp-enable-snippet nil
        lsp-headerline-breadcrumb-enable nil
        lsp-modeline-code-actions-enable nil
        lsp-modeline-diagnostics-enable nil
        lsp-modeline-workspace-status-enable nil
        lsp-lens-enable nil
        lsp-diagnostics-provider :none)
  (let ((session lsp-session-file))
    (add-hook 'kill-emacs-hook (lambda () (ignore-errors (delete-file session)))))
  (require 'lsp-mode)
  (require 'nagent-lsp-mode))

(defun nagent-test-connect ()
  "Connect the current buffer to the server the way a user would."
  (pcase nagent-test-backend
    ('eglot (nagent--connection t))
    ('lsp-mode
     (lsp)
     (let ((deadline (+ (float-time) 30)))
       (while (and (not (nagent-lsp-mode--find)) (< (float-time) deadline))
         (accept-process-output nil 0.05))))))

(defun nagent-test-server-commands ()
  "The commands the connected server advertises."
  (let ((conn (nagent--connection)))
    (pcase (car conn)
      ('eglot (append (nagent--get (eglot--capabilities (cdr conn))
                                   :executeCommandProvider :commands)
                      nil))
      ('lsp-mode (append (nagent--get (nagent--normalize
                                       (lsp--workspace-server-capabilities (cdr conn)))
                                      :executeCommandProvider :commands)
                         nil)))))

(defun nagent-test-require-command (command)
  "Skip the current test unless the server has COMMAND."
  (unless (member command (nagent-test-server-commands))
    (ert-skip (format "the server has no %s yet" command))))

(defun nagent-test-hover ()
  "The hover Markdown at point, as a string."
  (let ((conn (nagent--connection)))
    (nagent--eglot-flush)
    (let* ((raw (pcase (car conn)
                  ('eglot (jsonrpc-request (cdr conn) :textDocument/hover
                                           (eglot--TextDocumentPositionParams)
                                           :timeout 30))
                  ('lsp-mode (let ((lsp--buffer-workspaces (list (cdr conn))))
                               (lsp-request "textDocument/hover"
                                            (lsp--text-document-position-params))))))
           (contents (plist-get (nagent--normalize raw) :contents)))
      (cond ((stringp contents) contents)
            ((plist-get contents :value))
            (t (format "%S" contents))))))

(defun nagent-test--dump ()
  "Print the connection's logs (for failed tests)."
  (let ((conn (ignore-errors (nagent--connection))))
    (when (eq (car conn) 'eglot)
      (let ((events (jsonrpc-events-buffer (cdr conn)))
            (stderr (jsonrpc-stderr-buffer (cdr conn))))
        (dolist (b (list events stderr))
          (when (buffer-live-p b)
            (with-current-buffer b
              (message "---- %s (tail)\n%s" (buffer-name b)
                       (buffer-substring-no-properties
                        (max (point-min) (- (point-max) 6000)) (point-max))))))))))

(defun nagent-test-shutdown ()
  "Stop the current buffer's server connection."
  (let ((conn (ignore-errors (nagent--connection))))
    (pcase (car conn)
      ('eglot (ignore-errors (eglot-shutdown (cdr conn))))
      ('lsp-mode (ignore-errors (lsp-workspace-shutdown (cdr conn)))))))

(defun nagent-test--merge-settings (base extra)
  "The settings plist BASE with the pairs of EXTRA put over it."
  (let ((out (copy-sequence base)))
    (cl-loop for (k v) on extra by #'cddr do (setq out (plist-put out k v)))
    out))

(cl-defmacro nagent-test-with-file ((&key (file "a.py") replies settings setup) &rest body)
  "Run BODY in a buffer visiting FILE of a fresh repository, connected to nagent.
REPLIES, when non-nil, start the fake model with that script (a list of
entries, or a function of the target's file name returning one).
SETTINGS are put over the test's `nagent-settings'.  SETUP, a function of
the repository and the home folder, runs before the file is visited.
Binds `repo', `home', `fake' and `target' (the file's true name) for BODY."
  (declare (indent 1))
  `(let* ((repo (nagent-test-make-repo))
          (home (file-name-as-directory (make-temp-file "nagent-home" t)))
          (_ (when ,setup (funcall ,setup repo home)))
          (target (expand-file-name ,file repo))
          (replies ,replies)
          (replies (if (functionp replies) (funcall replies target) replies))
          (fake (and replies (nagent-test-start-fake replies)))
          (process-environment
           (append (list (concat "HOME=" home)
                         (concat nagent-test-api-key-env "=sk-test-not-a-secret")
                         "OPENAI_API_KEY" "OPENAI_BASE_URL" "NAGENT_MODEL")
                   process-environment))
          (nagent-server-command nagent-test-server-command)
          (nagent-request-timeout 90)
          (nagent-backend (if (eq nagent-test-backend 'eglot) 'eglot 'auto))
          (nagent-settings
           (nagent-test--merge-settings
            (append (list :model "fake-model"
                          :apiKeyEnv nagent-test-api-key-env
                          :history (list :summarize :json-false))
                    (and fake (list :baseUrl (plist-get fake :url))))
            ,settings))
          (nagent-show-answers t)
          (nagent-review-on-proposal 'open)
          (eglot-confirm-server-initiated-edits nil)
          (eglot-sync-connect t)
          (buf (find-file-noselect target)))
     (ignore replies)
     (unwind-protect
         (with-current-buffer buf
           (when (string-suffix-p ".py" target) (python-mode))
           (nagent-test-connect)
           (should (nagent--connection))
           (should (eq (car (nagent--connection)) nagent-test-backend))
           (condition-case err
               (progn ,@body)
             ((debug error ert-test-failed)
              (nagent-test--dump)
              (signal (car err) (cdr err)))))
       (when (buffer-live-p buf)
         (with-current-buffer buf (nagent-test-shutdown)))
       (nagent-test-stop-fake fake)
       (dolist (job nagent--jobs) (ignore-errors (nagent--job-abort job "test over")))
       (dolist (b (buffer-list))
         (when (string-match-p "\\`\\*nagent" (buffer-name b))
           (kill-buffer b)))
       (dolist (b (buffer-list))
         (let ((f (buffer-file-name b)))
           (when (and f (string-prefix-p repo (file-truename f)))
             (with-current-buffer b (set-buffer-modified-p nil))
             (kill-buffer b))))
       (delete-directory repo t)
       (delete-directory home t))))

(defun nagent-test-wait-for (predicate &optional timeout)
  "Poll PREDICATE until it returns non-nil (returned) or TIMEOUT seconds pass."
  (let ((deadline (+ (float-time) (or timeout 10))) value)
    (while (and (not (setq value (funcall predicate))) (< (float-time) deadline))
      (accept-process-output nil 0.2))
    value))

(defun nagent-test-buffer-text (name)
  "Text of the buffer NAME."
  (with-current-buffer name (buffer-substring-no-properties (point-min) (point-max))))

(provide 'nagent-test-helpers)
;;; nagent-test-helpers.el ends here
