from hami_dra_webhook.cli.main import main

raise SystemExit(main())
