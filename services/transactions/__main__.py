"""``python -m odradek.transactions``: the transaction coordinator."""

from odradek.service import run
from odradek.transactions.service import DEFAULTS, TransactionCoordinatorService


def main() -> None:
    run("odradek.transactions", TransactionCoordinatorService, DEFAULTS)


if __name__ == "__main__":
    main()
