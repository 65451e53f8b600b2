;;; nagent-review.el --- Reviewing nagent proposals  -*- lexical-binding: t -*-

;; This file is not part of GNU Emacs.

;;; Commentary:

;; Part of nagent.el: a proposal (a change set awaiting review) in a
;; `diff-mode' buffer, hunk by hunk.

;;; Code:

(require 'cl-lib)
(require 'subr-x)
(require 'json)
(require 'diff-mode)
(require 'nagent-core)
(require 'nagent-connection)
(require 'nagent-chat)

;;;; Review of proposals

(defface nagent-review-accepted '((t :inherit success :weight bold))
  "Face of an accepted hunk's mark."
  :group 'nagent)

(defface nagent-review-rejected '((t :inherit error :weight bold))
  "Face of a rejected hunk's mark."
  :group 'nagent)

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
  "Face of the header of a hunk that no longer applies."
  :group 'nagent)

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
         (beg (progn (dolist (w (nagent--list (plist-get hunk :warnings)))
                       (insert (propertize (format "# ⚠ hunk %s: %s\n" id w) 'face 'warning)))
                     (point))))
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
    ;; A request may have several lines (an instruction gets a note appended).
    (let ((lines (split-string (or (plist-get proposal :request) "") "\n")))
      (insert (format "# Request: %s\n" (car lines)))
      (dolist (l (cdr lines)) (insert (format "#          %s\n" l))))
    (when-let ((conv (plist-get proposal :conversation)))
      (insert (format "# Conversation: %s\n"
                      (if (consp conv) (or (plist-get conv :path) conv) conv))))
    (insert "# a/r accept/reject the hunk at point, A/R all, C-c C-c send, RET visit, q quit\n")
    (when (and answer (not (string-empty-p (string-trim answer))))
      (insert "#\n# The model's answer:\n")
      (dolist (line (split-string (string-trim answer) "\n"))
        (insert "#   " line "\n")))
    (insert "#\n# Files of the change set:\n")
    (dolist (file files)
      (let ((n (length (nagent--list (plist-get file :hunks)))))
        (insert (format "#   %s%s  (%d hunk%s)\n"
                        (nagent--review-shown-path file (nagent--review-file-path file))
                        (if (nagent--true-p (plist-get file :created)) " (new file)" "")
                        n (if (= n 1) "" "s")))))
    (dolist (c (nagent--list (plist-get proposal :coupling)))
      (insert (format "# ⚠ %s\n" (plist-get c :message))))
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
                  (nagent--inline-refresh id)
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
             (nagent--inline-refresh id)
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

;;;; Review in the source buffer: pending hunks as overlays where they apply

(defface nagent-inline-removed '((t :inherit diff-removed :strike-through t))
  "Face of the lines a pending hunk would replace, in the source buffer."
  :group 'nagent)

(defface nagent-inline-added '((t :inherit diff-added))
  "Face of the text a pending hunk would put in, in the source buffer."
  :group 'nagent)

(defvar nagent-inline-hunk-map
  (let ((map (make-sparse-keymap)))
    (define-key map (kbd "C-c C-a") #'nagent-review-hunk-accept)
    (define-key map (kbd "C-c C-k") #'nagent-review-hunk-reject)
    (define-key map (kbd "C-c C-v") #'nagent-review)
    map)
  "Keys on a pending hunk shown in the source buffer.")

(defun nagent--inline-overlays (&optional id)
  "The pending-hunk overlays of this buffer (of proposal ID only, when given)."
  (save-restriction
    (widen)
    (cl-remove-if-not (lambda (ov) (and (overlay-get ov 'nagent-hunk)
                                        (or (null id) (equal (overlay-get ov 'nagent-proposal) id))))
                      (overlays-in (point-min) (point-max)))))

(defun nagent--inline-clear (&optional id)
  "Remove this buffer's pending-hunk overlays (of proposal ID only, when given)."
  (mapc #'delete-overlay (nagent--inline-overlays id)))

(defun nagent--line-pos (line)
  "Start of LINE (0-based) in the widened buffer; nil past its last line."
  (save-excursion
    (save-restriction
      (widen)
      (goto-char (point-min))
      (and (= 0 (forward-line line)) (< (point) (point-max)) (point)))))

(defun nagent--inline-text (text face)
  "TEXT in FACE, ending with a newline, for a before/after string."
  (let ((text (if (or (string-empty-p text) (string-suffix-p "\n" text)) text (concat text "\n"))))
    (propertize text 'face face)))

(defun nagent--inline-add-hunk (id hunk)
  "Show the pending HUNK of proposal ID in the current buffer; return its overlay."
  (let* ((start (or (nagent--get hunk :range :start :line) 0))
         (end (or (nagent--get hunk :range :end :line) start))
         (old (or (plist-get hunk :oldText) ""))
         (new (or (plist-get hunk :newText) ""))
         (warnings (nagent--list (plist-get hunk :warnings)))
         (note (propertize
                (format "nagent hunk %s%s: %s accept, %s reject\n"
                        (plist-get hunk :id)
                        (if warnings (concat " ⚠ " (string-join warnings "; ")) "")
                        (substitute-command-keys "\\<nagent-inline-hunk-map>\\[nagent-review-hunk-accept]")
                        (substitute-command-keys "\\<nagent-inline-hunk-map>\\[nagent-review-hunk-reject]"))
                'face (if warnings 'warning 'shadow)))
         (beg (nagent--line-pos start))
         (stop (or (nagent--line-pos end) (point-max)))
         ov)
    (cond
     ((null beg)                        ; past the end: an insertion at the end of the file
      (setq ov (make-overlay (max (point-min) (1- (point-max))) (point-max)))
      (overlay-put ov 'after-string
                   (concat (if (eq (char-before (point-max)) ?\n) "" "\n")
                           note (nagent--inline-text new 'nagent-inline-added))))
     ((string-empty-p old)              ; an insertion before line START
      (setq ov (make-overlay beg (save-excursion (goto-char beg) (line-end-position))))
      (overlay-put ov 'before-string (concat note (nagent--inline-text new 'nagent-inline-added))))
     (t
      (setq ov (make-overlay beg (max beg stop)))
      (overlay-put ov 'face 'nagent-inline-removed)
      (overlay-put ov 'before-string note)
      (overlay-put ov 'after-string (nagent--inline-text new 'nagent-inline-added))))
    (overlay-put ov 'nagent-proposal id)
    (overlay-put ov 'nagent-hunk (plist-get hunk :id))
    (overlay-put ov 'keymap nagent-inline-hunk-map)
    (overlay-put ov 'evaporate nil)
    (overlay-put ov 'help-echo (format "nagent proposal %s, hunk %s" id (plist-get hunk :id)))
    ov))

(defun nagent--inline-show-proposal (proposal)
  "Show PROPOSAL's pending hunks in the buffers of its files (visiting them).
Returns the overlays made."
  (let ((id (plist-get proposal :id)) made)
    (dolist (file (nagent--list (plist-get proposal :files)))
      (let ((path (nagent--review-file-path file)))
        (when (and path (file-exists-p path))
          (with-current-buffer (nagent--visit path)
            (nagent--inline-clear id)
            (dolist (hunk (nagent--list (plist-get file :hunks)))
              (when (or (not (plist-member hunk :applies)) (nagent--true-p (plist-get hunk :applies)))
                (push (nagent--inline-add-hunk id hunk) made)))))))
    made))

(defun nagent-review-show-inline (id)
  "Show the pending hunks of proposal ID in the buffers of its files.
Returns the number of hunks shown."
  (let ((proposal (nagent-command "nagent.review.show" (list :id id) "reading proposal")))
    (length (nagent--inline-show-proposal proposal))))

;;;###autoload
(defun nagent-review-inline ()
  "Show every pending hunk of this file where it applies, as overlays.
On a hunk, \\<nagent-inline-hunk-map>\\[nagent-review-hunk-accept] accepts it and \\[nagent-review-hunk-reject] rejects it
\(the others stay pending).
Returns the number of hunks shown."
  (interactive)
  (nagent--with-user-errors
    (let* ((here (file-truename (nagent--file-or-error)))
           (proposals (nagent--list (plist-get (nagent-command "nagent.review.list" nil
                                                               "listing proposals")
                                               :proposals)))
           (mine (cl-remove-if-not
                  (lambda (p)
                    (cl-some (lambda (f) (equal (file-truename (nagent--uri-to-path (plist-get f :uri))) here))
                             (nagent--list (plist-get p :files))))
                  proposals))
           (n 0))
      (nagent--inline-clear)
      (dolist (p mine)
        (setq n (+ n (nagent-review-show-inline (plist-get p :id)))))
      (when (called-interactively-p 'any)
        (message "nagent: %s" (if (= n 0) "no pending hunk in this file"
                                (format "%d pending hunk%s shown" n (if (= n 1) "" "s")))))
      n)))

(defun nagent--inline-hunk-at-point ()
  "The pending-hunk overlay at point or on its line, or nil."
  (or (cl-find-if (lambda (ov) (overlay-get ov 'nagent-hunk)) (overlays-at (point)))
      (cl-find-if (lambda (ov) (overlay-get ov 'nagent-hunk))
                  (overlays-in (line-beginning-position) (min (point-max) (1+ (line-end-position)))))
      (user-error "nagent: no pending hunk at point (M-x nagent-review-inline shows them)")))

(defun nagent--inline-refresh (id)
  "Show proposal ID's hunks again, or remove them when it is resolved."
  (let ((proposal (condition-case nil
                      (nagent-command "nagent.review.show" (list :id id) "reading proposal")
                    (nagent-error nil))))
    (if (and proposal (cl-some (lambda (f) (nagent--list (plist-get f :hunks)))
                               (nagent--list (plist-get proposal :files))))
        (nagent--inline-show-proposal proposal)
      (dolist (b (buffer-list))
        (with-current-buffer b (when buffer-file-name (nagent--inline-clear id)))))))

(defun nagent--inline-decide (accept)
  "Accept (ACCEPT non-nil) or reject the pending hunk at point.
The proposal's other hunks stay pending.
Returns the job."
  (let* ((ov (nagent--inline-hunk-at-point))
         (id (overlay-get ov 'nagent-proposal))
         (hunk (overlay-get ov 'nagent-hunk))
         (buf (current-buffer)))
    (nagent-command-async
     (if accept "nagent.review.apply" "nagent.review.discard")
     (if accept
         (list :id id :accept (vector hunk) :rest "keep")
       (list :id id :hunks (vector hunk)))
     :label (if accept "accepting a hunk" "rejecting a hunk")
     :then (lambda (res)
             (when (buffer-live-p buf)
               (with-current-buffer buf (nagent--inline-refresh id)))
             (let ((conflicts (nagent--list (plist-get res :conflicts))))
               (message "nagent: hunk %s %s%s; %d pending" hunk
                        (if accept "accepted" "rejected")
                        (if conflicts (format " (conflict: %s)" (or (plist-get res :reason) "")) "")
                        (length (nagent--list (plist-get res :pending)))))))))

(defun nagent-review-hunk-accept ()
  "Accept the pending hunk at point (shown by `nagent-review-inline').
