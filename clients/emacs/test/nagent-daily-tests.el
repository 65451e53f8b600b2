;;; nagent-daily-tests.el --- ERT tests of nagent.el's daily use (issues 23, 25-27)  -*- lexical-binding: t -*-

;;; Commentary:

;; Loaded by nagent-tests.el, so they run once per back end (eglot and
;; lsp-mode) against the real server and the fake OpenAI server.
;;
;; Issue 25's Emacs defects (each test failed before its fix): shell
;; commands asked about (window.showMessage), a conversation buffer is no
;; edit target, `nagent-settings-changed' from any buffer, and the small
;; ones (broken definitions shown, created files opened, a recipe asks for
;; a request only when it uses one, a refused request kept, cost with its
;; unit, conversation commands, the empty conversation's hint).  Its four
;; expectations: the conversation is the chat, review in the source
;; buffer, @path mentions, a model profile per request.  Issue 23: the
;; answer streams into *nagent*, the conversation and the mode line.
;; Issue 26: history checks shown.  Issue 27: the turn that wrote a line.
;;
;; A test that needs a server feature another part of the project builds
;; says so when the server lacks it: it is skipped with "WAITING for …"
;; (`nagent-test-waiting'); clients/ci-editors.sh counts that as a failure.

;;; Code:

(require 'nagent-test-helpers)

(defvar nagent-test-a-retries)
(defvar nagent-test--twelve)
(defvar nagent-test--twelve-edited)
(defvar nagent-test-b-edited)
(declare-function nagent-test--text-of "nagent-ui-tests" (file))

(defun nagent-test-waiting (what)
  "Skip the test: the server does not do WHAT yet (another part builds it)."
  (ert-skip (format "WAITING for the server: %s" what)))

(defun nagent-test--readme-block (readme after lang)
  "The first LANG code block after the text AFTER in README."
  (with-temp-buffer
    (insert-file-contents readme)
    (goto-char (point-min))
    (search-forward after)
    (re-search-forward (format "^```%s\n" lang))
    (let ((beg (point)))
      (re-search-forward "^```$")
      (buffer-substring-no-properties beg (match-beginning 0)))))

(defun nagent-test--write-tests-recipe (_repo home)
  "Put the README's own `tests' recipe (write tests, run them) in HOME."
  (nagent-test--write (expand-file-name ".nagent/recipes/tests.yaml" home)
                      (nagent-test--readme-block
                       (expand-file-name "README.md" nagent-test-repo-root)
                       "Write tests for the selection, run them" "yaml")))

(defun nagent-test--answer-text ()
  "Text of the *nagent* buffer, or \"\"."
  (if (get-buffer nagent-answer-buffer) (nagent-test-buffer-text nagent-answer-buffer) ""))

;;;; Defect 2: shell commands are asked about (window.showMessage)

(ert-deftest nagent-shell-commands-are-asked ()
  "With the default `shell: \"ask\"' the server asks about a command step
\(window/showMessageRequest, which the client says it answers); \"Run once\"
runs the README's own `tests' recipe: the fix step sees pytest's output."
  (nagent-test-with-file
      (:replies (list (list (cons 'text "from a import size\n\n\ndef test_size():\n    assert size([1, 2]) == 2\n"))
                      (list (cons 'text nagent-test-a-retries)))
       :setup #'nagent-test--write-tests-recipe)
    (nagent-test-require-command "nagent.recipe.run")
    (let* ((asked nil)
           (res (cl-letf (((symbol-function 'completing-read)
                           (lambda (prompt collection &rest _)
                             (push (cons prompt (all-completions "" collection)) asked)
                             "Run once")))
                  (nagent-wait (nagent-run-recipe "tests" "size counts items")))))
      (should (= (length asked) 1))
      (should (string-match-p "shell command" (caar asked)))
      (should (string-match-p "pytest" (caar asked)))
      (should (equal (cdar asked) '("Run once" "Always" "Deny")))
      ;; The command ran: the fix step got its output.
      (should (= (length (nagent-test-fake-requests fake)) 2))
      (should (string-match-p "[0-9]+ \\(passed\\|failed\\)"
                              (json-encode (nth 1 (nagent-test-fake-requests fake)))))
      (should (plist-get (plist-get res :outputs) :testOutput))
      (should (nagent-test-wait-for (lambda () (equal (buffer-string) nagent-test-a-retries)) 10)))))

(ert-deftest nagent-deny-refuses-the-command ()
  "\"Deny\" refuses the command step: the run ends, the fix step never runs."
  (nagent-test-with-file
      (:replies (list (list (cons 'text "def test_x():\n    pass\n")))
       :setup #'nagent-test--write-tests-recipe)
    (nagent-test-require-command "nagent.recipe.run")
    (let ((nagent-ask-function (lambda (_message choices)
                                 (should (member "Deny" choices))
                                 "Deny")))
      (ignore-errors (nagent-wait (nagent-run-recipe "tests" "size")))
      (should (= (length (nagent-test-fake-requests fake)) 1))
      (should (equal (buffer-string) nagent-test-a-v3)))))

;;;; Defect 6: a conversation is not an edit target; C-c C-c there sends

(ert-deftest nagent-conversation-buffer-is-not-an-edit-target ()
  "In a conversation, C-c n c shows that conversation (not a conversation of it),
and `nagent-edit' is refused before a request is typed."
  (nagent-test-with-file (:replies (lambda (target)
                                     (list (nagent-test-write-reply target nagent-test-a-retries)
                                           (nagent-test-response-reply "ok"))))
    (nagent-test-require-command "nagent.edit")
    (nagent-wait (nagent-edit "add retries please"))
    (let* ((path (save-window-excursion (nagent-open-conversation)))
           (conv (find-buffer-visiting path))
           (dir (file-name-directory path))
           (before (directory-files dir nil "\\`[^.]")))
      (with-current-buffer conv
        (should (equal (save-window-excursion
                         (call-interactively (lookup-key nagent-command-map (kbd "c"))))
                       path))
        (should (equal (directory-files dir nil "\\`[^.]") before))
        (let ((typed nil))
          (cl-letf (((symbol-function 'read-string) (lambda (&rest _) (setq typed t) "x")))
            (let ((err (should-error (call-interactively #'nagent-edit) :type 'user-error)))
              (should (string-match-p "conversation" (error-message-string err)))))
          (should-not typed))
        (should (eq (lookup-key nagent-conversation-mode-map (kbd "C-c C-c"))
                    #'nagent-conversation-send))))))

;;;; Defect 4: eglot alone (no nagent plugin) is not frozen by a code action

(declare-function nagent-test--pick-code-action "nagent-code-action-tests" (title beg end))
(declare-function nagent-test--delayed "nagent-ui-tests" (seconds entry))
(defvar eglot-workspace-configuration)

(when (eq nagent-test-backend 'eglot)
  (ert-deftest nagent-eglot-alone-code-action-answers-at-once ()
    "With plain eglot (no nagent plugin class), \"nagent: apply this instruction\"
returns before the model has answered -- eglot runs executeCommand synchronously --
and the edit arrives afterwards through workspace/applyEdit."
    (nagent-test-with-file (:replies (lambda (target)
                                       (list (nagent-test--delayed
                                              4 (nagent-test-write-reply target nagent-test-a-retries))
                                             (nagent-test-response-reply "Added retries."))))
      (nagent-test-shutdown)
      (should-not (nagent--connection))
      (let ((eglot-workspace-configuration (list (cons :nagent (nagent--settings-json))))
            (eglot-server-programs (list (cons 'python-mode nagent-test-server-command))))
        (apply #'eglot (eglot--guess-contact))
        (should (eq (eieio-object-class (eglot-current-server)) 'eglot-lsp-server))
        (should (nagent-test-wait-for (lambda () (equal (plist-get (nagent-status) :model) "fake-model")) 20))
        (goto-char (point-min))
        (insert "# nagent: add a retries parameter to fetch\n")
        (let ((returned nil))
          (nagent-test--pick-code-action "nagent: apply this instruction (add a retries parameter to fetch)"
                                        (point-min) (point-min))
          (setq returned (buffer-string))
          ;; The call came back while the model was still being asked.
          (should (string-prefix-p "# nagent: add a retries parameter" returned))
          (should-not (string-match-p "retries=3" returned)))
        (should (nagent-test-wait-for (lambda () (equal (buffer-string) nagent-test-a-retries)) 40))))))

;;;; `nagent-settings-changed' from a buffer visiting no file

(ert-deftest nagent-settings-changed-from-any-buffer ()
  "From *scratch* (no file), the settings reach every running nagent-lsp."
  (nagent-test-with-file ()
    (let ((nagent-settings (plist-put (copy-sequence nagent-settings) :model "model-from-scratch")))
      (with-temp-buffer
        (should (>= (nagent-settings-changed) 1)))
      (should (nagent-test-wait-for
               (lambda () (equal (plist-get (nagent-status) :model) "model-from-scratch"))
               15)))))

;;;; The small ones

(ert-deftest nagent-broken-definitions-are-shown ()
  "A broken agent or recipe file is named in a warning, not silently left out."
  (nagent-test-with-file
      (:setup (lambda (_repo home)
                (nagent-test--write (expand-file-name ".nagent/agents/broken.md" home)
                                    "no front matter at all\n")
                (nagent-test--write (expand-file-name ".nagent/recipes/broken.yaml" home)
                                    "steps: [\n")))
    (nagent-test-require-command "nagent.agents.list")
    (let (warnings)
      (cl-letf (((symbol-function 'display-warning)
                 (lambda (_type text &rest _) (push text warnings))))
        (should (cl-find "edit" (nagent-agents) :key (lambda (a) (plist-get a :name)) :test #'equal))
        (nagent-recipes))
      (should (cl-some (lambda (w) (string-match-p "agent file.*\n.*broken\\.md" w)) warnings))
      (should (cl-some (lambda (w) (string-match-p "recipe file.*\n.*broken\\.yaml" w)) warnings)))))

(ert-deftest nagent-created-file-is-named-and-opened ()
  "A file the run creates is named in the answer and the echo line, and visited."
  (nagent-test-with-file (:replies (lambda (target)
                                     (let ((new (expand-file-name "test_a.py" (file-name-directory target))))
                                       (list (nagent-test-write-reply new "from a import size\n")
                                             (nagent-test-response-reply "Added a test file.")))))
    (nagent-test-require-command "nagent.edit")
    (let* ((new (expand-file-name "test_a.py" repo))
           (messages nil)
           (res (cl-letf* ((orig (symbol-function 'message))
                           ((symbol-function 'message)
                            (lambda (fmt &rest args)
                              (when fmt (push (apply #'format fmt args) messages))
                              (apply orig fmt args))))
                  (nagent-wait (nagent-edit "add a test file")))))
      (should (cl-some (lambda (f) (nagent--true-p (plist-get f :created)))
                       (append (plist-get res :files) nil)))
      ;; Visited (and displayed, where the frame has room: batch frames are small).
      (should (find-buffer-visiting new))
      (should (string-match-p "Created:.*test_a\\.py" (nagent-test--answer-text)))
      (should (cl-some (lambda (m) (string-match-p "created test_a\\.py" m)) messages)))))

(defun nagent-test--write-norequest-recipe (_repo home)
  "A user recipe `why' that uses no request."
  (nagent-test--write
   (expand-file-name ".nagent/recipes/why.json" home)
   (json-encode '((description . "Why it changed")
                  (steps . [((step . "why") (inputs . ["file"]) (outputs . ((summary . "string")))
                             (systemPrompt . "WHY-MARKER {{file}}"))])))))

(ert-deftest nagent-recipe-asks-for-a-request-only-when-it-uses-one ()
  "Run Recipe asks for a request only when the recipe's `needsRequest' says so."
  (nagent-test-with-file (:replies (list (list (cons 'text "Because.")))
                          :setup #'nagent-test--write-norequest-recipe)
    (nagent-test-require-command "nagent.recipes.list")
    (let* ((asked nil)
           (job (cl-letf (((symbol-function 'completing-read) (lambda (&rest _) "why"))
                          ((symbol-function 'read-string)
                           (lambda (&rest _) (setq asked t) "")))
                  (call-interactively #'nagent-run-recipe))))
      (should-not asked)
      (should (equal (nagent--get (nagent-wait job) :outputs :summary) "Because."))
      (should (string-match-p "WHY-MARKER" (json-encode (nagent-test-fake-requests fake)))))))

(ert-deftest nagent-refusal-comes-before-typing ()
  "With no model configured, `nagent-edit' says so before the request is typed."
  (nagent-test-with-file (:settings (list :apiKeyEnv "NAGENT_TEST_NO_SUCH_KEY"))
    (nagent-test-require-command "nagent.edit")
    (should-not (nagent--true-p (plist-get (nagent-status) :modelConfigured)))
    (let ((typed nil))
      (cl-letf (((symbol-function 'read-string) (lambda (&rest _) (setq typed t) "x")))
        (let ((err (should-error (call-interactively #'nagent-edit) :type 'user-error)))
          (should (string-match-p "no model configured.*NAGENT_TEST_NO_SUCH_KEY" (error-message-string err)))))
      (should-not typed))))

(ert-deftest nagent-refused-request-is-kept ()
  "A refused run keeps the typed request in the history, and says so."
  (nagent-test-with-file ()
    (nagent-test-require-command "nagent.edit")
    (let ((nagent-request-history nil)
          (messages nil))
      (cl-letf* ((orig (symbol-function 'message))
                 ((symbol-function 'message)
                  (lambda (fmt &rest args)
                    (when fmt (push (apply #'format fmt args) messages))
                    (apply orig fmt args))))
        (should-error (nagent-wait (nagent-edit "REQUEST-KEPT-7 with care" nil nil "no-such-agent"))
                      :type 'nagent-error))
      (should (member "REQUEST-KEPT-7 with care" nagent-request-history))
      (should (cl-some (lambda (m) (string-match-p "request is kept" m)) messages)))))

(ert-deftest nagent-server-message-and-cost-unit ()
  "The echo line is the server's own `message' when it sends one; the cost says USD."
  (let ((messages nil)
        (nagent-show-answers nil))
    (unwind-protect
        (cl-letf* ((orig (symbol-function 'message))
                   ((symbol-function 'message)
                    (lambda (fmt &rest args)
                      (when fmt (push (apply #'format fmt args) messages))
                      (apply orig fmt args))))
          (nagent--finish-run "/tmp/calc.py" "req"
                              (list :applied t :edits 1 :response "ok"
                                    :message "applied 1 edit to calc.py · 2 turns · 1.2k tokens · $0.0123"
                                    :tokens (list :input 1000 :output 200 :cost 0.0123)))
          (should (string-match-p "\\`nagent: applied 1 edit to calc\\.py · 2 turns · 1\\.2k tokens · \\$0\\.0123"
                                  (car messages)))
          (should (string-match-p "cost \\$0\\.0123" (nagent--answer-text-for-test)))
          (should (string-match-p "\\$0\\.0123" (nagent-format-tokens (list :input 1 :output 1 :cost 0.0123)))))
      (when (get-buffer nagent-answer-buffer) (kill-buffer nagent-answer-buffer)))))

(defun nagent--answer-text-for-test ()
  "The *nagent* buffer's text."
  (nagent-test--answer-text))

(ert-deftest nagent-conversation-commands ()
  "Save, load, list, summarize and compact a conversation from Emacs."
  (nagent-test-with-file (:replies (lambda (target)
                                     (list (nagent-test-write-reply target nagent-test-a-retries)
                                           (nagent-test-response-reply "ok")
                                           (list (cons 'text "SUMMARY-OF-THE-CONVERSATION"))
                                           (list (cons 'text "COMPACTED-SUMMARY")))))
    (nagent-test-require-command "nagent.conversation.save")
    (nagent-wait (nagent-edit "add retries please"))
    (let ((saved (nagent-conversation-save "before-cleanup")))
      (should (file-exists-p saved))
      (should (string-match-p "add retries please" (nagent-test--text-of saved))))
    (nagent-clear-conversation t)
    (let ((loaded (nagent-conversation-load "before-cleanup")))
      (should (string-match-p "add retries please" (nagent-test--text-of loaded))))
    (let ((files (nagent-conversation-list)))
      (should (cl-some (lambda (f) (string-match-p "a\\.py\\'" (or (plist-get f :path) ""))) files))
      (should (string-match-p "a\\.py" (nagent-test-buffer-text "*nagent-conversations*"))))
    (nagent-wait (nagent-conversation-summarize))
    (should (string-match-p "SUMMARY-OF-THE-CONVERSATION"
                            (nagent-test-buffer-text "*nagent-conversation-summary*")))
    (let ((res (nagent-wait (nagent-conversation-compact))))
      (should (file-exists-p (plist-get res :archivedPath))))
    ;; All of them are on keys.
    (dolist (key '("s" "l" "k" "S" "L"))
      (should (commandp (lookup-key nagent-conversation-command-map (kbd key)))))))

(ert-deftest nagent-empty-conversation-shows-how-to-send ()
  "A conversation with no request yet says in its header how to send one."
  (nagent-test-with-file ()
    (nagent-test-require-command "nagent.conversation.open")
    (let ((path (save-window-excursion (nagent-open-conversation))))
      (with-current-buffer (find-buffer-visiting path)
        (should (equal header-line-format '(:eval (nagent-conversation-hint))))
        (should (string-match-p "No request yet.*C-c C-c" (nagent-conversation-hint)))))))

;;;; Expectation: the conversation is the chat

(ert-deftest nagent-conversation-is-the-chat ()
  "Type the request (two lines) at the end of the conversation, C-c C-c sends it
\(nagent.conversation.send); the reply lands in the conversation, the draft becomes
the request, once."
  (nagent-test-with-file (:replies (lambda (target)
                                     (list (nagent-test-write-reply target nagent-test-a-retries)
                                           (nagent-test-response-reply "first done")
                                           (nagent-test-response-reply "CHAT-REPLY-42"))))
    (nagent-test-require-command "nagent.edit")
    (unless (member "nagent.conversation.send" (nagent-test-server-commands))
      (nagent-test-waiting "nagent.conversation.send (issue 25, editor-server part)"))
    (nagent-wait (nagent-edit "add retries please"))
    (let* ((path (save-window-excursion (nagent-open-conversation)))
           (conv (find-buffer-visiting path)))
      (with-current-buffer conv
        (should (nagent-test-wait-for #'nagent--managed-p 10))
        (goto-char (point-max))
        (insert "\nexplain the retries\nin two lines\n")
        (let ((job (call-interactively (lookup-key nagent-conversation-mode-map (kbd "C-c C-c")))))
          (should (nagent-job-p job))
          (should (string-match-p "CHAT-REPLY-42" (plist-get (nagent-wait job) :response))))
        (should (string-match-p "explain the retries\\\\nin two lines"
                                (json-encode (nth 2 (nagent-test-fake-requests fake)))))
        (should (nagent-test-wait-for (lambda () (string-match-p "CHAT-REPLY-42" (buffer-string))) 10))
        (should (= 1 (how-many "explain the retries" (point-min) (point-max))))
        (should-not (nagent-conversation-streamed-text))
        (should-not (buffer-modified-p))))))

;;;; Issue 23: the answer streams in

(ert-deftest nagent-answer-streams-in ()
  "The answer shows in *nagent*, in the open conversation and in the mode line
while it is written; the final answer replaces the live text."
  (nagent-test-with-file (:replies (lambda (target)
                                     (list (nagent-test-write-reply target nagent-test-a-retries)
                                           (nagent-test-response-reply "first done")
                                           (append '((chunk_delay . 0.5))
                                                   (nagent-test-response-reply
                                                    "STREAM-ONE STREAM-TWO STREAM-THREE STREAM-FOUR STREAM-FIVE")))))
    (nagent-test-require-command "nagent.edit")
    (nagent-wait (nagent-edit "add retries please"))
    (let* ((path (save-window-excursion (nagent-open-conversation)))
           (conv (find-buffer-visiting path))
           (job (nagent-edit "explain"))
           (live-answer nil) (live-conv nil) (live-mode-line nil))
      (nagent-test-wait-for
       (lambda ()
         (unless (nagent-job-done job)
           (when (string-match-p "STREAM-ONE" (nagent-test--answer-text))
             (setq live-answer t))
           (when (string-match-p "STREAM-ONE"
                                 (or (with-current-buffer conv (nagent-conversation-streamed-text)) ""))
             (setq live-conv t))
           (when (string-match-p "answer [0-9.k]+ chars" (or (nagent--mode-line-text) ""))
             (setq live-mode-line t)))
         (nagent-job-done job))
       60)
      (should (nagent-job-done job))
      (unless (or live-answer live-conv)
        (nagent-test-waiting "nagent/stream notifications (issue 23, streaming part)"))
      (should live-answer)
      (should live-conv)
      (should live-mode-line)
      ;; The final answer replaced the live text: once, nothing "writing…" left.
      (let ((text (nagent-test--answer-text)))
        (should (= 1 (with-temp-buffer (insert text) (how-many "STREAM-FIVE" (point-min) (point-max)))))
        (should-not (string-match-p "writing…" text)))
      (should-not (with-current-buffer conv (nagent-conversation-streamed-text))))))

(ert-deftest nagent-stream-rendering ()
  "`nagent/stream' deltas build the live answer; a new turn starts afresh; the
final answer replaces it (no server needed)."
  (let ((nagent-show-answers nil)
        (file (make-temp-file "nagent-stream" nil ".py")))
    (unwind-protect
        (let ((uri (concat "file://" file)))
          (nagent--stream-delta (list :uri uri :delta "Hello " :turn 1 :token "t"))
          (nagent--stream-delta (list :uri uri :delta "wor" :turn 1 :token "t"))
          (should (equal (nagent-stream-text file) "Hello wor"))
          (should (string-match-p "Hello wor" (nagent-test--answer-text)))
          (nagent--stream-delta (list :uri uri :delta "Retry" :turn 2 :token "t"))
          (should (equal (nagent-stream-text file) "Retry"))
          (should-not (string-match-p "Hello" (nagent-test--answer-text)))
          (nagent--stream-delta (list :uri uri :delta "" :turn 2 :done t :token "t"))
          (nagent--add-answer file "req" (list :response "Retry done" :applied :json-false))
          (should-not (nagent-stream-text file))
          (should-not (string-match-p "writing…" (nagent-test--answer-text)))
          (should (string-match-p "Retry done" (nagent-test--answer-text))))
      (delete-file file)
      (when (get-buffer nagent-answer-buffer) (kill-buffer nagent-answer-buffer)))))

;;;; Expectation: review in the source buffer

(ert-deftest nagent-review-in-the-source-buffer ()
  "A proposal's hunks show as overlays where they apply; one key accepts the hunk
at point (the other stays pending), one rejects it."
  (nagent-test-with-file (:replies (lambda (target)
                                     (list (nagent-test-write-reply target nagent-test--twelve-edited)
                                           (nagent-test-response-reply "Two lines changed.")))
                          :settings (list :confirmEdits t))
    (nagent-test-require-command "nagent.review.show")
    (erase-buffer)
    (insert nagent-test--twelve)
    (pop-to-buffer-same-window (current-buffer))
    (let* ((nagent-review-on-proposal nil)
           (res (nagent-wait (nagent-edit "change lines six and eleven")))
           (id (nagent--proposal-id (plist-get res :proposal))))
      (should id)
      (should (= (length (nagent--inline-overlays id)) 2))
      (goto-char (point-min))
      (re-search-forward "^line 6$")
      (let ((ov (nagent--inline-hunk-at-point)))
        (should (string-match-p "LINE SIX" (overlay-get ov 'after-string)))
        (should (eq (overlay-get ov 'face) 'nagent-inline-removed))
        (should (string-match-p "line 6" (buffer-substring (overlay-start ov) (overlay-end ov)))))
      ;; One key: C-c C-a on the hunk accepts it.
      (execute-kbd-macro (kbd "C-c C-a"))
      (should (nagent-test-wait-for (lambda () (string-match-p "^LINE SIX$" (buffer-string))) 20))
      (should (nagent-test-wait-for (lambda () (= (length (nagent--inline-overlays id)) 1)) 20))
      (goto-char (point-min))
      (re-search-forward "^line 11$")
      (execute-kbd-macro (kbd "C-c C-k"))
      (should (nagent-test-wait-for (lambda () (null (nagent--inline-overlays id))) 20))
      (should-not (string-match-p "LINE ELEVEN" (buffer-string)))
      (should-not (append (plist-get (nagent-command "nagent.review.list") :proposals) nil)))))

(ert-deftest nagent-review-lists-every-file-of-the-change-set ()
  "The review shows the change set's files; `nagent-review-files' lists and visits them."
  (nagent-test-with-file (:replies (lambda (target)
                                     (let ((b (expand-file-name "b.py" (file-name-directory target))))
                                       (list (list (cons 'text
                                                         (concat
                                                          (format "<nagent-write path=\"%s\">%s</nagent-write>\n"
                                                                  target nagent-test-a-retries)
                                                          (format "<nagent-write path=\"%s\">%s</nagent-write>"
                                                                  b nagent-test-b-edited))))
                                             (nagent-test-response-reply "both"))))
                          :settings (list :confirmEdits t))
    (nagent-test-require-command "nagent.review.show")
    (let* ((nagent-review-on-proposal 'open)
           (res (save-window-excursion (nagent-wait (nagent-edit "two files"))))
           (id (nagent--proposal-id (plist-get res :proposal)))
           (offered nil))
      (should (string-match-p "Files of the change set:\n#   a\\.py  (1 hunk)\n#   b\\.py  (1 hunk)"
                              (nagent-test-buffer-text (format "*nagent-review %s*" id))))
      (let ((buf (cl-letf (((symbol-function 'completing-read)
                            (lambda (_p collection &rest _)
                              (setq offered (all-completions "" collection))
                              (car (all-completions "b.py" collection)))))
                   (save-window-excursion (nagent-review-files id)))))
        (should (equal (length offered) 2))
        (should (equal (file-name-nondirectory (buffer-file-name buf)) "b.py"))
        (with-current-buffer buf
          (should (= (length (nagent--inline-overlays id)) 1)))))))

;;;; Expectation: @path mentions

(ert-deftest nagent-mention-picker-inserts-path ()
  "The picker offers the project's files and inserts @path (quoted with spaces);
the request prompt has it on C-c @; the server includes the file."
  (nagent-test-with-file (:replies (lambda (_target) (list (nagent-test-response-reply "Seen b."))))
    (should (equal (nagent-mention-text "a b.py") "@\"a b.py\""))
    (should (equal (nagent-mention-text "src/b.py") "@src/b.py"))
    (should (eq (lookup-key nagent-request-minibuffer-map (kbd "C-c @")) #'nagent-insert-mention))
    (let ((offered nil))
      (with-temp-buffer
        (insert "explain")
        (let ((nagent--mention-root repo))
          (cl-letf (((symbol-function 'completing-read)
                     (lambda (_p collection &rest _) (setq offered collection) "b.py")))
            (nagent-insert-mention)))
        (should (equal (buffer-string) "explain @b.py ")))
      (should (member "b.py" offered))
      (should (member "c.md" offered)))
    (nagent-test-require-command "nagent.edit")
    (let ((res (nagent-wait (nagent-edit "explain how @b.py uses this"))))
      (unless (plist-member res :mentions)
        (nagent-test-waiting "`mentions' in nagent.edit results (issue 25, editor-server part)"))
      (should (cl-some (lambda (m) (and (equal (plist-get m :path) "b.py")
                                        (nagent--true-p (plist-get m :included))))
                       (append (plist-get res :mentions) nil)))
      (should (string-match-p "size(\\[\\])" (json-encode (nagent-test-fake-requests fake))))
      (should (string-match-p "Mentioned files:.*@b\\.py.*included" (nagent-test--answer-text))))))

;;;; Expectation: a model profile per request

(ert-deftest nagent-model-profile-per-request ()
  "C-u nagent-edit offers the agents and the user's model profiles in one list;
the profile picked runs this one request."
  (nagent-test-with-file (:replies (lambda (_target) (list (nagent-test-response-reply "from fast")))
                          :settings (list :models (list :fast (list :model "fake-fast-model"))))
    (nagent-test-require-command "nagent.edit")
    (unless (plist-member (nagent-status) :profiles)
      (nagent-test-waiting "`profiles' in nagent.status (issue 25, editor-server part)"))
    (let* ((offered nil)
           (job (cl-letf (((symbol-function 'completing-read)
                           (lambda (_prompt collection &rest _)
                             (setq offered (all-completions "" collection))
                             "model:fast"))
                          ((symbol-function 'read-string) (lambda (&rest _) "say hi")))
                  (let ((current-prefix-arg '(4)))
                    (call-interactively #'nagent-edit)))))
      (should (member "model:fast" offered))
      (should (member "edit" offered))
      (nagent-wait job)
      (should (equal (alist-get 'model (alist-get 'body (car (nagent-test-fake-requests fake))))
                     "fake-fast-model"))
      (should (string-match-p "say hi (model:fast)" (nagent-test--answer-text))))))

;;;; Issue 26: history checks shown

(ert-deftest nagent-history-checks-are-shown ()
  "`coupling' messages and `historyWarnings' go to *nagent* and the echo line; the
review shows the change set's coupling and each hunk's warnings (no server needed)."
  (let ((nagent-show-answers nil)
        (messages nil)
        (file (make-temp-file "nagent-calc" nil ".py" "a\nb\nc\n")))
    (unwind-protect
        (progn
          (cl-letf* ((orig (symbol-function 'message))
                     ((symbol-function 'message)
                      (lambda (fmt &rest args)
                        (when fmt (push (apply #'format fmt args) messages))
                        (apply orig fmt args))))
            (nagent--finish-run
             file "req"
             (list :applied t :edits 1 :response "done"
                   :coupling (vector (list :uri "file:///w/calc.py" :partner "tests/test_calc.py"
                                           :message "calc.py usually changes with tests/test_calc.py (62%, 21 of 34 commits); not touched"))
                   :historyWarnings (vector (list :uri "file:///w/calc.py" :line 4
                                                  :message "changes lines from abc1234 'Fix race'")))))
          (should (string-match-p "usually changes with tests/test_calc\\.py" (car messages)))
          (let ((text (nagent-test--answer-text)))
            (should (string-match-p "⚠ calc\\.py usually changes with tests/test_calc\\.py (62%" text))
            (should (string-match-p "⚠ line 5: changes lines from abc1234 'Fix race'" text)))
          (with-temp-buffer
            (nagent-review-mode)
            (nagent--review-render
             (list :id "p1" :request "first line\nsecond line"
                   :coupling (vector (list :message "calc.py usually changes with tests/test_calc.py"))
                   :files (vector (list :uri (concat "file://" file) :path file
                                        :hunks (vector (list :id "h1" :range (list :start (list :line 1 :character 0)
                                                                                    :end (list :line 2 :character 0))
                                                             :oldText "b\n" :newText "B\n"
                                                             :warnings ["changes lines from abc1234 'Fix race' (Alice, 3 days ago)"])))))
             nil)
            (let ((text (buffer-string)))
              (should (string-match-p "^# Request: first line\n#          second line$" text))
              (should (string-match-p "^# ⚠ calc\\.py usually changes with tests/test_calc\\.py$" text))
              (should (string-match-p "^# ⚠ hunk h1: changes lines from abc1234 'Fix race' (Alice, 3 days ago)\n@@ " text)))))
      (delete-file file)
      (when (get-buffer nagent-answer-buffer) (kill-buffer nagent-answer-buffer)))))

(ert-deftest nagent-coupling-from-the-server ()
  "A run on a file that usually changes with another, untouched, names it."
  (nagent-test-with-file (:replies (lambda (target)
                                     (list (nagent-test-write-reply target nagent-test-a-retries)
                                           (nagent-test-response-reply "ok")))
                          ;; Low thresholds: the test repository is small.
                          :settings (list :history (list :summarize :json-false
                                                         :couplingMinRate 0.1 :couplingMinCommits 1)))
    (nagent-test-require-command "nagent.edit")
    (let ((res (nagent-wait (nagent-edit "add retries"))))
      (unless (plist-member res :coupling)
        (nagent-test-waiting "`coupling' in nagent.edit results (issue 26)"))
      ;; a.py changed with b.py in 2 of its 3 commits; b.py is not touched.
      (let ((hint (cl-find "b.py" (append (plist-get res :coupling) nil)
                           :key (lambda (c) (file-name-nondirectory (or (plist-get c :partner) "")))
                           :test #'equal)))
        (should hint)
        (should (string-match-p "b\\.py" (plist-get hint :message)))
        (should (string-match-p (regexp-quote (plist-get hint :message)) (nagent-test--answer-text)))))))

(ert-deftest nagent-coupling-code-action-opens-partner-conversation ()
  "The history check's code action \"nagent: open b.py's conversation\" runs in
Emacs: the partner's conversation opens (eglot 1.9 shows no window/showDocument)."
  (nagent-test-with-file (:replies (lambda (target)
                                     (list (nagent-test-write-reply target nagent-test-a-retries)
                                           (nagent-test-response-reply "ok")))
                          :settings (list :history (list :summarize :json-false
                                                         :couplingMinRate 0.1 :couplingMinCommits 1)))
    (nagent-test-require-command "nagent.edit")
    (let* ((res (nagent-wait (nagent-edit "add retries")))
           (mine (nagent--get res :conversation :path))
           (title "nagent: open b.py's conversation"))
      (unless (plist-member res :coupling)
        (nagent-test-waiting "`coupling' in nagent.edit results (issue 26)"))
      (goto-char (point-min))
      (should (nagent-test-wait-for
               (lambda () (nagent-test--action (nagent-test--code-actions (point-min) (line-end-position))
                                               title))
               15))
      (save-window-excursion
        (nagent-test--pick-code-action title (point-min) (line-end-position))
        (should (nagent-test-wait-for
                 (lambda ()
                   (cl-some (lambda (b)
                              (with-current-buffer b
                                (and (derived-mode-p 'nagent-conversation-mode)
                                     (not (equal (file-truename buffer-file-name) (file-truename mine))))))
                            (buffer-list)))
                 15))))))

(ert-deftest nagent-recent-fix-warning-in-review ()
  "A hunk over the lines of a recent fix carries its warning, in the review buffer
and beside the hunk in the source buffer."
  (nagent-test-with-file (:replies (lambda (target)
                                     (list (nagent-test-write-reply
                                            target (replace-regexp-in-string
                                                    "return len(items)" "return len(items) - 1"
                                                    nagent-test-a-v3 t t))
                                           (nagent-test-response-reply "Changed size.")))
                          :settings (list :confirmEdits t
                                          :history (list :summarize :json-false :recentFixDays 36500)))
    (nagent-test-require-command "nagent.review.show")
    (let* ((res (save-window-excursion (nagent-wait (nagent-edit "make size smaller"))))
           (id (nagent--proposal-id (plist-get res :proposal)))
           (hunk (aref (plist-get (aref (plist-get (nagent-command "nagent.review.show" (list :id id)) :files) 0)
                                  :hunks)
                       0)))
      (unless (plist-member hunk :warnings)
        (nagent-test-waiting "hunk `warnings' in nagent.review.show (issue 26)"))
      (should (string-match-p "Fix off-by-one in size" (aref (plist-get hunk :warnings) 0)))
      (should (string-match-p "^# ⚠ hunk [^:]+: changes lines from .*Fix off-by-one in size.*\n@@ "
                              (nagent-test-buffer-text (format "*nagent-review %s*" id))))
      (let ((ov (car (nagent--inline-overlays id))))
        (should ov)
        (should (string-match-p "⚠ .*Fix off-by-one in size" (overlay-get ov 'before-string)))))))

;;;; Issue 27: the turn that wrote the line

(ert-deftest nagent-open-attribution-opens-the-turn ()
  "On a line nagent wrote, the command opens the conversation at that turn."
  (nagent-test-with-file (:replies (lambda (target)
                                     (list (nagent-test-write-reply target nagent-test-a-retries)
                                           (nagent-test-response-reply "ok"))))
    (nagent-test-require-command "nagent.edit")
    (unless (member "nagent.attribution.at" (nagent-test-server-commands))
      (nagent-test-waiting "nagent.attribution.at (issue 27)"))
    (nagent-wait (nagent-edit "ATTRIBUTED-REQUEST add retries"))
    (goto-char (point-min))
    (should (looking-at "def fetch(url, retries=3)"))
    (let ((attribution (save-window-excursion
                         (let ((a (call-interactively (lookup-key nagent-command-map (kbd "w")))))
                           (should (derived-mode-p 'nagent-conversation-mode))
                           (should (string-match-p "ATTRIBUTED-REQUEST"
                                                   (buffer-substring (line-beginning-position)
                                                                     (min (point-max) (+ (point) 2000)))))
                           a))))
      (should (equal (plist-get attribution :source) "nagent"))
      (should (stringp (plist-get attribution :message))))))

(provide 'nagent-daily-tests)
;;; nagent-daily-tests.el ends here
