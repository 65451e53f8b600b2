;;; nagent-history.el --- History, co-edits and hover of nagent  -*- lexical-binding: t -*-

;; This file is not part of GNU Emacs.

;;; Commentary:

;; Part of nagent.el: *nagent-history*, *nagent-coedits*, the whole hover card.

;;; Code:

(require 'cl-lib)
(require 'subr-x)
(require 'button)
(require 'diff-mode)
(require 'nagent-core)
(require 'nagent-connection)

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

;;;; Which request wrote this line (nagent.attribution.at)

(declare-function nagent--show-conversation "nagent-chat" (path))

(defun nagent-attribution-at (&optional line)
  "The attribution of LINE (0-based; default: point's) of this file, or nil.
A plist: :source (\"nagent\", \"notes\" or \"git\"), :message (one line to
show), and for a nagent turn :conversationPath, :conversationLine, :turn,
:request, :model."
  (let ((line (or line (1- (line-number-at-pos nil t)))))
    (plist-get (nagent-command "nagent.attribution.at" (nagent--uri-argument :line line)
                               "attribution")
               :attribution)))

;;;###autoload
(defun nagent-open-attribution (&optional line)
  "Open the conversation at the turn that wrote the line at point.
LINE (0-based) is another line of this file.  Asks nagent-lsp which
request wrote it (a nagent turn, another tool's session from git
notes, or a commit); for a nagent turn, the conversation opens with
point at that turn.  Returns the attribution plist, or nil."
  (interactive)
  (nagent--with-user-errors
    (let* ((attribution (nagent-attribution-at line))
           (text (and attribution (plist-get attribution :message)))
           (path (and attribution (plist-get attribution :conversationPath)))
           (at (and attribution (plist-get attribution :conversationLine))))
      (cond
       ((null attribution)
        (message "nagent: no attribution for this line"))
       ((and (stringp path) (file-exists-p path))
        (let ((buf (nagent--show-conversation path)))
          (with-current-buffer buf
            (when (numberp at)
              (widen)
              (goto-char (point-min))
              (forward-line at)
              (dolist (w (get-buffer-window-list buf nil t))
                (set-window-point w (point))
                (with-selected-window w (recenter 3)))))
          (message "nagent: %s" (or text "written by nagent"))))
       (t (message "nagent: %s" (or text (format "%s" (plist-get attribution :source))))))
      attribution)))

(provide 'nagent-history)
;;; nagent-history.el ends here