It is applied at once; the proposal's other hunks stay pending.
Returns the job."
  (interactive)
  (nagent--inline-decide t))

(defun nagent-review-hunk-reject ()
  "Reject the pending hunk at point (shown by `nagent-review-inline').
The proposal's other hunks stay pending.  Returns the job."
  (interactive)
  (nagent--inline-decide nil))

;;;###autoload
(defun nagent-review-files (&optional id)
  "Pick a file of the change set ID (default: this file's) and visit it.
Every file of the change set is listed with its pending hunks; the
visited file shows them inline.  Returns the visited buffer."
  (interactive)
  (nagent--with-user-errors
    (let* ((id (or id (nagent--pick-proposal)))
           (proposal (nagent-command "nagent.review.show" (list :id id) "reading proposal"))
           (table (mapcar (lambda (f)
                            (let ((n (length (nagent--list (plist-get f :hunks))))
                                  (path (nagent--review-file-path f)))
                              (cons (format "%s  (%d hunk%s%s)" (nagent--review-shown-path f path)
                                            n (if (= n 1) "" "s")
                                            (if (nagent--true-p (plist-get f :created)) ", new file" ""))
                                    path)))
                          (nagent--list (plist-get proposal :files))))
           (path (cdr (assoc (completing-read (format "Files of proposal %s: " id) table nil t)
                             table))))
      (nagent--inline-show-proposal proposal)
      (pop-to-buffer (nagent--visit path)))))

(provide 'nagent-review)
;;; nagent-review.el ends here
