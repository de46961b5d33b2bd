"""``python -m odradek.console``: the web console."""

from odradek.console.service import DEFAULTS, build
from odradek.service import run


def main() -> None:
    run("odradek.console", build, DEFAULTS)


if __name__ == "__main__":
    main()
