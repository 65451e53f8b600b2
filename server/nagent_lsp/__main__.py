import sys

from nagent_lsp.headless.launch import secure_start

secure_start(sys.argv)  # before anything else: may restart the interpreter without the key variables

from nagent_lsp.headless.cli import main  # noqa: E402

raise SystemExit(main())
