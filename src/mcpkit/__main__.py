from mcpkit.cli import main

raise SystemExit(main())
