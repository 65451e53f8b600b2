;;; nagent-run.el --- Edits, agents, recipes and code actions of nagent  -*- lexical-binding: t -*-

;; This file is not part of GNU Emacs.

;;; Commentary:

;; Part of nagent.el: `nagent-edit', `nagent-run-recipe', their pickers, and the
;; code-action commands the client runs its own way.

;;; Code:

(require 'cl-lib)
(require 'subr-x)
(require 'seq)
(require 'nagent-core)
(require 'nagent-connection)
(require 'nagent-answers)


(declare-function nagent-review "nagent-review" (&optional id))
(declare-function nagent-review-show-inline "nagent-review" (id))
(declare-function nagent--conversation-source "nagent-chat" ())
(declare-function nagent--show-conversation "nagent-chat" (path))
(defvar nagent-conversation-mode-map)
(defvar nagent-profile-history nil "Minibuffer history of model profiles.")
(defvar nagent-mention-history nil "Minibuffer history of mentioned files.")
(declare-function nagent--review-code-action "nagent-review" (command argument))
(declare-function nagent-history "nagent-history" (&optional max-commits))
(declare-function nagent-split "nagent" (&optional target-bytes))
(declare-function nagent-patch "nagent" (index-path &optional force dry-run))
;;;; Edits, agents and recipes

(defun nagent--handle-proposal (result)
  "Offer or open the review of RESULT's proposal, if it has one."
  (let ((id (nagent--proposal-id (plist-get result :proposal))))
    (when id
      (puthash id (plist-get result :response) nagent--proposal-answers)
      ;; The hunks show where they apply, in the files' own buffers.
      (condition-case err
          (nagent-review-show-inline id)
        (error (message "nagent: could not show the proposal's hunks inline: %s"
                        (error-message-string err))))
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

(defun nagent--open-created (files)
  "Visit the FILES a run created, each in a window; return their buffers."
  (mapcar (lambda (path)
            (let ((buf (nagent--visit path)))
              (display-buffer buf '(nil (inhibit-same-window . t)))
              buf))
          (seq-filter #'file-exists-p files)))

(defun nagent--finish-run (file title result &optional extra)
  "Show RESULT of a run on FILE: answer buffer, echo line, proposal.
When the run changed lines outside the selection, say so in the answer and as
a warning (`display-warning').  The echo line is the server's own `message'
when it sends one (tokens and cost in USD).  Files the run created are named
and visited; history checks (`coupling', `historyWarnings') are shown."
  (let* ((outside (and (nagent--true-p (plist-get result :outsideSelection))
                       (nagent-outside-selection-text (plist-get result :outsideLines)
                                                      #'nagent--outside-name)))
         (created (nagent--created-files result))
         (hints (nagent--list (plist-get result :coupling)))
         (server-line (plist-get result :message)))
    (nagent--add-answer file title result
                        (if outside
                            (concat (format "**⚠ %s**" outside) (if extra (concat "\n\n" extra) ""))
                          extra))
    (when outside (display-warning 'nagent outside :warning))
    (nagent--open-created created)
    (let ((applied (nagent--true-p (plist-get result :applied))))
      (message "nagent: %s (answer in %s)%s%s%s"
               (if (and (stringp server-line) (not (string-empty-p server-line)))
                   (string-remove-prefix "nagent: " server-line)
                 (format "%s%s — %s"
                         (if applied
                             (format "applied %s edit(s)" (or (plist-get result :edits) 0))
                           "nothing applied")
                         (if (and (not applied) (plist-get result :reason))
                             (format ": %s" (plist-get result :reason))
                           "")
                         (nagent-format-tokens (plist-get result :tokens))))
               nagent-answer-buffer
               (if created
                   (format "; created %s" (mapconcat #'file-name-nondirectory created ", "))
                 "")
               (if hints (format "; %s" (plist-get (car hints) :message)) "")
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

;;;; Pickers: agents, recipes, model profiles, files to mention

(defun nagent--warn-problems (what problems)
  "Show the PROBLEMS (strings) nagent found in WHAT (\"agent\", \"recipe\") files.
A broken file is left out of the list; this says which and why."
  (let ((problems (seq-filter #'stringp (nagent--list problems))))
    (when problems
      (display-warning 'nagent
                       (format "%d %s file%s left out:\n%s" (length problems) what
                               (if (cdr problems) "s" "")
                               (mapconcat (lambda (p) (concat "  " p)) problems "\n"))
                       :warning))
    problems))

(defun nagent-agents ()
  "The agents nagent-lsp offers for the current file (a list of plists).
Broken agent files are shown as a warning (the list's `problems')."
  (let ((res (nagent-command "nagent.agents.list" (nagent--uri-argument) "listing agents")))
    (nagent--warn-problems "agent" (plist-get res :problems))
    (nagent--list (plist-get res :agents))))

(defun nagent-profiles ()
  "The user's model profiles (names) from `nagent.status'."
  (mapcar (lambda (p) (if (stringp p) p (format "%s" (or (plist-get p :name) p))))
          (nagent--list (plist-get (nagent-command "nagent.status" (make-hash-table) "status")
                                   :profiles))))

(defun nagent-read-agent ()
  "Pick an agent for the current file with `completing-read'."
  (nagent--choose "nagent agent: " (nagent-agents) 'nagent-agent-history "edit"))

(defun nagent-read-profile ()
  "Pick one of the user's model profiles; nil when there is none."
  (let ((profiles (nagent-profiles)))
    (if (null profiles)
        (progn (message "nagent: no model profiles (settings `models')") nil)
      (completing-read "nagent model profile: " profiles nil t nil 'nagent-profile-history))))

(defconst nagent--profile-prefix "model:"
  "How a model profile is shown among the agents in `nagent-read-agent-or-profile'.")

(defun nagent-read-agent-or-profile ()
  "Pick an agent or a model profile for one request, from one short list.
Returns (AGENT . PROFILE), one of them nil."
  (let* ((agents (nagent-agents))
         (profiles (ignore-errors (nagent-profiles)))
         (items (append agents
                        (mapcar (lambda (p) (list :name (concat nagent--profile-prefix p)
                                                  :description "model profile"))
                                profiles)))
         (choice (nagent--choose "nagent agent or model: " items 'nagent-agent-history "edit")))
    (if (string-prefix-p nagent--profile-prefix choice)
        (cons nil (string-remove-prefix nagent--profile-prefix choice))
      (cons choice nil))))

(defun nagent--project-files (root)
  "Files of the project at ROOT, relative to it (git's list in a repository)."
  (let ((default-directory (file-name-as-directory root)))
    (or (with-temp-buffer
          (when (eq 0 (ignore-errors
                        (process-file "git" nil t nil "--no-pager" "ls-files" "-co" "--exclude-standard")))
            (split-string (buffer-string) "\n" t)))
        (mapcar (lambda (f) (file-relative-name f root))
                (directory-files-recursively root "" nil
                                             (lambda (d) (not (string-match-p "/\\." d))))))))

(defun nagent-mention-text (path)
  "PATH (workspace-relative) as a mention: @path, or @\"path\" with spaces."
  (if (string-match-p "[ \t\"]" path)
      (format "@\"%s\"" (replace-regexp-in-string "\"" "\\\\\"" path))
    (concat "@" path)))

(defvar nagent--mention-root nil
  "Project root of the buffer whose request is being typed.")

(defun nagent-insert-mention (&optional path)
  "Insert a mention of a file of the project at point: @PATH.
Interactively PATH is picked with `completing-read' over the project's
files.  The server reads a mentioned file (through the same rules as any
read) and records it in the conversation."
  (interactive)
  (let* ((root (or nagent--mention-root
                   (and (minibufferp)
                        (let ((b (window-buffer (minibuffer-selected-window))))
                          (and (nagent--buffer-file b) (nagent--repo-root (nagent--buffer-file b)))))
                   (and buffer-file-name
                        (let ((src (and (derived-mode-p 'nagent-conversation-mode)
                                        (fboundp 'nagent--conversation-source)
                                        (nagent--conversation-source))))
                          (nagent--repo-root (or src buffer-file-name))))
                   default-directory))
         (path (or path (completing-read "nagent mention file: " (nagent--project-files root)
                                         nil t nil 'nagent-mention-history))))
    (unless (or (bobp) (memq (char-before) '(?\s ?\t ?\n)))
      (insert " "))
    (insert (nagent-mention-text path) " ")))

(defvar nagent-request-minibuffer-map
  (let ((map (make-sparse-keymap)))
    (define-key map (kbd "C-c @") #'nagent-insert-mention)
    map)
  "Keys added to the minibuffer while a nagent request is typed.")

(defun nagent--read-request (prompt)
  "Read a request with PROMPT (history `nagent-request-history').
\\<nagent-request-minibuffer-map>\\[nagent-insert-mention] inserts an @file mention."
  (let ((root (and buffer-file-name (nagent--repo-root buffer-file-name))))
    (minibuffer-with-setup-hook
        (lambda ()
          (setq-local nagent--mention-root root)
          (use-local-map (make-composed-keymap nagent-request-minibuffer-map (current-local-map))))
      (read-string prompt nil 'nagent-request-history))))

;;;; Edits and recipes

(defun nagent--state-file-p (&optional file)
  "Non-nil when FILE (default: this buffer's) is nagent state, not a target.
Conversations and everything else under a `.nagent' state root."
  (let ((file (or file buffer-file-name)))
    (or (derived-mode-p 'nagent-conversation-mode)
        (and file (string-match-p "/\\.nagent/" (file-truename file))))))

(defun nagent--check-edit-target ()
  "Refuse, before anything is typed, a buffer nagent cannot edit; connect.
Returns the file."
  (let ((file (nagent--file-or-error)))
    (when (nagent--state-file-p file)
      (user-error (substitute-command-keys
                   "nagent: this is nagent's own state%s, not a file to edit%s")
                  (if (derived-mode-p 'nagent-conversation-mode) " (a conversation)" "")
                  (if (derived-mode-p 'nagent-conversation-mode)
                      (substitute-command-keys
                       "; type the request at its end and \\<nagent-conversation-mode-map>\\[nagent-conversation-send] sends it")
                    "")))
    (unless (nagent--connection t)
      (user-error "nagent: could not connect to nagent-lsp"))
    file))

(defun nagent--check-before-typing ()
  "Refuse what the server would refuse anyway, before a request is typed.
The buffer must be editable (`nagent--check-edit-target') and a model
configured (`nagent.status')."
  (let ((file (nagent--check-edit-target))
        (status (ignore-errors (nagent-command "nagent.status" (make-hash-table) "status"))))
    (when (and status (plist-member status :modelConfigured)
               (not (nagent--true-p (plist-get status :modelConfigured))))
      (user-error "nagent: no model configured: set the API key's variable (%s), or baseUrl \
for a local OpenAI-compatible server, in `nagent-settings'"
                  (or (plist-get status :apiKeyEnv) "OPENAI_API_KEY")))
    file))

(defun nagent--request-kept (label request)
  "An else-handler for the run LABEL of REQUEST: says the request is kept."
  (lambda (err)
    (when (and (stringp request) (not (string-empty-p request)))
      (add-to-history 'nagent-request-history request))
    (message "nagent: %s: %s%s" label err
             (if (and (stringp request) (not (string-empty-p request)))
                 (substitute-command-keys
                  " (your request is kept: \\<minibuffer-local-map>\\[previous-history-element] at the prompt recalls it)")
               ""))))

;;;###autoload
(defun nagent-edit (request &optional beg end agent profile)
  "Ask nagent to edit the current buffer according to REQUEST.
With BEG and END (interactively: the active region), the request is
about that range.  AGENT names the agent that runs it and PROFILE the
model profile for this one request (interactively: \\[universal-argument] picks
an agent or a profile from one list, \\[universal-argument] \\[universal-argument] a profile then an agent).
REQUEST may name files with @path (\\<nagent-request-minibuffer-map>\\[nagent-insert-mention] in the prompt picks one).
Returns at once with the request's job (see `nagent-wait'); the edit
arrives as an ordinary change, the answer goes to the *nagent* buffer,
and a change awaiting review opens in `nagent-review'."
  (interactive
   (progn
     (nagent--check-before-typing)
     (let* ((picked (cond ((equal current-prefix-arg '(16))
                           (let ((profile (nagent-read-profile)))
                             (cons (nagent-read-agent) profile)))
                          (current-prefix-arg (nagent-read-agent-or-profile))))
            (agent (car picked))
            (profile (cdr picked))
            (region (use-region-p)))
       (list (nagent--read-request
              (format "nagent%s edit%s: "
                      (let ((who (delq nil (list agent (and profile (concat nagent--profile-prefix profile))))))
                        (if who (format " (%s)" (string-join who ", ")) ""))
                      (if region " region" "")))
             (and region (region-beginning))
             (and region (region-end))
             agent profile))))
  (when (string-empty-p (string-trim request))
    (user-error "nagent: empty request"))
  (let* ((file (nagent--check-edit-target))
         (backend (car (nagent--connection t)))
         (arg (list :uri (nagent--uri backend) :request request))
         (label (format "editing %s" (file-name-nondirectory file))))
    (when (and beg end)
      (setq arg (append arg (list :range (nagent--range (min beg end) (max beg end) backend)))))
    (when (and agent (not (string-empty-p agent)))
      (setq arg (append arg (list :agent agent))))
    (when (and profile (not (string-empty-p profile)))
      (setq arg (append arg (list :profile profile))))
    (prog1 (nagent-command-async
            "nagent.edit" arg
            :label label
            :then (lambda (res)
                    (nagent--finish-run
                     file (let ((who (delq nil (list (and (plist-member arg :agent) agent)
                                                     (and (plist-member arg :profile)
                                                          (concat nagent--profile-prefix profile))))))
                            (if who (format "%s (%s)" request (string-join who ", ")) request))
                     res))
            :else (nagent--request-kept label request))
      (message "nagent: editing %s… (M-x nagent-cancel stops it)"
               (file-name-nondirectory file)))))

(defun nagent-recipes ()
  "The recipes nagent-lsp offers for the current file (a list of plists).
Broken recipe files are shown as a warning (the list's `problems')."
  (let ((res (nagent-command "nagent.recipes.list" (nagent--uri-argument) "listing recipes")))
    (nagent--warn-problems "recipe" (plist-get res :problems))
    (nagent--list (plist-get res :recipes))))

(defun nagent--recipe-needs-request-p (recipe)
  "Non-nil when the RECIPE (a plist of nagent.recipes.list) uses a request.
A server that does not say is asked for one, as before."
  (or (not (plist-member recipe :needsRequest))
      (nagent--true-p (plist-get recipe :needsRequest))))

;;;###autoload
(defun nagent-run-recipe (recipe &optional request beg end)
  "Run the nagent RECIPE on the current buffer, with REQUEST if non-empty.
With BEG and END (interactively: the active region), the run is about
that range.  Interactively the request is asked for only when the
recipe uses one (`needsRequest').  Returns at once with the request's
job; the outputs and the answer go to the *nagent* buffer, a changed
`fileText' arrives as an edit (or a proposal to review)."
  (interactive
   (progn
     (nagent--check-before-typing)
     (let* ((recipes (nagent-recipes))
            (recipe (nagent--choose "nagent recipe: " recipes 'nagent-recipe-history))
            (entry (cl-find recipe recipes :key (lambda (r) (plist-get r :name)) :test #'equal))
            (region (use-region-p)))
       (list recipe
             (and (nagent--recipe-needs-request-p entry)
                  (nagent--read-request (format "nagent [%s] request: " recipe)))
             (and region (region-beginning))
             (and region (region-end))))))
  (let* ((file (nagent--check-edit-target))
         (backend (car (nagent--connection t)))
         (arg (list :uri (nagent--uri backend) :recipe recipe))
         (label (format "recipe %s on %s" recipe (file-name-nondirectory file))))
    (when (and request (not (string-empty-p (string-trim request))))
      (setq arg (append arg (list :request request))))
    (when (and beg end)
      (setq arg (append arg (list :range (nagent--range (min beg end) (max beg end) backend)))))
    (prog1 (nagent-command-async
            "nagent.recipe.run" arg
            :label label
            :then (lambda (res)
                    (nagent--finish-run file (format "recipe %s%s" recipe
                                                     (if (plist-member arg :request)
                                                         (format ": %s" request) ""))
                                        res (nagent--outputs-markdown (plist-get res :outputs))))
            :else (nagent--request-kept label request))
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
                              (nagent--read-request (format "nagent edit%s: " (if range " selection" ""))))))
             (nagent-edit request beg end (plist-get argument :agent))))
          ("nagent.history" (nagent-history (plist-get argument :maxCommits)))
          ("nagent.split" (nagent-split (plist-get argument :targetBytes)))
          ("nagent.patch" (nagent-patch (plist-get argument :indexPath)
                                        (nagent--true-p (plist-get argument :force))
                                        (nagent--true-p (plist-get argument :dryRun))))
          ("nagent.recipe.run"
           (nagent-run-recipe (plist-get argument :recipe) (plist-get argument :request) beg end))
          ("nagent.instruction.apply" (nagent--apply-instruction argument))
          ;; "nagent: open tests/test_calc.py's conversation" (a history check's action).
          ("nagent.conversation.open"
           (let ((res (nagent-command command argument "opening conversation")))
             (when (plist-get res :path) (nagent--show-conversation (plist-get res :path)))
             res))
          ((or "nagent.review.apply" "nagent.review.discard")
           (nagent--review-code-action command argument))
          ;; A server that wrapped a command anyway (it did not see the capability).
          ("nagent.codeAction.run"
           (nagent-run-code-action-command (plist-get argument :command)
                                           (plist-get argument :argument)))
          (_ (nagent-command command argument)))))))


(provide 'nagent-run)
;;; nagent-run.el ends here
