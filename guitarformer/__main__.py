"""`python -m guitarformer` (also what torchrun launches)."""
from guitarformer.cli import main

if __name__ == "__main__":
    main()
