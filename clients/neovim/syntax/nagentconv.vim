" nagent conversation files (.nagent/conversations/*): the tag protocol's blocks.
if exists("b:current_syntax")
  finish
endif

syntax case match
syntax region nagentconvContext matchgroup=nagentconvContextTag start="^\s*<initial_context>" end="</initial_context>" fold contains=nagentconvSection
syntax match nagentconvSection contained "^{[a-z-]\+}\s*$"
syntax match nagentconvSection contained "^\s*{/[a-z-]\+}\s*$"
syntax region nagentconvPrompt matchgroup=nagentconvPromptTag start="<user-prompt\%(\s[^>]*\)\?>" end="</user-prompt>"
syntax region nagentconvResponse matchgroup=nagentconvResponseTag start="<agent-response\%(\s[^>]*\)\?>" end="</agent-response>" contains=nagentconvAction
syntax match nagentconvAction contained "</\?nagent-[a-z-]\+\%(\s[^>]*\)\?/\?>"
syntax match nagentconvResult "</\?nagent-[a-z-]*-result\%(\s[^>]*\)\?>"
syntax match nagentconvTag "</\?\%(system\|nagent-next-input\|conversation-summary\|nagent-review-result\|nagent-recipe-result\)\%(\s[^>]*\)\?>"
syntax match nagentconvStatus "<nagent-turn-status\%(\s[^>]*\)\?/\?>"
syntax match nagentconvStatus "^Interrupted\.\.\..*$"
syntax match nagentconvAttr contained "\<[a-zA-Z]\+=" containedin=nagentconvResult,nagentconvAction,nagentconvPromptTag,nagentconvResponseTag

highlight default link nagentconvContextTag PreProc
highlight default link nagentconvContext Comment
highlight default link nagentconvSection Title
highlight default link nagentconvPromptTag Statement
highlight default link nagentconvPrompt Normal
highlight default link nagentconvResponseTag Type
highlight default link nagentconvAction Special
highlight default link nagentconvResult Identifier
highlight default link nagentconvTag PreProc
highlight default link nagentconvStatus Comment
highlight default link nagentconvAttr Constant

let b:current_syntax = "nagentconv"
