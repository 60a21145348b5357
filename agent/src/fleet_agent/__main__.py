import sys

from fleet_agent.cli import main

sys.exit(main())
