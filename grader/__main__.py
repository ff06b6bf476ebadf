"""`python -m grader` is `grade`."""

import sys

from grader.cli import main

sys.exit(main())
