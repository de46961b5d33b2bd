"""``python -m odradek.mirror --config FILE [--set name=value ...]``: the mirror service."""

from odradek.mirror.service import DEFAULTS, build
from odradek.service import run


def main() -> None:
    run("odradek.mirror", build, DEFAULTS)


if __name__ == "__main__":
    main()
