"""``python -m odradek.offsets``: the offset store."""

from odradek.offsets.service import DEFAULTS, OffsetStoreService
from odradek.service import run


def main() -> None:
    run("odradek.offsets", OffsetStoreService, DEFAULTS)


if __name__ == "__main__":
    main()
