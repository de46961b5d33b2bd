"""``python -m odradek.controller``: run the replication controller."""

from odradek.controller.service import DEFAULTS, build
from odradek.service import run


def main() -> None:
    run("odradek.controller", build, DEFAULTS)


if __name__ == "__main__":
    main()
