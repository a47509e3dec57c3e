"""`python -m onnxport.gui [FILES...]`."""

import sys

from .app import main

sys.exit(main())
