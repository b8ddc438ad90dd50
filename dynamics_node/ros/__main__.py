"""python -m dynamics_node.ros: the node (same as the console script dynamics_node)."""
import sys

from .process import main

if __name__ == "__main__":  # not when multiprocessing's spawn imports it
    sys.exit(main())
