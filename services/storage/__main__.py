"""``python -m odradek.storage``: run one storage node."""

from odradek.service import run
from odradek.storage.service import build
from odradek.storage.settings import DEFAULTS


def main() -> None:
    run("odradek.storage", build, DEFAULTS)


if __name__ == "__main__":
    main()
