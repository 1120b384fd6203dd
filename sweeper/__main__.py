from sweeper.cli import main

raise SystemExit(main())
