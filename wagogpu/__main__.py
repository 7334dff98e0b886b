"""`python -m wagogpu`: the same as the `wagogpu` command."""
import sys

from .cli import main

sys.exit(main())
