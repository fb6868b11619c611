import sys

from heartbeat.main import main

sys.exit(main())
