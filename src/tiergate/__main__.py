from tiergate.cli import main

raise SystemExit(main())
