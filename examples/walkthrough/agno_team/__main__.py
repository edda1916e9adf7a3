from agno_team.cli import main

raise SystemExit(main())
