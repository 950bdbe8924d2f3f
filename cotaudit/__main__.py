import sys

from cotaudit.cli import main

sys.exit(main())
