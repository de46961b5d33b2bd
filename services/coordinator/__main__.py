"""``python -m odradek.coordinator``: the group coordinator."""

from odradek.coordinator.service import DEFAULTS, CoordinatorService
from odradek.service import run


def main() -> None:
    run("odradek.coordinator", CoordinatorService, DEFAULTS)


if __name__ == "__main__":
    main()
