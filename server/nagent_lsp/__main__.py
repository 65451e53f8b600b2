from nagent_lsp.cli import main

raise SystemExit(main())
