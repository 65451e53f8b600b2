from nagent_lsp.headless.cli import main

raise SystemExit(main())
