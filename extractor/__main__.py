import sys

from extractor.main import main

sys.exit(main())
