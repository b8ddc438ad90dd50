"""python -m dynamics_node.ros: the node (same as the console script dynamics_node)."""
import sys

from .process import main

sys.exit(main())
