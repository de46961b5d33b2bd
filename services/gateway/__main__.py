"""``python -m odradek.gateway``: the Kafka-wire gateway."""

from odradek.gateway.gateway import DEFAULTS, Gateway
from odradek.service import run


def main() -> None:
    run("odradek.gateway", Gateway, DEFAULTS)


if __name__ == "__main__":
    main()
